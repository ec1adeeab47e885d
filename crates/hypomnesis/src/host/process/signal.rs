//! The only foreign call of the process readers and signallers: `kill(2)`. With signal 0 it
//! sends nothing and says whether a process has that number in this PID namespace.
#![allow(unsafe_code)]

/// Sends `signal` to process `pid`, as `kill(2)` does: to that one process only, never a group
/// or every process (pid 0 and pids above `i32::MAX` are refused).
///
/// # Errors
///
/// [`std::io::ErrorKind::InvalidInput`] for a pid that names no single process; otherwise the
/// system's error: no such process (`ESRCH`), not permitted (`EPERM`), an invalid signal
/// (`EINVAL`).
pub fn send_signal(pid: u32, signal: i32) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("pid {pid} names no single process"),
            )
        })?;
    // SAFETY: kill takes plain integers and touches no memory of ours; `pid` is positive, so it
    // names one process.
    if unsafe { libc::kill(pid, signal) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether a process numbered `pid` exists in this PID namespace: `kill(pid, 0)` succeeds, or
/// is refused (`EPERM`: another user's); `Some(false)` on `ESRCH`. `None` for a number that is
/// not a single process's (0, above `i32::MAX`) or another error.
#[cfg(target_os = "linux")]
pub(crate) fn exists(pid: u32) -> Option<bool> {
    let pid = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    // SAFETY: kill with signal 0 sends no signal and reads no memory of ours; `pid` is positive,
    // so it names one process, never a group or every process.
    let rc = unsafe { libc::kill(pid, 0) };
    if rc == 0 {
        return Some(true);
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::EPERM) => Some(true),
        Some(libc::ESRCH) => Some(false),
        _ => None,
    }
}
