//! Reading other processes' procfs entries (names, visibility), with an injectable root.
//!
//! The root comes from [`crate::host::roots`] (`HYPOMNESIS_PROCFS`, `hmn --procfs`).

// Which helpers a build uses depends on its features.
#![cfg_attr(
    not(all(feature = "nvml", feature = "nvidia-smi-fallback", feature = "drm")),
    allow(dead_code)
)]

use std::collections::HashMap;
use std::path::Path;

use super::leader::Leader;
use super::visibility::Lookup;
use super::visibility::{Numbering, numbering_of};
use crate::types::UnreadableReason;

/// The procfs root in use (see [`crate::host::roots`]).
pub(crate) fn root() -> crate::error::Result<&'static Path> {
    crate::host::roots::procfs()
}

/// The name of `pid` under `root`: its `comm`, and where the kernel cut that at 15 bytes
/// (`TASK_COMM_LEN` less its NUL), the whole name from the file name of its `exe` link, else
/// from `argv[0]` of its `cmdline`, when that name begins with the cut one (a name set by the
/// process that has nothing to do with its executable stays as it is). `None` when the pid is
/// not visible or `comm` is unreadable. One read into a stack buffer for most processes: this
/// is read for every GPU process.
pub(crate) fn comm(root: &Path, pid: u32) -> Option<String> {
    use std::io::Read;
    let mut buf = [0_u8; 256];
    let dir = root.join(pid.to_string());
    let path = dir.join("comm");
    let _waiting = crate::inflight::reading(&path);
    let mut file = std::fs::File::open(&path).ok()?;
    let n = file.read(&mut buf).ok()?;
    let raw = buf.get(..n)?;
    let cut = raw.strip_suffix(b"\n").unwrap_or(raw);
    if cut.is_empty() {
        return None;
    }
    if cut.len() == COMM_CUT {
        let exe = std::fs::read_link(dir.join("exe")).ok();
        let cmdline = head(&dir.join("cmdline"));
        let argv0 = cmdline.as_deref().and_then(|c| c.split(|&b| b == 0).next());
        let exe = exe.as_deref().map(|p| p.as_os_str().as_encoded_bytes());
        if let Some(whole) = whole_name(cut, exe, argv0) {
            return Some(String::from_utf8_lossy(whole).into_owned());
        }
    }
    Some(String::from_utf8_lossy(cut).into_owned())
}

/// The length a `comm` is cut at: `TASK_COMM_LEN` (16) less its NUL.
const COMM_CUT: usize = 15;

/// How much of `cmdline` is read for its `argv[0]`.
const CMDLINE_HEAD: u64 = 4 << 10;

/// The first [`CMDLINE_HEAD`] bytes of a file, whatever they are.
fn head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let _waiting = crate::inflight::reading(path);
    let mut out = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(CMDLINE_HEAD)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

/// The whole name of a process whose `comm` is `cut`: the file name of `exe` (its target, a
/// ` (deleted)` mark dropped), else of `argv0`, the first that begins with `cut` and is longer.
pub(crate) fn whole_name<'a>(
    cut: &[u8],
    exe: Option<&'a [u8]>,
    argv0: Option<&'a [u8]>,
) -> Option<&'a [u8]> {
    let file_name = |p: &'a [u8]| -> &'a [u8] {
        let p = p.strip_suffix(b" (deleted)").unwrap_or(p);
        p.rsplit(|&b| b == b'/').next().unwrap_or(p)
    };
    [exe, argv0]
        .into_iter()
        .flatten()
        .map(file_name)
        .find(|name| name.len() > cut.len() && name.starts_with(cut))
}

/// Whether `pid` has a directory under `root` (is visible in this PID namespace's view).
pub(crate) fn visible(root: &Path, pid: u32) -> bool {
    root.join(pid.to_string()).is_dir()
}

