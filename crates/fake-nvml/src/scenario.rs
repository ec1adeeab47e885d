//! The JSON scenario that drives the fake library, and its resolved form.
//!
//! ```json
//! {
//!   "driver_version": "590.48.01",        // default "590.48.01"
//!   "nvml_version": "13.590.48.01",       // default "13.590.48.01"
//!   "cuda_driver_version": 13010,         // default 13010
//!   "init_error": 9,                      // every nvmlInit* returns it (0/absent = succeed)
//!   "process_names": {"4194400": "python3"},  // nvmlSystemGetProcessName; else NOT_FOUND
//!   "hide_other_namespaces": false,      // leave out rows whose pid has no /proc/<pid> here,
//!                                         // as the driver hides other PID namespaces' processes
//!   "devices": [{                         // required (may be empty); at most 64
//!     "name": "NVIDIA H200",              // default "NVIDIA Fake GPU <i>"
//!     "uuid": "GPU-...",                  // default "GPU-fa4e0000-0000-4000-8000-<i as 12 hex>"
//!     "pci_bus_id": "00000000:18:00.0",   // default "00000000:<i+1 as 2 hex>:00.0"
//!     "pci_device_id": 590483678,         // default 0x233010DE
//!     "pci_subsystem_id": 0,              // default 0
//!     "total": 150754820096,              // bytes, default 16 GiB
//!     "free": 116181811200,               // default total - reserved
//!     "free_file": null,                  // a file whose number is the free figure, read at
//!                                         // every memory call (`free` while it holds none)
//!     "reserved": 643825664,              // default 0
//!     "handle_error": 4,                  // GetHandleBy{Index,UUID,PciBusId} give this code
//!     "memory_error": 3,                  // both memory functions give this code
//!     "compute_processes": [{"pid": 1, "used": 1048576,   // also "pid_file", "used_file":
//!                                                         // read at each call
//!                            "gpu_instance_id": null, "compute_instance_id": null}],
//!     "graphics_processes": [],
//!     "mps_processes": [],                // MPS clients (nvmlDeviceGetMPSComputeRunningProcesses*)
//!     "grow_between_calls": 0,            // synthetic compute processes after the first call
//!     "grow_past_every_resize": false,    // every Compute list call needs more room than given
//!     "v2_total": null,                   // nvmlDeviceGetMemoryInfo_v2's total, when not v1's
//!     "addressing_mode": 2,               // nvmlDeviceGetAddressingMode: 0 none, 1 HMM,
//!                                         // 2 ATS; absent/null = NOT_SUPPORTED
//!     "numa_node": 1,                     // nvmlDeviceGetNumaNodeId: the NUMA node that is
//!                                         // the GPU's memory; absent/null = NOT_SUPPORTED
//!     "utilization": {"gpu": 87, "memory": 41},  // nvmlDeviceGetUtilizationRates, percent;
//!                                         // absent/null = NOT_SUPPORTED
//!     "process_samples": [{"pid": 4412, "age_s": 600, "sm": 0, "mem": 0, "enc": 0, "dec": 0}],
//!                                         // nvmlDeviceGetProcessUtilization: each sample taken
//!                                         // age_s seconds before the call (percents default 0);
//!                                         // [] = NOT_FOUND, absent/null = NOT_SUPPORTED
//!     "mig_mode": 1,                      // nvmlDeviceGetMigMode current mode (0 off, 1 on);
//!                                         // absent/null = NOT_SUPPORTED (a GPU without MIG)
//!     "mig_pending": 1,                   // pending mode, default = mig_mode
//!     "max_mig_devices": 7,               // nvmlDeviceGetMaxMigDeviceCount, default 7 (any u32)
//!     "aggregate_error": 4,               // while mig_mode is 1: the GPU's memory functions and
//!                                         // process lists give this code (unprivileged caller)
//!     "mig_devices": [{                   // MIG devices (at most 8, and at most max_mig_devices),
//!                                         // only while mig_mode is 1
//!       "slot": 0,                        // nvmlDeviceGetMigDeviceHandleByIndex index, default
//!                                         // its position; other slots < max are NOT_FOUND
//!       "gpu_instance_id": 2, "compute_instance_id": 0,   // default 0
//!       "name": "NVIDIA H200 MIG 1c.3g.71gb",  // default "<GPU name> MIG device <slot>"
//!       "uuid": "MIG-...",                // default "MIG-fa4e0000-0000-4000-8000-<i:04x><slot:08x>"
//!       "total": 74894880768, "free": 57147342848, "reserved": 0,
//!                                         // bytes; omitted = those of an earlier MIG device of
//!                                         // the same GPU instance (shared memory), else
//!                                         // 8 GiB / total - reserved / 0
//!       "memory_error": null,             // both memory functions on this MIG handle give it
//!       "compute_processes": [], "graphics_processes": []  // ids default to the device's
//!     }]
//!   }],
//!   "fail": [{"function": "nvmlDeviceGetMemoryInfo", "code": 1, "times": 1, "device": 0,
//!             "mig_device": null}],
//!   "slow": [{"function": "nvmlDeviceGetMemoryInfo", "ms": 600000,  // blocks that long,
//!             "after": 0}],                                         // after that many calls
//!   "garbage": {"name_without_nul": false, "count_larger_than_buffer": false,
//!               "process_used_max": false, "empty_error_strings": false,
//!               "parent_handle_alias": false, "ask_for_rows": null, "device_count": null}
//! }
//! ```
//!
//! * Unknown keys anywhere are an error (init then returns 999 and says why on stderr).
//! * Process `used` omitted or `null` = 0xFFFFFFFFFFFFFFFF (NVML_VALUE_NOT_AVAILABLE, as under
//!   WDDM); `null`/omitted instance ids = 0xFFFFFFFF.
//! * `grow_between_calls: N`: as soon as the first Compute process-list call (any version) on
//!   that device returns, whatever its result, the Compute list gains N processes with pids
//!   4300000.. and 1 MiB each (once).
//! * MIG device handles answer `nvmlDeviceGetName`, `…GetUUID`, both memory functions, the
//!   process lists, `…GetGpuInstanceId`, `…GetComputeInstanceId`, `…IsMigDeviceHandle` and
//!   `…GetDeviceHandleFromMigDeviceHandle`; `nvmlDeviceGetHandleByUUID` finds them by UUID.
//!   With MIG on and no `aggregate_error`, the GPU's own process lists hold its rows plus every
//!   MIG device's (a privileged caller's view).
//! * `fail`: the first rule whose `function` equals the exported name, whose `device` (if set)
//!   equals the call's device index, and whose `times` (default 1) is not used up, makes the
//!   call return `code` (any u32). The device index comes from the handle, or from the index
//!   argument of `nvmlDeviceGetHandleByIndex*`; rules with `device` never match other calls.
//! * The file is read by `nvmlInit*` (and `nvmlSystemGetNVMLVersion`) while not initialised,
//!   and only again when `FAKE_NVML_SCENARIO` names a different file, so fail counters and
//!   growth persist across init/shutdown cycles for one file, and a test can switch scenarios
//!   between cycles by pointing the variable at a new file.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::abi::NVML_DEVICE_MIG_ENABLE;

