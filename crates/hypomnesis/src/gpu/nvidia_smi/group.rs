//! The foreign calls of the `nvidia-smi` runner on Unix: waiting for pipes (`poll`), killing
//! a run's whole process group, and making sure no group outlives this process (`atexit`).
#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::{Mutex, OnceLock, PoisonError, TryLockError};
use std::time::Duration;

/// The process groups of runs in progress, and whether this process is on its way out.
static GROUPS: Mutex<Groups> = Mutex::new(Groups::new());

/// How long the exit handler waits for a run being started (the list is locked only to start
/// a run or to change the list).
const EXIT_WAIT: Duration = Duration::from_millis(500);

struct Groups {
    running: Vec<libc::pid_t>,
    exiting: bool,
}

impl Groups {
    const fn new() -> Self {
        Self {
            running: Vec::new(),
            exiting: false,
        }
    }

    /// Starts `cmd` in a process group of its own and remembers the group; on the way out,
    /// starts nothing (a caller that waited for a killed run would otherwise start one that
    /// outlives this process).
    fn spawn(&mut self, cmd: &mut Command) -> std::io::Result<Child> {
        if self.exiting {
            return Err(std::io::Error::other(
                "not started: this process is exiting",
            ));
        }
        let child = cmd.process_group(0).spawn()?;
        if let Ok(pgid) = libc::pid_t::try_from(child.id()) {
            self.running.push(pgid);
        }
        Ok(child)
    }

    fn forget(&mut self, pgid: u32) {
        if let Ok(pgid) = libc::pid_t::try_from(pgid) {
            self.running.retain(|&p| p != pgid);
        }
    }

    /// The way out: each group still running is killed, and no run starts after.
    fn exit(&mut self) {
        self.exiting = true;
        kill_all(&self.running);
    }
}

/// Sends SIGKILL to process group `pgid` (nothing happens when none is left).
pub(super) fn kill(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        kill_all(&[pgid]);
    }
}

/// Starts `cmd` in a process group of its own, remembered until [`forget`]: if this process
/// exits meanwhile (a signal stops `hmn serve` in the middle of a measurement), the group is
/// killed on the way out, and no run starts after that.
pub(super) fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    static AT_EXIT: OnceLock<()> = OnceLock::new();
    AT_EXIT.get_or_init(|| {
        // SAFETY: `kill_remembered` is an `extern "C" fn()` that does not unwind.
        unsafe {
            libc::atexit(kill_remembered);
        }
    });
    GROUPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .spawn(cmd)
}

/// The run of `pgid` is over.
pub(super) fn forget(pgid: u32) {
    GROUPS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .forget(pgid);
}

/// At exit: kills the groups of runs still in progress, and lets none start after. Waits at
/// most [`EXIT_WAIT`] for the list (another thread may be starting a run) and never unwinds.
extern "C" fn kill_remembered() {
    let deadline = std::time::Instant::now() + EXIT_WAIT;
    loop {
        match GROUPS.try_lock() {
            Ok(mut groups) => return groups.exit(),
            Err(TryLockError::Poisoned(p)) => return p.into_inner().exit(),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(TryLockError::WouldBlock) => return,
        }
    }
}

/// SIGKILL to each of `groups`.
fn kill_all(groups: &[libc::pid_t]) {
    for &pgid in groups {
        // SAFETY: killpg takes plain integers.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Waits up to `limit` for any of `fds` to be readable (data, end of file or an error); for
/// each, whether it is. With no fds, simply waits.
pub(super) fn readable(fds: &[RawFd], limit: Duration) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(limit.as_millis()).unwrap_or(libc::c_int::MAX);
    let n = libc::nfds_t::try_from(polled.len()).unwrap_or(0);
    // SAFETY: `polled` is a live array of `n` pollfd structs for the duration of the call.
    let rc = unsafe { libc::poll(polled.as_mut_ptr(), n, ms) };
    if rc <= 0 {
        return vec![false; fds.len()];
    }
    polled.iter().map(|p| p.revents != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    fn sleeper() -> Command {
        let mut c = Command::new("sleep");
        c.arg("30");
        c
    }

    #[test]
    fn runs_are_remembered_until_forgotten() {
        let mut groups = Groups::new();
        let mut a = groups.spawn(&mut sleeper()).unwrap();
        let mut b = groups.spawn(&mut sleeper()).unwrap();
        let pgid = |c: &Child| libc::pid_t::try_from(c.id()).unwrap();
        assert_eq!(groups.running, [pgid(&a), pgid(&b)]);
        // Each in a group of its own.
        for c in [&a, &b] {
            // SAFETY: getpgid takes a plain integer.
            assert_eq!(unsafe { libc::getpgid(pgid(c)) }, pgid(c));
        }
        groups.forget(a.id());
        assert_eq!(groups.running, [pgid(&b)]);
        groups.forget(u32::MAX); // not a pid_t: nothing forgotten, not a panic
        assert_eq!(groups.running, [pgid(&b)]);
        for c in [&mut a, &mut b] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }

    #[test]
    fn on_the_way_out_each_group_is_killed_and_none_starts() {
        let mut groups = Groups::new();
        let mut child = groups.spawn(&mut sleeper()).unwrap();
        groups.exit();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
        let dir = std::env::temp_dir().join(format!("hmn-group-exit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mark = dir.join("started");
        let mut touch = Command::new("touch");
        touch.arg(&mark);
        let e = groups.spawn(&mut touch).unwrap_err();
        assert_eq!(e.to_string(), "not started: this process is exiting");
        std::thread::sleep(Duration::from_millis(100));
        assert!(!mark.exists(), "a run started on the way out");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_group_is_killed_whole() {
        let mut child = sleeper().process_group(0).spawn().unwrap();
        kill(child.id());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
}
