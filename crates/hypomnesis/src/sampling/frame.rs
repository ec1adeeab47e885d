//! The one sampler: each tick reads every device once into a [`Frame`] (its figures, its
//! processes, its residency, its MIG instances, this process's own memory on it: whatever the
//! caller asked for), plus the RSS of the processes the caller follows (and, for a tree of
//! them, their PSS when a [`PssPacer`] allows). Callers fold frames into their own results
//! (`hmn run`, `watch`, `top` and `serve`, Python's `track()`); sums per pid are made here and
//! nowhere else.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use super::pss::{PssPacer, TreeRam};
use crate::error::HypomnesisError;
use crate::types::{
    GpuDeviceInfo, GpuProcessEntry, MigGpuInstance, ProcessGpuInfo, Residency, Utilization,
};

/// What a frame reads, beyond the device count (a refresh reads only what it shows). Start from
/// [`Want::NONE`] and switch on the parts wanted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one switch per part of a frame
#[non_exhaustive]
pub struct Want {
    /// Each device's figures ([`crate::device_info`]).
    pub devices: bool,
    /// Each device's processes ([`crate::gpu_processes`]).
    pub processes: bool,
    /// Without their names ([`crate::gpu_processes_unnamed`]: a view that reads the command
    /// lines of the rows it shows spares a file per process).
    pub unnamed: bool,
    /// Each device's residency (Windows WDDM spill).
    pub residency: bool,
    /// The MIG GPU instances of devices in MIG mode.
    pub mig: bool,
    /// Each device's GPU and memory-controller utilization.
    pub utilization: bool,
    /// This process's own memory on each device ([`crate::process_gpu_info`]).
    pub own: bool,
}

impl Want {
    /// Nothing beyond the device count.
    pub const NONE: Self = Self {
        devices: false,
        processes: false,
        unnamed: false,
        residency: false,
        mig: false,
        utilization: false,
        own: false,
    };
}

pub use crate::error::Failure;

/// One device at one tick. A part that was not asked for is `None`; a part that could not be
/// read holds the reason.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DeviceFrame {
    /// The device's figures.
    pub info: Option<Result<GpuDeviceInfo, Failure>>,
    /// The processes holding memory on it.
    pub processes: Option<Result<Vec<GpuProcessEntry>, Failure>>,
    /// Its residency (Windows).
    pub residency: Option<Result<Residency, Failure>>,
    /// Its MIG GPU instances (empty when MIG is off or they could not be read).
    pub mig: Option<Vec<MigGpuInstance>>,
    /// Its utilization.
    pub utilization: Option<Result<Utilization, Failure>>,
    /// This process's own memory on it.
    pub own: Option<Result<ProcessGpuInfo, Failure>>,
}

impl DeviceFrame {
    /// The figures, when read.
    #[must_use]
    pub fn info(&self) -> Option<&GpuDeviceInfo> {
        self.info.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// The processes, when read.
    #[must_use]
    pub fn processes(&self) -> Option<&[GpuProcessEntry]> {
        self.processes
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .map(Vec::as_slice)
    }

    /// The memory this process holds on the device, when the source gives it per process
    /// (`None` when it was not read, failed, or the source gives only a device-wide figure).
    #[must_use]
    pub fn own_bytes(&self) -> Option<u64> {
        self.own
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .filter(|p| p.is_per_process)
            .map(|p| p.used_bytes)
    }
}

/// Everything one tick read.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Frame {
    /// When, since the sampler started.
    pub at: Duration,
    /// Devices counted (0 when there is no GPU source), or why they could not be counted.
    pub count: Result<u32, Failure>,
    /// One entry per counted device, in index order.
    pub devices: Vec<DeviceFrame>,
    /// RSS of each followed pid (`None`: not readable, e.g. exited).
    pub rss: BTreeMap<u32, Option<u64>>,
    /// PSS of each followed pid where this tick read it ([`Sampler::frame_tree`]; `None`: not
    /// readable); empty when it did not.
    pub pss: BTreeMap<u32, Option<u64>>,
}

impl Frame {
    /// A frame made of its parts (a caller's tests, a replay).
    #[must_use]
    pub fn new(
        at: Duration,
        count: Result<u32, Failure>,
        devices: Vec<DeviceFrame>,
        rss: BTreeMap<u32, Option<u64>>,
    ) -> Self {
        Self {
            at,
            count,
            devices,
            rss,
            pss: BTreeMap::new(),
        }
    }

