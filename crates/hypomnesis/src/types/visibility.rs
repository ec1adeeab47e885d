//! Why a listed process's files cannot be read from here, and how the procfs root in use is
//! mounted (the `hidepid`, `gid` and `subset` options that decide which processes it shows).

use std::fmt;
use std::path::PathBuf;

/// Why the procfs files of a process a GPU source listed cannot be read from here. Its memory
/// is still counted; its owner, command line and resident set are unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum UnreadableReason {
    /// The process is not in this PID namespace (another container, or the caller's container
    /// does not share the host's pids): what [`crate::types::GpuProcessEntry::outside_pid_namespace`]
    /// says.
    OutsidePidNamespace,
    /// The process is in this PID namespace, but the procfs root in use is mounted with
    /// `hidepid` and hides other users' processes from this one (see [`ProcfsMount`]).
    HiddenByHidepid,
    /// The process exited between the source's list and the read of its files.
    Exited,
    /// The process is there but its files cannot be read for another reason (permission).
    NotReadable,
    /// No process here has, or can have, the source's number: it is above `pid_max` while
    /// this process runs in the initial PID namespace, where every process has a number (a
    /// driver's bogus row, or a list of another system's processes). Its memory is counted;
    /// the process is unknown.
    NoSuchPid,
}

impl UnreadableReason {
    /// A short stable name: `outside_pid_namespace`, `hidden_by_hidepid`, `exited`,
    /// `not_readable`, `no_such_pid` (what JSON, the exporter and Python say).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OutsidePidNamespace => "outside_pid_namespace",
            Self::HiddenByHidepid => "hidden_by_hidepid",
            Self::Exited => "exited",
            Self::NotReadable => "not_readable",
            Self::NoSuchPid => "no_such_pid",
        }
    }
}

impl fmt::Display for UnreadableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `hidepid` option of a procfs mount (`proc(5)`): which processes' `/proc/<pid>`
/// directories other users may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[non_exhaustive]
pub enum Hidepid {
    /// `hidepid=0` (`off`, the default): every process is visible and readable.
    Off,
    /// `hidepid=1` (`noaccess`): other users' directories are listed, their files unreadable.
    NoAccess,
    /// `hidepid=2` (`invisible`): other users' processes are not listed at all.
    Invisible,
    /// `hidepid=4` (`ptraceable`): only the processes the caller may ptrace are listed.
    Ptraceable,
}

impl Hidepid {
    /// The mode of a `hidepid=` value, by number or name (`2`, `invisible`); `None` for
    /// another value.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "0" | "off" => Self::Off,
            "1" | "noaccess" => Self::NoAccess,
            "2" | "invisible" => Self::Invisible,
            "4" | "ptraceable" => Self::Ptraceable,
            _ => return None,
        })
    }

    /// The name the kernel prints since 5.8: `off`, `noaccess`, `invisible`, `ptraceable`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::NoAccess => "noaccess",
            Self::Invisible => "invisible",
            Self::Ptraceable => "ptraceable",
        }
    }
}

impl fmt::Display for Hidepid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mount the procfs root in use is on, from `/proc/self/mountinfo` (Linux): its options
/// decide which processes it shows this one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProcfsMount {
    /// Where the mount is (the procfs root, or a directory above it).
    pub mount_point: PathBuf,
    /// Its filesystem type (`proc` for a procfs; a fixture tree is on another).
    pub fs_type: String,
    /// Its filesystem options as the kernel prints them (`rw,nosuid,hidepid=invisible,gid=27`).
    pub options: String,
    /// The `hidepid` mode: [`Hidepid::Off`] when the options set none; `None` when they set a
    /// value this version does not know.
    pub hidepid: Option<Hidepid>,
    /// The group exempt from `hidepid=noaccess|invisible` (`gid=`); `None` when the options set
    /// none (the kernel then exempts group 0).
    pub gid: Option<u32>,
    /// `subset=pid`: the mount shows the processes only, not `meminfo`, `sys` and the rest.
    pub subset_pid: bool,
    /// Whether `hidepid` hides other users' processes from this process: `Some(false)` when it
    /// is off, or this process is exempt (it has `CAP_SYS_PTRACE`, as root has, or is in the
    /// exempt group); `None` when that cannot be told.
    pub hides_other_users: Option<bool>,
}

impl ProcfsMount {
    /// The group whose members `hidepid` does not hide processes from: the `gid=` option, else
    /// 0 (the kernel's default); `None` under `hidepid=ptraceable`, which exempts no group.
    #[must_use]
    pub fn exempt_gid(&self) -> Option<u32> {
        match self.hidepid {
            Some(Hidepid::Ptraceable) => None,
            _ => Some(self.gid.unwrap_or(0)),
        }
    }

    /// What hides processes and what to do, for a user: `/proc is mounted with
    /// hidepid=invisible: other users' processes are hidden; run as root or as a member of group
    /// 27`. `None` when `hidepid` hides nothing from this process.
    #[must_use]
    pub fn advice(&self) -> Option<String> {
        if self.hides_other_users == Some(false) {
            return None;
        }
        let mode = match self.hidepid {
            Some(Hidepid::Off) => return None,
            Some(m) => format!("hidepid={m}"),
            None => "an unknown hidepid".to_string(),
        };
        let what = match self.hidepid {
            Some(Hidepid::NoAccess) => "other users' processes cannot be read",
            Some(Hidepid::Ptraceable) => "the processes this one cannot ptrace are hidden",
            _ => "other users' processes are hidden",
        };
        let fix = match (self.exempt_gid(), self.gid) {
            (None, _) => "run as root".to_string(),
            (Some(g), Some(_)) => format!("run as root or as a member of group {g}"),
            (Some(g), None) => {
                format!("run as root or as a member of group {g} (the mount sets no gid=)")
            }
        };
        Some(format!(
            "{} is mounted with {mode}: {what}; {fix}",
            self.mount_point.display()
        ))
    }
}
