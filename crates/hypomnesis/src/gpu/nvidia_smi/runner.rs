//! Running `nvidia-smi` with a hard timeout and bounded output.

use std::io::{self, Read};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
#[cfg(not(unix))]
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[cfg(not(unix))]
use wait_timeout::ChildExt;

/// Most stdout kept (a 64-GPU host's CSV is a few KiB); the rest is read and discarded.
const STDOUT_CAP: usize = 4 << 20;
/// Most stderr kept.
const STDERR_CAP: usize = 64 << 10;
/// How long to wait for the pipes to close after the child exited (a grandchild may hold them).
const PIPE_GRACE: Duration = Duration::from_secs(1);

/// A finished run.
#[derive(Debug)]
pub(crate) struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Why a run produced no usable output.
#[derive(Debug)]
pub(crate) enum RunError {
    /// The executable could not be started.
    Spawn(std::io::Error),
    /// It did not finish in time; it was killed and reaped.
    TimedOut(Duration),
    /// It printed more than we keep.
    TooMuchOutput(usize),
    /// Waiting for it failed, or its pipes stayed open after it exited.
    Wait(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Spawn(e) => write!(f, "could not be started: {e}"),
            Self::TimedOut(d) => write!(
                f,
                "{} {} and was killed",
                crate::error::TIMED_OUT,
                crate::duration::format_duration(*d)
            ),
            Self::TooMuchOutput(n) => write!(f, "printed more than {n} bytes; output discarded"),
            Self::Wait(why) => f.write_str(why),
        }
    }
}

/// Read a pipe to its end, keeping at most `cap` bytes. `Err(total)` when more came.
#[cfg_attr(unix, allow(dead_code))] // Unix reads both pipes on one thread (`Pipe`)
fn drain(mut r: impl Read, cap: usize) -> Result<Vec<u8>, usize> {
    let mut kept = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    // A read error ends the output; what came before it is kept.
    let _ = r.by_ref().take(limit).read_to_end(&mut kept);
    if kept.len() <= cap {
        return Ok(kept);
    }
    let rest = io::copy(&mut r, &mut io::sink()).unwrap_or(0);
    Err(kept
        .len()
        .saturating_add(usize::try_from(rest).unwrap_or(usize::MAX)))
}

/// How often a run is looked at while its pipes are quiet (has it exited? is it past its time?).
#[cfg(unix)]
const STEP: Duration = Duration::from_millis(20);

/// One output pipe of a run being read: what was kept, how much came, whether it ended.
#[cfg(unix)]
struct Pipe<R> {
    reader: Option<R>,
    kept: Vec<u8>,
    total: usize,
    cap: usize,
}

#[cfg(unix)]
impl<R: Read + std::os::fd::AsRawFd> Pipe<R> {
    fn new(reader: Option<R>, cap: usize) -> Self {
        Self {
            reader,
            kept: Vec::new(),
            total: 0,
            cap,
        }
    }

    fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.reader.as_ref().map(std::os::fd::AsRawFd::as_raw_fd)
    }

    /// One read (the pipe is readable, so it does not block); the end closes it.
    fn read(&mut self) {
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        // The size only sets how many reads a long output takes.
        let mut chunk = [0_u8; 16_384];
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => self.reader = None,
            Ok(n) => {
                let got = chunk.get(..n).unwrap_or_default();
                let room = self.cap.saturating_sub(self.kept.len());
                self.kept
                    .extend_from_slice(got.get(..room.min(n)).unwrap_or_default());
                self.total = self.total.saturating_add(n);
            }
        }
    }

    /// What came: `Err(total)` when more than the cap.
    fn output(self) -> Result<Vec<u8>, usize> {
        if self.total > self.cap {
            Err(self.total)
        } else {
            Ok(self.kept)
        }
    }
}

