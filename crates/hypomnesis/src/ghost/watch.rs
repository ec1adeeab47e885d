//! Ghosts over time: what a caller that looks again and again (a monitor, an exporter, a
//! training loop) keeps between its looks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::classify::{Look, Memory, Scans, classify};
use super::idle::{DeviceActivity, now_us};
use super::pods::Pods;
use super::scanner::Scanner;
use super::{GhostOptions, GhostReport};
use crate::error::{ErrorKind, Failure, Result};
use crate::host::parse::stat::StatIds;
use crate::types::{GpuDeviceInfo, GpuProcessEntry};

/// Looks for ghosts again and again, keeping what one look teaches the next: each GPU's
/// activity samples (so a holder is idle once watched for [`GhostOptions::idle_after`],
/// whatever the driver's buffer of samples holds), the processes seen in `D` with their
/// context switches (so one that has not switched since a look [`GhostOptions::stuck_after`]
/// or more earlier is stuck, without waiting between looks as [`super::ghosts_with`] does),
/// and which processes hold their GPU's device file. The scan of every process's descriptors
/// runs on a thread of its own, and a look uses the latest one that finished and started
/// after what it must explain was first seen (its age is in [`GhostReport::holder_scan`]):
/// until then, what frees that memory is unknown, and said so.
///
/// ```no_run
/// let mut watch = hypomnesis::GhostWatch::new(hypomnesis::GhostOptions::default());
/// loop {
///     let report = watch.look()?;
///     for g in &report.ghosts {
///         println!("GPU {}: {} {} MiB: {}", g.device_index, g.class, g.bytes >> 20, g.remedy);
///     }
///     std::thread::sleep(std::time::Duration::from_secs(60));
/// }
/// # Ok::<(), hypomnesis::HypomnesisError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GhostWatch {
    options: GhostOptions,
    activity: BTreeMap<u32, DeviceActivity>,
    memory: Memory,
    scanner: Scanner,
    live_pods: Option<BTreeSet<(String, String)>>,
    /// The procfs and rootfs looked at, when not the process-wide settings.
    roots: Option<(PathBuf, PathBuf)>,
}

impl GhostWatch {
    /// A watch that has not looked yet.
    #[must_use]
    pub fn new(options: GhostOptions) -> Self {
        Self {
            options,
            activity: BTreeMap::new(),
            memory: Memory::default(),
            scanner: Scanner::default(),
            live_pods: None,
            roots: None,
        }
    }

    /// The watch looking at the processes under `procfs` and the kubelet's layout under
    /// `rootfs` (a node's, mounted at `/host/proc` and `/host`) instead of the process-wide
    /// settings ([`crate::roots`]).
    #[must_use]
    pub fn with_roots(mut self, procfs: impl Into<PathBuf>, rootfs: impl Into<PathBuf>) -> Self {
        self.roots = Some((procfs.into(), rootfs.into()));
        self
    }

    /// How it looks.
    #[must_use]
    pub fn options(&self) -> GhostOptions {
        self.options
    }

    /// The pods the kubelet runs, by namespace and name, as its pod-resources API listed them
    /// (`None`: not read): a process whose pod's log directory is still there but which this
    /// list lacks is then in a pod that no longer exists.
    pub fn set_live_pods(&mut self, pods: Option<BTreeSet<(String, String)>>) {
        self.live_pods = pods;
    }

    /// One look at every GPU, without waiting: a process in `D` is stuck when it has not
    /// switched since an earlier look at least `stuck_after` ago; the scan of descriptors runs
    /// in the background.
    ///
    /// # Errors
    ///
    /// As [`super::ghosts`].
    pub fn look(&mut self) -> Result<GhostReport> {
        self.look_with(false)
    }

    /// One look that waits: a process in `D` is looked at again after `stuck_after`, and the
    /// scan of descriptors, when a ghost needs one, is made before it answers (what
    /// [`super::ghosts_with`] does, with this watch's pods).
    ///
    /// # Errors
    ///
    /// As [`super::ghosts`].
    pub fn look_once(mut self) -> Result<GhostReport> {
        self.look_with(true)
    }