/// Most devices a scenario may describe (handles point into a fixed table).
pub const MAX_DEVICES: usize = 64;
/// Most MIG devices per GPU (handles point into a fixed table).
pub const MAX_MIG_DEVICES: usize = 8;
/// Default `max_mig_devices` (A100/H100/H200: 7).
const DEFAULT_MAX_MIG: u32 = 7;
/// Default memory of a MIG device with no figures: 8 GiB.
const DEFAULT_MIG_TOTAL: u64 = 8 * 1024 * 1024 * 1024;

/// Default `driver_version`.
pub const DEFAULT_DRIVER_VERSION: &str = "590.48.01";
/// Default `nvml_version`.
pub const DEFAULT_NVML_VERSION: &str = "13.590.48.01";
/// Default `cuda_driver_version` (CUDA 13.1).
pub const DEFAULT_CUDA_DRIVER_VERSION: i32 = 13010;
/// Default device memory size: 16 GiB.
const DEFAULT_TOTAL: u64 = 16 * 1024 * 1024 * 1024;
/// Default PCI device id (H100 SXM, vendor NVIDIA in the low half).
const DEFAULT_PCI_DEVICE_ID: u32 = 0x2330_10DE;

/// First pid of the synthetic processes added by `grow_between_calls`.
pub const GROW_PID_BASE: u32 = 4_300_000;
/// Memory of each synthetic process added by `grow_between_calls`.
pub const GROW_USED: u64 = 1024 * 1024;

