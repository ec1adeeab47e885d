//! The dispatcher: which backend answers which question.
//!
//! Backends are asked in a fixed priority order (NVML, then `nvidia-smi`). The first present
//! backend that answers wins; when every present backend fails, the highest-priority failure is
//! returned with the others' reasons appended; when none is present at all,
//! [`HypomnesisError::NoGpuSource`]. A backend that answered a device count is authoritative
//! about index bounds: an out-of-range index is not retried elsewhere. The device list puts the
//! NVIDIA devices first (NVML indices), then each other-vendor backend's devices.

use std::sync::OnceLock;

use super::backend::{Backend, Op, Presence, Scope};
use super::pci::PciAddress;
use crate::{
    error::HypomnesisError, error::Result, types::GpuDeviceInfo, types::GpuProcessEntry,
    types::GpuQuerySource, types::MigInstance, types::MigState, types::ProcessActivity,
    types::ProcessGpuInfo, types::SourceReport, types::SourceState, types::Utilization,
};

#[cfg(feature = "nvml")]
static NVML: super::nvml::NvmlBackend = super::nvml::NvmlBackend;
#[cfg(feature = "nvidia-smi-fallback")]
static SMI: super::nvidia_smi::SmiBackend = super::nvidia_smi::SmiBackend::new();
#[cfg(all(target_os = "linux", feature = "drm"))]
static DRM: super::drm::DrmBackend = super::drm::DrmBackend::new();
#[cfg(all(target_os = "macos", feature = "metal"))]
static METAL: super::metal::MetalBackend = super::metal::MetalBackend::new();
#[cfg(all(windows, feature = "dxgi"))]
static DXGI_NVIDIA: super::windows::DxgiBackend = super::windows::DxgiBackend::nvidia();
#[cfg(all(windows, feature = "pdh"))]
static PDH: super::windows::PdhBackend = super::windows::PdhBackend;
#[cfg(all(windows, feature = "dxgi"))]
static DXGI_OTHERS: super::windows::DxgiBackend = super::windows::DxgiBackend::others();

/// The backends of this build, highest priority first; those that list devices the NVIDIA
/// sources measure too have been told which (see [`introduce`]).
pub(super) fn backends() -> &'static [&'static dyn Backend] {
    static LIST: OnceLock<Vec<&'static dyn Backend>> = OnceLock::new();
    #[allow(unused_mut, clippy::vec_init_then_push)] // the pushes depend on features
    LIST.get_or_init(|| {
        let mut list: Vec<&'static dyn Backend> = Vec::new();
        #[cfg(feature = "nvml")]
        list.push(&NVML);
        #[cfg(feature = "nvidia-smi-fallback")]
        list.push(&SMI);
        #[cfg(all(target_os = "linux", feature = "drm"))]
        list.push(&DRM);
        #[cfg(all(target_os = "macos", feature = "metal"))]
        list.push(&METAL);
        #[cfg(all(windows, feature = "dxgi"))]
        list.push(&DXGI_NVIDIA);
        #[cfg(all(windows, feature = "pdh"))]
        list.push(&PDH);
        #[cfg(all(windows, feature = "dxgi"))]
        list.push(&DXGI_OTHERS);
        introduce(&list);
        list
    })
}

/// Tells the backends that need them (other vendors' device walks, which meet NVIDIA cards;
/// DXGI, which orders its NVIDIA adapters as NVML does) the PCI addresses of the devices the
/// NVIDIA sources measure, in their index order. The NVIDIA sources are asked only when some
/// backend needs the answer.
fn introduce(list: &[&dyn Backend]) {
    if !list.iter().any(|b| b.needs_nvidia_devices()) {
        return;
    }
    let addresses = nvidia_addresses(list);
    for b in list.iter().filter(|b| b.needs_nvidia_devices()) {
        b.nvidia_devices(&addresses);
    }
}

/// PCI addresses of the devices the NVIDIA sources measure, in NVIDIA index order (devices
/// whose address is unknown are left out); empty when no NVIDIA source answers.
fn nvidia_addresses(list: &[&dyn Backend]) -> Vec<PciAddress> {
    let Ok(n) = first_ok(list, Scope::Nvidia, Op::DeviceCount, |b| b.device_count()) else {
        return Vec::new();
    };
    (0..n)
        .filter_map(|i| first_ok(list, Scope::Nvidia, Op::DeviceInfo, |b| b.device_info(i)).ok())
        .filter_map(|d| d.pci_bus_id.as_deref().and_then(PciAddress::parse))
        .collect()
}