/// Whether the calling process holds the CUDA unified-memory device open (`/dev/nvidia-uvm`),
/// which every CUDA context does (so does NVML itself on some drivers: a `true` is a hint, not
/// proof). `None` when the fd table cannot be read. The fd table is scanned at most once a
/// second; once the device is open the answer stays `true`.
pub(crate) fn self_has_cuda_context(root: &Path) -> Option<bool> {
    use std::sync::Mutex;
    static LAST: Mutex<Remembered> = Mutex::new(Remembered { last: None });
    LAST.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .answer(std::time::Instant::now(), || scan_for_uvm(root))
}

/// How long an answer of the fd-table scan is reused.
const RESCAN: std::time::Duration = std::time::Duration::from_secs(1);

/// The last scan's answer and when it was made: a `true` for good, anything else for
/// [`RESCAN`].
struct Remembered {
    last: Option<(std::time::Instant, Option<bool>)>,
}

impl Remembered {
    fn answer(
        &mut self,
        now: std::time::Instant,
        scan: impl FnOnce() -> Option<bool>,
    ) -> Option<bool> {
        if let Some((at, answer)) = self.last
            && (answer == Some(true) || now.saturating_duration_since(at) < RESCAN)
        {
            return answer;
        }
        let answer = scan();
        self.last = Some((now, answer));
        answer
    }
}

fn scan_for_uvm(root: &Path) -> Option<bool> {
    let dir = std::fs::read_dir(root.join("self").join("fd")).ok()?;
    Some(dir.flatten().any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|t| {
            t.as_os_str()
                .as_encoded_bytes()
                .starts_with(b"/dev/nvidia-uvm")
        })
    }))
}

/// How a pid that a GPU source reported (NVML reports the host's pids) looks from the
/// caller's PID namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PidView {
    /// Visible here under the same number.
    Here(u32),
    /// Visible here as `local`, while the source reported `host`: the caller runs in a child
    /// PID namespace and reads the host's procfs.
    Mapped { local: u32, host: u32 },
    /// Not visible from the caller's namespace; the number is the source's.
    Outside(u32),
    /// In the caller's namespace as far as is known, but its files cannot be read, for the
    /// reason given (hidden by `hidepid`, exited, not readable; never outside).
    Unseen(u32, UnreadableReason),
}

impl PidView {
    /// The view of a pid that cannot be read, for `why`.
    pub(crate) fn unreadable(pid: u32, why: UnreadableReason) -> Self {
        match why {
            UnreadableReason::OutsidePidNamespace => Self::Outside(pid),
            _ => Self::Unseen(pid, why),
        }
    }

    /// The pid to show: the caller's number when it has one, else the source's.
    pub(crate) fn pid(self) -> u32 {
        match self {
            Self::Here(p)
            | Self::Outside(p)
            | Self::Unseen(p, _)
            | Self::Mapped { local: p, .. } => p,
        }
    }

    /// The source's (host) pid when it differs from the one shown.
    pub(crate) fn host_pid(self) -> Option<u32> {
        match self {
            Self::Mapped { host, .. } => Some(host),
            Self::Here(_) | Self::Outside(_) | Self::Unseen(..) => None,
        }
    }

    /// Whether the process is not visible from the caller's namespace.
    pub(crate) fn is_outside(self) -> bool {
        matches!(self, Self::Outside(_))
    }

    /// Why the process's files cannot be read; `None` when they can.
    pub(crate) fn reason(self) -> Option<UnreadableReason> {
        match self {
            Self::Outside(_) => Some(UnreadableReason::OutsidePidNamespace),
            Self::Unseen(_, why) => Some(why),
            Self::Here(_) | Self::Mapped { .. } => None,
        }
    }
}

fn ns_link(path: &Path) -> Option<std::ffi::OsString> {
    std::fs::read_link(path)
        .ok()
        .map(std::path::PathBuf::into_os_string)
}

