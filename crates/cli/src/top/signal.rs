//! Sending a signal to the process selected in `hmn top` (`k`), only if it is still that
//! process: the pid must still have the start time it had when selected, so a pid reused by a
//! later process is never signalled. On Linux the check and the signal go through a pidfd,
//! which names one process whatever happens to its pid after it is opened.
// pidfd_open(2), pidfd_send_signal(2) and kill(2) have no safe wrapper in std or libc.
#![allow(unsafe_code)]

use super::state::{Pick, Sig};

/// The signal's number.
#[cfg(target_os = "linux")]
fn number(sig: Sig) -> libc::c_int {
    match sig {
        Sig::Term => libc::SIGTERM,
        Sig::Int => libc::SIGINT,
        Sig::Kill => libc::SIGKILL,
    }
}

/// Sends `sig` to `pick` if it is still the process selected; what happened, in a sentence
/// (`Err`: nothing was sent, and why).
pub fn send(pick: Pick, sig: Sig) -> Result<String, String> {
    if !hypomnesis::procfs_is_own() {
        return Err(format!(
            "nothing sent: hmn reads processes from a procfs other than this system's /proc, \
             whose pid {} may be another process here",
            pick.pid
        ));
    }
    send_here(pick, sig)
}

#[cfg(target_os = "linux")]
fn send_here(pick: Pick, sig: Sig) -> Result<String, String> {
    let Some(start) = pick.start else {
        return Err(format!(
            "nothing sent: the start time of pid {} could not be read when it was selected, so \
             it cannot be told from a later process with the same pid",
            pick.pid
        ));
    };
    let pid =
        libc::pid_t::try_from(pick.pid).map_err(|_| format!("pid {} is out of range", pick.pid))?;
    // With a pidfd the process cannot change under the check. Only a kernel without pidfds
    // (before 5.3: ENOSYS) falls back to kill(2), the check made just before it; any other
    // refusal sends nothing (EINVAL or ENOENT: the number is a thread's, and kill(2) would end
    // the whole process the thread belongs to; ESRCH: it has exited).
    let fd = match linux::PidFd::open(pid) {
        Ok(fd) => Some(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => None,
        Err(e) => return Err(unopened(pick.pid, &e)),
    };
    match hypomnesis::process_start_time(pick.pid) {
        Some(now) if now == start => {}
        Some(_) => {
            return Err(format!(
                "nothing sent: pid {} is no longer the process selected (it exited, and the pid \
                 now belongs to a later process)",
                pick.pid
            ));
        }
        None => return Err(format!("nothing sent: pid {} has exited", pick.pid)),
    }
    let sent = match &fd {
        Some(fd) => fd.signal(number(sig)),
        None => hypomnesis::send_signal(pick.pid, number(sig)),
    };
    match sent {
        Ok(()) => Ok(format!("sent {} to pid {}", sig.name(), pick.pid)),
        Err(e) => Err(refusal(pick.pid, sig, &e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn send_here(pick: Pick, sig: Sig) -> Result<String, String> {
    let _ = sig;
    Err(format!(
        "nothing sent to pid {}: hmn top signals processes on Linux only, where it can tell a \
         process from a later one that reuses its pid",
        pick.pid
    ))
}

/// Why no pidfd could be had for `pid`, in words (nothing was sent).
#[cfg(target_os = "linux")]
fn unopened(pid: u32, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        // Not a thread-group leader: EINVAL, or ENOENT on newer kernels (6.18).
        Some(libc::EINVAL | libc::ENOENT) => format!(
            "nothing sent: {pid} is not the number of a process but of a thread of another \
             (the process selected has exited)"
        ),
        Some(libc::ESRCH) => format!("nothing sent: pid {pid} has exited"),
        _ => format!("nothing sent to pid {pid}: a pidfd for it could not be opened: {e}"),
    }
}

/// Why the system refused a signal, in words.
#[cfg(target_os = "linux")]
fn refusal(pid: u32, sig: Sig, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => format!(
            "not permitted to send {} to pid {pid}: it is another user's process (run hmn as \
             that user or as root)",
            sig.name()
        ),
        Some(libc::ESRCH) => format!("nothing sent: pid {pid} has exited"),
        _ => format!("{} to pid {pid} failed: {e}", sig.name()),
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd, RawFd};
    use std::os::raw::c_long;

    /// A pidfd (`pidfd_open(2)`): one process, whatever becomes of its pid.
    pub struct PidFd(OwnedFd);

    impl PidFd {
        pub fn open(pid: libc::pid_t) -> io::Result<Self> {
            // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor or -1.
            let rc: c_long = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
            if rc < 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = RawFd::try_from(rc).map_err(|_| io::Error::other("pidfd out of range"))?;
            // SAFETY: `fd` was just returned by pidfd_open and is owned by nobody else.
            Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        pub fn signal(&self, sig: libc::c_int) -> io::Result<()> {
            use std::os::fd::AsRawFd;
            // SAFETY: pidfd_send_signal with our open pidfd, a valid signal, no siginfo, no flags.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    self.0.as_raw_fd(),
                    sig,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    fn exited(child: &mut std::process::Child) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if child.try_wait().ok().flatten().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn a_pid_with_another_start_time_is_refused_and_the_selected_one_is_signalled() {
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let start = hypomnesis::process_start_time(pid).unwrap();
        // The pid as a later process would have it: another start time. Refused, not sent.
        let reused = Pick {
            pid,
            start: Some(start + 1),
        };
        let why = send(reused, Sig::Kill).unwrap_err();
        assert!(why.contains("no longer the process selected"), "{why}");
        let unknown = send(Pick { pid, start: None }, Sig::Kill).unwrap_err();
        assert!(unknown.contains("cannot be told"), "{unknown}");
        assert!(child.try_wait().unwrap().is_none(), "still running");
        // The process as selected: signalled, and gone.
        let said = send(
            Pick {
                pid,
                start: Some(start),
            },
            Sig::Term,
        )
        .unwrap();
        assert_eq!(said, format!("sent SIGTERM to pid {pid}"));
        assert!(exited(&mut child));
        // Now exited and reaped: refused as such.
        let gone = send(
            Pick {
                pid,
                start: Some(start),
            },
            Sig::Term,
        )
        .unwrap_err();
        assert!(
            gone.contains("exited") || gone.contains("no longer"),
            "{gone}"
        );
    }

    /// A pid that is a thread's number (what a driver still charging an exited process's pid
    /// may name): nothing is sent, and the process the thread belongs to lives on. Before,
    /// `pidfd_open`'s EINVAL fell back to kill(2), which ended the whole process.
    #[test]
    fn a_thread_id_is_never_signalled() {
        use std::io::{BufRead, BufReader};
        let script = "import threading, time\n\
                      t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n\
                      t.start()\n\
                      print(t.native_id, flush=True)\n\
                      time.sleep(60)\n";
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (the CI installs it)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let tid: u32 = line.trim().parse().unwrap();
        assert_ne!(tid, child.id());
        let start = hypomnesis::process_start_time(tid);
        assert!(start.is_some(), "a thread's stat reads as a process's");
        let why = send(Pick { pid: tid, start }, Sig::Term).unwrap_err();
        assert!(why.contains("thread"), "{why}");
        std::thread::sleep(Duration::from_millis(200));
        assert!(child.try_wait().unwrap().is_none(), "its process lives on");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn another_users_process_is_refused_in_words() {
        let e = std::io::Error::from_raw_os_error(libc::EPERM);
        let why = refusal(1, Sig::Term, &e);
        assert!(
            why.starts_with("not permitted to send SIGTERM to pid 1"),
            "{why}"
        );
    }
}