/// Top level of the scenario file, exactly as written in JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    #[serde(default)]
    driver_version: Option<String>,
    #[serde(default)]
    nvml_version: Option<String>,
    #[serde(default)]
    cuda_driver_version: Option<i32>,
    #[serde(default)]
    init_error: Option<u32>,
    #[serde(default)]
    process_names: BTreeMap<String, String>,
    #[serde(default)]
    hide_other_namespaces: bool,
    devices: Vec<RawDevice>,
    #[serde(default)]
    fail: Vec<FailRule>,
    #[serde(default)]
    slow: Vec<SlowRule>,
    #[serde(default)]
    garbage: Garbage,
}

/// One GPU, exactly as written in JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    pci_bus_id: Option<String>,
    #[serde(default)]
    pci_device_id: Option<u32>,
    #[serde(default)]
    pci_subsystem_id: Option<u32>,
    #[serde(default)]
    total: Option<u64>,
    #[serde(default)]
    free: Option<u64>,
    #[serde(default)]
    free_file: Option<String>,
    #[serde(default)]
    reserved: Option<u64>,
    #[serde(default)]
    handle_error: Option<u32>,
    #[serde(default)]
    memory_error: Option<u32>,
    #[serde(default)]
    compute_processes: Vec<Process>,
    #[serde(default)]
    graphics_processes: Vec<Process>,
    #[serde(default)]
    mps_processes: Vec<Process>,
    #[serde(default)]
    grow_between_calls: u32,
    #[serde(default)]
    grow_past_every_resize: bool,
    #[serde(default)]
    v2_total: Option<u64>,
    #[serde(default)]
    utilization: Option<Utilization>,
    #[serde(default)]
    addressing_mode: Option<u32>,
    #[serde(default)]
    numa_node: Option<u32>,
    #[serde(default)]
    process_samples: Option<Vec<ProcessSample>>,
    #[serde(default)]
    mig_mode: Option<u32>,
    #[serde(default)]
    mig_pending: Option<u32>,
    #[serde(default)]
    max_mig_devices: Option<u32>,
    #[serde(default)]
    aggregate_error: Option<u32>,
    #[serde(default)]
    mig_devices: Vec<RawMig>,
}

/// One MIG device, exactly as written in JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMig {
    #[serde(default)]
    slot: Option<u32>,
    #[serde(default)]
    gpu_instance_id: u32,
    #[serde(default)]
    compute_instance_id: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    total: Option<u64>,
    #[serde(default)]
    free: Option<u64>,
    #[serde(default)]
    reserved: Option<u64>,
    #[serde(default)]
    memory_error: Option<u32>,
    #[serde(default)]
    compute_processes: Vec<Process>,
    #[serde(default)]
    graphics_processes: Vec<Process>,
}

/// One row of a process list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    /// Process id (ignored when `pid_file` is given).
    #[serde(default)]
    pub pid: u32,
    /// A file holding the pid, read at every list call (for processes started after the
    /// scenario was written); the row is left out while the file is missing or not a pid.
    #[serde(default)]
    pub pid_file: Option<String>,
    /// Bytes used; omitted or `null` means NVML_VALUE_NOT_AVAILABLE (all ones, as under WDDM).
    #[serde(default)]
    pub used: Option<u64>,
    /// A file holding the bytes used, read at every list call (a figure that changes while a
    /// test runs); while it is missing or not a number, `used` stands.
    #[serde(default)]
    pub used_file: Option<String>,
    /// GPU instance id; `null`/omitted = 0xFFFFFFFF (MIG off).
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    /// Compute instance id; `null`/omitted = 0xFFFFFFFF (MIG off).
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

