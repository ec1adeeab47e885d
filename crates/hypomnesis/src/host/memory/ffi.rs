//! The only foreign calls of the RAM readers.
#![allow(unsafe_code)]

/// The system page size in bytes, or `None` if `sysconf` cannot tell.
pub(crate) fn page_size() -> Option<u64> {
    // SAFETY: sysconf takes an integer name and reads no memory of ours; _SC_PAGESIZE is valid.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(v).ok().filter(|&p| p > 0)
}

/// Clock ticks per second (the unit of CPU times in `/proc/<pid>/stat`), or `None` if
/// `sysconf` cannot tell.
pub(crate) fn clock_ticks() -> Option<u64> {
    // SAFETY: as above; _SC_CLK_TCK is a valid name.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&t| t > 0)
}