    /// [`Self::look`] at rows already read (each GPU's figures and processes), so that a
    /// caller that has just listed them (an exporter's scrape) does not ask the driver again;
    /// only the activity samples and procfs are read.
    ///
    /// # Errors
    ///
    /// As reading the procfs and rootfs settings (`HYPOMNESIS_PROCFS`, `HYPOMNESIS_ROOTFS`).
    pub fn look_at_rows(
        &mut self,
        devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
    ) -> Result<GhostReport> {
        self.classify_rows(devices, false, |_, _| BTreeMap::new())
    }

    /// [`Self::look_at_rows`] reading each listed process's `stat` (its state, relations and
    /// start time) through the files `identities` keeps open for its changing parts, where
    /// they are kept (by path elsewhere): a caller that keeps who its processes are (`hmn
    /// top`'s refresh) opens no file twice.
    ///
    /// # Errors
    ///
    /// As [`Self::look_at_rows`].
    #[cfg(feature = "sampling")]
    pub fn look_at_rows_with(
        &mut self,
        devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
        identities: &mut crate::sampling::Identities,
    ) -> Result<GhostReport> {
        self.classify_rows(devices, false, |procfs, pids| {
            #[cfg(target_os = "linux")]
            return identities.stats(procfs, pids);
            #[cfg(not(target_os = "linux"))]
            {
                let _ = (identities, procfs, pids);
                BTreeMap::new()
            }
        })
    }

    fn look_with(&mut self, single: bool) -> Result<GhostReport> {
        let n = crate::gpu::device_count()?;
        let mut devices = Vec::new();
        let mut unseen = Vec::new();
        for i in 0..n {
            match (crate::gpu::device_info(i), crate::gpu::gpu_processes(i)) {
                (Ok(info), Ok(procs)) => devices.push((info, procs)),
                (Err(e), _) | (_, Err(e)) => {
                    unseen.push(Failure::new(e.kind(), format!("GPU {i}: {e}")));
                }
            }
        }
        let mut report = self.classify_rows(&devices, single, |_, _| BTreeMap::new())?;
        if !unseen.is_empty() {
            report.complete = false;
        }
        unseen.append(&mut report.unseen);
        report.unseen = unseen;
        Ok(report)
    }

    /// The look at `devices`, `stats` giving the state, relations and start time of the listed
    /// processes it can (under the procfs root, by pid) before the others are read by path.
    fn classify_rows(
        &mut self,
        devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
        single: bool,
        stats: impl FnOnce(&Path, &[u32]) -> BTreeMap<u32, (StatIds, u64)>,
    ) -> Result<GhostReport> {
        if !cfg!(target_os = "linux") {
            return Ok(GhostReport {
                unseen: vec![Failure::new(
                    ErrorKind::NotSupported,
                    "processes are looked at through procfs, on Linux only",
                )],
                ..GhostReport::default()
            });
        }
        let (procfs, rootfs) = match &self.roots {
            Some((p, r)) => (p.as_path(), Ok(r.as_path())),
            None => (
                crate::host::roots::procfs()?,
                crate::host::roots::rootfs().map_err(|e| Failure::of(&e)),
            ),
        };
        let listed: BTreeSet<u32> = devices
            .iter()
            .flat_map(|(_, ps)| ps.iter().map(|p| p.pid))
            .collect();
        let pids: Vec<u32> = listed.iter().copied().collect();
        let stats = stats(procfs, &pids);
        let now = now_us();
        for (info, _) in devices {
            let seen = self.activity.entry(info.index).or_default();
            let answer = crate::gpu::process_activity(info.index, seen.since_us())
                .map_err(|e| e.to_string());
            seen.take(now, answer);
        }
        let look = Look {
            procfs,
            pods: Pods::read(rootfs, self.live_pods.as_ref()),
            stats: &stats,
            activity: &self.activity,
            now_us: now,
            options: self.options,
            single,
            scans: if single {
                Scans::Now
            } else {
                Scans::Background(&self.scanner)
            },
        };
        let report = classify(&look, &mut self.memory, devices);
        self.memory
            .holding
            .retain(|(pid, _, _)| listed.contains(pid));
        for (info, procs) in devices {
            if let Some(seen) = self.activity.get_mut(&info.index) {
                seen.keep_only(|pid| procs.iter().any(|p| p.pid == pid));
            }
        }
        Ok(report)
    }
}
