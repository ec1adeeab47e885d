//! The only foreign call of the process readers: `kill(pid, 0)`, which sends nothing and says
//! whether a process has that number in this PID namespace.
#![allow(unsafe_code)]

/// Whether a process numbered `pid` exists in this PID namespace: `kill(pid, 0)` succeeds, or
/// is refused (`EPERM`: another user's); `Some(false)` on `ESRCH`. `None` for a number that is
/// not a single process's (0, above `i32::MAX`) or another error.
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
