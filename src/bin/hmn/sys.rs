//! The one foreign call of `hmn`: forwarding a signal to a child process.
#![allow(unsafe_code)]

/// Send SIGINT to `pid`; `false` if it could not be delivered.
#[cfg(unix)]
pub fn interrupt(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, libc::SIGINT) == 0 }
}

/// Windows delivers Ctrl-C to every process of the console; nothing to forward.
#[cfg(not(unix))]
pub fn interrupt(_pid: u32) -> bool {
    false
}
