//! The host's memory and the calling process's resident set: one file per OS, the same function
//! in each (the parsers are in `host::parse::memory`).

use crate::error::Result;

#[cfg(target_os = "linux")]
mod ffi;
pub(crate) mod host;
#[cfg(target_os = "linux")]
pub(crate) mod linux;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(windows)]
mod windows;

/// Resident set size of the calling process, in bytes.
///
/// # Errors
///
/// [`crate::error::HypomnesisError::Io`] when the OS source cannot be read (the message names the
/// path), [`crate::error::HypomnesisError::Ram`] when what it returned makes no sense or the platform
/// has no implementation.
///
/// # Platform-specific behaviour
///
/// Linux: `/proc/self/statm` resident pages × page size (falling back to `VmRSS` of
/// `/proc/self/status`). Windows: the working set from `K32GetProcessMemoryInfo`. macOS:
/// `phys_footprint` from `task_info(TASK_VM_INFO)`.
pub fn process_rss() -> Result<u64> {
    #[cfg(target_os = "linux")]
    let rss = linux::self_rss();
    #[cfg(windows)]
    let rss = windows::self_rss();
    #[cfg(target_os = "macos")]
    let rss = macos::self_rss();
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    let rss = Err(crate::error::HypomnesisError::ram(
        crate::error::ErrorKind::Other,
        format!(
            "process RSS is not implemented for this platform ({})",
            std::env::consts::OS
        ),
    ));
    rss
}