    /// The frame with the PSS this tick read (a caller's tests, a replay).
    #[must_use]
    pub fn with_pss(mut self, pss: BTreeMap<u32, Option<u64>>) -> Self {
        self.pss = pss;
        self
    }

    /// GPU memory per local pid on device `index`, rows of the same pid added up; `None` when
    /// the device's processes were not read. Rows outside this PID namespace are left out:
    /// their number is the driver's, which a local process may have too.
    #[must_use]
    pub fn gpu_by_pid(&self, index: usize) -> Option<BTreeMap<u32, u64>> {
        let rows = self.devices.get(index)?.processes()?;
        let mut out: BTreeMap<u32, u64> = BTreeMap::new();
        for r in rows {
            if let Some(pid) = r.local_pid() {
                let e = out.entry(pid).or_insert(0);
                *e = e.saturating_add(r.used_bytes);
            }
        }
        Some(out)
    }

    /// GPU memory per pid over every device whose processes were read; `None` when none was.
    #[must_use]
    pub fn gpu_by_pid_all(&self) -> Option<BTreeMap<u32, u64>> {
        let mut out: Option<BTreeMap<u32, u64>> = None;
        for i in 0..self.devices.len() {
            if let Some(m) = self.gpu_by_pid(i) {
                let all = out.get_or_insert_with(BTreeMap::new);
                for (pid, b) in m {
                    let e = all.entry(pid).or_insert(0);
                    *e = e.saturating_add(b);
                }
            }
        }
        out
    }

    /// GPU memory `pids` hold on device `index`; `None` when its processes were not read.
    #[must_use]
    pub fn gpu_of(&self, index: usize, pids: &HashSet<u32>) -> Option<u64> {
        self.gpu_by_pid(index).map(|m| {
            m.iter()
                .filter(|(p, _)| pids.contains(p))
                .map(|(_, b)| *b)
                .fold(0, u64::saturating_add)
        })
    }

    /// The used memory of device `index`, when read.
    #[must_use]
    pub fn used(&self, index: usize) -> Option<u64> {
        self.devices
            .get(index)
            .and_then(DeviceFrame::info)
            .map(|d| d.used_bytes)
    }

    /// Sum of the RSS of `pids` (processes that vanished count 0); `None` when not one could
    /// be read.
    #[must_use]
    pub fn rss_sum(&self, pids: &[u32]) -> Option<u64> {
        let known: Vec<u64> = pids
            .iter()
            .filter_map(|p| self.rss.get(p).copied().flatten())
            .collect();
        (!known.is_empty()).then(|| known.into_iter().fold(0, u64::saturating_add))
    }

    /// What the tree `pids` holds in RAM, shared pages counted once (see [`TreeRam`]): a lone
    /// process's RSS; for several, the sum of their PSS where this tick read it, the RSS of
    /// those whose PSS could not be read in its place (named), processes that vanished
    /// (unreadable, or a zombie's RSS of 0) counting 0. `None` for several when this tick read no PSS (it is never estimated), and
    /// when not one figure could be read.
    #[must_use]
    pub fn tree_ram(&self, pids: &[u32]) -> Option<TreeRam> {
        let rss = |p: &u32| self.rss.get(p).copied().flatten();
        if let [lone] = pids {
            return rss(lone).map(|b| TreeRam::new(b, false, 1, Vec::new()));
        }
        if pids.is_empty() || self.pss.is_empty() {
            return None;
        }
        let mut sum: Option<u64> = None;
        let mut counted = 0;
        let mut rss_for = Vec::new();
        for p in pids {
            let bytes = match (self.pss.get(p).copied().flatten(), rss(p)) {
                (Some(pss), _) => pss,
                // A process that exited and is not yet reaped reads RSS 0 and no PSS: it
                // vanished, and is not one counted by RSS.
                (None, Some(r)) if r > 0 => {
                    rss_for.push(*p);
                    r
                }
                (None, _) => continue,
            };
            sum = Some(sum.unwrap_or(0).saturating_add(bytes));
            counted += 1;
        }
        sum.map(|b| TreeRam::new(b, true, counted, rss_for))
    }
}

/// Reads frames.
#[derive(Debug, Clone)]
pub struct Sampler {
    started: Instant,
    want: Want,
}

impl Sampler {
    /// A sampler that reads `want`, its clock starting now.
    #[must_use]
    pub fn new(want: Want) -> Self {
        Self {
            started: Instant::now(),
            want,
        }
    }

