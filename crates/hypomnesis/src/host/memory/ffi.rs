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

/// Bumped in the child of every `fork()` of this process (a `pthread_atfork` handler).
static FORKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn forked_child() {
    // Async-signal-safe: one atomic increment.
    FORKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// How many times this process is a forked child of the one that first asked: a file of
/// `/proc/self` kept open describes this process only while this stays the same. The handler
/// is registered at the first call; `None` when it could not be.
pub(crate) fn fork_generation() -> Option<u64> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: pthread_atfork with no prepare or parent handler and a child handler that only
    // does an atomic increment, which is async-signal-safe.
    let ok = *REGISTERED
        .get_or_init(|| unsafe { libc::pthread_atfork(None, None, Some(forked_child)) == 0 });
    ok.then(|| FORKS.load(std::sync::atomic::Ordering::Relaxed))
}