/// An injected failure: `function` returns `code` for its next `times` calls.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailRule {
    /// Exact exported name, e.g. `nvmlDeviceGetMemoryInfo_v2`.
    pub function: String,
    /// Return code to produce (any u32, also codes NVML never defined).
    pub code: u32,
    /// How many calls fail (counts down); default 1.
    #[serde(default = "one")]
    pub times: u64,
    /// Only calls for this device index (handle functions, and the index argument of
    /// `nvmlDeviceGetHandleByIndex*`); omitted = any call.
    #[serde(default)]
    pub device: Option<usize>,
    /// Only calls on this MIG device (its position in the GPU's `mig_devices`); omitted = calls
    /// on GPUs and MIG devices alike.
    #[serde(default)]
    pub mig_device: Option<usize>,
}

fn one() -> u64 {
    1
}

/// A function that takes this long before it answers (a driver call that blocks), every time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlowRule {
    /// Exact exported name, e.g. `nvmlDeviceGetMemoryInfo`.
    pub function: String,
    pub ms: u64,
    /// How many calls answer at once before the rule applies; default 0 (from the first).
    #[serde(default)]
    pub after: u64,
}

/// Deliberately wrong answers, to test a loader's defences.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(clippy::struct_field_names)]
pub struct Garbage {
    /// `nvmlDeviceGetName` fills the whole buffer with `A` and writes no NUL.
    #[serde(default)]
    pub name_without_nul: bool,
    /// Process-list fill calls report `capacity + 10` entries but write `capacity`.
    #[serde(default)]
    pub count_larger_than_buffer: bool,
    /// Every process row reports `usedGpuMemory` = 0xFFFFFFFFFFFFFFFF.
    #[serde(default)]
    pub process_used_max: bool,
    /// `nvmlErrorString` returns an empty string for every code.
    #[serde(default)]
    pub empty_error_strings: bool,
    /// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle` gives a second handle of the GPU, not the
    /// one `nvmlDeviceGetHandleByIndex` gives (NVML does not promise one handle per GPU).
    #[serde(default)]
    pub parent_handle_alias: bool,
    /// Process-list calls whose buffer holds fewer rows than this answer INSUFFICIENT_SIZE and
    /// ask for room for this many.
    #[serde(default)]
    pub ask_for_rows: Option<u32>,
    /// `nvmlDeviceGetCount*` answers this instead of the number of devices.
    #[serde(default)]
    pub device_count: Option<u32>,
}

/// A device with every default filled in.
#[derive(Debug, Clone)]
pub struct Device {
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    pub pci_device_id: u32,
    pub pci_subsystem_id: u32,
    pub total: u64,
    pub free: u64,
    /// A file whose number is the free figure, read at every memory call (`free` while it
    /// holds none): a figure that changes while the scenario runs.
    pub free_file: Option<String>,
    pub reserved: u64,
    pub handle_error: Option<u32>,
    pub memory_error: Option<u32>,
    pub compute_processes: Vec<Process>,
    pub graphics_processes: Vec<Process>,
    /// The MPS clients' list.
    pub mps_processes: Vec<Process>,
    pub grow_between_calls: u32,
    /// Every Compute list call needs more room than it was given (a list that outgrows
    /// every buffer a client allocates).
    pub grow_past_every_resize: bool,
    /// The total `nvmlDeviceGetMemoryInfo_v2` reports, when it differs from v1's.
    pub v2_total: Option<u64>,
    /// What `nvmlDeviceGetUtilizationRates` reports; `None`: NOT_SUPPORTED.
    pub utilization: Option<Utilization>,
    /// What `nvmlDeviceGetAddressingMode` reports (0 none, 1 HMM, 2 ATS); `None`:
    /// NOT_SUPPORTED.
    pub addressing_mode: Option<u32>,
    /// What `nvmlDeviceGetNumaNodeId` reports; `None`: NOT_SUPPORTED.
    pub numa_node: Option<u32>,
    /// What `nvmlDeviceGetProcessUtilization` reports; `None`: NOT_SUPPORTED.
    pub process_samples: Option<Vec<ProcessSample>>,
    /// `None`: MIG not supported.
    pub mig_mode: Option<u32>,
    pub mig_pending: Option<u32>,
    pub max_mig_devices: u32,
    pub aggregate_error: Option<u32>,
    pub mig_devices: Vec<MigDevice>,
}

/// GPU and memory-controller utilization, percent.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

