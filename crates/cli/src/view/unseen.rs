//! Processes hmn cannot read, and memory no listed process accounts for: why, and what to do
//! (`hmn ps`, `hmn top`, `hmn doctor` say the same). A listed process may be outside this PID
//! namespace, hidden by the procfs mount's `hidepid`, exited since the list, or not readable;
//! memory of no listed process is held by processes the driver does not list here.

use hypomnesis::{GpuProcessEntry, ProcfsMount, UnreadableReason};

use super::format_size;

/// Memory of one GPU that no listed process accounts for, beyond the driver's own overhead:
/// held by processes the driver does not show to this caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    pub device_index: u32,
    pub device_name: Option<String>,
    pub device_vendor: Option<hypomnesis::GpuVendor>,
    pub bytes: u64,
    /// Whether the GPU runs MPS (its server or a client is listed): its clients, not another
    /// PID namespace, are then the likely holders.
    pub mps: bool,
    /// The procfs mount's `hidepid` option (`hidepid=invisible`) when it hides processes
    /// from hmn: the row names it.
    pub hidepid: Option<String>,
    /// What `hmn ps --why` found of this memory.
    pub why: super::ghosts::Why,
}

/// What hmn knows of why processes may be unseen here: the procfs mount's `hidepid` and the
/// PID namespace it runs in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Causes {
    /// What the procfs mount hides and how to see it, when its `hidepid` hides processes from
    /// hmn (see [`ProcfsMount::advice`]).
    pub hidepid: Option<String>,
    /// `hidepid=invisible`: the option, as a row names it.
    pub hidepid_option: Option<String>,
    /// Whether hmn runs in the initial PID namespace (no process is outside it).
    pub initial_pid_namespace: Option<bool>,
    /// Whether hmn runs as root (whose driver lists are every user's).
    pub root: Option<bool>,
}

impl Causes {
    /// The causes of a procfs `mount` (`None`: unknown) and a namespace.
    pub fn of(mount: Option<&ProcfsMount>, initial_pid_namespace: Option<bool>) -> Self {
        let hidepid = mount.and_then(ProcfsMount::advice);
        Self {
            hidepid_option: hidepid.as_ref().and(mount).map(|m| {
                m.hidepid
                    .map_or_else(|| "hidepid".into(), |h| format!("hidepid={h}"))
            }),
            hidepid,
            initial_pid_namespace,
            root: None,
        }
    }

    /// The causes on this host, as the library reads them.
    pub fn here() -> Self {
        Self {
            root: is_root(),
            ..Self::of(
                hypomnesis::procfs_mount().as_ref(),
                hypomnesis::in_initial_pid_namespace(),
            )
        }
    }
}

/// Whether this process runs as root (the owner of its own procfs directory is its effective
/// user); `None` where that cannot be read.
fn is_root() -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata("/proc/self").ok().map(|m| m.uid() == 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The mark of a row whose files cannot be read: `outside`, `hidden`, `exited`, `unreadable`.
pub fn mark(why: UnreadableReason) -> &'static str {
    match why {
        UnreadableReason::OutsidePidNamespace => "outside",
        UnreadableReason::HiddenByHidepid => "hidden",
        UnreadableReason::Exited => "exited",
        UnreadableReason::NoSuchPid => "no such pid",
        _ => "unreadable",
    }
}

/// The reason of a row: its typed reason, else `outside` for a row that only says that.
pub fn reason_of(e: &GpuProcessEntry) -> Option<UnreadableReason> {
    e.unreadable.or(e
        .outside_pid_namespace
        .then_some(UnreadableReason::OutsidePidNamespace))
}

/// The text of the `(not visible from here)` row: with the `hidepid` option when it hides
/// processes from hmn.
pub fn not_visible_cell(h: &Hidden) -> String {
    match &h.hidepid {
        Some(o) => format!("(not visible from here: {o})"),
        None => "(not visible from here)".into(),
    }
}

