//! The public GPU functions. Which backend answers is the dispatcher's business
//! (`dispatch.rs`); the backends are NVML and `nvidia-smi` (NVIDIA), Linux DRM (AMD, Intel),
//! DXGI and PDH (Windows), Metal (macOS), each in a module of its own behind one trait
//! (`backend.rs`), with the rules the two NVIDIA sources share in `nvidia.rs`.

pub(crate) mod backend;
mod dispatch;
pub(crate) mod drm;
#[cfg(all(target_os = "macos", feature = "metal"))]
mod metal;
pub(crate) mod mig;
#[cfg(any(feature = "nvml", feature = "nvidia-smi-fallback"))]
mod nvidia;
#[cfg(feature = "nvidia-smi-fallback")]
pub(crate) mod nvidia_smi;
#[cfg(feature = "nvml")]
pub(crate) mod nvml;
// The Metal backend's pure helpers are tested on every OS.
#[cfg(all(test, not(all(target_os = "macos", feature = "metal"))))]
#[path = "metal/parse.rs"]
mod metal_parse;
pub(crate) mod pci;
#[cfg(all(windows, feature = "dxgi"))]
mod windows;
pub(crate) mod winparse;

use dispatch::{backends, dispatcher};
pub use mig::mig_gpu_instances;

use crate::error::HypomnesisError;
use crate::{
    error::Result, types::GpuDeviceInfo, types::GpuProcessEntry, types::GpuProcessListing,
    types::GpuQuerySource, types::MigInstance, types::MigState, types::ProcessActivity,
    types::ProcessGpuInfo, types::Residency, types::SourceReport, types::Utilization,
};

/// Number of GPUs this host can measure.
///
/// # Errors
///
/// [`HypomnesisError::NoGpuSource`] when there is no GPU to measure: no GPU source exists on
/// this host, or the ones that exist find none (the NVIDIA driver is not loaded,
/// `NVML_ERROR_GPU_NOT_FOUND`; [`crate::gpu::sources`] still says which). Otherwise the failing
/// source's error: [`HypomnesisError::Nvml`] naming the call and the return code when the NVML
/// library loads but `nvmlInit_v2` or the count fails (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`
/// after a driver upgrade without a reboot, say).
///
/// # Platform-specific behaviour
///
/// Linux and Windows: NVIDIA GPUs through NVML, or `nvidia-smi` when NVML cannot be loaded;
/// other vendors' devices follow the NVIDIA ones.
pub fn device_count() -> Result<u32> {
    no_gpu_is_no_source(dispatcher().device_count())
}

/// A failure that means there is no GPU here, rather than one that cannot be measured: the
/// driver is not loaded, or NVML finds no GPU. Such a failure reads as
/// [`HypomnesisError::NoGpuSource`] (what 0.2.x programs test for).
fn means_no_gpu(e: &HypomnesisError) -> bool {
    matches!(
        e.kind(),
        crate::error::ErrorKind::DriverNotLoaded | crate::error::ErrorKind::NoGpu
    )
}

/// `r`, with a failure that means no GPU made [`HypomnesisError::NoGpuSource`].
fn no_gpu_is_no_source<T>(r: Result<T>) -> Result<T> {
    match r {
        Err(e) if means_no_gpu(&e) => Err(HypomnesisError::NoGpuSource),
        r => r,
    }
}

/// Device-wide memory of GPU `index`: total, free, used (= total − free) and, where the source
/// reports it, the driver reservation (a subset of total).
///
/// # Errors
///
/// [`HypomnesisError::DeviceIndexOutOfRange`] for an index past the last device,
/// [`HypomnesisError::NoGpuSource`] when no source exists, or the source's own error.
pub fn device_info(index: u32) -> Result<GpuDeviceInfo> {
    no_gpu_is_no_source(dispatcher().device_info(index))
}

/// Device `index`'s used memory, bytes: [`device_info`]'s `used_bytes`, read as cheaply as the
/// source can (NVML: its memory call alone, for a GPU with memory of its own), for a caller
/// that reads it often (a tracked block's edges).
///
/// # Errors
///
/// As [`device_info`].
pub fn device_used_bytes(index: u32) -> Result<u64> {
    no_gpu_is_no_source(dispatcher().device_used(index))
}

