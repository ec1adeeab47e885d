//! Ghosts: GPU memory still held after the work that allocated it is over, sorted into the
//! class the evidence shows, with who really holds it and what would free it.
//!
//! Each class is given only from what was read, and the reading is the [`Ghost::evidence`]:
//!
//! - [`GhostClass::Exited`]: the driver charges a pid that no longer exists, in a PID namespace
//!   this process sees whole (the library's `UnreadableReason::Exited`); the processes holding
//!   that GPU's device file that the driver does not list are named, as the real holders (a
//!   child that inherited the descriptors);
//! - [`GhostClass::Zombie`]: a thread-group leader in state `Z` whose other threads still run,
//!   or that its parent has not reaped (the parent is named);
//! - [`GhostClass::Stuck`]: in uninterruptible sleep (`D`) at two looks the options' interval
//!   apart, with the kernel function it waits in (`wchan`);
//! - [`GhostClass::Orphan`]: not the leader of its process group or session, whose leader is
//!   gone (a data-loader worker whose trainer ended), with its parent as it is now;
//! - [`GhostClass::GonePod`]: in a Kubernetes pod the node no longer has (its cgroup's pod
//!   UID has no directory in the kubelet's log layout, or the kubelet's pod-resources list
//!   the caller gave lacks it);
//! - [`GhostClass::Idle`]: alive, holding memory, and no activity in the driver's
//!   per-process samples for [`GhostOptions::idle_after`] (where the samples cannot be read or
//!   cover less, the report says it is not known);
//! - [`GhostClass::Unaccounted`]: allocated memory that no listed process accounts for beyond
//!   the driver's own allowance, or that the driver charges to a pid no process here can have,
//!   with the device-file holders the driver does not list.
//!
//! A caller that looks again and again keeps a [`GhostWatch`]: activity is followed between
//! its looks, and a process in `D` at two of them is stuck without waiting.
//!
//! Linux only: elsewhere [`ghosts`] finds the GPUs' rows and says that it cannot look.

mod holders;
mod idle;
mod look;
mod pods;
mod watch;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

pub use holders::HolderScan;
pub use watch::GhostWatch;

use crate::error::Result;
use crate::types::{GpuDeviceInfo, GpuProcessEntry, UnreadableReason};

/// Why memory is held that should not be (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum GhostClass {
    /// The driver charges a pid that no longer exists.
    Exited,
    /// A zombie leader with live threads, or one its parent has not reaped.
    Zombie,
    /// In uninterruptible sleep at two looks.
    Stuck,
    /// Reparented after its group's or session's leader ended.
    Orphan,
    /// In a Kubernetes pod the node no longer has.
    GonePod,
    /// Alive, holding memory, with no activity for the options' `idle_after`.
    Idle,
    /// Allocated memory no listed process accounts for.
    Unaccounted,
}

impl GhostClass {
    /// Every class, in the order of [`Ord`].
    pub const ALL: [Self; 7] = [
        Self::Exited,
        Self::Zombie,
        Self::Stuck,
        Self::Orphan,
        Self::GonePod,
        Self::Idle,
        Self::Unaccounted,
    ];

    /// A short stable name: `exited`, `zombie`, `stuck`, `orphan`, `gone_pod`, `idle`,
    /// `unaccounted` (what JSON, the exporter's `class` label and Python say).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Zombie => "zombie",
            Self::Stuck => "stuck",
            Self::Orphan => "orphan",
            Self::GonePod => "gone_pod",
            Self::Idle => "idle",
            Self::Unaccounted => "unaccounted",
        }
    }
}

