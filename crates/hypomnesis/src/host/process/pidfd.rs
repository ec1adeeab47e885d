//! Whether the processes of a list are running, through pidfds kept open (Linux 5.3 and
//! later) in an epoll set: one `epoll_wait` for the whole list at each refresh of a view (a
//! `poll` of them all where the set cannot be made), where `kill(pid, 0)` costs a system call
//! a process. A pidfd names one process: it turns readable when that
//! process has exited, and never answers for a later process given the same number. So only
//! "running" is taken from it; a process whose pidfd turned readable (a zombie, or exited and
//! its number perhaps reused) is asked of `kill` as before, and its pidfd let go.

// pidfd_open(2), poll(2) and epoll(7) have no wrapper in std.
#![allow(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The most pidfds kept (one descriptor each, as [`crate::host::process::context`] keeps
/// `stat` files): a view of a few dozen rows is served whole; the rest of a list of thousands
/// is asked of `kill`.
const KEPT_PIDFDS: usize = 128;

/// The pidfds kept for the callers of [`running`].
static KEPT: Mutex<Option<Watched>> = Mutex::new(None);

/// Set when the kernel has no `pidfd_open` (before 5.3) or a seccomp filter refuses it: not
/// asked again.
static REFUSED: AtomicBool = AtomicBool::new(false);

/// Which of `pids` (this PID namespace's numbers) are running, as far as a kept pidfd tells:
/// `pid → true` for each; a pid left out is for `kill` to answer (not kept, or exited).
/// Pidfds of processes no longer listed are closed.
pub(crate) fn running(pids: &[u32]) -> HashMap<u32, bool> {
    if REFUSED.load(Ordering::Relaxed) {
        return HashMap::new();
    }
    // Never waited for: a caller on another thread sends this one to `kill`.
    let Some(mut slot) = crate::host::file::lock_now(&KEPT) else {
        return HashMap::new();
    };
    if let Some(out) = slot.get_or_insert_with(Watched::default).running(pids) {
        return out;
    }
    REFUSED.store(true, Ordering::Relaxed);
    *slot = None;
    HashMap::new()
}

/// Pidfds kept, by pid, and an epoll set of them (none where it cannot be made): a pidfd turned
/// readable is one event of a wait, where `poll` looks at every descriptor of the list at each
/// call (a twentieth of `hmn top`'s refresh at 20 processes, with the kernel's `pidfd_poll`
/// for each).
#[derive(Default)]
struct Watched {
    by_pid: HashMap<u32, OwnedFd>,
    epoll: Epoll,
}

impl Watched {
    /// [`running`] through these pidfds; `None` when the kernel refuses pidfds.
    fn running(&mut self, pids: &[u32]) -> Option<HashMap<u32, bool>> {
        let listed: HashSet<u32> = pids.iter().copied().collect();
        // A pidfd closed leaves the epoll set with it.
        self.by_pid.retain(|pid, _| listed.contains(pid));
        for &pid in pids {
            if self.by_pid.len() >= KEPT_PIDFDS {
                break;
            }
            if self.by_pid.contains_key(&pid) {
                continue;
            }
            match open(pid) {
                Opened::Fd(fd) => {
                    self.epoll.add(&fd, pid);
                    self.by_pid.insert(pid, fd);
                }
                // A thread's number is no process: left to the caller, who tells it so.
                Opened::NoProcess | Opened::Thread | Opened::Failed => {}
                Opened::Refused => return None,
            }
        }
        // Exited (or the descriptor went bad): `kill` answers, and the number is opened afresh
        // if it is listed again.
        let exited = match self.epoll.ready(self.by_pid.len()) {
            Some(ready) => ready,
            None => self.polled(),
        };
        for pid in exited {
            self.by_pid.remove(&pid);
        }
        Some(self.by_pid.keys().map(|&pid| (pid, true)).collect())
    }

    /// The pids whose pidfd is readable, by one `poll` of them all.
    fn polled(&self) -> Vec<u32> {
        let order: Vec<u32> = self.by_pid.keys().copied().collect();
        let mut fds: Vec<libc::pollfd> = order
            .iter()
            .filter_map(|pid| self.by_pid.get(pid))
            .map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let Ok(count) = libc::nfds_t::try_from(fds.len()) else {
            return Vec::new();
        };
        // SAFETY: `fds` is a valid array of `count` pollfd; with a timeout of 0 poll(2) only
        // writes their revents and returns at once.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), count, 0) };
        if rc < 0 {
            // Unknown: each kept pidfd taken as running, as before a failed poll.
            return Vec::new();
        }
        order
            .into_iter()
            .zip(&fds)
            .filter(|(_, fd)| fd.revents != 0)
            .map(|(pid, _)| pid)
            .collect()
    }
}

/// An epoll set of pidfds, each added with its pid; `None` once a call on it failed (then the
/// pidfds are polled).
struct Epoll(Option<OwnedFd>);

impl Default for Epoll {
    fn default() -> Self {
        // SAFETY: epoll_create1 takes flags and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        // SAFETY: `fd` was just opened here and is owned by nobody else.
        Self((fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }))
    }
}