    /// Time since the sampler started.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// One frame: the device count, then each device once for what was asked, then the RSS
    /// of `pids`.
    #[must_use]
    pub fn frame(&self, pids: &[u32]) -> Frame {
        let at = self.started.elapsed();
        let count = match crate::gpu::device_count() {
            Ok(n) => Ok(n),
            Err(HypomnesisError::NoGpuSource) => Ok(0),
            Err(e) => Err(Failure::of(&e)),
        };
        let devices = (0..*count.as_ref().unwrap_or(&0))
            .map(|i| self.device(i))
            .collect();
        Frame {
            at,
            count,
            devices,
            rss: pids
                .iter()
                .map(|&p| (p, crate::host::process::process_rss_of(p).ok()))
                .collect(),
            pss: BTreeMap::new(),
        }
    }

    /// One frame of the tree `pids` (a root and what runs below it): as [`Sampler::frame`],
    /// and, when there are several processes and `pacer` says a walk is due, the PSS of each
    /// (see [`TreeRam`] for why it is paced). A process whose PSS cannot be read and whose RSS
    /// can no longer be read either has exited since its RSS was read: it has neither figure
    /// in the frame (it is not one whose PSS is hidden).
    #[must_use]
    pub fn frame_tree(&self, pids: &[u32], pacer: &mut PssPacer) -> Frame {
        use crate::host::process::{process_pss_of, process_rss_of};
        let mut f = self.frame(pids);
        let began = Instant::now();
        if pids.len() > 1 && pacer.due(began) {
            for &p in pids {
                let pss = process_pss_of(p).ok();
                if pss.is_none() && process_rss_of(p).is_err() {
                    f.rss.insert(p, None);
                }
                f.pss.insert(p, pss);
            }
            pacer.walked(began, began.elapsed());
        }
        f
    }

    /// Device `index` alone, for what was asked (a caller that follows some devices only).
    #[must_use]
    pub fn device(&self, index: u32) -> DeviceFrame {
        use crate::gpu;
        let w = self.want;
        let text = |e: HypomnesisError| Failure::of(&e);
        DeviceFrame {
            info: w.devices.then(|| gpu::device_info(index).map_err(text)),
            processes: w.processes.then(|| {
                if w.unnamed {
                    gpu::gpu_processes_unnamed(index)
                } else {
                    gpu::gpu_processes(index)
                }
                .map_err(text)
            }),
            residency: w
                .residency
                .then(|| gpu::adapter_residency(index).map_err(text)),
            mig: w.mig.then(|| {
                gpu::mig_instances(index)
                    .map(|list| gpu::mig::mig_gpu_instances(&list))
                    .unwrap_or_default()
            }),
            utilization: w
                .utilization
                .then(|| gpu::device_utilization(index).map_err(text)),
            own: w.own.then(|| gpu::process_gpu_info(index).map_err(text)),
        }
    }
}