/// One per-process utilization sample, taken `age_s` seconds before each call that reads it.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSample {
    pub pid: u32,
    pub age_s: f64,
    #[serde(default)]
    pub sm: u32,
    #[serde(default)]
    pub mem: u32,
    #[serde(default)]
    pub enc: u32,
    #[serde(default)]
    pub dec: u32,
}

impl Device {
    /// MIG is on (mode `NVML_DEVICE_MIG_ENABLE`, 1).
    pub fn mig_on(&self) -> bool {
        self.mig_mode == Some(NVML_DEVICE_MIG_ENABLE)
    }
}

/// A MIG device with every default filled in.
#[derive(Debug, Clone)]
pub struct MigDevice {
    pub slot: u32,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub name: String,
    pub uuid: String,
    pub total: u64,
    pub free: u64,
    pub reserved: u64,
    pub memory_error: Option<u32>,
    pub compute_processes: Vec<Process>,
    pub graphics_processes: Vec<Process>,
}

/// A scenario with every default filled in.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub driver_version: String,
    pub nvml_version: String,
    pub cuda_driver_version: i32,
    pub init_error: Option<u32>,
    pub process_names: BTreeMap<u32, String>,
    pub hide_other_namespaces: bool,
    pub devices: Vec<Device>,
    pub fail: Vec<FailRule>,
    pub slow: Vec<SlowRule>,
    pub garbage: Garbage,
}

impl Scenario {
    /// Parses and resolves a scenario document.
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawScenario = serde_json::from_str(text).map_err(|e| e.to_string())?;
        Self::resolve(raw)
    }

    fn resolve(raw: RawScenario) -> Result<Self, String> {
        if raw.devices.len() > MAX_DEVICES {
            return Err(format!(
                "{} devices; the fake supports at most {MAX_DEVICES}",
                raw.devices.len()
            ));
        }
        let mut process_names = BTreeMap::new();
        for (pid, name) in raw.process_names {
            let pid: u32 = pid
                .trim()
                .parse()
                .map_err(|_| format!("process_names key {pid:?} is not a pid"))?;
            process_names.insert(pid, name);
        }
        let devices = raw
            .devices
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                let total = d.total.unwrap_or(DEFAULT_TOTAL);
                let reserved = d.reserved.unwrap_or(0);
                let name = d.name.unwrap_or_else(|| format!("NVIDIA Fake GPU {i}"));
                let max_mig_devices = d.max_mig_devices.unwrap_or(DEFAULT_MAX_MIG);
                let mig_devices = resolve_mig(i, &name, max_mig_devices, d.mig_devices)?;
                Ok(Device {
                    name,
                    uuid: d
                        .uuid
                        .unwrap_or_else(|| format!("GPU-fa4e0000-0000-4000-8000-{i:012x}")),
                    pci_bus_id: d
                        .pci_bus_id
                        .unwrap_or_else(|| format!("00000000:{:02X}:00.0", i + 1)),
                    pci_device_id: d.pci_device_id.unwrap_or(DEFAULT_PCI_DEVICE_ID),
                    pci_subsystem_id: d.pci_subsystem_id.unwrap_or(0),
                    total,
                    free: d.free.unwrap_or_else(|| total.saturating_sub(reserved)),
                    free_file: d.free_file,
                    reserved,
                    handle_error: d.handle_error.filter(|&c| c != 0),
                    memory_error: d.memory_error.filter(|&c| c != 0),
                    compute_processes: d.compute_processes,
                    graphics_processes: d.graphics_processes,
                    mps_processes: d.mps_processes,
                    grow_between_calls: d.grow_between_calls,
                    grow_past_every_resize: d.grow_past_every_resize,
                    v2_total: d.v2_total,
                    utilization: d.utilization,
                    addressing_mode: d.addressing_mode,
                    numa_node: d.numa_node,
                    process_samples: d.process_samples,
                    mig_mode: d.mig_mode,
                    mig_pending: d.mig_pending.or(d.mig_mode),
                    max_mig_devices,
                    aggregate_error: d.aggregate_error.filter(|&c| c != 0),
                    mig_devices,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            driver_version: raw
                .driver_version
                .unwrap_or_else(|| DEFAULT_DRIVER_VERSION.to_owned()),
            nvml_version: raw
                .nvml_version
                .unwrap_or_else(|| DEFAULT_NVML_VERSION.to_owned()),
            cuda_driver_version: raw
                .cuda_driver_version
                .unwrap_or(DEFAULT_CUDA_DRIVER_VERSION),
            init_error: raw.init_error.filter(|&c| c != 0),
            process_names,
            hide_other_namespaces: raw.hide_other_namespaces,
            devices,
            fail: raw.fail,
            slow: raw.slow,
            garbage: raw.garbage,
        })
    }
}

