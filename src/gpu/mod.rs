//! Public GPU functions and the dispatcher over backends.
//!
//! Backends are asked in a fixed priority order (NVML, then `nvidia-smi`). The first present
//! backend that answers wins; when every present backend fails, the highest-priority failure is
//! returned with the others' reasons appended; when none is present at all,
//! [`HypomnesisError::NoGpuSource`]. A backend that answered a device count is authoritative
//! about index bounds: an out-of-range index is not retried elsewhere.
//! Windows (DXGI, PDH), macOS (Metal) and Linux DRM backends take their slots in this list.

pub(crate) mod backend;
#[cfg(feature = "nvidia-smi-fallback")]
pub(crate) mod nvidia_smi;
#[cfg(feature = "nvml")]
pub(crate) mod nvml;

use std::sync::OnceLock;

use backend::{Backend, Presence};

use crate::{
    GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, HypomnesisError, ProcessGpuInfo, Result,
    SourceReport, SourceState,
};

#[cfg(feature = "nvml")]
static NVML: nvml::NvmlBackend = nvml::NvmlBackend;
#[cfg(feature = "nvidia-smi-fallback")]
static SMI: nvidia_smi::SmiBackend = nvidia_smi::SmiBackend::new();

/// The backends of this build, highest priority first.
fn backends() -> &'static [&'static dyn Backend] {
    static LIST: OnceLock<Vec<&'static dyn Backend>> = OnceLock::new();
    #[allow(unused_mut, clippy::vec_init_then_push)] // the pushes depend on features
    LIST.get_or_init(|| {
        let mut list: Vec<&'static dyn Backend> = Vec::new();
        #[cfg(feature = "nvml")]
        list.push(&NVML);
        #[cfg(feature = "nvidia-smi-fallback")]
        list.push(&SMI);
        list
    })
}

/// Ask `backends` in order; see the module docs for which answer or error wins.
fn first_ok<T>(backends: &[&dyn Backend], f: impl Fn(&dyn Backend) -> Result<T>) -> Result<T> {
    let mut primary: Option<HypomnesisError> = None;
    let mut notes = Vec::new();
    for b in backends {
        if let Presence::Absent(_) = b.presence() {
            continue;
        }
        match f(*b) {
            Ok(v) => {
                if let Some(e) = &primary {
                    crate::debug_log!(
                        "{} answered after a higher-priority source failed: {e}",
                        b.source()
                    );
                }
                return Ok(v);
            }
            Err(e) => match primary {
                None if matches!(e, HypomnesisError::DeviceIndexOutOfRange { .. }) => {
                    return Err(e);
                }
                None => primary = Some(e),
                Some(_) => notes.push(format!("{} fallback: {e}", b.source())),
            },
        }
    }
    match primary {
        None => Err(HypomnesisError::NoGpuSource),
        Some(e) if notes.is_empty() => Err(e),
        Some(e) => Err(e.with_note(&notes.join("; "))),
    }
}

/// Number of GPUs this host can measure.
///
/// # Errors
///
/// [`HypomnesisError::NoGpuSource`] when no GPU source exists on this host; otherwise the
/// failing source's error (e.g. [`HypomnesisError::Nvml`] naming the NVML return code).
///
/// # Platform-specific behaviour
///
/// Linux and Windows: NVIDIA GPUs through NVML, or `nvidia-smi` when NVML cannot be loaded.
pub fn device_count() -> Result<u32> {
    first_ok(backends(), |b| b.device_count())
}

/// Device-wide memory of GPU `index`: total, free, used (= total − free) and, where the source
/// reports it, the driver reservation (a subset of total).
///
/// # Errors
///
/// [`HypomnesisError::DeviceIndexOutOfRange`] for an index past the last device,
/// [`HypomnesisError::NoGpuSource`] when no source exists, or the source's own error.
pub fn device_info(index: u32) -> Result<GpuDeviceInfo> {
    first_ok(backends(), |b| b.device_info(index))
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
    first_ok(backends(), |b| b.process_gpu_info(device_index))
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
    first_ok(backends(), |b| b.gpu_processes(device_index))
}