/// The larger of two optional figures (`None` only when both are).
#[must_use]
pub fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{GpuQuerySource, UnreadableReason};

    fn row(pid: u32, used: u64) -> GpuProcessEntry {
        GpuProcessEntry {
            pid,
            used_bytes: used,
            ..GpuProcessEntry::blank(GpuQuerySource::Nvml)
        }
    }

    /// A row of another PID namespace whose driver number is `pid`.
    fn outside(pid: u32, used: u64) -> GpuProcessEntry {
        GpuProcessEntry {
            outside_pid_namespace: true,
            unreadable: Some(UnreadableReason::OutsidePidNamespace),
            ..row(pid, used)
        }
    }

    fn frame() -> Frame {
        let dev = |rows: Option<Vec<GpuProcessEntry>>| DeviceFrame {
            processes: rows.map(Ok),
            ..DeviceFrame::default()
        };
        Frame::new(
            Duration::ZERO,
            Ok(3),
            vec![
                dev(Some(vec![
                    row(7, 10),
                    row(7, 5),
                    row(9, 1),
                    outside(9, 1000),
                ])),
                dev(None),
                dev(Some(vec![row(7, 100)])),
            ],
            [(7, Some(300)), (8, None), (9, Some(20))]
                .into_iter()
                .collect(),
        )
    }

    #[test]
    fn sums_per_pid() {
        let f = frame();
        assert_eq!(
            f.gpu_by_pid(0),
            Some([(7, 15), (9, 1)].into_iter().collect())
        );
        assert_eq!(f.gpu_by_pid(1), None, "not read is not zero");
        // (The row of pid 9 outside this namespace is not the local pid 9's.)
        assert_eq!(
            f.gpu_by_pid_all(),
            Some([(7, 115), (9, 1)].into_iter().collect())
        );
        let seven: HashSet<u32> = [7].into_iter().collect();
        assert_eq!(f.gpu_of(0, &seven), Some(15));
        assert_eq!(f.gpu_of(1, &seven), None);
        assert_eq!(f.gpu_of(5, &seven), None);
        assert_eq!(f.rss_sum(&[7, 8, 9]), Some(320));
        assert_eq!(f.rss_sum(&[8]), None);
        assert_eq!(f.rss_sum(&[]), None);
        assert_eq!(f.tree_ram(&[7, 9]), None, "no PSS read: no tree figure");
        assert_eq!(
            f.tree_ram(&[7]),
            Some(TreeRam::new(300, false, 1, Vec::new()))
        );
        assert_eq!(f.tree_ram(&[8]), None);
        let none = Frame::new(Duration::ZERO, Ok(0), Vec::new(), BTreeMap::new());
        assert_eq!(none.gpu_by_pid_all(), None, "no device read is not zero");
        assert_eq!(none.used(0), None);
    }

    /// Several processes: PSS summed, RSS only for those whose PSS could not be read (said),
    /// the vanished left out.
    #[test]
    fn a_tree_counts_pss_and_names_the_rss_it_counts() {
        let f = frame().with_pss([(7, Some(100)), (8, None), (9, None)].into_iter().collect());
        assert_eq!(
            f.tree_ram(&[7, 8, 9]),
            Some(TreeRam::new(120, true, 2, vec![9]))
        );
        assert_eq!(
            f.tree_ram(&[7, 8]),
            Some(TreeRam::new(100, true, 1, Vec::new()))
        );
        assert_eq!(f.tree_ram(&[8, 10]), None, "nothing read");
        // A zombie: no PSS, RSS 0; it vanished, and is not named as counted by RSS.
        let mut z = f.clone();
        z.rss.insert(11, Some(0));
        z.pss.insert(11, None);
        assert_eq!(
            z.tree_ram(&[7, 9, 11]),
            Some(TreeRam::new(120, true, 2, vec![9]))
        );
        assert_eq!(f.tree_ram(&[]), None);
        assert_eq!(
            f.tree_ram(&[7]),
            Some(TreeRam::new(300, false, 1, Vec::new()))
        );
    }

    #[test]
    fn own_bytes_only_when_per_process() {
        let own = |per_process: bool| DeviceFrame {
            own: Some(Ok(ProcessGpuInfo {
                used_bytes: 42,
                is_per_process: per_process,
                source: GpuQuerySource::Nvml,
            })),
            ..DeviceFrame::default()
        };
        assert_eq!(own(true).own_bytes(), Some(42));
        assert_eq!(
            own(false).own_bytes(),
            None,
            "a device-wide figure is not ours"
        );
        assert_eq!(DeviceFrame::default().own_bytes(), None);
    }

    #[test]
    fn a_frame_reads_only_what_was_asked() {
        let mut want = Want::NONE;
        want.devices = true;
        let me = std::process::id();
        let f = Sampler::new(want).frame(&[me]);
        for d in &f.devices {
            assert!(d.info.is_some());
            assert!(d.processes.is_none() && d.own.is_none() && d.mig.is_none());
            assert!(d.residency.is_none() && d.utilization.is_none());
        }
        assert_eq!(f.rss.len(), 1);
        #[cfg(any(target_os = "linux", target_os = "macos", windows))]
        assert!(f.rss.get(&me).copied().flatten().is_some_and(|r| r > 0));
    }

    #[test]
    fn a_failure_says_what_the_error_said() {
        let e = HypomnesisError::NoGpuSource;
        let f = Failure::of(&e);
        assert_eq!(f.to_string(), e.to_string());
        assert_eq!(f.message, e.to_string());
        assert_eq!(f.kind, e.kind());
        assert!(!f.message.is_empty());
    }

    #[test]
    fn maxima() {
        assert_eq!(max_opt(Some(1), Some(3)), Some(3));
        assert_eq!(max_opt(Some(3), Some(1)), Some(3));
        assert_eq!(max_opt(None, Some(3)), Some(3));
        assert_eq!(max_opt(Some(2), None), Some(2));
        assert_eq!(max_opt(None, None), None);
    }
}
