//! The one internal trait every GPU backend implements.
// A build without any GPU feature has the trait but no implementation of it.
#![cfg_attr(
    not(any(feature = "nvml", feature = "nvidia-smi-fallback")),
    allow(dead_code)
)]

use super::pci::PciAddress;
use crate::{
    error::Result, types::GpuDeviceInfo, types::GpuProcessEntry, types::GpuQuerySource,
    types::MigInstance, types::MigState, types::ProcessActivity, types::ProcessGpuInfo,
    types::SourceReport, types::SourceState, types::Utilization,
};

/// Whether a backend's source exists on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presence {
    /// It exists (it may still fail when asked).
    Present,
    /// It does not exist here. (Why is each source's report's to say, `SourceState::Absent`:
    /// presence is asked at every call the dispatcher makes, and its reason was never read.)
    Absent,
}

/// A question the dispatcher asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    DeviceCount,
    DeviceInfo,
    ProcessGpuInfo,
    GpuProcesses,
    /// MIG mode and instances (NVIDIA sources that know MIG answer it).
    Mig,
}

/// Which devices a backend enumerates: NVIDIA GPUs (the NVML order, shared by every NVIDIA
/// source), or the other vendors' devices, which follow the NVIDIA ones in the device list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Nvidia,
    Others,
}

/// A source of GPU figures (NVML, `nvidia-smi`, DXGI, …). Indices are the source's own device
/// indices; the dispatcher asks backends in priority order.
pub(crate) trait Backend: Send + Sync {
    /// Which source this is.
    fn source(&self) -> GpuQuerySource;
    /// Whether the source exists (cheap after the first call).
    fn presence(&self) -> Presence;
    /// Number of devices the source sees.
    fn device_count(&self) -> Result<u32>;
    /// Device `index`'s used memory, bytes, as cheaply as the source reads it (a tracked
    /// block's edges read it): by default, what [`Self::device_info`] says.
    fn device_used(&self, index: u32) -> Result<u64> {
        self.device_info(index).map(|d| d.used_bytes)
    }
    /// Device-wide memory of one device.
    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo>;
    /// The calling process's memory on one device.
    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo>;
    /// Every process holding memory on one device, sorted by pid.
    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>>;
    /// The same without reading each process's name where that costs a file per process
    /// (NVML); sources whose list carries the names give them anyway.
    fn gpu_processes_unnamed(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        self.gpu_processes(index)
    }
    /// [`Self::gpu_processes`] and the pids of the processes the system refused to let this
    /// one read (sorted, no duplicates): empty but where the platform refuses (macOS).
    fn gpu_process_listing(&self, index: u32) -> Result<(Vec<GpuProcessEntry>, Vec<u32>)> {
        self.gpu_processes(index).map(|rows| (rows, Vec::new()))
    }
    /// What the source says about itself, for `hmn doctor`.
    fn report(&self) -> SourceReport;
    /// Whether the source is present and answers, asked as cheaply as it can be: the state of
    /// [`Self::report`] without the questions its details take. Sources whose report is cheap
    /// give that report's state.
    fn state(&self) -> SourceState {
        self.report().state
    }
    /// Process rows left out of the devices' latest lists (implausible or unknown figures),
    /// without asking the source anything.
    fn dropped_process_rows(&self) -> u64 {
        0
    }
    /// How busy one device is. Sources that do not say give `None` figures.
    fn utilization(&self, _index: u32) -> Result<Utilization> {
        Ok(Utilization::unknown(self.source()))
    }
    /// The driver's per-process activity samples of one device newer than `since_us`.
    fn process_activity(&self, _index: u32, _since_us: u64) -> Result<ProcessActivity> {
        Ok(ProcessActivity::Unknown {
            reason: format!("{} gives no per-process activity", self.source()),
        })
    }
    /// The minor number of one device's file (`/dev/nvidia<minor>`), where the source knows it.
    fn device_minor(&self, _index: u32) -> Result<Option<u32>> {
        Ok(None)
    }
    /// MIG mode and instances of one device. Sources that know nothing of MIG say "unknown".
    fn mig_state(&self, index: u32) -> Result<MigState> {
        Ok(MigState::unknown(index, self.source()))
    }
    /// The MIG device with this UUID (`MIG-…`).
    fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        Err(self.source().error(crate::error::Failure::new(
            crate::error::ErrorKind::Other,
            format!("this source does not list MIG devices, so {uuid:?} cannot be looked up"),
        )))
    }
    /// Whether this source answers `op` on this platform at all (NVML's per-process figures are
    /// N/A under Windows WDDM, for instance); the dispatcher skips it silently when not.
    fn answers(&self, _op: Op) -> bool {
        true
    }
    /// Which devices this backend enumerates.
    fn scope(&self) -> Scope {
        Scope::Nvidia
    }
    /// Whether this backend lists devices the NVIDIA sources may measure too (a sysfs walk that
    /// meets NVIDIA cards; DXGI, whose NVIDIA adapters take NVML's order), and so wants
    /// [`Self::nvidia_devices`] before it is asked anything else.
    fn needs_nvidia_devices(&self) -> bool {
        false
    }
    /// The PCI addresses of the devices the NVIDIA sources measure, in their index order:
    /// given by the dispatcher once, before any other question, to the backends that want it.
    fn nvidia_devices(&self, _addresses: &[PciAddress]) {}
}