/// The calling process's GPU memory on device `device_index`.
///
/// `is_per_process` is `true` when the figure is this process's own; when the source cannot
/// attribute memory to this process (e.g. it runs in a PID namespace NVML does not see), the
/// device-wide usage is returned with `is_per_process == false`.
///
/// # Errors
///
/// As [`device_info`].
pub fn process_gpu_info(device_index: u32) -> Result<ProcessGpuInfo> {
    no_gpu_is_no_source(dispatcher().process_gpu_info(device_index))
}

/// Every process holding memory on device `device_index`, sorted by pid.
///
/// NVML's compute and graphics lists are merged per pid (a process in both is counted once);
/// the `nvidia-smi` fallback lists compute processes only. Rows whose memory figure the
/// driver does not provide (`N/A`, e.g. under Windows WDDM) are left out, as are impossible
/// ones (larger than the device); `hmn doctor` counts them.
///
/// # Errors
///
/// As [`device_info`].
pub fn gpu_processes(device_index: u32) -> Result<Vec<GpuProcessEntry>> {
    no_gpu_is_no_source(dispatcher().gpu_processes(device_index, true))
}

/// [`gpu_processes`] and the pids of the processes the system refused to let the caller read
/// ([`GpuProcessListing::denied_pids`]): always empty on Linux and Windows; on macOS other
/// users' processes, whose memory cannot be read.
///
/// # Errors
///
/// As [`gpu_processes`]; [`HypomnesisError::ProcessListDenied`] when no process but the
/// caller's could be read.
pub fn gpu_process_listing(device_index: u32) -> Result<GpuProcessListing> {
    let (entries, denied_pids) =
        no_gpu_is_no_source(dispatcher().gpu_process_listing(device_index))?;
    Ok(GpuProcessListing {
        entries,
        denied_pids,
    })
}

/// [`gpu_processes`] without each process's name where reading it costs a file per process
/// (NVML reads `/proc/<pid>/comm`): `name` is `None` there. For callers that read what they
/// show of a process themselves (a live view with thousands of GPU processes reads the command
/// lines of the rows on screen only).
///
/// # Errors
///
/// As [`gpu_processes`].
pub fn gpu_processes_unnamed(device_index: u32) -> Result<Vec<GpuProcessEntry>> {
    no_gpu_is_no_source(dispatcher().gpu_processes(device_index, false))
}

/// How busy GPU `device_index` is: GPU and memory-controller utilization, percent, as the
/// driver samples them; `None` figures where it does not say.
///
/// # Errors
///
/// As [`device_info`] (no GPU source, an index out of range, a source that failed).
///
/// # Platform-specific behaviour
///
/// NVIDIA: `nvmlDeviceGetUtilizationRates` (not for a GPU in MIG mode, where the driver does
/// not sample it; not through the `nvidia-smi` fallback). AMD on Linux: `gpu_busy_percent` and
/// `mem_busy_percent` in sysfs. Intel, Windows and macOS: `None`.
pub fn device_utilization(device_index: u32) -> Result<Utilization> {
    dispatcher().utilization(device_index)
}

/// What GPU `device_index`'s driver keeps of its processes' activity: a sample per process
/// and sample period in which the process used an engine, newer than `since_us` (microseconds
/// since the Unix epoch; 0 for all the driver keeps). What tells an idle holder of memory
/// from a busy one.
///
/// # Errors
///
/// As [`device_info`]; a source that does not sample per-process activity answers
/// [`ProcessActivity::Unknown`] with why, never an empty list.
///
/// # Platform-specific behaviour
///
/// NVIDIA through NVML: `nvmlDeviceGetProcessUtilization` (not on a GPU in MIG mode; not
/// through the `nvidia-smi` fallback). Other vendors: unknown.
pub fn process_activity(device_index: u32, since_us: u64) -> Result<ProcessActivity> {
    dispatcher().process_activity(device_index, since_us)
}