/// Memory written for a GPU instance: (total, free, reserved).
type SharedMemory = (Option<u64>, Option<u64>, Option<u64>);

/// Fills in the MIG devices of GPU `gpu`: slots, names, UUIDs, and memory shared per GPU
/// instance.
fn resolve_mig(
    gpu: usize,
    gpu_name: &str,
    max: u32,
    raw: Vec<RawMig>,
) -> Result<Vec<MigDevice>, String> {
    if raw.len() > MAX_MIG_DEVICES {
        return Err(format!(
            "device {gpu}: {} MIG devices; the fake supports at most {MAX_MIG_DEVICES}",
            raw.len()
        ));
    }
    if raw.len() > max as usize {
        return Err(format!(
            "device {gpu}: {} MIG devices but max_mig_devices is {max}",
            raw.len()
        ));
    }
    // Memory written for a GPU instance, for its other compute instances.
    let mut shared: BTreeMap<u32, SharedMemory> = BTreeMap::new();
    for m in &raw {
        let e = shared.entry(m.gpu_instance_id).or_default();
        e.0 = e.0.or(m.total);
        e.1 = e.1.or(m.free);
        e.2 = e.2.or(m.reserved);
    }
    let mut out: Vec<MigDevice> = Vec::new();
    for (k, m) in raw.into_iter().enumerate() {
        #[allow(clippy::cast_possible_truncation)] // k < MAX_MIG_DEVICES
        let slot = m.slot.unwrap_or(k as u32);
        if slot >= max {
            return Err(format!(
                "device {gpu}: MIG slot {slot} is not below max_mig_devices {max}"
            ));
        }
        if out.iter().any(|o| o.slot == slot) {
            return Err(format!("device {gpu}: MIG slot {slot} is used twice"));
        }
        let (gt, gf, gr) = shared.get(&m.gpu_instance_id).copied().unwrap_or_default();
        let total = m.total.or(gt).unwrap_or(DEFAULT_MIG_TOTAL);
        let reserved = m.reserved.or(gr).unwrap_or(0);
        out.push(MigDevice {
            slot,
            gpu_instance_id: m.gpu_instance_id,
            compute_instance_id: m.compute_instance_id,
            name: m
                .name
                .unwrap_or_else(|| format!("{gpu_name} MIG device {slot}")),
            uuid: m
                .uuid
                .unwrap_or_else(|| format!("MIG-fa4e0000-0000-4000-8000-{gpu:04x}{slot:08x}")),
            total,
            free: m
                .free
                .or(gf)
                .unwrap_or_else(|| total.saturating_sub(reserved)),
            reserved,
            memory_error: m.memory_error.filter(|&c| c != 0),
            compute_processes: m.compute_processes,
            graphics_processes: m.graphics_processes,
        });
    }
    Ok(out)
}