/// Where `pid` (a number in `root`'s namespace) is from the caller's point of view. With the
/// caller's own `/proc`, visibility decides. With another procfs (a host's, mounted in a
/// container), `NSpid` and the `ns/pid` links map host pids to the caller's numbers. A pid that
/// cannot be read gets its reason (see [`super::visibility::classify`]).
pub(crate) fn view(root: &Path, pid: u32, root_is_own: bool) -> PidView {
    let dir = root.join(pid.to_string());
    if root_is_own {
        return own_by_dir(root, &dir, pid);
    }
    let status =
        match crate::host::file::read_capped(&dir.join("status"), crate::host::file::STATUS) {
            Ok(status) => status,
            Err(e) => return unseen(root, pid, Lookup::of(&e)),
        };
    if super::leader::of_status(&status, pid) == Leader::Thread {
        return not_a_process(pid);
    }
    let mine = ns_link(Path::new("/proc/self/ns/pid"));
    let theirs = ns_link(&dir.join("ns").join("pid"));
    match (mine, theirs) {
        (Some(m), Some(t)) if m == t => {
            match super::visibility::parse_nspid(&status).and_then(|v| v.last().copied()) {
                Some(local) if local == pid => PidView::Here(pid),
                Some(local) => PidView::Mapped { local, host: pid },
                None => PidView::Outside(pid),
            }
        }
        // Another namespace than ours. Its numbers in `root` are ours only when we share the
        // namespace of `root` itself (e.g. a pod with hostPID).
        (Some(m), Some(_)) => {
            if ns_link(&root.join("1").join("ns").join("pid")).is_some_and(|r| r == m) {
                PidView::Here(pid)
            } else {
                PidView::Outside(pid)
            }
        }
        // The links cannot be read: the relation is unknown, so the pid is shown as `root` has it.
        _ => PidView::Here(pid),
    }
}

/// Whether, in the caller's own procfs `root`, `kill(pid, 0)` tells what a `stat` of the pid's
/// directory would (a path walk; one a listed process at each refresh of a view): where the
/// mount's `hidepid` is known to be off (nothing hidden from this process) and the root
/// numbers processes as this process's PID namespace does.
fn numbers_tell(root: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        let facts = super::visibility::facts(root);
        facts
            .mount
            .as_ref()
            .is_some_and(|m| m.hidepid == Some(crate::types::Hidepid::Off))
            && facts.same_numbers == Some(true)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        false
    }
}

/// The view of a pid whose process has exited while its number is now a thread of another
/// process (or was taken by nothing between two reads): the process the source listed is gone.
fn not_a_process(pid: u32) -> PidView {
    PidView::Unseen(pid, UnreadableReason::Exited)
}

/// `Here`, when `pid` is a process (see [`super::leader`]); a thread's number or one gone
/// since is the exited process's.
fn here_if_process(root: &Path, pid: u32) -> Option<PidView> {
    match super::leader::of(root, pid) {
        Leader::Thread | Leader::Gone => Some(not_a_process(pid)),
        Leader::Process | Leader::Unknown => None,
    }
}

/// [`view`] in the caller's own procfs, from `pid`'s directory `dir`.
fn own_by_dir(root: &Path, dir: &Path, pid: u32) -> PidView {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            here_if_process(root, pid).unwrap_or_else(|| here_unless_refused(root, dir, pid))
        }
        Ok(_) => unseen(root, pid, Lookup::Missing),
        Err(e) => unseen(root, pid, Lookup::of(&e)),
    }
}

/// The view of a pid `root` does not show (`lookup`), with its reason.
fn unseen(root: &Path, pid: u32, lookup: Lookup) -> PidView {
    #[cfg(target_os = "linux")]
    let why = super::visibility::classify(
        &super::visibility::facts(root),
        pid,
        lookup,
        super::visibility::alive,
    );
    #[cfg(not(target_os = "linux"))]
    let why = {
        let _ = root;
        super::visibility::classify(&super::visibility::Facts::default(), pid, lookup, |_| None)
    };
    PidView::unreadable(pid, why)
}

