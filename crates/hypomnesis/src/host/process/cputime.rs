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
}
