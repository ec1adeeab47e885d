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

/// Time since boot by `CLOCK_BOOTTIME` (suspend included, in this process's time namespace):
/// the clock `/proc/uptime` and the start times in `stat` are counted on, read through the
/// vDSO without a system call. `None` if the clock cannot be read.
#[cfg(target_os = "linux")]
pub(crate) fn boot_time() -> Option<std::time::Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec; CLOCK_BOOTTIME is a valid clock on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &raw mut ts) };
    if rc != 0 {
        return None;
    }
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u64::try_from(ts.tv_nsec).ok()?;
    std::time::Duration::from_secs(secs).checked_add(std::time::Duration::from_nanos(nanos))
}