/// `Here`, unless the mount's `hidepid=noaccess` lists the directory of another user's process
/// and refuses its files (its `comm` is tried, only under that option).
fn here_unless_refused(root: &Path, dir: &Path, pid: u32) -> PidView {
    #[cfg(target_os = "linux")]
    if super::visibility::facts(root).refuses_files()
        && let Err(e) = std::fs::File::open(dir.join("comm"))
        && Lookup::of(&e) == Lookup::Denied
    {
        return unseen(root, pid, Lookup::Denied);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (root, dir);
    PidView::Here(pid)
}

/// A pid in `root`'s own numbers (a DRM fdinfo sweep of it) placed in the caller's view.
pub(crate) fn place(root: &Path, pid: u32) -> PidView {
    view(root, pid, crate::host::roots::procfs_is_own())
}

/// How the pids a GPU driver reports meet the procfs root in use. Where the driver numbers
/// processes as the initial PID namespace does ([`Numbering::Host`]), a caller that reads its
/// own procfs from a PID namespace of its own (a container without the host's PID namespace)
/// cannot tell which local process, if any, a reported pid is: a local process with the same
/// number is another process, so every reported pid is outside. With the host's procfs
/// mounted (`--procfs`), `NSpid` maps them. Where the driver numbers them as the caller's
/// namespace does ([`Numbering::Caller`]), they are placed in the caller's own procfs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DriverPids {
    /// The caller's own procfs, in a PID namespace that is not the initial one, with a driver
    /// that reports the host's pids.
    foreign: bool,
    /// The procfs in use is the caller's own `/proc`.
    own: bool,
    /// A pid is placed by `kill(pid, 0)` (see [`numbers_tell`]), decided once per listing.
    by_number: bool,
}

impl DriverPids {
    /// The relation for the procfs root in use and a driver of `version`.
    pub(crate) fn of_driver(root: &Path, version: Option<&str>) -> Self {
        let own = crate::host::roots::procfs_is_own();
        let host_numbers = numbering_of(version) == Numbering::Host;
        #[cfg(target_os = "linux")]
        let foreign = own && host_numbers && super::visibility::facts(root).initial == Some(false);
        #[cfg(not(target_os = "linux"))]
        let foreign = {
            let _ = (root, host_numbers);
            false
        };
        let by_number = own && !foreign && numbers_tell(root);
        Self {
            foreign,
            own,
            by_number,
        }
    }

    /// Whether a reported pid can never be matched to a process here.
    pub(crate) fn foreign(self) -> bool {
        self.foreign
    }

    /// A reported pid placed in the caller's view.
    pub(crate) fn place(self, root: &Path, pid: u32) -> PidView {
        if self.foreign {
            return PidView::Outside(pid);
        }
        #[cfg(target_os = "linux")]
        if self.by_number {
            match super::visibility::alive(pid) {
                // `kill` answers for a thread's number too: whether it is a process is asked.
                Some(true) => return here_if_process(root, pid).unwrap_or(PidView::Here(pid)),
                Some(false) => return unseen(root, pid, Lookup::Missing),
                // Not a single process's number, or kill cannot tell: the directory decides.
                None => {}
            }
        }
        place(root, pid)
    }

    /// The placing of a whole list of reported pids: where a pid is placed by its number,
    /// whether each is running is asked at once (pidfds kept open, one `poll` a list), and
    /// `kill` answers for the rest (not kept, exited, or no pidfds on this system).
    pub(crate) fn placing(self, pids: &[u32]) -> Placing {
        #[cfg(target_os = "linux")]
        let running = if self.by_number {
            super::pidfd::running(pids)
        } else {
            HashMap::new()
        };
        #[cfg(not(target_os = "linux"))]
        let running = {
            let _ = pids;
            HashMap::new()
        };
        Placing {
            driver: self,
            running,
        }
    }

    /// [`place_named`] for a reported pid.
    pub(crate) fn place_named(self, root: &Path, pid: u32) -> (PidView, Option<String>) {
        if self.foreign {
            return (PidView::Outside(pid), None);
        }
        place_named(root, pid)
    }

    /// Whether a process outside the caller's namespace may be named from `root` under the
    /// reported number: only from a host's procfs, where that number is the process's.
    pub(crate) fn names_outside(self) -> bool {
        !self.own
    }
}

/// [`DriverPids::place`] for the pids of one list, with their liveness asked at once (see
/// [`DriverPids::placing`]).
pub(crate) struct Placing {
    driver: DriverPids,
    /// Pids known to be running (only where pids are placed by number).
    running: HashMap<u32, bool>,
}