/// The lines on listed rows hmn cannot read, by reason, each with what to do; empty when
/// every row was read.
pub fn rows_line<'a>(
    rows: impl IntoIterator<Item = &'a GpuProcessEntry>,
    causes: &Causes,
) -> Vec<String> {
    let rows: Vec<&GpuProcessEntry> = rows.into_iter().collect();
    let count = |why| {
        rows.iter()
            .filter(|e| reason_of(e) == Some(why))
            .map(|e| e.pid)
            .collect::<std::collections::BTreeSet<u32>>()
            .len()
    };
    let n = |k: usize| {
        if k == 1 {
            "1 process is".to_string()
        } else {
            format!("{k} processes are")
        }
    };
    let mut out = Vec::new();
    let outside = count(UnreadableReason::OutsidePidNamespace);
    if outside > 0 {
        out.push(format!(
            "hmn: {} outside this PID namespace (memory counted; the pid is the driver's, owner \
             and command unknown): run hmn in the host's PID namespace, or give it the host's \
             /proc with --procfs.",
            n(outside)
        ));
    }
    let bogus = count(UnreadableReason::NoSuchPid);
    if bogus > 0 {
        out.push(format!(
            "hmn: {} listed with a pid no process here can have (above pid_max, and this is the \
             initial PID namespace): memory counted, the process unknown.",
            n(bogus)
        ));
    }
    let hidden = count(UnreadableReason::HiddenByHidepid);
    if hidden > 0 {
        out.push(format!(
            "hmn: {} hidden (memory counted; owner and command unknown): {}.",
            n(hidden),
            causes.hidepid.as_deref().unwrap_or(
                "the procfs mount's hidepid option hides other users' processes; run as root"
            )
        ));
    }
    let exited = count(UnreadableReason::Exited);
    if exited > 0 {
        out.push(format!(
            "hmn: {} gone: exited between the driver's list and the read of its files.",
            n(exited)
        ));
    }
    let unreadable = count(UnreadableReason::NotReadable);
    if unreadable > 0 {
        out.push(format!(
            "hmn: {} not readable here (permission): run as root to see owner and command.",
            n(unreadable)
        ));
    }
    out
}

/// Why memory is not visible from here and what to do, for the GPUs in `hidden`: MPS GPUs
/// first (their clients, not a PID namespace, are the likely holders), then the others.
pub fn hidden_line(hidden: &[Hidden], causes: &Causes) -> String {
    let (mps, other): (Vec<&Hidden>, Vec<&Hidden>) = hidden.iter().partition(|h| h.mps);
    let mut lines = Vec::new();
    if !mps.is_empty() {
        lines.push(hidden_mps_line(&mps));
    }
    if !other.is_empty() {
        lines.push(hidden_other_line(&other, causes));
    }
    lines.join("\n")
}

/// The total and the GPUs' indices, `0, 2`.
fn total_and_gpus(hidden: &[&Hidden]) -> (u64, String) {
    let total = hidden.iter().map(|h| h.bytes).fold(0, u64::saturating_add);
    let gpus: Vec<String> = hidden.iter().map(|h| h.device_index.to_string()).collect();
    (total, gpus.join(", "))
}

fn hidden_mps_line(hidden: &[&Hidden]) -> String {
    let (total, gpus) = total_and_gpus(hidden);
    format!(
        "hmn: {} on GPU {gpus} is held by no listed process. MPS runs there: the likely \
         holders are MPS clients the driver lists without a memory figure or not at all, not \
         another PID namespace; `hmn doctor` says whether this driver has the MPS client list.",
        format_size(total),
    )
}