impl fmt::Display for GhostClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What would free a ghost's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "action", rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Remedy {
    /// Ending these processes frees it.
    Kill {
        /// The processes to end.
        pids: Vec<u32>,
    },
    /// The zombie's parent reaps it (`wait`), or ends so that init does.
    Reap {
        /// The zombie's parent.
        parent: u32,
    },
    /// Nothing a signal reaches holds it: only a GPU reset (or a reboot) frees it.
    GpuReset,
    /// Who holds it cannot be told here (the GPU's device file is not known), so neither
    /// can what frees it.
    Unknown,
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Kill { pids } => {
                f.write_str("kill")?;
                for p in pids {
                    write!(f, " {p}")?;
                }
                Ok(())
            }
            Self::Reap { parent } => write!(f, "reap: parent {parent} must wait for it, or end"),
            Self::GpuReset => f.write_str("GPU reset"),
            Self::Unknown => f.write_str("unknown (its holders cannot be told here)"),
        }
    }
}

/// One ghost: memory held on one GPU, its class, what shows it, and what would free it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Ghost {
    /// Why it is held.
    pub class: GhostClass,
    /// The GPU it is held on.
    pub device_index: u32,
    /// The pid the driver charges; `None` for memory no listed process accounts for.
    pub pid: Option<u32>,
    /// Its name, where it could be read.
    pub name: Option<String>,
    /// The memory it holds on this GPU.
    pub bytes: u64,
    /// Processes holding this GPU's device file that the driver does not list.
    pub holders: Vec<u32>,
    /// What was read that shows the class, one fact a line.
    pub evidence: Vec<String>,
    /// What would free it.
    pub remedy: Remedy,
}

impl Ghost {
    /// A ghost given whole (a view's tests, one found elsewhere): no holders, no evidence,
    /// its remedy unknown until set.
    #[must_use]
    pub fn new(class: GhostClass, device_index: u32, pid: Option<u32>, bytes: u64) -> Self {
        Self {
            class,
            device_index,
            pid,
            name: None,
            bytes,
            holders: Vec::new(),
            evidence: Vec::new(),
            remedy: Remedy::Unknown,
        }
    }
}

/// Every ghost found, with what could not be looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GhostReport {
    /// The ghosts, by GPU row order, then the memory no process accounts for.
    pub ghosts: Vec<Ghost>,
    /// What could not be seen or read, and why (a GPU whose figures failed, a process in
    /// another PID namespace, a scan cut by its deadline).
    pub unseen: Vec<String>,
    /// The scan of descriptors, when there was something it could explain.
    pub holder_scan: Option<HolderScan>,
}

impl GhostReport {
    /// The bytes held by each class found.
    #[must_use]
    pub fn bytes_by_class(&self) -> BTreeMap<GhostClass, u64> {
        let mut out = BTreeMap::new();
        for g in &self.ghosts {
            let sum: &mut u64 = out.entry(g.class).or_default();
            *sum = sum.saturating_add(g.bytes);
        }
        out
    }
}

/// How [`ghosts_with`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct GhostOptions {
    /// A process in `D` is stuck when it is still there after this long (a second look).
    pub stuck_after: Duration,
    /// The longest the scan of descriptors may take.
    pub scan_deadline: Duration,
    /// A process holding memory is idle after this long without activity.
    pub idle_after: Duration,
}

impl Default for GhostOptions {
    fn default() -> Self {
        Self {
            stuck_after: Duration::from_secs(2),
            scan_deadline: Duration::from_secs(2),
            idle_after: Duration::from_secs(600),
        }
    }
}

impl GhostOptions {
    /// The options with another interval for the second look at a process in `D`.
    #[must_use]
    pub fn stuck_after(mut self, d: Duration) -> Self {
        self.stuck_after = d;
        self
    }

    /// The options with another time without activity after which a holder is idle.
    #[must_use]
    pub fn idle_after(mut self, d: Duration) -> Self {
        self.idle_after = d;
        self
    }
}