/// Ask the present backends of `scope` that answer `op`, in order; see the module docs for
/// which answer or error wins.
pub(super) fn first_ok<T>(
    backends: &[&dyn Backend],
    scope: Scope,
    op: Op,
    f: impl Fn(&dyn Backend) -> Result<T>,
) -> Result<T> {
    let mut primary: Option<HypomnesisError> = None;
    let mut notes = Vec::new();
    for b in backends
        .iter()
        .filter(|b| b.scope() == scope && b.answers(op))
    {
        if b.presence() == Presence::Absent {
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
                Some(_) => notes.push(crate::error::Failure::new(
                    e.kind(),
                    format!("{} fallback: {e}", b.source()),
                )),
            },
        }
    }
    match primary {
        None => Err(HypomnesisError::NoGpuSource),
        Some(e) if notes.is_empty() => Err(e),
        Some(e) => Err(e.with_fallback_notes(&notes)),
    }
}

/// Where a device index points.
enum Target<'a> {
    /// An NVIDIA device: NVML index.
    Nvidia(u32),
    /// Device `local` of another vendor's backend, `global` in the combined list.
    Other {
        backend: &'a dyn Backend,
        local: u32,
        global: u32,
    },
}

/// The combined device list: NVIDIA devices first (NVML indices), then each other-vendor
/// backend's devices in backend order. On hosts without other-vendor sources this is exactly
/// the NVIDIA list, at no extra cost.
pub(super) struct Dispatcher<'a> {
    list: &'a [&'a dyn Backend],
}

impl<'a> Dispatcher<'a> {
    /// Other-vendor backends that exist here, with their device counts (failures are left to
    /// `sources()` to report).
    fn others(&self) -> Vec<(&'a dyn Backend, u32)> {
        self.list
            .iter()
            .filter(|b| b.scope() == Scope::Others && b.presence() == Presence::Present)
            .filter_map(|b| match b.device_count() {
                Ok(n) => Some((*b, n)),
                Err(e) => {
                    crate::debug_log!("{}: {e}", b.source());
                    None
                }
            })
            .collect()
    }

    fn any_other_present(&self) -> bool {
        self.list
            .iter()
            .any(|b| b.scope() == Scope::Others && b.presence() == Presence::Present)
    }

    fn nvidia_count(&self) -> Result<u32> {
        first_ok(self.list, Scope::Nvidia, Op::DeviceCount, |b| {
            b.device_count()
        })
    }

    pub(super) fn device_count(&self) -> Result<u32> {
        if !self.any_other_present() {
            return self.nvidia_count();
        }
        let others: u32 = self
            .others()
            .iter()
            .map(|(_, n)| *n)
            .fold(0, u32::saturating_add);
        match self.nvidia_count() {
            Ok(n) => Ok(n.saturating_add(others)),
            Err(e) => {
                crate::debug_log!("NVIDIA sources: {e}");
                Ok(others)
            }
        }
    }

    fn locate(&self, index: u32) -> Result<Target<'a>> {
        if !self.any_other_present() {
            return Ok(Target::Nvidia(index));
        }
        let nvidia = self.nvidia_count().unwrap_or(0);
        if index < nvidia {
            return Ok(Target::Nvidia(index));
        }
        let mut base = nvidia;
        for (backend, n) in self.others() {
            if let Some(local) = index.checked_sub(base).filter(|&l| l < n) {
                return Ok(Target::Other {
                    backend,
                    local,
                    global: index,
                });
            }
            base = base.saturating_add(n);
        }
        Err(HypomnesisError::DeviceIndexOutOfRange { index, count: base })
    }

    pub(super) fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::DeviceInfo, |b| {
                b.device_info(i)
            }),
            Target::Other {
                backend,
                local,
                global,
            } => backend.device_info(local).map(|mut d| {
                d.index = global;
                d
            }),
        }
    }

    pub(super) fn device_used(&self, index: u32) -> Result<u64> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::DeviceInfo, |b| {
                b.device_used(i)
            }),
            Target::Other { backend, local, .. } => backend.device_used(local),
        }
    }

    pub(super) fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::ProcessGpuInfo, |b| {
                b.process_gpu_info(i)
            }),
            Target::Other { backend, local, .. } => backend.process_gpu_info(local),
        }
    }

    /// Device `index`'s processes, named when `names` (see [`Backend::gpu_processes_unnamed`]).
    pub(super) fn gpu_processes(&self, index: u32, names: bool) -> Result<Vec<GpuProcessEntry>> {
        self.listing(index, |b, i| {
            if names {
                b.gpu_processes(i)
            } else {
                b.gpu_processes_unnamed(i)
            }
        })
    }

    /// Device `index`'s processes, and the pids the platform refused to let this process read.
    pub(super) fn gpu_process_listing(
        &self,
        index: u32,
    ) -> Result<(Vec<GpuProcessEntry>, Vec<u32>)> {
        // Only the backend that answers sets it (the list's rows pass through `listing`).
        let denied = std::cell::Cell::new(Vec::new());
        let rows = self.listing(index, |b, i| {
            b.gpu_process_listing(i).map(|(rows, d)| {
                denied.set(d);
                rows
            })
        })?;
        let denied = denied.into_inner();
        Ok((rows, denied))
    }

    /// The rows `list` gives for device `index`, from the backend that answers it, with the
    /// combined list's index in each row.
    fn listing(
        &self,
        index: u32,
        list: impl Fn(&dyn Backend, u32) -> Result<Vec<GpuProcessEntry>>,
    ) -> Result<Vec<GpuProcessEntry>> {
        match self.locate(index)? {
            Target::Nvidia(i) => {
                first_ok(self.list, Scope::Nvidia, Op::GpuProcesses, |b| list(b, i))
            }
            Target::Other {
                backend,
                local,
                global,
            } => list(backend, local).map(|mut rows| {
                for r in &mut rows {
                    r.device_index = global;
                }
                rows
            }),
        }
    }
}

