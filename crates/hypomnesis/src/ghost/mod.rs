//! Ghosts: GPU memory still held after the work that allocated it is over, sorted into the
//! class the evidence shows, with who really holds it and what would free it. What frees it is
//! decided in one place, [`rule`](self) (`rule.rs`): a kill or a GPU reset only from positive
//! evidence read on this host, shown in [`Ghost::evidence`]; otherwise [`Remedy::Unknown`],
//! saying what was not seen.
//!
//! Each class is given only from what was read:
//!
//! - [`GhostClass::Exited`]: the driver charges a pid whose process no longer exists (the
//!   number is free, or now a thread of another process), in a PID namespace this process
//!   sees whole; the holders of that GPU's device file are judged as its suspects;
//! - [`GhostClass::Zombie`]: a thread-group leader in state `Z` that its parent has not reaped
//!   (the parent is named), or whose other threads still run and are idle by the driver's
//!   samples (busy, or not known, it is a [`GhostFact`] on its row, not a ghost);
//! - [`GhostClass::Stuck`]: continuously in uninterruptible sleep (`D`, its context switches
//!   unchanged) for [`GhostOptions::stuck_after`], with where it waits: a GPU reset only for a
//!   wait in the NVIDIA driver;
//! - [`GhostClass::Orphan`]: not the leader of its process group or session, whose leader is
//!   gone, reparented, and idle by the driver's samples (a data-loader worker whose trainer
//!   ended); a busy one (a `nohup` job after logout) is a [`GhostFact`];
//! - [`GhostClass::GonePod`]: in a Kubernetes pod the node no longer has (see `pods.rs`: never
//!   a pod the kubelet's live list names);
//! - [`GhostClass::Idle`]: alive, holding memory, and no activity in the driver's
//!   per-process samples for [`GhostOptions::idle_after`] (where the samples cannot be read or
//!   cover less, the report says it is not known);
//! - [`GhostClass::Unaccounted`]: allocated memory that no listed process accounts for beyond
//!   the driver's own allowance, memory the driver charges to a pid no process here can have,
//!   or to a pid here whose process holds no descriptor of that GPU (its number reused, or the
//!   driver numbering another PID namespace's processes).
//!
//! Device-file holders are told by the device number of each descriptor's file (`holders.rs`),
//! and the scan of every process says whether it saw everything; a caller that looks again and
//! again keeps a [`GhostWatch`], which scans in the background and follows activity and
//! uninterruptible sleep between its looks.
//!
//! Linux only: elsewhere [`ghosts`] finds the GPUs' rows and says that it cannot look.

mod classify;
#[cfg(target_os = "linux")]
mod fdstat;
mod holders;
mod idle;
mod look;
mod pods;
mod rule;
mod scanner;
mod stuck;
mod suspects;
mod watch;

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

pub use holders::HolderScan;
pub use watch::GhostWatch;

use crate::error::Result;
use crate::types::GpuDeviceInfo;

/// Why memory is held that should not be (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum GhostClass {
    /// The driver charges a pid whose process no longer exists.
    Exited,
    /// A zombie its parent has not reaped, or an idle zombie leader whose threads run.
    Zombie,
    /// Continuously in uninterruptible sleep for the options' `stuck_after`.
    Stuck,
    /// Idle, and reparented after its group's or session's leader ended.
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
    /// Nothing a signal reaches holds it: only a GPU reset (or a reboot) frees it. A reset
    /// also ends every other process on that GPU (the evidence names them).
    GpuReset,
    /// What frees it cannot be told from what was read here, and why.
    Unknown {
        /// What was not seen or does not settle it.
        why: String,
    },
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
            Self::Unknown { why } => write!(f, "unknown: {why}"),
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
    /// Processes holding this GPU's device file that may hold this memory (for memory whose
    /// charged process is not here): never hmn itself, nor a client without a context.
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
            remedy: Remedy::Unknown {
                why: "no evidence was given".into(),
            },
        }
    }
}

/// A fact about a listed process that is not proof its memory is abandoned: structure (an
/// orphan whose group's or session's leader is gone, a zombie leader whose threads run) of a
/// process at work, or whose activity is not known. Shown on its row; never a remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GhostFact {
    /// The class it would be, were it idle.
    pub class: GhostClass,
    /// The GPU it holds memory on.
    pub device_index: u32,
    /// The process.
    pub pid: u32,
    /// What was read, one fact a line, the last saying why it is no ghost.
    pub evidence: Vec<String>,
}

impl GhostFact {
    /// A fact given whole (a view's tests, one found elsewhere).
    #[must_use]
    pub fn new(class: GhostClass, device_index: u32, pid: u32, evidence: Vec<String>) -> Self {
        Self {
            class,
            device_index,
            pid,
            evidence,
        }
    }
}

/// Every ghost found, with what could not be looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GhostReport {
    /// The ghosts, by GPU row order, then the memory no process accounts for.
    pub ghosts: Vec<Ghost>,
    /// What could not be seen or read, and why (a GPU whose figures failed, a process in
    /// another PID namespace, a scan cut by its deadline), each with its kind (`NoPermission`
    /// for a process hidden by `hidepid`, the GPU's error's kind, …). In JSON, the messages.
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::error::messages_only")
    )]
    pub unseen: Vec<crate::error::Failure>,
    /// The scan of descriptors, when there was something it could explain.
    pub holder_scan: Option<HolderScan>,
    /// Facts about listed processes that are not ghosts (see [`GhostFact`]).
    pub facts: Vec<GhostFact>,
    /// Whether every listed GPU process was looked at: every GPU's list read, and no row
    /// hidden, outside this PID namespace or unreadable. `hmn ghosts` says "no ghosts" only
    /// then.
    pub complete: bool,
}

impl Default for GhostReport {
    /// Nothing found, and nothing looked at yet.
    fn default() -> Self {
        Self {
            ghosts: Vec::new(),
            unseen: Vec::new(),
            holder_scan: None,
            facts: Vec::new(),
            complete: false,
        }
    }
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
    /// A process in `D` is stuck when it stays there, without a context switch, this long.
    pub stuck_after: Duration,
    /// The longest the scan of descriptors may take (a scan cut short proves no absence).
    pub scan_deadline: Duration,
    /// A process holding memory is idle after this long without activity.
    pub idle_after: Duration,
}

impl Default for GhostOptions {
    fn default() -> Self {
        Self {
            stuck_after: Duration::from_secs(2),
            scan_deadline: Duration::from_secs(60),
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

    /// The options with another bound on the scan of descriptors.
    #[must_use]
    pub fn scan_deadline(mut self, d: Duration) -> Self {
        self.scan_deadline = d;
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
/// PCI bus id), else as NVML does (`nvmlDeviceGetMinorNumber`): `(index, minor)` for each
/// device either gives; empty where neither does (another vendor, no driver, not Linux).
#[must_use]
pub fn nvidia_device_minors(devices: &[GpuDeviceInfo]) -> Vec<(u32, u32)> {
    let gpus = crate::host::roots::procfs()
        .map(holders::driver_gpus)
        .unwrap_or_default();
    devices
        .iter()
        .filter_map(|d| {
            let minor = holders::minor_of(&gpus, d.uuid.as_deref(), d.pci_bus_id.as_deref())
                .or_else(|| crate::gpu::device_minor(d.index))?;
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

#[cfg(all(test, target_os = "linux"))]
mod tests;
#[cfg(all(test, target_os = "linux"))]
mod tests_edges;
#[cfg(all(test, target_os = "linux"))]
mod tests_watch;