/// Each of `devices`' minor number, the `N` of its device node `/dev/nvidiaN`, as the NVIDIA
/// driver's `<procfs>/driver/nvidia/gpus/*/information` files give it (matched by UUID, else by
/// PCI bus id): `(index, minor)` for each device found there; empty where the files are not
/// (another vendor, no driver, not Linux).
#[must_use]
pub fn nvidia_device_minors(devices: &[GpuDeviceInfo]) -> Vec<(u32, u32)> {
    let Ok(procfs) = crate::host::roots::procfs() else {
        return Vec::new();
    };
    let gpus = holders::driver_gpus(procfs);
    devices
        .iter()
        .filter_map(|d| {
            let minor = holders::minor_of(&gpus, d.uuid.as_deref(), d.pci_bus_id.as_deref())?;
            Some((d.index, minor))
        })
        .collect()
}

/// The ghosts on every GPU, with [`GhostOptions::default`].
///
/// # Errors
///
/// As [`crate::device_count`] when no GPU source answers; a GPU whose figures or processes
/// fail is named in [`GhostReport::unseen`] instead.
pub fn ghosts() -> Result<GhostReport> {
    ghosts_with(GhostOptions::default())
}

/// The ghosts on every GPU (see the module docs), at one look: a process in `D` is looked at
/// again after [`GhostOptions::stuck_after`], and activity is what the driver's buffer of
/// samples holds.
///
/// # Errors
///
/// As [`ghosts`].
pub fn ghosts_with(options: GhostOptions) -> Result<GhostReport> {
    GhostWatch::new(options).look_once()
}

/// What a process row is, from procfs (before the holders are known).
enum Found {
    Exited,
    /// A pid no process here can have (the library's `NoSuchPid`).
    NoSuchPid,
    Zombie {
        live: Vec<u32>,
        ppid: u32,
    },
    MaybeStuck,
    Orphan {
        ppid: u32,
        leader: u32,
        of: &'static str,
    },
    GonePod(Vec<String>),
    Idle(Vec<String>),
}

/// What one look knows besides the rows.
pub(crate) struct Look<'a> {
    pub(crate) procfs: &'a Path,
    pub(crate) pods: pods::Pods<'a>,
    /// Each GPU's activity samples, by device index.
    pub(crate) activity: &'a BTreeMap<u32, idle::DeviceActivity>,
    pub(crate) now_us: u64,
    /// When each pid was first seen in `D` at earlier looks; `None` for a single look, which
    /// waits `stuck_after` and looks again.
    pub(crate) in_d: Option<&'a BTreeMap<u32, Instant>>,
    pub(crate) options: GhostOptions,
}

/// The classes of `devices`' rows, with the pids found in `D` at this look.
pub(crate) fn classify(
    look: &Look<'_>,
    devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
) -> (GhostReport, Vec<u32>) {
    let procfs = look.procfs;
    let mut report = GhostReport::default();
    let mut notes = BTreeSet::new();
    let found = find(look, devices, &mut report.unseen, &mut notes);
    let in_d: Vec<u32> = found
        .iter()
        .filter(|(_, f)| matches!(f, Found::MaybeStuck))
        .map(|(p, _)| p.pid)
        .collect();
    // A single look looks at those in D a second time: stuck only when still there, in D.
    if look.in_d.is_none() && !in_d.is_empty() {
        std::thread::sleep(look.options.stuck_after);
    }
    let unaccounted = unaccounted(devices);
    let needs_scan = !unaccounted.is_empty()
        || found
            .iter()
            .any(|(_, f)| matches!(f, Found::Exited | Found::NoSuchPid));
    let holders = if needs_scan {
        Holders::scan(procfs, devices, look.options.scan_deadline, &mut report)
    } else {
        Holders::default()
    };
    for (p, f) in found {
        let info = devices
            .iter()
            .map(|(i, _)| i)
            .find(|i| i.index == p.device_index);
        let held = info.and_then(|i| holders.of(i));
        if let Some(g) = ghost_of(look, p, f, held) {
            report.ghosts.push(g);
        }
    }
    for (info, bytes) in unaccounted {
        report
            .ghosts
            .push(unaccounted_ghost(info, bytes, holders.of(info)));
    }
    report.unseen.extend(notes);
    (report, in_d)
}

