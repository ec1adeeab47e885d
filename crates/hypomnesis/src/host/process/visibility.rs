//! Why a process a GPU source listed cannot be read through the procfs root in use: outside
//! this PID namespace, hidden by the mount's `hidepid`, exited since the list, or not readable.
//!
//! What decides it is read once per procfs root (Linux): the mount the root is on
//! (`/proc/self/mountinfo`) and its `hidepid` and `gid` options, whether they apply to this
//! process (its groups and `CAP_SYS_PTRACE`, from `<root>/self/status`), whether the root
//! numbers processes as this process's PID namespace does (`NSpid`), whether that namespace is
//! the initial one (whose numbers NVML reports), and `pid_max`. A pid the root does not show is
//! then asked about with `kill(pid, 0)`, which tells a live process from a gone one without
//! touching it.

use crate::{types::Hidepid, types::ProcfsMount, types::UnreadableReason};

/// The highest pid Linux gives (`PID_MAX_LIMIT` on 64-bit): the bound when `pid_max` cannot
/// be read.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const PID_MAX_LIMIT: u32 = 1 << 22;

/// What is known of this process's view through one procfs root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Facts {
    /// The mount the root is on; `None` when `mountinfo` cannot be read or has no such mount.
    pub mount: Option<ProcfsMount>,
    /// Whether the root numbers processes as this process's PID namespace does.
    pub same_numbers: Option<bool>,
    /// Whether this process runs in the initial PID namespace.
    pub initial: Option<bool>,
    /// The highest pid of this namespace (0: unknown, every pid taken as beyond it).
    pub pid_max: u32,
}

impl Facts {
    /// Whether the mount's `hidepid` may hide other users' processes from this process (on,
    /// and this process not known to be exempt).
    pub(crate) fn hiding(&self) -> bool {
        self.mount
            .as_ref()
            .is_some_and(|m| m.hidepid != Some(Hidepid::Off) && m.hides_other_users != Some(false))
    }

    /// Whether other users' directories are listed but their files refused (`noaccess`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux reads a procfs
    pub(crate) fn refuses_files(&self) -> bool {
        self.hiding()
            && self
                .mount
                .as_ref()
                .is_some_and(|m| m.hidepid == Some(Hidepid::NoAccess))
    }
}

/// The `NSpid:` values of a `status` file: the pid in each namespace, outermost (the procfs
/// mount's) first.
pub(crate) fn parse_nspid(status: &str) -> Option<Vec<u32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    let v: Option<Vec<u32>> = line.split_whitespace().map(|p| p.parse().ok()).collect();
    v.filter(|v| !v.is_empty())
}

/// How the root answered for a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// No such entry (`ENOENT`, what `hidepid=invisible` answers too).
    Missing,
    /// The entry is there, its files refused (`EACCES`, `hidepid=noaccess`).
    Denied,
}

impl Lookup {
    /// The lookup an I/O error means.
    pub(crate) fn of(e: &std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::PermissionDenied => Self::Denied,
            _ => Self::Missing,
        }
    }
}

/// Why `pid` is not readable, from `facts` and the `lookup`; `alive` says (`kill(pid, 0)`)
/// whether a process of this namespace has that number (`None`: cannot tell), and is asked
/// only when the root's numbers are this namespace's.
///
/// - refused: hidden when `hidepid` applies, else not readable;
/// - missing, beyond `pid_max` or numbered by another namespace: outside;
/// - missing, yet alive: hidden when `hidepid` applies, else not readable;
/// - missing and not alive: exited in the initial namespace (every process has a number there),
///   outside in another (the source's number may be the host's).
pub(crate) fn classify(
    facts: &Facts,
    pid: u32,
    lookup: Lookup,
    alive: impl FnOnce(u32) -> Option<bool>,
) -> UnreadableReason {
    let hidden_or_not_readable = || {
        if facts.hiding() {
            UnreadableReason::HiddenByHidepid
        } else {
            UnreadableReason::NotReadable
        }
    };
    if lookup == Lookup::Denied {
        return hidden_or_not_readable();
    }
    // In the initial PID namespace every process has a number up to pid_max: a larger one
    // is no process (there is no other namespace it could be of).
    if pid > facts.pid_max && facts.initial == Some(true) {
        return UnreadableReason::NoSuchPid;
    }
    if pid > facts.pid_max || facts.same_numbers != Some(true) {
        return UnreadableReason::OutsidePidNamespace;
    }
    match alive(pid) {
        Some(true) => hidden_or_not_readable(),
        _ if facts.initial == Some(true) => UnreadableReason::Exited,
        _ => UnreadableReason::OutsidePidNamespace,
    }
}