/// The namespace advice, and before it the `hidepid` one when the mount hides processes from
/// hmn; in the initial PID namespace (where no process is outside) the namespace advice is
/// left out when `hidepid` explains the rest.
fn hidden_other_line(hidden: &[&Hidden], causes: &Causes) -> String {
    let (total, gpus) = total_and_gpus(hidden);
    let namespace = "the driver lists only the processes of this PID namespace (and, on some \
         systems, of this user). To see them, run hmn in the host's PID namespace (docker run \
         --pid=host, Kubernetes hostPID: true), with --procfs /host/proc where the container \
         mounts a /proc of its own.";
    let head = format!(
        "hmn: {} on GPU {gpus} is held by processes not visible from here:",
        format_size(total)
    );
    match (&causes.hidepid, causes.initial_pid_namespace) {
        (Some(h), Some(true)) => format!("{head} {h}."),
        (Some(h), _) => format!("{head} {h}. Besides, {namespace}"),
        // Already in the host's PID namespace, nothing hidden: no process is in another, so
        // "run with hostPID" would send the reader where it already is.
        (None, Some(true)) if causes.root == Some(true) => format!(
            "{head} none the driver lists, and this is the host's PID namespace, as root, with \
             nothing hidden: a context whose process has exited while another holds its \
             descriptors, or the driver's own. `hmn ghosts` looks for who holds the GPU's \
             device file."
        ),
        (None, Some(true)) => format!(
            "{head} this is the host's PID namespace, so none is in another: on some systems \
             the driver lists only this user's processes (run as root to see every one), or \
             no process holds it (`hmn ghosts` looks for who holds the GPU's device file)."
        ),
        (None, _) => format!("{head} {namespace}"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use hypomnesis::Hidepid;

    fn mount(hidepid: Hidepid, gid: Option<u32>, hides: Option<bool>) -> ProcfsMount {
        ProcfsMount::builder()
            .hidepid(Some(hidepid))
            .gid(gid)
            .hides_other_users(hides)
            .build()
    }

    #[test]
    fn the_advice_names_the_option_and_the_group() {
        let c = Causes::of(
            Some(&mount(Hidepid::Invisible, Some(27), Some(true))),
            Some(true),
        );
        assert_eq!(
            c.hidepid.as_deref(),
            Some(
                "/proc is mounted with hidepid=invisible: other users' processes are hidden; \
                 run as root or as a member of group 27"
            )
        );
        assert_eq!(c.hidepid_option.as_deref(), Some("hidepid=invisible"));
        let c = Causes::of(
            Some(&mount(Hidepid::Invisible, Some(27), Some(false))),
            Some(true),
        );
        assert_eq!((c.hidepid, c.hidepid_option), (None, None), "exempt");
        let c = Causes::of(Some(&mount(Hidepid::Off, None, Some(false))), None);
        assert_eq!(c.hidepid, None);
        let c = Causes::of(Some(&mount(Hidepid::NoAccess, None, None)), None);
        assert!(
            c.hidepid.as_deref().unwrap().contains(
                "hidepid=noaccess: other users' processes cannot be read; run as root or as a \
                 member of group 0 (the mount sets no gid=)"
            ),
            "{c:?}"
        );
        let c = Causes::of(Some(&mount(Hidepid::Ptraceable, Some(5), Some(true))), None);
        assert!(
            c.hidepid
                .as_deref()
                .unwrap()
                .ends_with("cannot ptrace are hidden; run as root"),
            "{c:?}"
        );
        assert_eq!(Causes::of(None, None), Causes::default());
    }

    fn row(pid: u32, why: Option<UnreadableReason>) -> GpuProcessEntry {
        GpuProcessEntry::builder()
            .pid(pid)
            .unreadable(why)
            .outside_pid_namespace(why == Some(UnreadableReason::OutsidePidNamespace))
            .build()
    }

    #[test]
    fn rows_are_counted_by_reason_once_per_pid() {
        let causes = Causes {
            hidepid: Some("/p is mounted with hidepid=invisible: x; run as root".into()),
            hidepid_option: Some("hidepid=invisible".into()),
            initial_pid_namespace: Some(true),
            root: Some(false),
        };
        let rows = [
            row(1, Some(UnreadableReason::HiddenByHidepid)),
            row(1, Some(UnreadableReason::HiddenByHidepid)),
            row(2, Some(UnreadableReason::HiddenByHidepid)),
            row(3, Some(UnreadableReason::Exited)),
            row(4, Some(UnreadableReason::OutsidePidNamespace)),
            row(5, None),
            row(6, Some(UnreadableReason::NotReadable)),
        ];
        let lines = rows_line(&rows, &causes);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert_eq!(
            lines[0],
            "hmn: 1 process is outside this PID namespace (memory counted; the pid is the \
             driver's, owner and command unknown): run hmn in the host's PID namespace, or give \
             it the host's /proc with --procfs."
        );
        assert_eq!(
            lines[1],
            "hmn: 2 processes are hidden (memory counted; owner and command unknown): /p is \
             mounted with hidepid=invisible: x; run as root."
        );
        assert!(
            lines[2].starts_with("hmn: 1 process is gone: exited"),
            "{lines:?}"
        );
        assert!(
            lines[3].starts_with("hmn: 1 process is not readable"),
            "{lines:?}"
        );
        assert!(rows_line(&rows[3..6], &Causes::default()).len() == 2);
        assert!(rows_line(&rows[4..6], &Causes::default()).len() == 1);
        assert_eq!(
            [
                UnreadableReason::OutsidePidNamespace,
                UnreadableReason::HiddenByHidepid,
                UnreadableReason::Exited,
                UnreadableReason::NotReadable
            ]
            .map(mark),
            ["outside", "hidden", "exited", "unreadable"]
        );
        // A row that says only `outside_pid_namespace` (built before the reason existed).
        let old = GpuProcessEntry::builder()
            .outside_pid_namespace(true)
            .build();
        assert_eq!(reason_of(&old), Some(UnreadableReason::OutsidePidNamespace));
    }

    #[test]
    fn memory_of_no_listed_process_names_hidepid_and_the_namespace() {
        let h = Hidden {
            device_index: 0,
            device_name: None,
            device_vendor: None,
            bytes: 1 << 30,
            mps: false,
            hidepid: Some("hidepid=invisible".into()),
            why: super::super::ghosts::Why::NotAsked,
        };
        assert_eq!(
            not_visible_cell(&h),
            "(not visible from here: hidepid=invisible)"
        );
        let mut causes = Causes {
            hidepid: Some("/proc is mounted with hidepid=invisible: y; run as root".into()),
            hidepid_option: Some("hidepid=invisible".into()),
            initial_pid_namespace: Some(true),
            root: Some(false),
        };
        assert_eq!(
            hidden_line(std::slice::from_ref(&h), &causes),
            "hmn: 1.0 GiB on GPU 0 is held by processes not visible from here: /proc is mounted \
             with hidepid=invisible: y; run as root."
        );
        causes.initial_pid_namespace = Some(false);
        let line = hidden_line(std::slice::from_ref(&h), &causes);
        assert!(
            line.contains("run as root. Besides, the driver lists only")
                && line.contains("--pid=host"),
            "{line}"
        );
        // In the host's PID namespace, nothing hidden: never "run with hostPID".
        causes.hidepid = None;
        causes.initial_pid_namespace = Some(true);
        for root in [Some(true), Some(false), None] {
            causes.root = root;
            let line = hidden_line(std::slice::from_ref(&h), &causes);
            assert!(
                line.contains("this is the host's PID namespace")
                    && line.contains("`hmn ghosts` looks for who holds")
                    && !line.contains("--pid=host")
                    && !line.contains("hostPID"),
                "{line}"
            );
            assert_eq!(line.contains("run as root"), root != Some(true), "{line}");
        }
        let line = hidden_line(&[h], &Causes::default());
        assert!(
            line.ends_with(
                "not visible from here: the driver lists only the processes of this \
                 PID namespace (and, on some systems, of this user). To see them, run hmn in the \
                 host's PID namespace (docker run --pid=host, Kubernetes hostPID: true), with \
                 --procfs /host/proc where the container mounts a /proc of its own."
            ),
            "{line}"
        );
    }
}