/// The rows that are ghosts, and what could not be looked at (each row's in `unseen`; what
/// holds for a whole GPU or node once, in `notes`).
fn find<'a>(
    look: &Look<'_>,
    devices: &'a [(GpuDeviceInfo, Vec<GpuProcessEntry>)],
    unseen: &mut Vec<String>,
    notes: &mut BTreeSet<String>,
) -> Vec<(&'a GpuProcessEntry, Found)> {
    let procfs = look.procfs;
    let mut found = Vec::new();
    let mut leaders = Leaders::default();
    for p in devices.iter().flat_map(|(_, procs)| procs) {
        match p.unreadable {
            Some(UnreadableReason::Exited) if !look::exists(procfs, p.pid) => {
                found.push((p, Found::Exited));
            }
            Some(UnreadableReason::NoSuchPid) => found.push((p, Found::NoSuchPid)),
            Some(why) => unseen.push(format!(
                "pid {} on GPU {} ({} MiB): {why}",
                p.pid,
                p.device_index,
                p.used_bytes >> 20
            )),
            None => {
                if let Some(f) =
                    look_at(procfs, p.pid, &mut leaders).or_else(|| alive(look, p, notes))
                {
                    found.push((p, f));
                }
            }
        }
    }
    found
}

/// A live row's class that its pod or its activity shows, if any.
fn alive(look: &Look<'_>, p: &GpuProcessEntry, notes: &mut BTreeSet<String>) -> Option<Found> {
    if let Some(evidence) = look.pods.gone(look.procfs, p.pid, notes) {
        return Some(Found::GonePod(evidence));
    }
    if p.used_bytes == 0 {
        return None;
    }
    let Some(activity) = look.activity.get(&p.device_index) else {
        notes.insert(format!(
            "GPU {}: whether its holders are idle is not known: its activity was not read",
            p.device_index
        ));
        return None;
    };
    let age = || look::age(look.procfs, p.pid);
    match activity.verdict(p.pid, age, look.options.idle_after, look.now_us) {
        idle::Verdict::Idle(evidence) => Some(Found::Idle(evidence)),
        idle::Verdict::Busy => None,
        idle::Verdict::Unknown(why) => {
            notes.insert(format!(
                "GPU {}: whether its holders are idle is not known: {why}",
                p.device_index
            ));
            None
        }
    }
}

/// Each device's allocated memory beyond its listed processes and the driver's allowance.
fn unaccounted(devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)]) -> Vec<(&GpuDeviceInfo, u64)> {
    devices
        .iter()
        .filter_map(|(info, procs)| {
            let beyond = info.unaccounted_bytes(procs)?;
            (beyond > 0).then_some((info, beyond))
        })
        .collect()
}

/// The device files' holders found by a scan, with the driver's GPUs and the listed pids.
#[derive(Default)]
struct Holders {
    held: BTreeMap<u32, BTreeSet<u32>>,
    minors: Vec<holders::DriverGpu>,
    listed: BTreeSet<u32>,
}

impl Holders {
    /// Scans the descriptors under `procfs`, noting in `report` how far it got.
    fn scan(
        procfs: &Path,
        devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
        deadline: Duration,
        report: &mut GhostReport,
    ) -> Self {
        let (held, stats) = holders::scan(procfs, Instant::now() + deadline);
        if !stats.complete {
            report.unseen.push(format!(
                "the scan of descriptors stopped at its {deadline:?} deadline after {} processes",
                stats.processes
            ));
        }
        if stats.unreadable > 0 {
            report.unseen.push(format!(
                "the descriptors of {} processes could not be read (another user's)",
                stats.unreadable
            ));
        }
        report.holder_scan = Some(stats);
        let listed = devices
            .iter()
            .flat_map(|(_, ps)| ps.iter().map(|p| p.pid))
            .collect();
        Self {
            held,
            minors: holders::driver_gpus(procfs),
            listed,
        }
    }

