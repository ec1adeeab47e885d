//! The foreign calls of the `nvidia-smi` runner on Unix: waiting for pipes (`poll`), killing
//! a run's whole process group, and making sure no group outlives this process (`atexit`).
#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

/// The process groups of runs in progress.
static RUNNING: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

/// Sends SIGKILL to process group `pgid` (nothing happens when none is left).
pub(super) fn kill(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        // SAFETY: killpg takes plain integers and touches no memory of ours.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Remembers `pgid` as running until [`forget`]: if this process exits meanwhile (a signal
/// stops `hmn serve` in the middle of a measurement), the group is killed on the way out.
pub(super) fn remember(pgid: u32) {
    static AT_EXIT: OnceLock<()> = OnceLock::new();
    AT_EXIT.get_or_init(|| {
        // SAFETY: `kill_remembered` is an `extern "C" fn()` that does not unwind.
        unsafe {
            libc::atexit(kill_remembered);
        }
    });
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        RUNNING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pgid);
    }
}

/// The run of `pgid` is over.
pub(super) fn forget(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        RUNNING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|&p| p != pgid);
    }
}

/// At exit: kills the groups of runs still in progress. Never blocks (another thread may hold
/// the list) and never unwinds.
extern "C" fn kill_remembered() {
    if let Ok(groups) = RUNNING.try_lock() {
        kill_all(&groups);
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

    fn running(pgid: libc::pid_t) -> bool {
        RUNNING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&pgid)
    }

    #[test]
    fn runs_are_remembered_until_forgotten() {
        // Group ids above any pid_max: no real group is touched.
        remember(4_000_001);
        remember(4_000_002);
        assert!(running(4_000_001) && running(4_000_002));
        forget(4_000_001);
        assert!(!running(4_000_001) && running(4_000_002));
        forget(4_000_002);
        assert!(!running(4_000_002));
        remember(u32::MAX); // not a pid_t: not remembered, not a panic
        assert!(
            !RUNNING
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|&p| p < 0)
        );
    }

    #[test]
    fn at_exit_each_group_is_killed() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        // Not kill_remembered itself: other tests' runs may be in progress.
        kill_all(&[libc::pid_t::try_from(child.id()).unwrap()]);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    }
}
