//! Windows: the working set of the calling process.

use crate::{error::HypomnesisError, error::Result};

/// Working set of the calling process, bytes.
pub(crate) fn self_rss() -> Result<u64> {
    ffi::working_set().map_err(|code| {
        HypomnesisError::ram(
            crate::error::ErrorKind::Other,
            format!("K32GetProcessMemoryInfo failed (GetLastError {code})"),
        )
    })
}

mod ffi {
    //! The one foreign call of the Windows RSS reader.
    #![allow(unsafe_code)]

    use windows::Win32::Foundation::GetLastError;
    use windows::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
    use windows::Win32::System::Threading::GetCurrentProcess;

    /// `WorkingSetSize` of this process, or the `GetLastError` code.
    pub(crate) fn working_set() -> Result<u64, u32> {
        let mut counters = PROCESS_MEMORY_COUNTERS::default();
        let size = u32::try_from(size_of::<PROCESS_MEMORY_COUNTERS>()).unwrap_or(u32::MAX);
        // SAFETY: GetCurrentProcess returns a pseudo-handle that needs no closing; `counters` is
        // a writable PROCESS_MEMORY_COUNTERS of exactly `size` bytes for the duration of the call.
        let ok = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &raw mut counters, size) };
        if ok.as_bool() {
            Ok(counters.WorkingSetSize as u64)
        } else {
            // SAFETY: GetLastError only reads this thread's last-error value.
            Err(unsafe { GetLastError() }.0)
        }
    }
}