/// The minor number of GPU `index`'s device file (`/dev/nvidia<minor>`), as NVML gives it
/// (`nvmlDeviceGetMinorNumber`); `None` for another vendor's device, or where it cannot be read.
pub(crate) fn device_minor(index: u32) -> Option<u32> {
    dispatcher().device_minor(index).ok().flatten()
}

/// Whether GPU `index` runs in MIG (Multi-Instance GPU) mode, and its MIG devices with their
/// memory: what a user of one instance can use, and which instance is full.
///
/// `enabled` is `None` for GPUs that cannot be split (and for other vendors' devices, which
/// are never split); `instances` is empty unless MIG is on. When MIG is on but the GPU's
/// device-wide figures are refused (unprivileged callers get `NVML_ERROR_NO_PERMISSION` from
/// NVML), the instances are still read and `device_memory_error` says what was refused;
/// [`device_info`] fails with that error.
///
/// # Errors
///
/// As [`device_info`]; also when the MIG devices cannot be enumerated.
///
/// # Platform-specific behaviour
///
/// Linux (MIG exists on Linux only): NVML's MIG device handles, or `nvidia-smi -q` and `-L`
/// (MIG Device blocks, "Shared FB Memory Usage") when NVML cannot be loaded.
pub fn mig_state(index: u32) -> Result<MigState> {
    dispatcher().mig_state(index)
}

/// The MIG devices of GPU `index` (see [`mig_state`]): empty when MIG is off or the GPU cannot
/// be split; sorted by GPU instance id, then compute instance id.
///
/// Compute instances of one GPU instance share its memory and report the same figures: use
/// [`mig_gpu_instances`] to count it once.
///
/// # Errors
///
/// As [`mig_state`].
pub fn mig_instances(index: u32) -> Result<Vec<MigInstance>> {
    mig_state(index).map(|s| s.instances)
}

/// The MIG device whose UUID is `uuid` (`MIG-…`, as `nvidia-smi -L` prints it), on whichever GPU.
///
/// # Errors
///
/// The source's error when no MIG device has that UUID (a whole GPU's UUID is refused too),
/// [`HypomnesisError::NoGpuSource`] when no NVIDIA source exists.
pub fn mig_instance(uuid: &str) -> Result<MigInstance> {
    dispatcher().mig_instance(uuid)
}

/// Dedicated-resident and shared-resident bytes of GPU `index` as a whole (Windows WDDM, from
/// PDH's `GPU Adapter Memory` counters), and the adapter's dedicated capacity. What
/// [`crate::spill::SpillTracker`] observes.
///
/// # Errors
///
/// [`HypomnesisError::Pdh`]/[`HypomnesisError::Dxgi`] when the counters cannot be read;
/// [`HypomnesisError::Unsupported`] on other platforms, where spill is not measurable.
pub fn adapter_residency(index: u32) -> Result<Residency> {
    #[cfg(all(windows, feature = "pdh"))]
    {
        windows::residency(index)
    }
    #[cfg(not(all(windows, feature = "pdh")))]
    {
        Err(HypomnesisError::unsupported(format!(
            "GPU {index}: spill into shared memory is measurable only on Windows (WDDM), not on {}",
            std::env::consts::OS
        )))
    }
}

/// Whether spill of GPU memory into shared system memory can be measured on this system:
/// `true` only on Windows, in a build with the `pdh` feature, where PDH's `GPU Adapter Memory`
/// counter set is registered (what [`adapter_residency`] and [`crate::spill::SpillTracker`]
/// read); `false` on Linux, macOS, and Windows without that counter set. A capability of the
/// platform, not an observation: it says nothing of whether a GPU spills now. Asked of PDH
/// once per process.
#[must_use]
pub fn is_spill_measurable() -> bool {
    #[cfg(all(windows, feature = "pdh"))]
    {
        static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *REGISTERED.get_or_init(windows::spill_counters_registered)
    }
    #[cfg(not(all(windows, feature = "pdh")))]
    {
        false
    }
}

/// What each GPU source of this build says about itself: present or not, answered or why not,
/// and its details (library path, driver and library versions, optional features).
#[must_use]
pub fn sources() -> Vec<SourceReport> {
    sources_where(|_| true)
}