impl Dispatcher<'_> {
    pub(super) fn utilization(&self, index: u32) -> Result<Utilization> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::DeviceInfo, |b| {
                b.utilization(i)
            }),
            Target::Other { backend, local, .. } => backend.utilization(local),
        }
    }

    pub(super) fn device_minor(&self, index: u32) -> Result<Option<u32>> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::DeviceInfo, |b| {
                b.device_minor(i)
            }),
            Target::Other { .. } => Ok(None),
        }
    }

    pub(super) fn process_activity(&self, index: u32, since_us: u64) -> Result<ProcessActivity> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::DeviceInfo, |b| {
                b.process_activity(i, since_us)
            }),
            Target::Other { backend, local, .. } => backend.process_activity(local, since_us),
        }
    }

    pub(super) fn mig_state(&self, index: u32) -> Result<MigState> {
        match self.locate(index)? {
            Target::Nvidia(i) => first_ok(self.list, Scope::Nvidia, Op::Mig, |b| b.mig_state(i)),
            // Only NVIDIA GPUs are split into MIG instances.
            Target::Other {
                backend, global, ..
            } => Ok(MigState::unknown(global, backend.source())),
        }
    }

    pub(super) fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        first_ok(self.list, Scope::Nvidia, Op::Mig, |b| b.mig_instance(uuid))
    }
}

/// The dispatcher over this build's backends.
pub(super) fn dispatcher() -> Dispatcher<'static> {
    Dispatcher { list: backends() }
}