/// Parses a PCI bus id in any of the forms NVML accepts:
/// `domain:bus:device.function`, `domain:bus:device`, `bus:device.function`
/// (all hex; the domain may have 4 or 8 digits). Returns (domain, bus, device, function).
pub fn parse_bus_id(text: &str) -> Option<(u32, u32, u32, u32)> {
    let text = text.trim();
    let hex = |s: &str| {
        if s.is_empty() || s.len() > 8 {
            None
        } else {
            u32::from_str_radix(s, 16).ok()
        }
    };
    let (head, function) = match text.rsplit_once('.') {
        Some((head, f)) => (head, hex(f)?),
        None => (text, 0),
    };
    let parts: Vec<&str> = head.split(':').collect();
    match parts.as_slice() {
        [d, b, dev] => Some((hex(d)?, hex(b)?, hex(dev)?, function)),
        [b, dev] if text.contains('.') => Some((0, hex(b)?, hex(dev)?, function)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_id_forms() {
        assert_eq!(parse_bus_id("00000000:18:00.0"), Some((0, 0x18, 0, 0)));
        assert_eq!(parse_bus_id("0001:0C:1f.3"), Some((1, 0x0C, 0x1F, 3)));
        assert_eq!(parse_bus_id("0000:18:00"), Some((0, 0x18, 0, 0)));
        assert_eq!(parse_bus_id("18:00.0"), Some((0, 0x18, 0, 0)));
        assert_eq!(parse_bus_id("18:00"), None);
        assert_eq!(parse_bus_id("zz"), None);
    }

    #[test]
    fn parses_the_documented_example() {
        let s = Scenario::parse(
            r#"{
              "driver_version": "590.48.01",
              "cuda_driver_version": 13010,
              "process_names": {"4194400": "python3"},
              "devices": [{
                "name": "NVIDIA H200", "uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0",
                "pci_device_id": 590483678, "total": 150754820096, "free": 116181811200,
                "reserved": 643825664,
                "compute_processes": [{"pid": 4194400, "used": 1073741824,
                                       "gpu_instance_id": null, "compute_instance_id": null}],
                "grow_between_calls": 0
              }, {}],
              "fail": [{"function": "nvmlDeviceGetMemoryInfo", "code": 1, "times": 1, "device": 0}],
              "garbage": {"name_without_nul": false}
            }"#,
        )
        .unwrap();
        assert_eq!(s.devices.len(), 2);
        assert_eq!(
            s.process_names.get(&4_194_400).map(String::as_str),
            Some("python3")
        );
        assert_eq!(s.devices[1].pci_bus_id, "00000000:02:00.0");
        assert_eq!(s.devices[1].free, DEFAULT_TOTAL);
        assert_eq!(s.nvml_version, DEFAULT_NVML_VERSION);
        assert!(Scenario::parse(r#"{"devices": [], "typo": 1}"#).is_err());
        assert!(!s.devices[0].mig_on() && s.devices[0].mig_mode.is_none());
        assert!(Scenario::parse(r#"{}"#).is_err());
    }

    #[test]
    fn mig_devices_share_their_gpu_instance_memory() {
        let s = Scenario::parse(
            r#"{"devices": [{"name": "NVIDIA H200", "mig_mode": 1, "aggregate_error": 4,
                "mig_devices": [
                  {"gpu_instance_id": 2, "compute_instance_id": 0, "total": 100, "free": 40},
                  {"gpu_instance_id": 2, "compute_instance_id": 1},
                  {"slot": 5, "gpu_instance_id": 9}
                ]}]}"#,
        )
        .unwrap();
        let d = &s.devices[0];
        assert!(d.mig_on());
        assert_eq!(d.mig_pending, Some(1));
        assert_eq!(d.aggregate_error, Some(4));
        assert_eq!(d.max_mig_devices, 7);
        let m = &d.mig_devices;
        assert_eq!((m[1].slot, m[1].total, m[1].free), (1, 100, 40));
        assert_eq!((m[2].slot, m[2].total), (5, DEFAULT_MIG_TOTAL));
        assert_eq!(m[2].name, "NVIDIA H200 MIG device 5");
        assert_eq!(m[0].uuid, "MIG-fa4e0000-0000-4000-8000-000000000000");
        for bad in [
            r#"{"devices": [{"mig_devices": [{"slot": 7}]}]}"#,
            r#"{"devices": [{"mig_devices": [{"slot": 1}, {"slot": 1}]}]}"#,
            r#"{"devices": [{"max_mig_devices": 1, "mig_devices": [{}, {}]}]}"#,
            r#"{"devices": [{"max_mig_devices": 99, "mig_devices": [{}, {}, {}, {}, {}, {}, {}, {}, {}]}]}"#,
            r#"{"devices": [{"mig_devices": [{"typo": 1}]}]}"#,
        ] {
            assert!(Scenario::parse(bad).is_err(), "{bad}");
        }
        let wide = Scenario::parse(r#"{"devices": [{"max_mig_devices": 300}]}"#).unwrap();
        assert_eq!(
            wide.devices[0].max_mig_devices, 300,
            "any count is told as it is"
        );
    }
}
