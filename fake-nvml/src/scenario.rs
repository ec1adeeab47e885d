//! The JSON scenario that drives the fake library, and its resolved form.
//!
//! ```json
//! {
//!   "driver_version": "590.48.01",        // default "590.48.01"
//!   "nvml_version": "13.590.48.01",       // default "13.590.48.01"
//!   "cuda_driver_version": 13010,         // default 13010
//!   "init_error": 9,                      // every nvmlInit* returns it (0/absent = succeed)
//!   "process_names": {"4194400": "python3"},  // nvmlSystemGetProcessName; else NOT_FOUND
//!   "devices": [{                         // required (may be empty); at most 64
//!     "name": "NVIDIA H200",              // default "NVIDIA Fake GPU <i>"
//!     "uuid": "GPU-...",                  // default "GPU-fa4e0000-0000-4000-8000-<i as 12 hex>"
//!     "pci_bus_id": "00000000:18:00.0",   // default "00000000:<i+1 as 2 hex>:00.0"
//!     "pci_device_id": 590483678,         // default 0x233010DE
//!     "pci_subsystem_id": 0,              // default 0
//!     "total": 150754820096,              // bytes, default 16 GiB
//!     "free": 116181811200,               // default total - reserved
//!     "reserved": 643825664,              // default 0
//!     "handle_error": 4,                  // GetHandleBy{Index,UUID,PciBusId} give this code
//!     "memory_error": 3,                  // both memory functions give this code
//!     "compute_processes": [{"pid": 1, "used": 1048576,
//!                            "gpu_instance_id": null, "compute_instance_id": null}],
//!     "graphics_processes": [],
//!     "grow_between_calls": 0             // synthetic compute processes after the first call
//!   }],
//!   "fail": [{"function": "nvmlDeviceGetMemoryInfo", "code": 1, "times": 1, "device": 0}],
//!   "garbage": {"name_without_nul": false, "count_larger_than_buffer": false,
//!               "process_used_max": false}
//! }
//! ```
//!
//! * Unknown keys anywhere are an error (init then returns 999 and says why on stderr).
//! * Process `used` omitted or `null` = 0xFFFFFFFFFFFFFFFF (NVML_VALUE_NOT_AVAILABLE, as under
//!   WDDM); `null`/omitted instance ids = 0xFFFFFFFF.
//! * `grow_between_calls: N`: as soon as the first Compute process-list call (any version) on
//!   that device returns, whatever its result, the Compute list gains N processes with pids
//!   4300000.. and 1 MiB each (once).
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

/// Most devices a scenario may describe (handles point into a fixed table).
pub const MAX_DEVICES: usize = 64;

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
    devices: Vec<RawDevice>,
    #[serde(default)]
    fail: Vec<FailRule>,
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
    grow_between_calls: u32,
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
}

fn one() -> u64 {
    1
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
    pub reserved: u64,
    pub handle_error: Option<u32>,
    pub memory_error: Option<u32>,
    pub compute_processes: Vec<Process>,
    pub graphics_processes: Vec<Process>,
    pub grow_between_calls: u32,
}

/// A scenario with every default filled in.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub driver_version: String,
    pub nvml_version: String,
    pub cuda_driver_version: i32,
    pub init_error: Option<u32>,
    pub process_names: BTreeMap<u32, String>,
    pub devices: Vec<Device>,
    pub fail: Vec<FailRule>,
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
                Device {
                    name: d.name.unwrap_or_else(|| format!("NVIDIA Fake GPU {i}")),
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
                    reserved,
                    handle_error: d.handle_error.filter(|&c| c != 0),
                    memory_error: d.memory_error.filter(|&c| c != 0),
                    compute_processes: d.compute_processes,
                    graphics_processes: d.graphics_processes,
                    grow_between_calls: d.grow_between_calls,
                }
            })
            .collect();
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
            devices,
            fail: raw.fail,
            garbage: raw.garbage,
        })
    }
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
        assert!(Scenario::parse(r#"{}"#).is_err());
    }
}