/// What each GPU source of this build says about itself: present or not, answered or why not,
/// and its details (library path, driver and library versions, optional features).
#[must_use]
pub fn sources() -> Vec<SourceReport> {
    let mut out: Vec<SourceReport> = backends().iter().map(|b| b.report()).collect();
    let compiled = |s: GpuQuerySource| out.iter().any(|r| r.source == s);
    let mut missing = Vec::new();
    for (s, feature) in [
        (GpuQuerySource::Nvml, "nvml"),
        (GpuQuerySource::NvidiaSmi, "nvidia-smi-fallback"),
    ] {
        if !compiled(s) {
            missing.push(SourceReport {
                source: s,
                state: SourceState::Absent(format!("not compiled in (cargo feature `{feature}`)")),
                details: Vec::new(),
            });
        }
    }
    out.extend(missing);
    out
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::GpuVendor;

    /// A backend with scripted answers.
    struct Fake {
        source: GpuQuerySource,
        present: bool,
        count: Result<u32>,
        calls: AtomicUsize,
    }

    fn err_clone(e: &HypomnesisError) -> HypomnesisError {
        match e {
            HypomnesisError::Nvml(s) => HypomnesisError::Nvml(s.clone()),
            HypomnesisError::NvidiaSmi(s) => HypomnesisError::NvidiaSmi(s.clone()),
            HypomnesisError::DeviceIndexOutOfRange { index, count } => {
                HypomnesisError::DeviceIndexOutOfRange {
                    index: *index,
                    count: *count,
                }
            }
            _ => HypomnesisError::NoGpuSource,
        }
    }

    impl Fake {
        fn new(source: GpuQuerySource, present: bool, count: Result<u32>) -> Self {
            Self {
                source,
                present,
                count,
                calls: AtomicUsize::new(0),
            }
        }
        fn count(&self) -> Result<u32> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            match &self.count {
                Ok(n) => Ok(*n),
                Err(e) => Err(err_clone(e)),
            }
        }
    }

    impl Backend for Fake {
        fn source(&self) -> GpuQuerySource {
            self.source
        }
        fn presence(&self) -> Presence {
            if self.present {
                Presence::Present
            } else {
                Presence::Absent("not here".into())
            }
        }
        fn device_count(&self) -> Result<u32> {
            self.count()
        }
        fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
            let count = self.count()?;
            if index >= count {
                return Err(HypomnesisError::DeviceIndexOutOfRange { index, count });
            }
            Ok(GpuDeviceInfo {
                index,
                name: None,
                total_bytes: 10,
                free_bytes: 4,
                used_bytes: 6,
                reserved_bytes: None,
                driver_version: None,
                uuid: None,
                pci_bus_id: None,
                vendor: Some(GpuVendor::Nvidia),
                source: self.source,
            })
        }
        fn process_gpu_info(&self, _: u32) -> Result<ProcessGpuInfo> {
            Err(HypomnesisError::Nvml("unused".into()))
        }
        fn gpu_processes(&self, _: u32) -> Result<Vec<GpuProcessEntry>> {
            Ok(Vec::new())
        }
        fn report(&self) -> SourceReport {
            SourceReport {
                source: self.source,
                state: SourceState::Answered,
                details: Vec::new(),
            }
        }
    }

    #[test]
    fn priority_first_present_answer_wins() {
        let a = Fake::new(GpuQuerySource::Nvml, true, Ok(2));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(5));
        let list: [&dyn Backend; 2] = [&a, &b];
        assert_eq!(first_ok(&list, |x| x.device_count()).unwrap(), 2);
        assert_eq!(
            b.calls.load(Ordering::Relaxed),
            0,
            "the fallback is not asked"
        );
        assert_eq!(
            first_ok(&list, |x| x.device_info(1)).unwrap().source,
            GpuQuerySource::Nvml
        );
    }

    #[test]
    fn fallback_on_failure_and_absent_backends_are_skipped() {
        let a = Fake::new(
            GpuQuerySource::Nvml,
            true,
            Err(HypomnesisError::Nvml(
                "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)".into(),
            )),
        );
        let b = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(1));
        let list: [&dyn Backend; 2] = [&a, &b];
        let d = first_ok(&list, |x| x.device_info(0)).unwrap();
        assert_eq!(d.source, GpuQuerySource::NvidiaSmi);
        let absent = Fake::new(GpuQuerySource::Nvml, false, Ok(9));
        let list: [&dyn Backend; 2] = [&absent, &b];
        assert_eq!(first_ok(&list, |x| x.device_count()).unwrap(), 1);
        assert_eq!(absent.calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn index_bounds_are_not_retried_elsewhere() {
        let a = Fake::new(GpuQuerySource::Nvml, true, Ok(1));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(4));
        let list: [&dyn Backend; 2] = [&a, &b];
        let e = first_ok(&list, |x| x.device_info(3)).unwrap_err();
        assert!(
            matches!(
                e,
                HypomnesisError::DeviceIndexOutOfRange { index: 3, count: 1 }
            ),
            "{e}"
        );
        assert_eq!(b.calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn which_error_wins() {
        let a = Fake::new(
            GpuQuerySource::Nvml,
            true,
            Err(HypomnesisError::Nvml("GPU lost".into())),
        );
        let b = Fake::new(
            GpuQuerySource::NvidiaSmi,
            true,
            Err(HypomnesisError::NvidiaSmi("exit status 9".into())),
        );
        let list: [&dyn Backend; 2] = [&a, &b];
        let e = first_ok(&list, |x| x.device_count()).unwrap_err();
        assert!(
            matches!(e, HypomnesisError::Nvml(_)),
            "the primary source's error wins: {e}"
        );
        assert_eq!(
            e.to_string(),
            "NVML: GPU lost; nvidia-smi fallback: nvidia-smi: exit status 9"
        );
        // A failed primary then an out-of-range fallback: still the primary's error.
        let c = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(0));
        let list: [&dyn Backend; 2] = [&a, &c];
        assert!(matches!(
            first_ok(&list, |x| x.device_info(0)).unwrap_err(),
            HypomnesisError::Nvml(_)
        ));
    }

    #[test]
    fn no_source_only_when_none_present() {
        let a = Fake::new(GpuQuerySource::Nvml, false, Ok(1));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, false, Ok(1));
        let list: [&dyn Backend; 2] = [&a, &b];
        assert!(matches!(
            first_ok(&list, |x| x.device_count()),
            Err(HypomnesisError::NoGpuSource)
        ));
        let empty: [&dyn Backend; 0] = [];
        assert!(matches!(
            first_ok(&empty, |x| x.device_count()),
            Err(HypomnesisError::NoGpuSource)
        ));
    }
}