    /// `info`'s device file and the processes holding it that the driver does not list;
    /// `None` when the file is not known (no scan, or no driver information for the GPU).
    fn of(&self, info: &GpuDeviceInfo) -> Option<(String, Vec<u32>)> {
        let minor = holders::minor_of(
            &self.minors,
            info.uuid.as_deref(),
            info.pci_bus_id.as_deref(),
        )?;
        let pids = self
            .held
            .get(&minor)
            .map(|s| {
                s.iter()
                    .copied()
                    .filter(|p| !self.listed.contains(p))
                    .collect()
            })
            .unwrap_or_default();
        Some((format!("/dev/nvidia{minor}"), pids))
    }
}

/// The evidence line for a device file's unlisted holders, and the remedy they give.
fn holder_facts(held: Option<(String, Vec<u32>)>) -> (String, Vec<u32>, Remedy) {
    match held {
        Some((file, pids)) if !pids.is_empty() => (
            format!(
                "{file} is held by {} processes the driver does not list: {}",
                pids.len(),
                join(&pids)
            ),
            pids.clone(),
            Remedy::Kill { pids },
        ),
        Some((file, _)) => (
            format!("no process but those the driver lists holds {file}"),
            Vec::new(),
            Remedy::GpuReset,
        ),
        None => (
            "the GPU's device file is not known here (no driver information file)".into(),
            Vec::new(),
            Remedy::Unknown,
        ),
    }
}

/// The ghost a row found as `f` is; `None` for one in D that was not at the second look.
fn ghost_of(
    look: &Look<'_>,
    p: &GpuProcessEntry,
    f: Found,
    held: Option<(String, Vec<u32>)>,
) -> Option<Ghost> {
    let procfs = look.procfs;
    let (class, evidence, remedy, holders) = match f {
        Found::Exited => {
            let (line, holders, remedy) = holder_facts(held);
            let first = format!(
                "pid {} no longer exists, and this PID namespace is seen whole",
                p.pid
            );
            (GhostClass::Exited, vec![first, line], remedy, holders)
        }
        Found::NoSuchPid => {
            let (line, holders, remedy) = holder_facts(held);
            let first = format!(
                "the driver charges pid {}, which no process here can have (above pid_max, \
                 in the initial PID namespace)",
                p.pid
            );
            (GhostClass::Unaccounted, vec![first, line], remedy, holders)
        }
        Found::Zombie { live, ppid } if live.is_empty() => {
            let line = format!(
                "state Z (zombie), not reaped by its parent {ppid}{}",
                named(procfs, ppid)
            );
            let remedy = Remedy::Reap { parent: ppid };
            (GhostClass::Zombie, vec![line], remedy, Vec::new())
        }
        Found::Zombie { live, .. } => {
            let line = format!(
                "state Z (zombie) as thread-group leader, while {} of its threads still run: {}",
                live.len(),
                join(&live)
            );
            let remedy = Remedy::Kill { pids: vec![p.pid] };
            (GhostClass::Zombie, vec![line], remedy, Vec::new())
        }
        Found::MaybeStuck => stuck(look, p)?,
        Found::Orphan { ppid, leader, of } => {
            let evidence = vec![
                format!("the leader {leader} of its {of} is gone"),
                format!("its parent is now {ppid}{}", named(procfs, ppid)),
            ];
            let remedy = Remedy::Kill { pids: vec![p.pid] };
            (GhostClass::Orphan, evidence, remedy, Vec::new())
        }
        Found::GonePod(evidence) => {
            let remedy = Remedy::Kill { pids: vec![p.pid] };
            (GhostClass::GonePod, evidence, remedy, Vec::new())
        }
        Found::Idle(evidence) => {
            let remedy = Remedy::Kill { pids: vec![p.pid] };
            (GhostClass::Idle, evidence, remedy, Vec::new())
        }
    };
    Some(Ghost {
        class,
        device_index: p.device_index,
        pid: Some(p.pid),
        name: p.name.clone(),
        bytes: p.used_bytes,
        holders,
        evidence,
        remedy,
    })
}