/// What the GPU sources `keep` takes say about themselves, as [`sources`] has it; the others
/// are not asked anything. For a caller that learns of a costly source another way: an
/// exporter that asks for reports at every measurement leaves `nvidia-smi` out (four or more
/// runs of it) and asks [`probe_source`] about it now and then.
#[must_use]
pub fn sources_where(keep: impl Fn(GpuQuerySource) -> bool) -> Vec<SourceReport> {
    let reports = backends()
        .iter()
        .filter(|b| keep(b.source()))
        .map(|b| {
            // The report first: making it may read the process lists whose rows it counts.
            let report = b.report();
            SourceReport {
                dropped_process_rows: b.dropped_process_rows(),
                ..report
            }
        })
        .collect();
    let wanted: Vec<_> = built_sources()
        .into_iter()
        .filter(|(s, _)| keep(*s))
        .collect();
    dispatch::merge_reports(reports, &wanted)
}

/// Whether GPU source `source` is present and answers, asked as cheaply as it can be: the
/// state [`sources`] gives it, without the questions its details take (for `nvidia-smi`, one
/// `--query-gpu` run instead of `--version`, the process list and the MIG modes as well). The
/// report has no details; a source this build does not have is absent.
#[must_use]
pub fn probe_source(source: GpuQuerySource) -> SourceReport {
    let reports = backends()
        .iter()
        .filter(|b| b.source() == source)
        .map(|b| SourceReport {
            source,
            state: b.state(),
            details: Vec::new(),
            dropped_process_rows: b.dropped_process_rows(),
        })
        .collect();
    let wanted: Vec<_> = built_sources()
        .into_iter()
        .filter(|(s, _)| *s == source)
        .collect();
    let merged = dispatch::merge_reports(reports, &wanted);
    merged.into_iter().next().unwrap_or_else(|| SourceReport {
        source,
        state: crate::types::SourceState::Absent(crate::error::Failure::new(
            crate::error::ErrorKind::NotBuiltIn,
            format!(
                "{}: a build for {} has no {} source",
                crate::error::NOT_BUILT_IN,
                std::env::consts::OS,
                source.as_str()
            ),
        )),
        details: Vec::new(),
        dropped_process_rows: 0,
    })
}

/// The sources every build of this platform reports, with the cargo feature of each (a
/// source not built in is reported absent).
fn built_sources() -> Vec<(GpuQuerySource, &'static str)> {
    let mut wanted = vec![
        (GpuQuerySource::Nvml, "nvml"),
        (GpuQuerySource::NvidiaSmi, "nvidia-smi-fallback"),
    ];
    if cfg!(windows) {
        wanted.extend([(GpuQuerySource::Dxgi, "dxgi"), (GpuQuerySource::Pdh, "pdh")]);
    }
    if cfg!(target_os = "macos") {
        wanted.push((GpuQuerySource::Metal, "metal"));
    }
    if cfg!(target_os = "linux") {
        wanted.push((GpuQuerySource::Drm, "drm"));
    }
    wanted
}

/// Process rows the GPU sources left out of their latest process lists: rows without a memory
/// figure, with pid 0, or claiming more memory than the device has. Cheap (asks no source
/// anything); `hmn ps` says it when it is not 0, [`sources`] gives it per source.
#[must_use]
pub fn dropped_process_rows() -> u64 {
    backends()
        .iter()
        .map(|b| b.dropped_process_rows())
        .fold(0, u64::saturating_add)
}

#[cfg(all(test, not(all(windows, feature = "pdh"))))]
mod tests {
    use super::*;

    #[test]
    fn spill_is_not_measurable_outside_windows() {
        let e = adapter_residency(3).unwrap_err();
        assert_eq!(e.kind(), crate::error::ErrorKind::NotSupported);
        assert!(
            e.to_string()
                .contains("GPU 3: spill into shared memory is measurable only on Windows"),
            "{e}"
        );
        // The capability check agrees: no spill to measure here.
        assert!(!is_spill_measurable());
    }
}