impl Placing {
    /// A reported pid of the list placed in the caller's view.
    pub(crate) fn place(&self, root: &Path, pid: u32) -> PidView {
        // Only where pids are placed by number (so not foreign), as `kill` saying so would.
        if self.running.get(&pid) == Some(&true) {
            return PidView::Here(pid);
        }
        self.driver.place(root, pid)
    }
}

/// [`place`] and the name together, for the rows of a process list. With the caller's own
/// procfs a readable `comm` proves the pid visible, which saves the `stat` of its directory
/// (one system call per process of a 1,000-process list); the name is `None` when it was
/// not read here (the caller names the process as it would after `place`).
pub(crate) fn place_named(root: &Path, pid: u32) -> (PidView, Option<String>) {
    if crate::host::roots::procfs_is_own()
        && let Some(name) = comm(root, pid)
    {
        // A thread's `comm` reads as well as a process's.
        if let Some(view) = here_if_process(root, pid) {
            return (view, None);
        }
        return (PidView::Here(pid), Some(name));
    }
    (place(root, pid), None)
}

/// A process name from a path or a name: the final path component (NVML and `nvidia-smi`
/// sometimes give full paths, `/proc/<pid>/comm` gives a short name).
pub(crate) fn short_name(s: &str) -> &str {
    let trimmed = s.trim();
    trimmed
        .rsplit(['/', '\\'])
        .next()
        .filter(|b| !b.is_empty())
        .unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The caller's own procfs placed by `kill` where that tells (numbers), and by the
    /// directory (dirs).
    #[cfg(target_os = "linux")]
    fn own_placings(root: &Path) -> (DriverPids, DriverPids) {
        let numbers = DriverPids {
            foreign: false,
            own: true,
            by_number: numbers_tell(root),
        };
        let dirs = DriverPids {
            by_number: false,
            ..numbers
        };
        (numbers, dirs)
    }

    /// Where `kill(pid, 0)` tells (no hidepid, this namespace's numbers), it tells what the
    /// directory does: a live process, this one, one reaped, a number no process has; and so
    /// do the kept pidfds of a list placed at once.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_number_and_the_directory_agree() {
        let root = Path::new("/proc");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let live = child.id();
        let mut reaped = std::process::Command::new("true").spawn().unwrap();
        let gone = reaped.id();
        reaped.wait().unwrap();
        let (numbers, dirs) = own_placings(root);
        let pids = [std::process::id(), live, gone, 0, u32::MAX];
        let placing = numbers.placing(&pids);
        for pid in pids {
            let by_dir = own_by_dir(root, &root.join(pid.to_string()), pid);
            assert_eq!(dirs.place(root, pid), by_dir, "pid {pid}");
            assert_eq!(numbers.place(root, pid), by_dir, "pid {pid}");
            assert_eq!(placing.place(root, pid), by_dir, "pid {pid}");
            if numbers.by_number && pid != 0 && pid != u32::MAX {
                let alive = super::super::visibility::alive(pid);
                assert_eq!(alive, Some(matches!(by_dir, PidView::Here(_))), "pid {pid}");
            }
        }
        // Numbers that name no single process are never asked of kill.
        assert_eq!(super::super::visibility::alive(0), None);
        assert_eq!(super::super::visibility::alive(u32::MAX), None);
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// The number of a thread of this process (what a driver still charging an exited
    /// process's pid may name once the number is reused): its `/proc/<tid>` opens and `kill`
    /// answers for it, yet every way of placing it says the process it named has exited.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_threads_number_is_placed_as_an_exited_process() {
        let thread = super::super::leader::Thread::start();
        let tid = thread.tid;
        let root = Path::new("/proc");
        let exited = PidView::Unseen(tid, UnreadableReason::Exited);
        let (numbers, dirs) = own_placings(root);
        assert_eq!(own_by_dir(root, &root.join(tid.to_string()), tid), exited);
        assert_eq!(dirs.place(root, tid), exited);
        assert_eq!(numbers.place(root, tid), exited);
        assert_eq!(numbers.placing(&[tid]).place(root, tid), exited);
        if crate::host::roots::procfs_is_own() {
            assert_eq!(place_named(root, tid), (exited, None));
        }
        // Through a procfs read as another's (a host's mounted in a container): its status.
        assert_eq!(view(root, tid, false), exited);
        drop(thread);
    }

    #[test]
    fn a_cut_name_is_made_whole_from_the_executable_or_argv0() {
        let cut = b"Trainer-Worker-";
        let exe: &[u8] = b"/opt/bin/Trainer-Worker-Number-Seven";
        assert_eq!(
            whole_name(cut, Some(exe), None),
            Some(&b"Trainer-Worker-Number-Seven"[..])
        );
        // A deleted executable keeps its name; argv[0] is the second choice.
        assert_eq!(
            whole_name(cut, Some(b"/x/Trainer-Worker-Number-Seven (deleted)"), None),
            Some(&b"Trainer-Worker-Number-Seven"[..])
        );
        assert_eq!(
            whole_name(
                cut,
                Some(b"/usr/bin/python3.11"),
                Some(b"./Trainer-Worker-Eight")
            ),
            Some(&b"Trainer-Worker-Eight"[..])
        );
        // A name that does not begin with the cut one is not the process's: keep comm.
        assert_eq!(
            whole_name(cut, Some(b"/usr/bin/python3.11"), Some(b"python3")),
            None
        );
        assert_eq!(whole_name(cut, None, None), None);
        assert_eq!(whole_name(cut, Some(b"/bin/Trainer-Worker-"), None), None);
        // Bytes, not characters: a name cut inside a UTF-8 character still matches.
        let name = "Übungs-Arbeiter-7".as_bytes();
        assert_eq!(whole_name(&name[..15], Some(name), None), Some(name));
    }

    #[cfg(unix)]
    #[test]
    fn a_cut_comm_on_a_fixture_root_is_made_whole() {
        let dir = std::env::temp_dir().join(format!("hmn-procfs-cut-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("7")).unwrap();
        std::fs::write(dir.join("7/comm"), "Trainer-Worker-\n").unwrap();
        std::fs::write(
            dir.join("7/cmdline"),
            "/w/Trainer-Worker-Number-Seven\0--rank\x000\0",
        )
        .unwrap();
        assert_eq!(
            comm(&dir, 7).as_deref(),
            Some("Trainer-Worker-Number-Seven")
        );
        std::os::unix::fs::symlink("/opt/Trainer-Worker-Number-Six", dir.join("7/exe")).unwrap();
        assert_eq!(comm(&dir, 7).as_deref(), Some("Trainer-Worker-Number-Six"));
        std::fs::write(dir.join("7/comm"), "short\n").unwrap();
        assert_eq!(
            comm(&dir, 7).as_deref(),
            Some("short"),
            "an uncut name is comm"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn comm_and_visibility_on_a_fixture_root() {
        let dir = std::env::temp_dir().join(format!("hmn-procfs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        std::fs::write(dir.join("42/comm"), "python3\n").unwrap();
        std::fs::create_dir_all(dir.join("43")).unwrap();
        std::fs::create_dir_all(dir.join("self/fd")).unwrap();
        assert_eq!(comm(&dir, 42).as_deref(), Some("python3"));
        assert_eq!(comm(&dir, 43), None);
        assert_eq!(comm(&dir, 44), None);
        assert!(visible(&dir, 43));
        assert!(!visible(&dir, 44));
        assert_eq!(scan_for_uvm(&dir), Some(false));
        std::os::unix::fs::symlink("/dev/nvidia-uvm", dir.join("self/fd/5")).unwrap();
        assert_eq!(scan_for_uvm(&dir), Some(true));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(scan_for_uvm(&dir), None);
    }

    #[test]
    fn an_fd_scan_is_reused_for_a_second_and_a_context_for_good() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut r = Remembered { last: None };
        let mut scans = 0;
        let mut ask = |r: &mut Remembered, ms: u64, found: Option<bool>| {
            r.answer(at(ms), || {
                scans += 1;
                found
            })
        };
        assert_eq!(ask(&mut r, 0, Some(false)), Some(false));
        assert_eq!(
            ask(&mut r, 999, Some(true)),
            Some(false),
            "reused within a second"
        );
        assert_eq!(ask(&mut r, 1000, None), None, "scanned again at a second");
        assert_eq!(
            ask(&mut r, 1500, Some(true)),
            None,
            "an unknown is reused too"
        );
        assert_eq!(ask(&mut r, 2000, Some(true)), Some(true));
        assert_eq!(
            ask(&mut r, 60_000, Some(false)),
            Some(true),
            "a context stays known"
        );
        assert_eq!(scans, 3);
    }

    #[cfg(unix)]
    #[test]
    fn views_through_a_host_procfs() {
        let root = std::env::temp_dir().join(format!("hmn-nspid-{}", std::process::id()));
        let own_ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
        // 48213 is in our namespace as pid 7; 50000 is in another container; 1 is host init.
        std::fs::create_dir_all(root.join("48213/ns")).unwrap();
        std::fs::write(root.join("48213/status"), "NSpid:\t48213\t7\n").unwrap();
        std::os::unix::fs::symlink(&own_ns, root.join("48213/ns/pid")).unwrap();
        std::fs::create_dir_all(root.join("50000/ns")).unwrap();
        std::fs::write(root.join("50000/status"), "NSpid:\t50000\t3\n").unwrap();
        std::os::unix::fs::symlink("pid:[4026539999]", root.join("50000/ns/pid")).unwrap();
        std::fs::create_dir_all(root.join("1/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026530001]", root.join("1/ns/pid")).unwrap();
        let mapped = view(&root, 48213, false);
        assert_eq!(
            mapped,
            PidView::Mapped {
                local: 7,
                host: 48213
            }
        );
        assert_eq!(
            (mapped.pid(), mapped.host_pid(), mapped.is_outside()),
            (7, Some(48213), false)
        );
        // Visible under the same number through a procfs of our own namespace.
        std::fs::create_dir_all(root.join("4242/ns")).unwrap();
        std::fs::write(root.join("4242/status"), "NSpid:\t4242\n").unwrap();
        std::os::unix::fs::symlink(&own_ns, root.join("4242/ns/pid")).unwrap();
        assert_eq!(view(&root, 4242, false), PidView::Here(4242));
        let outside = view(&root, 50000, false);
        assert_eq!(outside, PidView::Outside(50000));
        assert_eq!(
            (outside.pid(), outside.host_pid(), outside.is_outside()),
            (50000, None, true)
        );
        // Beyond pid_max: outside, or no process at all when the root's namespace is the
        // initial one (as a host's procfs read from the host's namespace is).
        #[cfg(target_os = "linux")]
        let initial = super::super::visibility::facts(&root).initial;
        #[cfg(not(target_os = "linux"))]
        let initial: Option<bool> = None;
        let beyond = if initial == Some(true) {
            PidView::Unseen(60000, crate::types::UnreadableReason::NoSuchPid)
        } else {
            PidView::Outside(60000)
        };
        assert_eq!(view(&root, 60000, false), beyond);
        let me = std::process::id();
        let here = view(Path::new("/proc"), me, true);
        assert_eq!(here, PidView::Here(me));
        assert_eq!(
            (here.pid(), here.host_pid(), here.is_outside()),
            (me, None, false)
        );
        let beyond = if crate::host::process::visibility::in_initial_pid_namespace() == Some(true) {
            PidView::Unseen(4_194_400, crate::types::UnreadableReason::NoSuchPid)
        } else {
            PidView::Outside(4_194_400)
        };
        assert_eq!(view(Path::new("/proc"), 4_194_400, true), beyond);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn short_names() {
        assert_eq!(short_name("/usr/bin/kwin_wayland"), "kwin_wayland");
        assert_eq!(short_name(r"C:\Windows\explorer.exe"), "explorer.exe");
        assert_eq!(short_name("ffmpeg"), "ffmpeg");
        assert_eq!(short_name("/"), "/");
    }
}