/// A row's class, evidence, remedy and device-file holders.
type Classed = (GhostClass, Vec<String>, Remedy, Vec<u32>);

/// A row in `D` at the first look: stuck when the second look finds it there still.
fn stuck(look: &Look<'_>, p: &GpuProcessEntry) -> Option<Classed> {
    let procfs = look.procfs;
    let apart = match look.in_d {
        None if look::ids(procfs, p.pid).is_none_or(|s| s.state != 'D') => return None,
        None => look.options.stuck_after,
        Some(earlier) => {
            let since = earlier.get(&p.pid)?.elapsed();
            if since < look.options.stuck_after {
                return None;
            }
            since
        }
    };
    let mut evidence = vec![format!(
        "state D (uninterruptible sleep) at two looks {} apart",
        apart_text(apart)
    )];
    if let Some(w) = look::wchan(procfs, p.pid) {
        evidence.push(format!("waiting in {w}"));
    }
    Some((GhostClass::Stuck, evidence, Remedy::GpuReset, Vec::new()))
}

/// The ghost of memory on `info` that no listed process accounts for.
fn unaccounted_ghost(info: &GpuDeviceInfo, bytes: u64, held: Option<(String, Vec<u32>)>) -> Ghost {
    let first = format!(
        "{} MiB allocated beyond the listed processes' sum, more than the driver's allowance",
        bytes >> 20
    );
    let (line, holders, remedy) = holder_facts(held);
    Ghost {
        class: GhostClass::Unaccounted,
        device_index: info.index,
        pid: None,
        name: None,
        bytes,
        holders,
        evidence: vec![first, line],
        remedy,
    }
}

/// Whether each process group or session leader asked about in one look is there: the rows of
/// one job share their leaders, so each is looked up once a look, not once a row.
#[derive(Default)]
struct Leaders(BTreeMap<u32, bool>);

impl Leaders {
    fn exists(&mut self, procfs: &Path, pid: u32) -> bool {
        *self
            .0
            .entry(pid)
            .or_insert_with(|| look::exists(procfs, pid))
    }
}

/// A listed live process's class, from its `stat`; `None` when it is none of them or cannot
/// be read.
fn look_at(procfs: &Path, pid: u32, leaders: &mut Leaders) -> Option<Found> {
    let ids = look::ids(procfs, pid)?;
    match ids.state {
        'Z' | 'X' => {
            return Some(Found::Zombie {
                live: look::live_threads(procfs, pid).unwrap_or_default(),
                ppid: ids.ppid,
            });
        }
        'D' => return Some(Found::MaybeStuck),
        _ => {}
    }
    // A leader gone first (two directory lookups, what most processes stop at), then
    // reparented: to init, or to a subreaper in another session than its own.
    let mut gone = |leader: u32| leader != 0 && leader != pid && !leaders.exists(procfs, leader);
    let (leader, of) = if gone(ids.pgrp) {
        (ids.pgrp, "process group")
    } else if gone(ids.session) {
        (ids.session, "session")
    } else {
        return None;
    };
    let reparented = ids.ppid <= 1
        || look::ids(procfs, ids.ppid).is_some_and(|parent| parent.session != ids.session);
    reparented.then_some(Found::Orphan {
        ppid: ids.ppid,
        leader,
        of,
    })
}

/// A span between two looks: whole seconds and up as [`idle::shown`], less in milliseconds.
fn apart_text(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        idle::shown(idle::micros(d))
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// ` (name)` of `pid` where its name can be read.
fn named(procfs: &Path, pid: u32) -> String {
    crate::host::process::procfs::comm(procfs, pid).map_or_else(String::new, |n| format!(" ({n})"))
}

fn join(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