/// Process rows a backend left out of each device's latest list, by device index: each new
/// list of a device replaces (or adds to, while it is being read in parts) that device's count.
#[derive(Debug, Default)]
pub(crate) struct DroppedRows(std::sync::Mutex<std::collections::BTreeMap<u32, Dropped>>);

/// The rows left out of one device's list: all of them, and those of them whose pid is no
/// process's (0, or 2³²−1: `NVML_VALUE_NOT_AVAILABLE`) rather than whose memory figure is not
/// a real one.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Dropped {
    pub(crate) rows: u64,
    pub(crate) no_pid: u64,
}

impl DroppedRows {
    /// None counted yet.
    pub(crate) const fn new() -> Self {
        Self(std::sync::Mutex::new(std::collections::BTreeMap::new()))
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<u32, Dropped>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Device `index`'s latest list left out `n` rows.
    pub(crate) fn set(&self, index: u32, n: Dropped) {
        self.counts().insert(index, n);
    }

    /// `n` more rows left out of device `index`'s list being read.
    pub(crate) fn add(&self, index: u32, n: Dropped) {
        let mut counts = self.counts();
        let c = counts.entry(index).or_default();
        c.rows = c.rows.saturating_add(n.rows);
        c.no_pid = c.no_pid.saturating_add(n.no_pid);
    }

    /// All devices together.
    pub(crate) fn total(&self) -> u64 {
        self.counts()
            .values()
            .fold(0, |a, b| a.saturating_add(b.rows))
    }

    /// All devices together, the rows and those without a process's pid.
    pub(crate) fn parts(&self) -> Dropped {
        self.counts()
            .values()
            .fold(Dropped::default(), |a, b| Dropped {
                rows: a.rows.saturating_add(b.rows),
                no_pid: a.no_pid.saturating_add(b.no_pid),
            })
    }
}

/// What a source's doctor says of the rows it left out: `None` when none was.
pub(crate) fn dropped_detail(d: Dropped) -> Option<String> {
    if d.rows == 0 {
        return None;
    }
    let figure = d.rows.saturating_sub(d.no_pid);
    Some(match (d.no_pid, figure) {
        (0, _) => format!(
            "{} (no usable memory figure, or more than the GPU has)",
            d.rows
        ),
        (_, 0) => format!("{} (pid 0 or 4294967295: no process)", d.rows),
        (p, f) => format!(
            "{} ({p} with pid 0 or 4294967295, no process; {f} with no usable memory figure or \
             more than the GPU has)",
            d.rows
        ),
    })
}

#[cfg(test)]
mod dropped_tests {
    use super::{Dropped, DroppedRows, dropped_detail};

    #[test]
    fn the_latest_list_of_each_device_counts() {
        let rows = |rows| Dropped { rows, no_pid: 0 };
        let d = DroppedRows::default();
        assert_eq!(d.total(), 0);
        d.set(0, rows(3));
        d.set(1, rows(2));
        assert_eq!(d.total(), 5);
        d.set(0, rows(1)); // a new list of device 0 replaces its count
        assert_eq!(d.total(), 3);
        d.add(1, Dropped { rows: 4, no_pid: 4 }); // a list read in parts adds up
        assert_eq!(d.total(), 7);
        assert_eq!(d.parts().no_pid, 4);
        d.set(1, rows(u64::MAX));
        d.add(1, rows(1));
        assert_eq!(d.total(), u64::MAX, "saturates");
    }

    /// Rows whose pid is no process's are not blamed on their memory figure.
    #[test]
    fn the_detail_says_which_rows_had_no_pid() {
        assert_eq!(dropped_detail(Dropped::default()), None);
        let only_pid = dropped_detail(Dropped { rows: 2, no_pid: 2 }).unwrap();
        assert_eq!(only_pid, "2 (pid 0 or 4294967295: no process)");
        let both = dropped_detail(Dropped { rows: 3, no_pid: 1 }).unwrap();
        assert!(
            both.contains("1 with pid 0 or 4294967295, no process; 2 with no usable memory figure"),
            "{both}"
        );
        let figure = dropped_detail(Dropped { rows: 1, no_pid: 0 }).unwrap();
        assert!(!figure.contains("pid"), "{figure}");
    }
}
