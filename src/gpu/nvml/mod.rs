//! NVIDIA through NVML, loaded at run time with `libloading`.
//!
//! The library is loaded, its symbols resolved and `nvmlInit` called **once per process**; the
//! session is re-initialised only after an error that means the driver went away
//! (`NVML_ERROR_UNINITIALIZED`, `NVML_ERROR_DRIVER_NOT_LOADED`). A failed initialisation is
//! retried at most once per [`INIT_RETRY_AFTER`].

mod ffi;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

pub use ffi::NVML_MEMORY_V2_VERSION;
use ffi::{
    Device, NVML_DEVICE_MIG_ENABLE, NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_INSUFFICIENT_SIZE,
    NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_UNINITIALIZED, NVML_SUCCESS,
    NVML_VALUE_NOT_AVAILABLE, NVML_VALUE_NOT_AVAILABLE_U32, Nvml, NvmlReturn, ProcessFn,
    ProcessInfoV1, ProcessInfoV2, ProcessInfoV3Wide, ProcessLayout, ProcessRecord, return_name,
};

use super::backend::{Backend, Op, Presence};
use super::mig;
use crate::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, HypomnesisError,
    MigInstance, MigState, ProcessGpuInfo, Result, SourceReport, SourceState, procfs,
};

/// How long a failed `nvmlInit` is remembered before it is tried again.
pub(crate) const INIT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long a device's MIG mode is reused before NVML is asked again.
const MIG_MODE_REUSE: Duration = Duration::from_secs(5);
/// First capacity of a process-list buffer: one call answers most hosts without a sizing call.
const FIRST_CAPACITY: usize = 64;
/// Tries of the two-call protocol before a list that keeps growing is given up on.
const MAX_LIST_ATTEMPTS: usize = 8;
/// A process count above this is garbage, not a host (`pid_max` is 2^22).
const MAX_LIST_ROWS: usize = 1 << 22;
/// A MIG device count above this is garbage (GPUs have at most 7 today).
const MAX_MIG_SLOTS: u32 = 256;

/// The NVML backend. All state is process-wide (see the module docs).
pub(crate) struct NvmlBackend;

/// Where the library is looked for: `HYPOMNESIS_NVML_LIBRARY` alone when set (it must be an
/// absolute path), otherwise the platform's list. `Ok((paths, explicit))`.
fn candidates() -> std::result::Result<(Vec<PathBuf>, bool), String> {
    if let Some(v) = std::env::var_os("HYPOMNESIS_NVML_LIBRARY").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        if !p.is_absolute() {
            return Err(format!(
                "HYPOMNESIS_NVML_LIBRARY must be an absolute path to the NVML library, got {:?}",
                v.to_string_lossy()
            ));
        }
        return Ok((vec![p], true));
    }
    Ok((default_candidates(), false))
}

#[cfg(target_os = "linux")]
fn default_candidates() -> Vec<PathBuf> {
    [
        "libnvidia-ml.so.1",
        "libnvidia-ml.so",
        "/usr/lib/wsl/lib/libnvidia-ml.so.1",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

#[cfg(windows)]
fn default_candidates() -> Vec<PathBuf> {
    // Absolute paths only: never the current directory or the DLL search path (DLL planting).
    let mut out = Vec::new();
    if let Some(root) = std::env::var_os("SystemRoot").or_else(|| std::env::var_os("windir")) {
        out.push(PathBuf::from(root).join("System32").join("nvml.dll"));
    }
    if let Some(pf) = std::env::var_os("ProgramFiles") {
        out.push(
            PathBuf::from(pf)
                .join("NVIDIA Corporation")
                .join("NVSMI")
                .join("nvml.dll"),
        );
    }
    out
}

#[cfg(not(any(target_os = "linux", windows)))]
fn default_candidates() -> Vec<PathBuf> {
    Vec::new()
}

/// The process-wide outcome of loading the library.
enum LoadOutcome {
    Loaded(Box<Loaded>),
    Failed { reason: String, explicit: bool },
}

fn outcome() -> &'static LoadOutcome {
    static STATE: OnceLock<LoadOutcome> = OnceLock::new();
    STATE.get_or_init(load)
}

fn load() -> LoadOutcome {
    let (paths, explicit) = match candidates() {
        Ok(c) => c,
        Err(reason) => {
            return LoadOutcome::Failed {
                reason,
                explicit: true,
            };
        }
    };
    if paths.is_empty() {
        return LoadOutcome::Failed {
            reason: format!("NVML is not available on {}", std::env::consts::OS),
            explicit: false,
        };
    }
    let mut tried = Vec::new();
    for path in paths {
        match Nvml::load(&path) {
            Ok(nvml) => {
                return LoadOutcome::Loaded(Box::new(Loaded {
                    nvml,
                    path,
                    session: Mutex::new(Session::default()),
                    dropped_rows: AtomicU64::new(0),
                }));
            }
            Err(why) => {
                let shown = path.display().to_string();
                tried.push(if why.starts_with(&shown) {
                    why
                } else {
                    format!("{shown}: {why}")
                });
            }
        }
    }
    LoadOutcome::Failed {
        reason: format!(
            "could not load the NVML library (tried {})",
            tried.join("; ")
        ),
        explicit,
    }
}

/// Current and pending MIG mode; `None` when the GPU cannot be split.
type MigMode = Option<(bool, bool)>;

#[derive(Default)]
struct Session {
    live: bool,
    init_calls: u64,
    last_failure: Option<(String, Instant)>,
    handles: Vec<Option<Device>>,
    /// `None`: not asked yet in this session; `Some(None)`: asked, unknown.
    #[allow(clippy::option_option)]
    driver_version: Option<Option<String>>,
    /// MIG mode per device handle, with when it was read: the driver call costs ~150 µs on an
    /// H200, and a mode change only takes effect at a GPU reset.
    mig_modes: Vec<(Device, Instant, MigMode)>,
}

/// A loaded library with its session.
struct Loaded {
    nvml: Nvml,
    path: PathBuf,
    session: Mutex<Session>,
    dropped_rows: AtomicU64,
}

/// Why an NVML-backed operation failed.
enum Failure {
    /// An NVML call returned a code.
    Call {
        function: &'static str,
        gpu: Option<u32>,
        code: NvmlReturn,
    },
    /// Anything else, already a finished error.
    Other(HypomnesisError),
}

impl Failure {
    fn driver_gone(&self) -> bool {
        matches!(self, Self::Call { code, .. } if *code == NVML_ERROR_UNINITIALIZED || *code == NVML_ERROR_DRIVER_NOT_LOADED)
    }
}

fn call(function: &'static str, gpu: Option<u32>) -> impl Fn(NvmlReturn) -> Failure {
    move |code| Failure::Call {
        function,
        gpu,
        code,
    }
}

/// A row of a process list, before names are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RawProcess {
    pid: u32,
    used: u64,
    context: GpuContextKind,
    gpu_instance: Option<u32>,
    compute_instance: Option<u32>,
}