/// Run `exe args…` with stdin closed, in a process group of its own; past `timeout` the whole
/// group is killed and the child reaped. Both pipes are read on this thread (no reader is left
/// behind), and a group still running when this process exits is killed then.
#[cfg(unix)]
pub(crate) fn run(exe: &Path, args: &[&str], timeout: Duration) -> Result<Ran, RunError> {
    let _waiting = crate::inflight::running(exe);
    let mut child = super::group::spawn(
        Command::new(exe)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .map_err(RunError::Spawn)?;
    let group = child.id();
    let outcome = follow(&mut child, timeout);
    if outcome.is_err() {
        // A timed-out run, or one whose pipes a straggler of its group still holds.
        super::group::kill(group);
    }
    let _ = child.wait();
    super::group::forget(group);
    outcome
}

/// Reads `child`'s pipes until both end and it has exited, or until `timeout`.
#[cfg(unix)]
fn follow(child: &mut std::process::Child, timeout: Duration) -> Result<Ran, RunError> {
    let started = Instant::now();
    let deadline = started + timeout;
    let as_file = |fd: std::os::fd::OwnedFd| std::fs::File::from(fd);
    let mut out = Pipe::new(child.stdout.take().map(Into::into).map(as_file), STDOUT_CAP);
    let mut err = Pipe::new(child.stderr.take().map(Into::into).map(as_file), STDERR_CAP);
    let mut exited: Option<(ExitStatus, Instant)> = None;
    loop {
        if exited.is_none() {
            match child.try_wait() {
                Ok(Some(status)) => exited = Some((status, Instant::now())),
                Ok(None) => {}
                Err(e) => return Err(RunError::Wait(format!("waiting for it failed: {e}"))),
            }
        }
        let open: Vec<_> = [out.fd(), err.fd()].into_iter().flatten().collect();
        if let Some((status, at)) = exited {
            if open.is_empty() {
                return finished(status, out, err);
            }
            if at.elapsed() > PIPE_GRACE {
                return Err(RunError::Wait(format!(
                    "exited after {:?} but its output pipes stayed open (a child process of it holds them)",
                    at.duration_since(started)
                )));
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(RunError::TimedOut(timeout));
        }
        let ready = super::group::readable(&open, STEP.min(deadline - now));
        let mut ready = ready.into_iter();
        for pipe in [&mut out, &mut err] {
            if pipe.fd().is_some() && ready.next() == Some(true) {
                pipe.read();
            }
        }
    }
}

#[cfg(unix)]
fn finished<R: Read + std::os::fd::AsRawFd>(
    status: ExitStatus,
    out: Pipe<R>,
    err: Pipe<R>,
) -> Result<Ran, RunError> {
    let stdout = out.output().map_err(RunError::TooMuchOutput)?;
    let stderr = err
        .output()
        .unwrap_or_else(|_| b"(stderr too long)".to_vec());
    Ok(Ran {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// Run `exe args…` with stdin closed; kill and reap it if it runs past `timeout`.
#[cfg(not(unix))]
pub(crate) fn run(exe: &Path, args: &[&str], timeout: Duration) -> Result<Ran, RunError> {
    let _waiting = crate::inflight::running(exe);
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Spawn)?;
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((true, drain(out, STDOUT_CAP)));
        });
    }
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            let _ = tx.send((false, drain(err, STDERR_CAP)));
        });
    } else {
        drop(tx);
    }
    let started = Instant::now();
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::TimedOut(timeout));
        }
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::Wait(format!("waiting for it failed: {e}")));
        }
    };
    let mut stdout = None;
    let mut stderr = None;
    let deadline = Instant::now() + PIPE_GRACE;
    while stdout.is_none() || stderr.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((true, r)) => stdout = Some(r),
            Ok((false, r)) => stderr = Some(r),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(RunError::Wait(format!(
                    "exited after {:?} but its output pipes stayed open (a child process of it holds them)",
                    started.elapsed()
                )));
            }
        }
    }
    let stdout = stdout
        .unwrap_or(Ok(Vec::new()))
        .map_err(RunError::TooMuchOutput)?;
    let stderr = stderr
        .unwrap_or(Ok(Vec::new()))
        .unwrap_or_else(|_| b"(stderr too long)".to_vec());
    Ok(Ran {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Result<Ran, RunError> {
        run(Path::new("/bin/sh"), &["-c", script], timeout)
    }

    #[test]
    fn output_and_status() {
        let r = sh("echo out; echo err >&2; exit 3", Duration::from_secs(10)).unwrap();
        assert_eq!(r.stdout, "out\n");
        assert_eq!(r.stderr, "err\n");
        assert_eq!(r.status.code(), Some(3));
    }

    #[test]
    fn a_limit_is_honoured_within_a_small_grace() {
        // The fastest of three runs, so a busy machine's scheduling does not decide; a runner
        // that waited longer than its limit would be over on every try.
        let limit = Duration::from_millis(200);
        let mut fastest = Duration::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            let e = sh("sleep 30", limit).unwrap_err();
            fastest = fastest.min(t.elapsed());
            assert!(matches!(e, RunError::TimedOut(_)), "{e}");
            assert_eq!(e.to_string(), "did not finish within 200ms and was killed");
        }
        // (The wait may end a fraction of a millisecond early: its clock starts after the spawn.)
        assert!(
            fastest + Duration::from_millis(5) >= limit
                && fastest < limit + Duration::from_millis(150),
            "a 200 ms limit took {fastest:?}"
        );
    }

    #[test]
    fn a_quick_command_is_not_held_up() {
        let t = Instant::now();
        let r = sh("echo hi", Duration::from_secs(10)).unwrap();
        assert_eq!(r.stdout, "hi\n");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }

    #[test]
    fn a_pipe_keeps_exactly_its_cap_and_counts_past_it() {
        let piped = |n: usize| {
            let path = std::env::temp_dir().join(format!("hmn-pipe-{n}-{}", std::process::id()));
            std::fs::write(&path, vec![7_u8; n]).unwrap();
            let mut p = Pipe::new(Some(std::fs::File::open(&path).unwrap()), 10);
            while p.fd().is_some() {
                p.read();
            }
            std::fs::remove_file(&path).unwrap();
            p.output()
        };
        assert_eq!(piped(10), Ok(vec![7; 10]), "exactly the cap is kept");
        assert_eq!(piped(11), Err(11));
        assert_eq!(
            piped(40_000),
            Err(40_000),
            "every byte is counted, over several reads"
        );
        assert_eq!(piped(0), Ok(Vec::new()));
    }

    #[test]
    fn drained_up_to_the_cap_and_counted_past_it() {
        assert_eq!(
            drain(&[7_u8; 10][..], 10),
            Ok(vec![7; 10]),
            "exactly the cap is kept"
        );
        assert_eq!(drain(&[7_u8; 11][..], 10), Err(11));
        assert_eq!(
            drain(vec![7_u8; 100_000].as_slice(), 10),
            Err(100_000),
            "every byte is counted"
        );
        assert_eq!(drain(&[][..], 0), Ok(Vec::new()));
        assert_eq!(drain(&[1_u8][..], 0), Err(1));
    }

    #[cfg(target_os = "linux")]
    fn threads_and_fds() -> (usize, usize) {
        let count = |d: &str| std::fs::read_dir(d).map_or(0, Iterator::count);
        (count("/proc/self/task"), count("/proc/self/fd"))
    }

    #[cfg(target_os = "linux")]
    fn gone(pid_file: &Path) -> bool {
        let pid = std::fs::read_to_string(pid_file).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        // Gone, or a zombie waiting for init.
        stat.map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_timed_out_wrapper_takes_its_children_with_it_and_leaves_nothing_behind() {
        let pid_file = std::env::temp_dir().join(format!("hmn-runner-{}", std::process::id()));
        let script = format!("sleep 30 & echo $! > {}; exec sleep 31", pid_file.display());
        let before = threads_and_fds();
        for _ in 0..20 {
            let _ = std::fs::remove_file(&pid_file);
            let e = sh(&script, Duration::from_millis(200)).unwrap_err();
            assert!(matches!(e, RunError::TimedOut(_)), "{e}");
            let until = Instant::now() + Duration::from_secs(2);
            while !gone(&pid_file) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(gone(&pid_file), "the wrapper's sleep outlived the timeout");
        }
        let after = threads_and_fds();
        // Other tests of this binary run alongside and come and go: allow their share.
        assert!(
            after.0 <= before.0 + 4 && after.1 <= before.1 + 8,
            "threads and fds {before:?} -> {after:?} over 20 timed-out runs"
        );
        let _ = std::fs::remove_file(&pid_file);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_child_that_leaves_a_grandchild_on_its_pipes_is_not_waited_for_forever() {
        let pid_file = std::env::temp_dir().join(format!("hmn-runner-gc-{}", std::process::id()));
        let script = format!("sleep 30 & echo $! > {}; exit 0", pid_file.display());
        let t = Instant::now();
        let e = sh(&script, Duration::from_secs(10)).unwrap_err();
        assert!(
            e.to_string().contains("its output pipes stayed open"),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        let until = Instant::now() + Duration::from_secs(2);
        while !gone(&pid_file) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(gone(&pid_file), "the grandchild was killed with its group");
        let _ = std::fs::remove_file(&pid_file);
    }

    #[test]
    fn flood_is_bounded() {
        let e = sh("head -c 6000000 /dev/zero", Duration::from_secs(20)).unwrap_err();
        assert!(matches!(e, RunError::TooMuchOutput(6_000_000)), "{e}");
    }

    #[test]
    fn spawn_failure_names_cause() {
        let e = run(
            Path::new("/nonexistent/nvidia-smi"),
            &[],
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("could not be started"), "{e}");
    }
}
