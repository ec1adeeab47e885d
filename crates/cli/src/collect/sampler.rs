//! The one sampler: each tick reads every device once into a [`Frame`] (its figures, its
//! processes, its residency, its MIG instances: whatever the command asked for), plus the RSS
//! of the processes the command follows. Commands fold frames into their own results; sums per
//! pid are made here and nowhere else.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use hypomnesis::{
    ErrorKind, GpuDeviceInfo, GpuProcessEntry, HypomnesisError, MigGpuInstance, Residency,
    Utilization,
};

/// What a frame reads, beyond the device count (a refresh reads only what it shows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one switch per part of a frame
pub struct Want {
    /// Each device's figures (`device_info`).
    pub devices: bool,
    /// Each device's processes (`gpu_processes`).
    pub processes: bool,
    /// Without their names (`gpu_processes_unnamed`: a view that reads the command lines of
    /// the rows it shows spares a file per process).
    pub unnamed: bool,
    /// Each device's residency (Windows WDDM spill).
    pub residency: bool,
    /// The MIG GPU instances of devices in MIG mode.
    pub mig: bool,
    /// Each device's GPU and memory-controller utilization.
    pub utilization: bool,
}

/// What a read that failed said, and what kind of failure it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub message: String,
    pub kind: ErrorKind,
}

impl Failure {
    pub fn of(e: &HypomnesisError) -> Self {
        Self {
            message: e.to_string(),
            kind: e.kind(),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One device at one tick. A part that was not asked for is `None`; a part that could not be
/// read holds the reason.
// `mig` and `utilization` are read by `hmn top` alone.
#[cfg_attr(not(feature = "top"), allow(dead_code))]
#[derive(Debug, Clone, Default)]
pub struct DeviceFrame {
    pub info: Option<Result<GpuDeviceInfo, Failure>>,
    pub processes: Option<Result<Vec<GpuProcessEntry>, Failure>>,
    pub residency: Option<Result<Residency, Failure>>,
    pub mig: Option<Vec<MigGpuInstance>>,
    pub utilization: Option<Result<Utilization, Failure>>,
}

impl DeviceFrame {
    /// The figures, when read.
    pub fn info(&self) -> Option<&GpuDeviceInfo> {
        self.info.as_ref().and_then(|r| r.as_ref().ok())
    }

    /// The processes, when read.
    pub fn processes(&self) -> Option<&[GpuProcessEntry]> {
        self.processes
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .map(Vec::as_slice)
    }
}

/// Everything one tick read.
// `count` is read by `hmn top` alone.
#[cfg_attr(not(feature = "top"), allow(dead_code))]
#[derive(Debug, Clone)]
pub struct Frame {
    /// When, since the sampler started.
    pub at: Duration,
    /// Devices counted (0 when there is no GPU source), or why they could not be counted.
    pub count: Result<u32, String>,
    /// One entry per counted device, in index order.
    pub devices: Vec<DeviceFrame>,
    /// RSS of each followed pid (`None`: not readable, e.g. exited).
    pub rss: BTreeMap<u32, Option<u64>>,
}

impl Frame {
    /// GPU memory per local pid on device `index`, rows of the same pid added up; `None` when
    /// the device's processes were not read. Rows outside this PID namespace are left out:
    /// their number is the driver's, which a local process may have too.
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
    pub fn gpu_of(&self, index: usize, pids: &HashSet<u32>) -> Option<u64> {
        self.gpu_by_pid(index).map(|m| {
            m.iter()
                .filter(|(p, _)| pids.contains(p))
                .map(|(_, b)| *b)
                .fold(0, u64::saturating_add)
        })
    }

    /// The used memory of device `index`, when read.
    pub fn used(&self, index: usize) -> Option<u64> {
        self.devices
            .get(index)
            .and_then(DeviceFrame::info)
            .map(|d| d.used_bytes)
    }

    /// Sum of the RSS of `pids` (processes that vanished count 0); `None` when not one could be
    /// read.
    pub fn rss_sum(&self, pids: &[u32]) -> Option<u64> {
        let known: Vec<u64> = pids
            .iter()
            .filter_map(|p| self.rss.get(p).copied().flatten())
            .collect();
        (!known.is_empty()).then(|| known.into_iter().fold(0, u64::saturating_add))
    }
}

/// Reads frames.
#[derive(Debug)]
pub struct Sampler {
    started: Instant,
    want: Want,
}

impl Sampler {
    pub fn new(want: Want) -> Self {
        Self {
            started: Instant::now(),
            want,
        }
    }

    /// Time since the sampler started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// One frame: the device count, then each device once for what was asked, then the RSS of
    /// `pids`.
    pub fn frame(&self, pids: &[u32]) -> Frame {
        let at = self.started.elapsed();
        let count = match hypomnesis::device_count() {
            Ok(n) => Ok(n),
            Err(HypomnesisError::NoGpuSource) => Ok(0),
            Err(e) => Err(e.to_string()),
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
                .map(|&p| (p, hypomnesis::process_rss_of(p).ok()))
                .collect(),
        }
    }

    fn device(&self, i: u32) -> DeviceFrame {
        let w = self.want;
        let text = |e: HypomnesisError| Failure::of(&e);
        DeviceFrame {
            info: w.devices.then(|| hypomnesis::device_info(i).map_err(text)),
            processes: w.processes.then(|| {
                if w.unnamed {
                    hypomnesis::gpu_processes_unnamed(i)
                } else {
                    hypomnesis::gpu_processes(i)
                }
                .map_err(text)
            }),
            residency: w
                .residency
                .then(|| hypomnesis::adapter_residency(i).map_err(text)),
            mig: w.mig.then(|| {
                hypomnesis::mig_instances(i)
                    .map(|list| hypomnesis::mig_gpu_instances(&list))
                    .unwrap_or_default()
            }),
            utilization: w
                .utilization
                .then(|| hypomnesis::device_utilization(i).map_err(text)),
        }
    }
}

/// The larger of two optional figures.
pub fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
mod tests {
    use hypomnesis::GpuProcessEntry;

    use super::*;

    fn row(pid: u32, used: u64) -> GpuProcessEntry {
        GpuProcessEntry::builder().pid(pid).used_bytes(used).build()
    }

    /// A row of another PID namespace whose driver number is `pid`.
    fn outside(pid: u32, used: u64) -> GpuProcessEntry {
        GpuProcessEntry::builder()
            .pid(pid)
            .used_bytes(used)
            .outside_pid_namespace(true)
            .build()
    }

    fn frame() -> Frame {
        let dev = |rows: Option<Vec<GpuProcessEntry>>| DeviceFrame {
            processes: rows.map(Ok),
            ..DeviceFrame::default()
        };
        Frame {
            at: Duration::ZERO,
            count: Ok(3),
            devices: vec![
                dev(Some(vec![
                    row(7, 10),
                    row(7, 5),
                    row(9, 1),
                    outside(9, 1000),
                ])),
                dev(None),
                dev(Some(vec![row(7, 100)])),
            ],
            rss: [(7, Some(300)), (8, None), (9, Some(20))]
                .into_iter()
                .collect(),
        }
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
    }

    #[test]
    fn maxima() {
        assert_eq!(max_opt(Some(1), Some(3)), Some(3));
        assert_eq!(max_opt(None, Some(3)), Some(3));
        assert_eq!(max_opt(Some(2), None), Some(2));
        assert_eq!(max_opt(None, None), None);
    }
}