/// A row as one NVML process list gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ListRow {
    pid: u32,
    used: u64,
    gpu_instance: Option<u32>,
    compute_instance: Option<u32>,
}

/// A GPU/compute instance id, `None` for NVML's "not available" (MIG off).
fn instance_id(v: u32) -> Option<u32> {
    (v != NVML_VALUE_NOT_AVAILABLE_U32).then_some(v)
}

/// The MIG instance a process list belongs to (GPU and compute instance ids), for lists read on
/// MIG device handles.
type InstanceIds = (Option<u32>, Option<u32>);

impl Loaded {
    fn lock(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn describe(&self, code: NvmlReturn) -> String {
        match self.nvml.error_string(code) {
            Some(s) if !s.is_empty() => format!("{} ({code}, \"{s}\")", return_name(code)),
            _ => format!("{} ({code})", return_name(code)),
        }
    }

    fn to_error(&self, f: Failure) -> HypomnesisError {
        match f {
            Failure::Other(e) => e,
            Failure::Call {
                function,
                gpu,
                code,
            } => {
                let what = match gpu {
                    Some(i) => format!("{function} for GPU {i}"),
                    None => function.to_string(),
                };
                if code == ffi::UNTERMINATED {
                    HypomnesisError::Nvml(format!(
                        "{what} returned a string without a terminating NUL"
                    ))
                } else {
                    HypomnesisError::Nvml(format!("{what} failed: {}", self.describe(code)))
                }
            }
        }
    }

    /// Make sure a session is live; `force` ignores the retry delay after a failure.
    fn ensure(&self, force: bool) -> Result<()> {
        let mut s = self.lock();
        if s.live {
            return Ok(());
        }
        if let Some((why, at)) = &s.last_failure
            && !force
            && at.elapsed() < INIT_RETRY_AFTER
        {
            return Err(HypomnesisError::Nvml(why.clone()));
        }
        s.init_calls += 1;
        let rc = self.nvml.init();
        if rc == NVML_SUCCESS {
            s.live = true;
            s.last_failure = None;
            s.handles.clear();
            s.mig_modes.clear();
            s.driver_version = None;
            Ok(())
        } else {
            let why = format!(
                "{} failed: {} (library {})",
                self.nvml.init_name,
                self.describe(rc),
                self.path.display()
            );
            s.last_failure = Some((why.clone(), Instant::now()));
            Err(HypomnesisError::Nvml(why))
        }
    }

    /// Drop the session after the driver went away (the next `ensure` initialises again).
    fn drop_session(&self) {
        let mut s = self.lock();
        if s.live {
            let _ = self.nvml.shutdown();
            s.live = false;
            s.handles.clear();
            s.mig_modes.clear();
        }
    }

    /// Run `f` in a live session; after an error meaning the driver went away, re-initialise
    /// once and run it again.
    fn run<T>(&self, f: impl Fn(&Self) -> std::result::Result<T, Failure>) -> Result<T> {
        self.ensure(false)?;
        match f(self) {
            Ok(v) => Ok(v),
            Err(e) if e.driver_gone() => {
                crate::debug_log!("NVML: {}; re-initialising", self.to_error(e));
                self.drop_session();
                self.ensure(true)?;
                f(self).map_err(|e| self.to_error(e))
            }
            Err(e) => Err(self.to_error(e)),
        }
    }

    fn device_count(&self) -> std::result::Result<u32, Failure> {
        self.nvml
            .device_count()
            .map_err(call(self.nvml.count_name, None))
    }

    /// The handle of device `index` (cached for the session).
    fn device(&self, index: u32) -> std::result::Result<Device, Failure> {
        let slot = usize::try_from(index).unwrap_or(usize::MAX);
        if let Some(Some(h)) = self.lock().handles.get(slot) {
            return Ok(*h);
        }
        let count = self.device_count()?;
        if index >= count {
            return Err(Failure::Other(HypomnesisError::DeviceIndexOutOfRange {
                index,
                count,
            }));
        }
        let h = self
            .nvml
            .handle(index)
            .map_err(call(self.nvml.handle_name, Some(index)))?;
        let mut s = self.lock();
        if s.handles.len() <= slot {
            s.handles.resize(slot.saturating_add(1), None);
        }
        if let Some(cell) = s.handles.get_mut(slot) {
            *cell = Some(h);
        }
        Ok(h)
    }

    fn driver_version(&self) -> Option<String> {
        if let Some(v) = &self.lock().driver_version {
            return v.clone();
        }
        let v = self
            .nvml
            .driver_version()
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        self.lock().driver_version = Some(v.clone());
        v
    }

    /// v1 memory of a device, validated.
    fn memory(&self, dev: Device, index: u32) -> std::result::Result<ffi::Memory, Failure> {
        let m = self
            .nvml
            .memory(dev)
            .ok_or_else(|| {
                Failure::Other(HypomnesisError::Nvml(
                    "the library exports no nvmlDeviceGetMemoryInfo".into(),
                ))
            })?
            .map_err(call("nvmlDeviceGetMemoryInfo", Some(index)))?;
        if m.free > m.total || m.total == NVML_VALUE_NOT_AVAILABLE {
            return Err(Failure::Other(HypomnesisError::Nvml(format!(
                "nvmlDeviceGetMemoryInfo for GPU {index} returned impossible figures (total {}, free {})",
                m.total, m.free
            ))));
        }
        Ok(m)
    }

    fn device_info(&self, index: u32) -> std::result::Result<GpuDeviceInfo, Failure> {
        let dev = self.device(index)?;
        let mem = self.memory(dev, index)?;
        let v2 = self.nvml.memory_v2(dev, NVML_MEMORY_V2_VERSION);
        let reserved = reserved_from_v2(v2, mem.total, mem.free);
        let name = self
            .nvml
            .device_name(dev)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        let uuid = self
            .nvml
            .device_uuid(dev)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        let pci_bus_id = self
            .nvml
            .pci_info(dev)
            .and_then(std::result::Result::ok)
            .and_then(|p| {
                text(
                    &p.bus_id
                        .iter()
                        .map(|c| c.cast_unsigned())
                        .take_while(|&b| b != 0)
                        .collect::<Vec<u8>>(),
                )
            });
        Ok(GpuDeviceInfo {
            index,
            name,
            total_bytes: mem.total,
            free_bytes: mem.free,
            used_bytes: mem.total - mem.free,
            reserved_bytes: reserved,
            driver_version: self.driver_version(),
            uuid,
            pci_bus_id,
            vendor: Some(GpuVendor::Nvidia),
            source: GpuQuerySource::Nvml,
            mig_enabled: self.mig_mode(dev).map(|(current, _)| current),
            ..GpuDeviceInfo::blank()
        })
    }

    /// Current and pending MIG mode; `None` when the GPU cannot be split (or NVML will not say).
    /// Remembered for [`MIG_MODE_REUSE`].
    fn mig_mode(&self, dev: Device) -> Option<(bool, bool)> {
        if let Some((_, _, mode)) = self
            .lock()
            .mig_modes
            .iter()
            .find(|(d, at, _)| *d == dev && at.elapsed() < MIG_MODE_REUSE)
        {
            return *mode;
        }
        let mode = self
            .nvml
            .mig_mode(dev)
            .and_then(std::result::Result::ok)
            .map(|(current, pending)| {
                (
                    current == NVML_DEVICE_MIG_ENABLE,
                    pending == NVML_DEVICE_MIG_ENABLE,
                )
            });
        let mut s = self.lock();
        s.mig_modes.retain(|(d, _, _)| *d != dev);
        s.mig_modes.push((dev, Instant::now(), mode));
        mode
    }

    /// The occupied MIG device slots of a GPU in MIG mode, with their handles (empty slots,
    /// `NVML_ERROR_NOT_FOUND`, are skipped).
    fn mig_devices(
        &self,
        dev: Device,
        index: u32,
    ) -> std::result::Result<Vec<(u32, Device)>, Failure> {
        let missing = |f: &str| {
            Failure::Other(HypomnesisError::Nvml(format!(
                "the library exports no {f}, so the MIG devices of GPU {index} cannot be listed"
            )))
        };
        let max = self
            .nvml
            .max_mig_devices(dev)
            .ok_or_else(|| missing("nvmlDeviceGetMaxMigDeviceCount"))?
            .map_err(call("nvmlDeviceGetMaxMigDeviceCount", Some(index)))?;
        if max > MAX_MIG_SLOTS {
            return Err(Failure::Other(HypomnesisError::Nvml(format!(
                "nvmlDeviceGetMaxMigDeviceCount for GPU {index} returned {max}, more than any GPU has"
            ))));
        }
        let mut out = Vec::new();
        for slot in 0..max {
            match self
                .nvml
                .mig_handle(dev, slot)
                .ok_or_else(|| missing("nvmlDeviceGetMigDeviceHandleByIndex"))?
            {
                Ok(h) => out.push((slot, h)),
                Err(NVML_ERROR_NOT_FOUND) => {}
                Err(code) => {
                    return Err(call("nvmlDeviceGetMigDeviceHandleByIndex", Some(index))(
                        code,
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The GPU and compute instance ids of a MIG device handle.
    fn instance_ids(&self, h: Device) -> InstanceIds {
        (
            self.nvml
                .gpu_instance_id(h)
                .and_then(std::result::Result::ok),
            self.nvml
                .compute_instance_id(h)
                .and_then(std::result::Result::ok),
        )
    }

    /// Everything NVML says about one MIG device. Memory that cannot be read is `None` with the
    /// reason, never zeros.
    fn mig_instance_of(&self, index: u32, slot: u32, h: Device) -> MigInstance {
        let mut m = MigInstance::blank(index, slot, GpuQuerySource::Nvml);
        m.uuid = self
            .nvml
            .device_uuid(h)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        m.name = self
            .nvml
            .device_name(h)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        m.profile = m.name.as_deref().and_then(mig::profile_from_name);
        (m.gpu_instance_id, m.compute_instance_id) = self.instance_ids(h);
        match self.nvml.memory(h) {
            None => m.memory_error = Some("the library exports no nvmlDeviceGetMemoryInfo".into()),
            Some(Err(code)) => m.memory_error = Some(return_name(code).to_string()),
            Some(Ok(mem)) if mem.free > mem.total || mem.total == NVML_VALUE_NOT_AVAILABLE => {
                m.memory_error = Some(format!(
                    "impossible figures (total {}, free {})",
                    mem.total, mem.free
                ));
            }
            Some(Ok(mem)) => {
                m.total_bytes = Some(mem.total);
                m.free_bytes = Some(mem.free);
                m.used_bytes = Some(mem.total - mem.free);
                m.reserved_bytes = reserved_from_v2(
                    self.nvml.memory_v2(h, NVML_MEMORY_V2_VERSION),
                    mem.total,
                    mem.free,
                );
            }
        }
        m
    }

    fn mig_state(&self, index: u32) -> std::result::Result<MigState, Failure> {
        let dev = self.device(index)?;
        let mut s = MigState::unsupported(index, GpuQuerySource::Nvml);
        s.name = self
            .nvml
            .device_name(dev)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        s.uuid = self
            .nvml
            .device_uuid(dev)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        let Some((current, pending)) = self.mig_mode(dev) else {
            return Ok(s);
        };
        s.enabled = Some(current);
        s.pending = Some(pending);
        if !current {
            return Ok(s);
        }
        let mut list: Vec<MigInstance> = self
            .mig_devices(dev, index)?
            .into_iter()
            .map(|(slot, h)| self.mig_instance_of(index, slot, h))
            .collect();
        mig::sort_instances(&mut list);
        s.instances = list;
        s.device_memory_error = match self.memory(dev, index) {
            Ok(_) => None,
            Err(Failure::Call { code, .. }) => Some(return_name(code).to_string()),
            Err(Failure::Other(e)) => Some(e.to_string()),
        };
        Ok(s)
    }

    /// The MIG device with this UUID, found with `nvmlDeviceGetHandleByUUID`.
    fn find_mig(&self, uuid: &str) -> std::result::Result<MigInstance, Failure> {
        let other = |m: String| Failure::Other(HypomnesisError::Nvml(m));
        let missing = |f: &str| other(format!("the library exports no {f}"));
        let h = match self
            .nvml
            .handle_by_uuid(uuid)
            .ok_or_else(|| missing("nvmlDeviceGetHandleByUUID"))?
        {
            Ok(h) => h,
            Err(NVML_ERROR_NOT_FOUND) => {
                return Err(other(format!("no GPU or MIG device has UUID {uuid:?}")));
            }
            Err(code) => return Err(call("nvmlDeviceGetHandleByUUID", None)(code)),
        };
        let is_mig = self
            .nvml
            .is_mig_handle(h)
            .ok_or_else(|| missing("nvmlDeviceIsMigDeviceHandle"))?
            .map_err(call("nvmlDeviceIsMigDeviceHandle", None))?;
        if !is_mig {
            return Err(other(format!(
                "{uuid:?} is a whole GPU, not a MIG device (ask for it by index)"
            )));
        }
        let parent = self
            .nvml
            .mig_parent(h)
            .ok_or_else(|| missing("nvmlDeviceGetDeviceHandleFromMigDeviceHandle"))?
            .map_err(call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", None))?;
        let uuid_of = |d: Device| {
            self.nvml
                .device_uuid(d)
                .and_then(std::result::Result::ok)
                .and_then(|b| text(&b))
        };
        let same =
            |a: Device, b: Device| a == b || (uuid_of(a).is_some() && uuid_of(a) == uuid_of(b));
        let count = self.device_count()?;
        let index = (0..count)
            .find(|&i| self.device(i).is_ok_and(|d| same(d, parent)))
            .ok_or_else(|| {
                other(format!(
                    "the GPU of MIG device {uuid:?} is not among the {count} GPUs NVML lists"
                ))
            })?;
        let slot = self
            .mig_devices(parent, index)?
            .into_iter()
            .find(|&(_, d)| same(d, h))
            .map(|(slot, _)| slot)
            .ok_or_else(|| {
                other(format!(
                    "MIG device {uuid:?} is not in the MIG device slots of GPU {index}"
                ))
            })?;
        Ok(self.mig_instance_of(index, slot, h))
    }

    /// One line for `hmn doctor` on GPU `index`'s MIG mode.
    fn mig_summary(&self, index: u32) -> String {
        let dev = match self.device(index) {
            Ok(d) => d,
            Err(e) => return format!("unknown ({})", self.to_error(e)),
        };
        match self.nvml.mig_mode(dev) {
            None => "unknown (the library exports no nvmlDeviceGetMigMode)".into(),
            Some(Err(NVML_ERROR_NOT_SUPPORTED)) => "not supported by this GPU".into(),
            Some(Err(code)) => format!("unknown ({})", return_name(code)),
            Some(Ok((current, pending))) => {
                let (current, pending) = (
                    current == NVML_DEVICE_MIG_ENABLE,
                    pending == NVML_DEVICE_MIG_ENABLE,
                );
                let mut s = if current {
                    match self.mig_devices(dev, index) {
                        Ok(list) => {
                            let n = list.len();
                            format!("on, {n} MIG device{}", if n == 1 { "" } else { "s" })
                        }
                        Err(e) => format!("on (MIG devices unknown: {})", self.to_error(e)),
                    }
                } else {
                    "off".to_string()
                };
                if pending != current {
                    s.push_str(if pending {
                        "; on after the next GPU reset"
                    } else {
                        "; off after the next GPU reset"
                    });
                }
                s
            }
        }
    }

    /// Compute and graphics lists of a device, merged per pid, implausible rows dropped. With
    /// MIG on, the lists of each MIG device are read too: they say which instance a process
    /// runs in, and they answer callers to whom the GPU-wide lists are refused.
    fn raw_processes(&self, index: u32) -> std::result::Result<Vec<RawProcess>, Failure> {
        let dev = self.device(index)?;
        let total = self.memory(dev, index).ok().map(|m| m.total);
        let parent = self.read_lists(dev, index, total, None);
        if !matches!(self.mig_mode(dev), Some((true, _))) {
            return parent.map(|m| m.into_values().collect());
        }
        let (mut merged, parent_error) = match parent {
            Ok(m) => (m, None),
            Err(e) => (BTreeMap::new(), Some(e)),
        };
        let instances = match self.mig_devices(dev, index) {
            Ok(list) => list,
            Err(e) => return Err(parent_error.unwrap_or(e)),
        };
        if instances.is_empty()
            && let Some(e) = parent_error
        {
            return Err(e);
        }
        let whole_list = parent_error.is_none();
        for (_, h) in instances {
            let ids = self.instance_ids(h);
            let own_total = self
                .nvml
                .memory(h)
                .and_then(std::result::Result::ok)
                .map(|m| m.total);
            match self.read_lists(h, index, own_total.or(total), Some(ids)) {
                Ok(rows) => {
                    for r in rows.into_values() {
                        merge(&mut merged, r);
                    }
                }
                // The GPU-wide lists already hold every process: the instance's only adds ids.
                Err(e) if whole_list => {
                    crate::debug_log!(
                        "NVML: GPU {index}: a MIG device's process list: {}",
                        self.to_error(e)
                    );
                }
                Err(e) => return Err(e),
            }
        }
        Ok(merged.into_values().collect())
    }

    /// The compute and graphics lists of one handle (a GPU, or a MIG device of GPU `index`
    /// whose instance ids are `ids`), merged per pid.
    fn read_lists(
        &self,
        dev: Device,
        index: u32,
        total: Option<u64>,
        ids: Option<InstanceIds>,
    ) -> std::result::Result<BTreeMap<u32, RawProcess>, Failure> {
        let lists = [
            (self.nvml.compute, GpuContextKind::Compute),
            (self.nvml.graphics, GpuContextKind::Graphics),
        ];
        if lists.iter().all(|(f, _)| f.is_none()) {
            return Err(Failure::Other(HypomnesisError::Nvml(
                "the library exports no process-list function".into(),
            )));
        }
        let mut merged: BTreeMap<u32, RawProcess> = BTreeMap::new();
        let mut dropped = 0_u64;
        for (pf, kind) in lists {
            let Some(pf) = pf else { continue };
            let rows = match read_list(pf, dev, index) {
                Ok(rows) => rows,
                // Graphics lists are unsupported on some compute-only boards (and on MIG
                // devices): compute still counts.
                Err(Failure::Call {
                    code: NVML_ERROR_NOT_SUPPORTED,
                    ..
                }) if kind == GpuContextKind::Graphics => continue,
                Err(e) => return Err(e),
            };
            for r in rows {
                if !plausible(r.pid, r.used, total) {
                    dropped += 1;
                    continue;
                }
                let (gi, ci) = ids.unwrap_or((None, None));
                merge(
                    &mut merged,
                    RawProcess {
                        pid: r.pid,
                        used: r.used,
                        context: kind,
                        gpu_instance: r.gpu_instance.or(gi),
                        compute_instance: r.compute_instance.or(ci),
                    },
                );
            }
        }
        if dropped > 0 {
            self.dropped_rows.fetch_add(dropped, Ordering::Relaxed);
            crate::debug_log!(
                "NVML: GPU {index}: {dropped} process row(s) without a usable memory figure dropped"
            );
        }
        Ok(merged)
    }

    fn name_of(&self, root: &Path, pid: u32) -> Option<String> {
        if let Some(n) = procfs::comm(root, pid) {
            return Some(n);
        }
        if !procfs::visible(root, pid) {
            // Another PID namespace: NVML's name lookup reads this namespace's /proc too and
            // could name an unrelated process with the same number.
            return None;
        }
        let bytes = self.nvml.process_name(pid)?.ok()?;
        let s = text(&bytes)?;
        Some(procfs::short_name(&s).to_string())
    }
}

fn read_list(pf: ProcessFn, dev: Device, index: u32) -> std::result::Result<Vec<ListRow>, Failure> {
    match pf.layout {
        ProcessLayout::V1 => read_typed::<ProcessInfoV1>(pf, dev, index),
        ProcessLayout::V2 => read_typed::<ProcessInfoV2>(pf, dev, index),
        ProcessLayout::V3Wide => read_typed::<ProcessInfoV3Wide>(pf, dev, index),
    }
}

/// The two-call protocol: ask with a buffer, grow it to what NVML says it needs (with room
/// for processes that appear meanwhile), and ask again; no cap on the number of rows.
fn read_typed<T: ProcessRecord>(
    pf: ProcessFn,
    dev: Device,
    index: u32,
) -> std::result::Result<Vec<ListRow>, Failure> {
    let mut buf = vec![T::default(); FIRST_CAPACITY];
    for _ in 0..MAX_LIST_ATTEMPTS {
        let (rc, count) = pf.call(dev, &mut buf);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        match rc {
            NVML_SUCCESS => {
                let rows = buf.get(..count).ok_or_else(|| {
                    Failure::Other(HypomnesisError::Nvml(format!(
                        "{} for GPU {index} reported {count} entries for a buffer of {}; the list is not trusted",
                        pf.name,
                        buf.len()
                    )))
                })?;
                return Ok(rows
                    .iter()
                    .map(|r| ListRow {
                        pid: r.pid(),
                        used: r.used(),
                        gpu_instance: instance_id(r.gpu_instance()),
                        compute_instance: instance_id(r.compute_instance()),
                    })
                    .collect());
            }
            NVML_ERROR_INSUFFICIENT_SIZE => {
                if count > MAX_LIST_ROWS {
                    return Err(Failure::Other(HypomnesisError::Nvml(format!(
                        "{} for GPU {index} asked for room for {count} processes, more than any host can run",
                        pf.name
                    ))));
                }
                let want = count
                    .max(buf.len())
                    .saturating_mul(2)
                    .saturating_add(8)
                    .min(MAX_LIST_ROWS);
                buf = vec![T::default(); want];
            }
            code => {
                return Err(Failure::Call {
                    function: pf.name,
                    gpu: Some(index),
                    code,
                });
            }
        }
    }
    Err(Failure::Other(HypomnesisError::Nvml(format!(
        "{} for GPU {index} still answered NVML_ERROR_INSUFFICIENT_SIZE after {MAX_LIST_ATTEMPTS} tries (the list keeps growing)",
        pf.name
    ))))
}

/// `reserved` from a v2 answer, only when it is consistent with the v1 figures: same total, and
/// `reserved <= total - free` (the reservation is a subset of v1's used). Otherwise `None`.
fn reserved_from_v2(
    v2: Option<std::result::Result<ffi::MemoryV2, NvmlReturn>>,
    total: u64,
    free: u64,
) -> Option<u64> {
    let m = v2?.ok()?;
    let used = total.checked_sub(free)?;
    (m.total == total && m.reserved <= used).then_some(m.reserved)
}

/// A row is kept when the pid is plausible and the memory figure is a real one no larger than
/// the device (drivers have returned `NVML_VALUE_NOT_AVAILABLE`, and garbage from wrong strides).
fn plausible(pid: u32, used: u64, total: Option<u64>) -> bool {
    pid != 0
        && pid != u32::MAX
        && used != NVML_VALUE_NOT_AVAILABLE
        && total.is_none_or(|t| used <= t)
}

/// Merge a row into the per-pid map: a pid in both lists (or in a GPU's and a MIG device's) is
/// one process (max of the two figures, never their sum); instance ids come from whichever row
/// has them.
fn merge(map: &mut BTreeMap<u32, RawProcess>, row: RawProcess) {
    map.entry(row.pid)
        .and_modify(|e| {
            e.used = e.used.max(row.used);
            if e.context != row.context {
                e.context = GpuContextKind::ComputeAndGraphics;
            }
            e.gpu_instance = e.gpu_instance.or(row.gpu_instance);
            e.compute_instance = e.compute_instance.or(row.compute_instance);
        })
        .or_insert(row);
}

/// Bytes to a trimmed UTF-8 string; `None` when empty.
fn text(bytes: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
}

impl NvmlBackend {
    fn with<T>(f: impl FnOnce(&Loaded) -> Result<T>) -> Result<T> {
        match outcome() {
            LoadOutcome::Loaded(l) => f(l),
            LoadOutcome::Failed { reason, .. } => Err(HypomnesisError::Nvml(reason.clone())),
        }
    }
}

impl Backend for NvmlBackend {
    fn answers(&self, op: Op) -> bool {
        // Per-process figures are N/A under Windows WDDM: DXGI and PDH answer those there.
        !(cfg!(all(windows, feature = "dxgi"))
            && matches!(op, Op::ProcessGpuInfo | Op::GpuProcesses))
    }

    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Nvml
    }

    fn presence(&self) -> Presence {
        match outcome() {
            LoadOutcome::Loaded(_) | LoadOutcome::Failed { explicit: true, .. } => {
                Presence::Present
            }
            LoadOutcome::Failed {
                reason,
                explicit: false,
            } => Presence::Absent(reason.clone()),
        }
    }

    fn device_count(&self) -> Result<u32> {
        Self::with(|l| l.run(Loaded::device_count))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        Self::with(|l| l.run(|l| l.device_info(index)))
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        Self::with(|l| {
            let root = procfs::root()?;
            let rows = l.run(|l| l.raw_processes(index))?;
            let me = std::process::id();
            let own_root = crate::roots::procfs_is_own();
            if let Some(r) = rows.iter().find(|r| {
                if own_root {
                    r.pid == me
                } else {
                    procfs::place(root, r.pid).0 == me
                }
            }) {
                return Ok(ProcessGpuInfo {
                    used_bytes: r.used,
                    is_per_process: true,
                    source: GpuQuerySource::Nvml,
                });
            }
            // Not listed. When every listed pid is visible here, NVML sees the same pids as we do
            // (an idle GPU lists none): this process holds nothing. Otherwise we may be in
            // another PID namespace; unless this process has no CUDA context at all, the honest
            // answer is the device-wide figure, flagged as such.
            let same_view = rows.iter().all(|r| !procfs::place(root, r.pid).2);
            if same_view || procfs::self_has_cuda_context(root) == Some(false) {
                return Ok(ProcessGpuInfo {
                    used_bytes: 0,
                    is_per_process: true,
                    source: GpuQuerySource::Nvml,
                });
            }
            let d = l.run(|l| l.device_info(index))?;
            Ok(ProcessGpuInfo {
                used_bytes: d.used_bytes,
                is_per_process: false,
                source: GpuQuerySource::Nvml,
            })
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        Self::with(|l| {
            let root = procfs::root()?;
            let rows = l.run(|l| l.raw_processes(index))?;
            let mut out: Vec<GpuProcessEntry> = rows
                .into_iter()
                .map(|r| {
                    let (pid, host_pid, outside) = procfs::place(root, r.pid);
                    let name = match (host_pid, outside) {
                        (None, false) => l.name_of(root, r.pid),
                        // Mapped, or outside our namespace but visible in a host procfs.
                        _ => procfs::comm(root, r.pid),
                    };
                    GpuProcessEntry {
                        pid,
                        name,
                        used_bytes: r.used,
                        source: GpuQuerySource::Nvml,
                        device_index: index,
                        context: Some(r.context),
                        host_pid,
                        outside_pid_namespace: outside,
                        gpu_instance_id: r.gpu_instance,
                        compute_instance_id: r.compute_instance,
                        ..GpuProcessEntry::blank()
                    }
                })
                .collect();
            out.sort_by_key(|e| e.pid);
            Ok(out)
        })
    }

    fn mig_state(&self, index: u32) -> Result<MigState> {
        Self::with(|l| l.run(|l| l.mig_state(index)))
    }

    fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        Self::with(|l| l.run(|l| l.find_mig(uuid)))
    }

    fn report(&self) -> SourceReport {
        let mut details = Vec::new();
        let state = match outcome() {
            LoadOutcome::Failed { reason, explicit } => {
                if *explicit {
                    SourceState::Failed(reason.clone())
                } else {
                    SourceState::Absent(reason.clone())
                }
            }
            LoadOutcome::Loaded(l) => {
                details.push(("library".into(), l.path.display().to_string()));
                let state = match l.run(Loaded::device_count) {
                    Ok(n) => {
                        details.push(("devices".into(), n.to_string()));
                        for i in 0..n {
                            details.push((format!("GPU {i} MIG"), l.mig_summary(i)));
                        }
                        SourceState::Answered
                    }
                    Err(e) => SourceState::Failed(e.to_string()),
                };
                if let Some(v) = l.driver_version() {
                    details.push(("driver version".into(), v));
                }
                if let Some(v) = l
                    .nvml
                    .lib_version()
                    .and_then(std::result::Result::ok)
                    .and_then(|b| text(&b))
                {
                    details.push(("NVML version".into(), v));
                }
                if let Some(Ok(v)) = l.nvml.cuda_driver_version() {
                    details.push((
                        "CUDA driver API".into(),
                        format!("{}.{}", v / 1000, (v % 1000) / 10),
                    ));
                }
                details.push((
                    "reserved memory (nvmlDeviceGetMemoryInfo_v2)".into(),
                    if l.nvml.has_memory_v2() {
                        "available".into()
                    } else {
                        "not exported (driver older than R510): reserved memory is unknown".into()
                    },
                ));
                let list = |f: Option<ProcessFn>| match f {
                    Some(f) => format!("{} ({}-byte entries)", f.name, f.layout.stride()),
                    None => "not exported".into(),
                };
                details.push(("compute process list".into(), list(l.nvml.compute)));
                details.push(("graphics process list".into(), list(l.nvml.graphics)));
                if let Some(p) = l.nvml.pci_symbol() {
                    details.push(("PCI info".into(), p.into()));
                }
                details.push(("nvmlInit calls".into(), l.lock().init_calls.to_string()));
                let dropped = l.dropped_rows.load(Ordering::Relaxed);
                if dropped > 0 {
                    details.push((
                        "process rows dropped".into(),
                        format!("{dropped} (memory not available or larger than the device)"),
                    ));
                }
                state
            }
        };
        SourceReport {
            source: GpuQuerySource::Nvml,
            state,
            details,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_wraps)] // the shape reserved_from_v2 takes
    fn v2(total: u64, reserved: u64) -> Option<std::result::Result<ffi::MemoryV2, NvmlReturn>> {
        Some(Ok(ffi::MemoryV2 {
            version: NVML_MEMORY_V2_VERSION,
            total,
            reserved,
            free: 0,
            used: 0,
        }))
    }

    #[test]
    fn reserved_only_when_consistent() {
        let total = 150_754_820_096;
        let free = 116_181_811_200;
        assert_eq!(
            reserved_from_v2(v2(total, 643_825_664), total, free),
            Some(643_825_664)
        );
        assert_eq!(
            reserved_from_v2(None, total, free),
            None,
            "pre-R510: symbol absent"
        );
        assert_eq!(
            reserved_from_v2(Some(Err(13)), total, free),
            None,
            "rejected tag"
        );
        assert_eq!(
            reserved_from_v2(v2(total - 1, 1), total, free),
            None,
            "totals disagree"
        );
        assert_eq!(
            reserved_from_v2(v2(total, total - free + 1), total, free),
            None,
            "reserved > used"
        );
    }

    #[test]
    fn plausibility() {
        assert!(plausible(10, 5, Some(10)));
        assert!(!plausible(10, 11, Some(10)));
        assert!(!plausible(10, u64::MAX, None));
        assert!(!plausible(0, 5, None));
        assert!(!plausible(u32::MAX, 5, None));
        assert!(plausible(10, 1 << 40, None));
    }

    fn raw(pid: u32, used: u64, context: GpuContextKind, ids: InstanceIds) -> RawProcess {
        RawProcess {
            pid,
            used,
            context,
            gpu_instance: ids.0,
            compute_instance: ids.1,
        }
    }

    #[test]
    fn merge_never_sums() {
        let mut m = BTreeMap::new();
        merge(&mut m, raw(7, 100, GpuContextKind::Compute, (None, None)));
        merge(&mut m, raw(7, 100, GpuContextKind::Graphics, (None, None)));
        merge(&mut m, raw(3, 5, GpuContextKind::Graphics, (None, None)));
        let rows: Vec<_> = m.into_values().collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].pid, 3);
        assert_eq!(
            rows[1],
            raw(7, 100, GpuContextKind::ComputeAndGraphics, (None, None))
        );
    }

    #[test]
    fn merge_takes_instance_ids_from_whichever_row_has_them() {
        let mut m = BTreeMap::new();
        // The GPU-wide list (no ids), then the MIG device's list of GI 2 CI 1.
        merge(
            &mut m,
            raw(21180, 2296, GpuContextKind::Compute, (None, None)),
        );
        merge(
            &mut m,
            raw(21180, 2296, GpuContextKind::Compute, (Some(2), Some(1))),
        );
        merge(
            &mut m,
            raw(21180, 2000, GpuContextKind::Compute, (Some(9), Some(0))),
        );
        let rows: Vec<_> = m.into_values().collect();
        assert_eq!(
            rows,
            vec![raw(
                21180,
                2296,
                GpuContextKind::Compute,
                (Some(2), Some(1))
            )]
        );
        assert_eq!(instance_id(u32::MAX), None);
        assert_eq!(instance_id(0), Some(0));
    }
}