/// One report per source, in order of first appearance (DXGI serves two scopes: the best state
/// of its reports, their details added up), then an `Absent` report for each `wanted` source
/// (with its cargo feature) that is not built in.
pub(super) fn merge_reports(
    reports: Vec<SourceReport>,
    wanted: &[(GpuQuerySource, &str)],
) -> Vec<SourceReport> {
    let mut out: Vec<SourceReport> = Vec::new();
    for r in reports {
        if let Some(seen) = out.iter_mut().find(|s| s.source == r.source) {
            if seen.state != SourceState::Answered && r.state == SourceState::Answered {
                seen.state = r.state;
            }
            seen.details.extend(r.details);
            seen.dropped_process_rows = seen
                .dropped_process_rows
                .saturating_add(r.dropped_process_rows);
        } else {
            out.push(r);
        }
    }
    for &(s, feature) in wanted {
        if !out.iter().any(|r| r.source == s) {
            out.push(SourceReport {
                source: s,
                state: SourceState::absent(
                    crate::error::ErrorKind::NotBuiltIn,
                    format!("{} (cargo feature `{feature}`)", crate::error::NOT_BUILT_IN),
                ),
                details: Vec::new(),
                dropped_process_rows: 0,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::types::GpuVendor;

    /// A backend with scripted answers.
    struct Fake {
        source: GpuQuerySource,
        present: bool,
        count: Result<u32>,
        calls: AtomicUsize,
        scope: Scope,
        skips: Option<Op>,
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
                scope: Scope::Nvidia,
                skips: None,
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
                Presence::Absent
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
                ..GpuDeviceInfo::blank(self.source)
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
                dropped_process_rows: 0,
            }
        }
        fn answers(&self, op: Op) -> bool {
            self.skips != Some(op)
        }
        fn scope(&self) -> Scope {
            self.scope
        }
    }

    fn other(count: u32) -> Fake {
        let mut f = Fake::new(GpuQuerySource::Dxgi, true, Ok(count));
        f.scope = Scope::Others;
        f
    }

    #[test]
    fn combined_list_puts_nvidia_first_then_others() {
        let nv = Fake::new(GpuQuerySource::Nvml, true, Ok(2));
        let amd = other(3);
        let list: [&dyn Backend; 2] = [&amd, &nv];
        let d = Dispatcher { list: &list };
        assert_eq!(d.device_count().unwrap(), 5);
        let info = d.device_info(1).unwrap();
        assert_eq!((info.index, info.source), (1, GpuQuerySource::Nvml));
        let info = d.device_info(3).unwrap();
        assert_eq!(
            (info.index, info.source),
            (3, GpuQuerySource::Dxgi),
            "global index, other backend"
        );
        let e = d.device_info(5).unwrap_err();
        assert!(
            matches!(
                e,
                HypomnesisError::DeviceIndexOutOfRange { index: 5, count: 5 }
            ),
            "{e}"
        );
    }

    #[test]
    fn others_alone_start_at_zero_and_nvidia_only_hosts_pay_nothing_extra() {
        let absent = Fake::new(GpuQuerySource::Nvml, false, Ok(9));
        let amd = other(1);
        let list: [&dyn Backend; 2] = [&absent, &amd];
        let d = Dispatcher { list: &list };
        assert_eq!(d.device_count().unwrap(), 1);
        assert_eq!(d.device_info(0).unwrap().source, GpuQuerySource::Dxgi);
        let nv = Fake::new(GpuQuerySource::Nvml, true, Ok(1));
        let mut missing_other = other(4);
        missing_other.present = false;
        let list: [&dyn Backend; 2] = [&nv, &missing_other];
        let d = Dispatcher { list: &list };
        d.device_info(0).unwrap();
        assert_eq!(
            nv.calls.load(Ordering::Relaxed),
            1,
            "no extra count call without other vendors"
        );
        assert_eq!(missing_other.calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_source_that_does_not_answer_an_op_is_skipped_silently() {
        let mut nvml = Fake::new(
            GpuQuerySource::Nvml,
            true,
            Err(HypomnesisError::Nvml("N/A under WDDM".into())),
        );
        nvml.skips = Some(Op::DeviceInfo);
        let dxgi = Fake::new(GpuQuerySource::Dxgi, true, Ok(1));
        let list: [&dyn Backend; 2] = [&nvml, &dxgi];
        let d = Dispatcher { list: &list };
        assert_eq!(d.device_info(0).unwrap().source, GpuQuerySource::Dxgi);
        assert_eq!(nvml.calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn priority_first_present_answer_wins() {
        let a = Fake::new(GpuQuerySource::Nvml, true, Ok(2));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(5));
        let list: [&dyn Backend; 2] = [&a, &b];
        assert_eq!(
            first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()).unwrap(),
            2
        );
        assert_eq!(
            b.calls.load(Ordering::Relaxed),
            0,
            "the fallback is not asked"
        );
        assert_eq!(
            first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_info(1))
                .unwrap()
                .source,
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
        let d = first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_info(0)).unwrap();
        assert_eq!(d.source, GpuQuerySource::NvidiaSmi);
        let absent = Fake::new(GpuQuerySource::Nvml, false, Ok(9));
        let list: [&dyn Backend; 2] = [&absent, &b];
        assert_eq!(
            first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()).unwrap(),
            1
        );
        assert_eq!(absent.calls.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn index_bounds_are_not_retried_elsewhere() {
        let a = Fake::new(GpuQuerySource::Nvml, true, Ok(1));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(4));
        let list: [&dyn Backend; 2] = [&a, &b];
        let e = first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_info(3)).unwrap_err();
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
        let e = first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()).unwrap_err();
        assert!(
            matches!(e, HypomnesisError::Nvml(_)),
            "the primary source's error wins: {e}"
        );
        assert_eq!(
            e.to_string(),
            "NVML: GPU lost; nvidia-smi fallback: nvidia-smi: exit status 9"
        );
        // A failed primary then an out-of-range fallback: still the primary's error, as it was.
        let c = Fake::new(GpuQuerySource::NvidiaSmi, true, Ok(0));
        let list: [&dyn Backend; 2] = [&a, &c];
        let e = first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_info(0)).unwrap_err();
        assert!(matches!(e, HypomnesisError::Nvml(_)), "{e}");
        // A source alone: its error as it was, no empty note added.
        let alone: [&dyn Backend; 1] = [&a];
        let e = first_ok(&alone, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()).unwrap_err();
        assert_eq!(e.to_string(), "NVML: GPU lost");
    }

    fn report(source: GpuQuerySource, state: SourceState, detail: &str) -> SourceReport {
        SourceReport {
            source,
            state,
            details: vec![(detail.into(), "x".into())],
            dropped_process_rows: 0,
        }
    }

    #[test]
    fn one_report_per_source_and_the_sources_not_built_in() {
        let failed = || SourceState::failed(crate::error::ErrorKind::Other, "no adapter");
        let reports = vec![
            report(GpuQuerySource::Dxgi, failed(), "a"),
            report(GpuQuerySource::Nvml, SourceState::Answered, "n"),
            report(GpuQuerySource::Dxgi, SourceState::Answered, "b"),
            report(GpuQuerySource::Dxgi, failed(), "c"),
        ];
        let wanted = [(GpuQuerySource::Nvml, "nvml"), (GpuQuerySource::Drm, "drm")];
        let merged = merge_reports(reports, &wanted);
        assert_eq!(merged.len(), 3, "{merged:?}");
        let dxgi = &merged[0];
        assert_eq!(dxgi.source, GpuQuerySource::Dxgi);
        assert_eq!(
            dxgi.state,
            SourceState::Answered,
            "the best state of the two scopes"
        );
        let keys: Vec<&str> = dxgi.details.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "b", "c"], "details add up");
        assert_eq!(
            merged[1].details.len(),
            1,
            "a source built in is not added again"
        );
        assert_eq!(merged[2].source, GpuQuerySource::Drm);
        assert_eq!(
            merged[2].state,
            SourceState::absent(
                crate::error::ErrorKind::NotBuiltIn,
                "not compiled in (cargo feature `drm`)"
            )
        );
        assert_eq!(merged[2].kind(), Some(crate::error::ErrorKind::NotBuiltIn));
        // A failure does not overwrite an answer.
        let merged = merge_reports(
            vec![
                report(GpuQuerySource::Dxgi, SourceState::Answered, "a"),
                report(GpuQuerySource::Dxgi, failed(), "b"),
            ],
            &[],
        );
        assert_eq!(merged[0].state, SourceState::Answered);
        let merged = merge_reports(
            vec![
                report(GpuQuerySource::Dxgi, failed(), "a"),
                report(
                    GpuQuerySource::Dxgi,
                    SourceState::absent(crate::error::ErrorKind::NotInstalled, "gone"),
                    "b",
                ),
            ],
            &[],
        );
        assert_eq!(merged[0].state, failed(), "the first failure stands");
    }

    #[test]
    fn mig_questions_go_to_nvidia_sources_only() {
        let nv = Fake::new(GpuQuerySource::Nvml, true, Ok(1));
        let amd = other(2);
        let list: [&dyn Backend; 2] = [&nv, &amd];
        let d = Dispatcher { list: &list };
        let s = d.mig_state(0).unwrap();
        assert_eq!(
            (s.index, s.enabled, s.source),
            (0, None, GpuQuerySource::Nvml)
        );
        let s = d.mig_state(2).unwrap();
        assert_eq!(
            (s.index, s.enabled, s.instances.len(), s.source),
            (2, None, 0, GpuQuerySource::Dxgi),
            "other vendors' devices are never split"
        );
        assert!(matches!(
            d.mig_state(3),
            Err(HypomnesisError::DeviceIndexOutOfRange { index: 3, count: 3 })
        ));
        let e = d.mig_instance("MIG-x").unwrap_err();
        assert!(
            matches!(&e, HypomnesisError::Nvml(m) if m.contains("does not list MIG devices")),
            "{e}"
        );
        let mut quiet = Fake::new(GpuQuerySource::Nvml, true, Ok(1));
        quiet.skips = Some(Op::Mig);
        let list: [&dyn Backend; 1] = [&quiet];
        let d = Dispatcher { list: &list };
        assert!(matches!(
            d.mig_instance("MIG-x"),
            Err(HypomnesisError::NoGpuSource)
        ));
    }

    #[test]
    fn no_source_only_when_none_present() {
        let a = Fake::new(GpuQuerySource::Nvml, false, Ok(1));
        let b = Fake::new(GpuQuerySource::NvidiaSmi, false, Ok(1));
        let list: [&dyn Backend; 2] = [&a, &b];
        assert!(matches!(
            first_ok(&list, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()),
            Err(HypomnesisError::NoGpuSource)
        ));
        let empty: [&dyn Backend; 0] = [];
        assert!(matches!(
            first_ok(&empty, Scope::Nvidia, Op::DeviceInfo, |x| x.device_count()),
            Err(HypomnesisError::NoGpuSource)
        ));
    }
}
