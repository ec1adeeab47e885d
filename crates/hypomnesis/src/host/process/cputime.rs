//! This process's CPU time, at the resolution of the system's own clock.
#![allow(unsafe_code)]

use std::time::Duration;

use crate::error::Result;

/// CPU time this process has used so far, user and system, all its threads together.
///
/// At the clock's resolution: nanoseconds on Linux and macOS (`clock_gettime` with
/// `CLOCK_PROCESS_CPUTIME_ID`; a process's `stat` file counts 10 ms ticks, so that a view
/// showing its own CPU share each second from them says 0.0% and 1.0% by turns while it uses
/// 0.2%), and on Windows as `GetProcessTimes` charges it (100 ns units).
///
/// # Errors
///
/// [`crate::HypomnesisError::Io`] when the system refuses the call;
/// [`crate::HypomnesisError::Unsupported`] on other platforms.
pub fn process_cpu_time() -> Result<Duration> {
    imp::cpu_time()
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
mod imp {
    use std::time::Duration;

    use crate::error::Result;

    pub(super) fn cpu_time() -> Result<Duration> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a writable timespec for the call to fill; the clock id is a constant
        // every supported kernel knows.
        if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &raw mut ts) } != 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
        Ok(Duration::new(secs, nanos))
    }
}

/// The CPU time of process `pid` of this PID namespace, all its threads together (those that
/// ended too), read from its CPU clock (`clock_gettime`, nanoseconds; any process may read
/// another's, as for `/proc/<pid>/stat`): the figure `stat` gives in 10 ms ticks. One system
/// call and no text, where `stat` is formatted whole (fifty-two fields). `None` when there is
/// no such process (or the number is not a pid). The number names whoever holds it at the
/// call: a caller that must know which process it read reads a file it holds open afterwards.
#[cfg(target_os = "linux")]
pub(crate) fn cpu_time_of(pid: u32) -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec for the call to fill; a clock id naming no process
    // is refused (EINVAL), not undefined.
    if unsafe { libc::clock_gettime(process_clock(pid)?, &raw mut ts) } != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok()?;
    Some(Duration::new(secs, nanos))
}

/// The id of the CPU clock of process `pid` (what `clock_getcpuclockid` gives, without the
/// system call it makes to check the process): the kernel's ABI encodes it as the pid's
/// complement shifted by three bits, with 2 (`CPUCLOCK_SCHED`: the scheduler's runtime) in
/// the low bits, the per-thread bit (4) clear. `None` for 0 (this process) and for numbers
/// beyond any pid.
#[cfg(target_os = "linux")]
fn process_clock(pid: u32) -> Option<libc::clockid_t> {
    const CPUCLOCK_SCHED: libc::clockid_t = 2;
    let pid = libc::clockid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    // Pids are below 2^22 (`pid_max`'s ceiling), so the shift keeps every bit.
    (pid < 1 << 22).then_some((!pid << 3) | CPUCLOCK_SCHED)
}

#[cfg(windows)]
mod imp {
    use std::time::Duration;

    use windows::Win32::Foundation::FILETIME;
    use windows::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};

    use crate::error::Result;

    pub(super) fn cpu_time() -> Result<Duration> {
        let (mut created, mut exited) = (FILETIME::default(), FILETIME::default());
        let (mut kernel, mut user) = (FILETIME::default(), FILETIME::default());
        // SAFETY: GetCurrentProcess returns a pseudo-handle that needs no closing; the four
        // FILETIMEs are writable for the call to fill.
        unsafe {
            GetProcessTimes(
                GetCurrentProcess(),
                &raw mut created,
                &raw mut exited,
                &raw mut kernel,
                &raw mut user,
            )
        }
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        // FILETIME durations count 100-nanosecond intervals.
        let hundreds = |t: FILETIME| u64::from(t.dwHighDateTime) << 32 | u64::from(t.dwLowDateTime);
        let total = hundreds(kernel).saturating_add(hundreds(user));
        Ok(Duration::from_nanos(total.saturating_mul(100)))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
mod imp {
    use std::time::Duration;

    use crate::error::{HypomnesisError, Result};

    pub(super) fn cpu_time() -> Result<Duration> {
        Err(HypomnesisError::Unsupported(
            "this process's CPU time is read on Linux, macOS and Windows".into(),
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    /// The clock moves with work done, and by less than a tick's worth of rounding.
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn cpu_time_grows_with_work_at_sub_tick_resolution() {
        let before = super::process_cpu_time().unwrap_or_default();
        let start = std::time::Instant::now();
        let mut x = 0_u64;
        while start.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
        let after = super::process_cpu_time().unwrap_or_default();
        assert!(after > before, "{before:?} -> {after:?}");
        assert!(after.saturating_sub(before) >= std::time::Duration::from_millis(5));
        // Not a whole number of 10 ms ticks, as /proc/self/stat would give.
        assert_ne!(after.subsec_nanos() % 10_000_000, 0, "{after:?}");
    }

    /// The clock id is the one libc's `clock_getcpuclockid` gives, for this process and for a
    /// child; numbers that are not pids have none.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_clock_of_a_process_is_libc_s() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        for pid in [std::process::id(), child.id()] {
            let mut id: libc::clockid_t = 0;
            // SAFETY: `id` is writable for the call to fill.
            let rc = unsafe {
                libc::clock_getcpuclockid(libc::pid_t::try_from(pid).unwrap(), &raw mut id)
            };
            assert_eq!(rc, 0);
            assert_eq!(super::process_clock(pid), Some(id), "pid {pid}");
        }
        for not_a_pid in [0, 1 << 22, u32::MAX] {
            assert_eq!(super::process_clock(not_a_pid), None, "{not_a_pid}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(
            super::cpu_time_of(child.id()),
            None,
            "reaped: no such process"
        );
    }

    /// Another process's CPU time by its clock: between this process's own clock read before
    /// and after (where `stat`'s ticks would fall behind the first), and growing with work.
    #[cfg(target_os = "linux")]
    #[test]
    fn another_process_s_cpu_time_at_the_clock_s_resolution() {
        let spin = |ms| {
            let start = std::time::Instant::now();
            let mut x = 0_u64;
            while start.elapsed() < std::time::Duration::from_millis(ms) {
                x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
            }
        };
        spin(25);
        let me = std::process::id();
        let before = super::process_cpu_time().unwrap();
        let read = super::cpu_time_of(me).unwrap();
        let after = super::process_cpu_time().unwrap();
        assert!(
            before <= read && read <= after,
            "{before:?} <= {read:?} <= {after:?}"
        );
        spin(25);
        let later = super::cpu_time_of(me).unwrap();
        assert!(
            later >= read + std::time::Duration::from_millis(5),
            "{read:?} -> {later:?}"
        );
    }
}