#[cfg(target_os = "linux")]
pub(crate) use linux::{alive, facts, shows_initial_namespace};

/// The mount of the procfs root in use and what its options mean for this process; `None`
/// where there is no procfs, or `mountinfo` cannot be read.
#[must_use]
pub fn procfs_mount() -> Option<ProcfsMount> {
    #[cfg(target_os = "linux")]
    {
        facts(crate::host::roots::procfs().ok()?).mount
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Whose numbers the pids a GPU driver reports are (see [`numbering`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Numbering {
    /// The initial PID namespace's, whoever asks (NVIDIA's drivers before 570.86.15).
    Host,
    /// The caller's own PID namespace's: the driver translates each client's pid into it and
    /// leaves out the clients it cannot see (from 570.86.15).
    Caller,
}

/// The first driver whose process lists number processes as the caller's PID namespace does:
/// NVIDIA's kernel modules (the resource manager's `gpu_rmapi.c` in the open modules' source,
/// which both module flavours build) convert each client's pid into the caller's
/// namespace from 570.86.15 and skip clients not visible there; at 515.43.04 the same code
/// returned host pids. The versions between were not read.
pub(crate) const CALLER_NUMBERING_FROM: (u32, u32, u32) = (570, 86, 15);

/// Whose numbers a driver of `version` (`590.48.01`) reports, and why, in words. An unknown or
/// unreadable version is taken as [`Numbering::Host`]: in a PID namespace of its own that makes
/// every listed pid outside, never blaming a local process that merely shares a number.
pub(crate) fn numbering(version: Option<&str>) -> (Numbering, String) {
    let parsed = parse_version(version);
    let (a, b, c) = CALLER_NUMBERING_FROM;
    match (parsed, version) {
        (Some(v), Some(text)) if v >= CALLER_NUMBERING_FROM => (
            Numbering::Caller,
            format!(
                "driver {text} reports pids in the caller's PID namespace (from {a}.{b}.{c}) and \
                 leaves out processes it cannot see"
            ),
        ),
        (Some(_), Some(text)) => (
            Numbering::Host,
            format!("driver {text} reports the host's pids (before {a}.{b}.{c})"),
        ),
        _ => (
            Numbering::Host,
            "the driver's version is not known: its pids are taken as the host's, so none is \
             matched to a process of another PID namespace"
                .into(),
        ),
    }
}

/// [`numbering`] without its sentence: what every placing of a reported pid asks (no text made).
pub(crate) fn numbering_of(version: Option<&str>) -> Numbering {
    match parse_version(version) {
        Some(v) if v >= CALLER_NUMBERING_FROM => Numbering::Caller,
        _ => Numbering::Host,
    }
}

/// A driver version `major.minor[.patch]` as numbers (missing parts 0); `None` when unknown or
/// not of that form.
fn parse_version(version: Option<&str>) -> Option<(u32, u32, u32)> {
    version.and_then(|v| {
        let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().ok());
        let major = parts.next()??;
        let minor = parts.next().unwrap_or(Some(0))?;
        let patch = parts.next().unwrap_or(Some(0))?;
        Some((major, minor, patch))
    })
}

/// Whose PID namespace numbers the pids a GPU driver reports, as this library takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverPidNumbering {
    /// `true`: the caller's own namespace's (NVIDIA's drivers from 570.86.15 translate each
    /// client's pid and leave out those the caller cannot see); `false`: the initial
    /// namespace's (older drivers, or a version not known).
    pub callers: bool,
    /// Why, in a sentence naming the driver's version.
    pub why: String,
}

/// Whose numbers the pids of a driver of `driver_version` (`590.48.01`, as
/// [`crate::GpuDeviceInfo::driver_version`] gives it) are, as the placing of GPU processes takes
/// them: in a PID namespace of its own with its own procfs, a caller that takes them as the
/// host's shows every listed pid as outside, one that takes them as its own places them among
/// its processes. An unknown version is taken as the host's, which never blames a local process
/// that merely shares a number.
#[must_use]
pub fn driver_pid_numbering(driver_version: Option<&str>) -> DriverPidNumbering {
    let (n, why) = numbering(driver_version);
    DriverPidNumbering {
        callers: n == Numbering::Caller,
        why,
    }
}

/// Whether this process runs in the initial PID namespace, whose numbers NVML reports (a
/// container's own PID namespace is not); `None` where that cannot be told (not Linux).
#[must_use]
pub fn in_initial_pid_namespace() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        facts(crate::host::roots::procfs().ok()?).initial
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use super::{Facts, PID_MAX_LIMIT};
    use crate::host::file::{MOUNTINFO, STATUS, read_capped};
    use crate::host::parse::mountinfo::{credentials, hides_other_users, mount_of, procfs_options};
    use crate::{types::Hidepid, types::ProcfsMount};

    /// The inode of the initial PID namespace (`PROC_PID_INIT_INO`), as `ns/pid` links name it.
    const INITIAL_PID_NS: &str = "pid:[4026531836]";

    /// The facts of `root`, read at its first use and kept (the roots are fixed once used).
    pub(crate) fn facts(root: &Path) -> Facts {
        static LAST: Mutex<Option<(PathBuf, Facts)>> = Mutex::new(None);
        let mut last = LAST
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((at, f)) = last.as_ref()
            && at == root
        {
            return f.clone();
        }
        let f = read(root);
        *last = Some((root.to_path_buf(), f.clone()));
        f
    }

    /// A file of `<root>/self`, else of this process's own `/proc/self`.
    fn own_file(root: &Path, name: &str, cap: u64) -> Option<String> {
        read_capped(&root.join("self").join(name), cap)
            .or_else(|_| read_capped(&Path::new("/proc/self").join(name), cap))
            .ok()
    }

    fn read(root: &Path) -> Facts {
        let status = read_capped(&root.join("self/status"), STATUS).ok();
        let creds = own_file(root, "status", STATUS)
            .as_deref()
            .and_then(credentials);
        let mount = std::fs::canonicalize(root).ok().and_then(|path| {
            let text = own_file(root, "mountinfo", MOUNTINFO)?;
            let m = mount_of(&text, &path.to_string_lossy())?;
            let (hidepid, gid, subset_pid) = if m.fs_type == "proc" {
                procfs_options(&m.options)
            } else {
                (Some(Hidepid::Off), None, false)
            };
            Some(ProcfsMount {
                mount_point: PathBuf::from(m.mount_point),
                fs_type: m.fs_type,
                options: m.options,
                hidepid,
                gid,
                subset_pid,
                hides_other_users: hides_other_users(hidepid, gid, creds.as_ref()),
            })
        });
        let ns = std::fs::read_link(root.join("self/ns/pid"))
            .or_else(|_| std::fs::read_link("/proc/self/ns/pid"))
            .ok();
        let pid_max = [
            root.join("sys/kernel/pid_max"),
            "/proc/sys/kernel/pid_max".into(),
        ]
        .iter()
        .find_map(|p| read_capped(p, 64).ok()?.trim().parse().ok())
        .unwrap_or(PID_MAX_LIMIT);
        Facts {
            mount,
            same_numbers: status
                .as_deref()
                .and_then(super::parse_nspid)
                .map(|v| v.len() == 1),
            initial: ns.map(|l| l.as_os_str() == INITIAL_PID_NS),
            pid_max,
        }
    }

    /// Whether `root` shows the initial PID namespace, where every process of the host has a
    /// number: its pid 1's `ns/pid` link (which only a privileged reader may read), else, for
    /// this process's own procfs, whether this process runs there; `None`: not known.
    pub(crate) fn shows_initial_namespace(root: &Path) -> Option<bool> {
        if let Ok(link) = std::fs::read_link(root.join("1/ns/pid")) {
            return Some(link.as_os_str() == INITIAL_PID_NS);
        }
        if root == Path::new("/proc") {
            return facts(root).initial;
        }
        None
    }

    /// Whether a process numbered `pid` in this PID namespace exists (`kill(pid, 0)`: done,
    /// or refused, means it does); `None` for a pid that is not one (0, above `i32::MAX`).
    pub(crate) fn alive(pid: u32) -> Option<bool> {
        crate::host::process::signal::exists(pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whose_numbers_a_driver_reports_by_its_version() {
        for (v, want) in [
            (Some("590.48.01"), Numbering::Caller),
            (Some("570.86.15"), Numbering::Caller),
            (Some("570.86.10"), Numbering::Host),
            (Some("570.124"), Numbering::Caller),
            (Some("565.57.01"), Numbering::Host),
            (Some("515.43.04"), Numbering::Host),
            (Some("610"), Numbering::Caller),
            (Some("5x0.1"), Numbering::Host),
            (Some(""), Numbering::Host),
            (None, Numbering::Host),
        ] {
            let (got, why) = numbering(v);
            assert_eq!(got, want, "{v:?}: {why}");
            assert_eq!(
                numbering_of(v),
                want,
                "{v:?}: the same without its sentence"
            );
            assert!(!why.is_empty());
        }
        assert!(
            numbering(Some("590.48.01"))
                .1
                .contains("caller's PID namespace")
        );
        assert!(numbering(None).1.contains("not known"));
    }

    fn facts(hidepid: Hidepid, hides: Option<bool>, initial: bool) -> Facts {
        Facts {
            mount: Some(ProcfsMount {
                mount_point: "/proc".into(),
                fs_type: "proc".into(),
                options: String::new(),
                hidepid: Some(hidepid),
                gid: None,
                subset_pid: false,
                hides_other_users: hides,
            }),
            same_numbers: Some(true),
            initial: Some(initial),
            pid_max: 32768,
        }
    }

    #[test]
    fn each_reason_from_the_mount_the_namespace_and_the_process() {
        use UnreadableReason::{
            Exited, HiddenByHidepid, NoSuchPid, NotReadable, OutsidePidNamespace,
        };
        let inv = facts(Hidepid::Invisible, Some(true), true);
        let live = |_| Some(true);
        let gone = |_| Some(false);
        assert_eq!(classify(&inv, 1, Lookup::Missing, live), HiddenByHidepid);
        assert_eq!(classify(&inv, 1, Lookup::Missing, gone), Exited);
        assert_eq!(classify(&inv, 1, Lookup::Denied, gone), HiddenByHidepid);
        // Beyond pid_max: no process of this namespace (`alive` is not asked); in the initial
        // one, no process at all.
        assert_eq!(
            classify(&inv, 40_000, Lookup::Missing, |_| unreachable!()),
            NoSuchPid
        );
        let child_ns = facts(Hidepid::Off, Some(false), false);
        assert_eq!(
            classify(&child_ns, 40_000, Lookup::Missing, |_| unreachable!()),
            OutsidePidNamespace
        );
        // Exempt (root, the gid group), or hidepid off: not hidden.
        for f in [
            facts(Hidepid::Invisible, Some(false), true),
            facts(Hidepid::Off, Some(false), true),
        ] {
            assert_eq!(classify(&f, 1, Lookup::Missing, live), NotReadable);
            assert_eq!(classify(&f, 1, Lookup::Denied, live), NotReadable);
            assert_eq!(classify(&f, 1, Lookup::Missing, gone), Exited);
        }
        // Unknown whether it applies: taken as applying.
        let unknown = facts(Hidepid::NoAccess, None, true);
        assert_eq!(classify(&unknown, 1, Lookup::Denied, live), HiddenByHidepid);
        assert!(unknown.refuses_files() && !inv.refuses_files());
        // In a child namespace, a number with no process here may be the host's.
        let child = facts(Hidepid::Invisible, Some(true), false);
        assert_eq!(
            classify(&child, 1, Lookup::Missing, gone),
            OutsidePidNamespace
        );
        assert_eq!(classify(&child, 1, Lookup::Missing, live), HiddenByHidepid);
        // A root numbered by another namespace (a host's procfs), or nothing known.
        let mut other = inv.clone();
        other.same_numbers = Some(false);
        assert_eq!(
            classify(&other, 1, Lookup::Missing, |_| unreachable!()),
            OutsidePidNamespace
        );
        assert_eq!(
            classify(&Facts::default(), 1, Lookup::Missing, live),
            OutsidePidNamespace
        );
        assert_eq!(
            classify(&Facts::default(), 1, Lookup::Denied, live),
            NotReadable
        );
    }

    #[test]
    fn nspid() {
        assert_eq!(
            parse_nspid("Name:\tpython\nNSpid:\t48213\t7\n"),
            Some(vec![48213, 7])
        );
        assert_eq!(parse_nspid("NSpid:\t1\n"), Some(vec![1]));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\tx\n"), None);
    }

    #[test]
    fn lookups_of_errors() {
        let e = |k| std::io::Error::from(k);
        assert_eq!(
            Lookup::of(&e(std::io::ErrorKind::PermissionDenied)),
            Lookup::Denied
        );
        assert_eq!(
            Lookup::of(&e(std::io::ErrorKind::NotFound)),
            Lookup::Missing
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_and_a_gone_one() {
        let me = std::process::id();
        assert_eq!(alive(me), Some(true));
        assert_eq!(alive(0), None);
        assert_eq!(alive(u32::MAX), None);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(alive(pid), Some(false), "reaped");
        let f = super::facts(std::path::Path::new("/proc"));
        assert_eq!(f.same_numbers, Some(true));
        assert!(f.pid_max >= 300, "{f:?}");
        let m = f.mount.expect("/proc is a mount");
        assert_eq!(m.fs_type, "proc");
    }
}