impl Epoll {
    /// Adds `fd`, whose readiness will name `pid`.
    fn add(&mut self, fd: &OwnedFd, pid: u32) {
        let Some(ep) = &self.0 else {
            return;
        };
        let mut event = libc::epoll_event {
            events: u32::try_from(libc::EPOLLIN).unwrap_or(1),
            u64: u64::from(pid),
        };
        // SAFETY: both descriptors are open; `event` is a valid epoll_event.
        let rc = unsafe {
            libc::epoll_ctl(
                ep.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &raw mut event,
            )
        };
        if rc < 0 {
            self.0 = None;
        }
    }

    /// The pids whose pidfd is readable, of a set of `kept`; `None` without a set.
    fn ready(&mut self, kept: usize) -> Option<Vec<u32>> {
        let ep = self.0.as_ref()?;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; kept.max(1)];
        let room = i32::try_from(events.len()).unwrap_or(i32::MAX);
        // SAFETY: `events` has room for `room` events; with a timeout of 0 epoll_wait(2)
        // returns at once.
        let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), room, 0) };
        let Ok(n) = usize::try_from(n) else {
            self.0 = None;
            return None;
        };
        Some(
            events
                .iter()
                .take(n)
                .filter_map(|e| u32::try_from(e.u64).ok())
                .collect(),
        )
    }
}

/// What `pid` is, by `pidfd_open(2)` (the descriptor closed at once): a process, not one
/// (`EINVAL` or `ENOENT`: not a thread-group leader, which the caller confirms), or no such
/// number (`ESRCH`); `None` where the kernel has no pidfds or refuses them to this process
/// (then another way must tell).
pub(crate) fn leader(pid: u32) -> Option<Answer> {
    if REFUSED.load(Ordering::Relaxed) {
        return None;
    }
    match open(pid) {
        Opened::Fd(_) => Some(Answer::Leader),
        Opened::Thread => Some(Answer::NotLeader),
        Opened::NoProcess => Some(Answer::NoSuch),
        Opened::Refused | Opened::Failed => None,
    }
}

/// What `pidfd_open(2)` says of a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A thread-group leader: a process.
    Leader,
    /// Not a thread-group leader (a thread's number).
    NotLeader,
    /// No task has the number.
    NoSuch,
}

/// What `pidfd_open` gave.
enum Opened {
    Fd(OwnedFd),
    /// No process has this number (or it cannot have a pidfd): `kill` answers.
    NoProcess,
    /// The number is a thread's, not a thread-group leader's (`EINVAL`).
    Thread,
    /// Another failure (no descriptor or memory left): nothing told.
    Failed,
    /// The kernel has no `pidfd_open`, or refuses it to this process.
    Refused,
}

fn open(pid: u32) -> Opened {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Opened::NoProcess;
    };
    if pid <= 0 {
        return Opened::NoProcess;
    }
    // SAFETY: pidfd_open takes a pid and flags (none) and returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    match std::os::fd::RawFd::try_from(rc) {
        // SAFETY: `fd` is a descriptor just opened here (close-on-exec, as every pidfd) and
        // owned by nobody else.
        Ok(fd) if fd >= 0 => Opened::Fd(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOSYS | libc::EPERM | libc::EACCES) => Opened::Refused,
            // The pid is positive and the flags none: "not a thread-group leader" (EINVAL;
            // ENOENT on newer kernels, seen on 6.18).
            Some(libc::EINVAL | libc::ENOENT) => Opened::Thread,
            Some(libc::ESRCH) => Opened::NoProcess,
            // Out of descriptors or memory: this time, nothing is told.
            _ => Opened::Failed,
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A running child is running; once it has exited (a zombie, then reaped) the kept pidfd
    /// no longer says so, and is let go; a process no longer listed has its pidfd closed.
    #[test]
    fn a_kept_pidfd_says_running_until_the_process_exits() {
        let kept = Watched::default();
        assert!(kept.epoll.0.is_some(), "an epoll set");
        says_running_until_exit(kept);
    }

    /// As much without the epoll set: the pidfds are polled.
    #[test]
    fn polled_pidfds_say_the_same() {
        says_running_until_exit(Watched {
            epoll: Epoll(None),
            ..Watched::default()
        });
    }

    fn says_running_until_exit(mut kept: Watched) {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let me = std::process::id();
        let Some(first) = kept.running(&[pid, me]) else {
            // This kernel or sandbox has no pidfds: nothing to check.
            child.kill().unwrap();
            child.wait().unwrap();
            return;
        };
        assert_eq!(first.get(&pid), Some(&true));
        assert_eq!(first.get(&me), Some(&true));
        assert_eq!(kept.by_pid.len(), 2);
        // Asked again through the kept descriptor; `me` no longer listed is let go.
        assert_eq!(kept.running(&[pid]).unwrap().get(&pid), Some(&true));
        assert_eq!(kept.by_pid.len(), 1);
        child.kill().unwrap();
        // A zombie, not yet reaped: not "running" by its pidfd (kill answers for it).
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(kept.running(&[pid]).unwrap().get(&pid), None);
        child.wait().unwrap();
        assert_eq!(kept.running(&[pid]).unwrap().get(&pid), None);
        // Numbers no process has: left to kill.
        assert_eq!(kept.running(&[0, u32::MAX]).unwrap(), HashMap::new());
        assert!(kept.by_pid.is_empty());
    }
}
