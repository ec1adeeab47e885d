//! Windows: a process's owner, executable and working set, through the process's handle and
//! its access token.

use super::{ContextParts, ProcessContext};

/// What can be read of process `pid` with the least access right (`PROCESS_QUERY_LIMITED_
/// INFORMATION`, which users hold for their own processes and administrators for all).
pub fn context(pid: u32, parts: ContextParts) -> ProcessContext {
    let mut ctx = ProcessContext::default();
    let Some(process) = ffi::Process::open(pid) else {
        return ctx;
    };
    if parts.command {
        ctx.command = process.image_path();
    }
    if parts.user {
        ctx.user = process.owner();
    }
    if parts.rss {
        ctx.rss_bytes = process.working_set().filter(|&b| b > 0);
    }
    if parts.cpu_time {
        ctx.cpu_time = process.cpu_time();
    }
    ctx
}

/// Whether process `pid` exists (see [`crate::host::process::process_exists`]).
pub(crate) fn exists(pid: u32) -> Option<bool> {
    ffi::exists(pid)
}

mod ffi {
    //! The foreign calls of the Windows process context.
    #![allow(unsafe_code)]

    use windows::Win32::Foundation::{CloseHandle, FILETIME, HANDLE};
    use windows::Win32::Security::{
        GetTokenInformation, LookupAccountSidW, SID_NAME_USE, TOKEN_QUERY, TOKEN_USER, TokenUser,
    };
    use windows::Win32::System::ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
    use windows::Win32::System::Threading::{
        GetProcessTimes, OpenProcess, OpenProcessToken, PROCESS_NAME_WIN32,
        PROCESS_QUERY_LIMITED_INFORMATION, QueryFullProcessImageNameW,
    };
    use windows::core::{PCWSTR, PWSTR};

    /// An open process handle, closed on drop.
    pub struct Process(HANDLE);

    impl Drop for Process {
        fn drop(&mut self) {
            // SAFETY: the handle came from OpenProcess and is closed once, here.
            let _ = unsafe { CloseHandle(self.0) };
        }
    }

    /// Text of a UTF-16 buffer's first `len` units.
    fn text(buf: &[u16], len: u32) -> Option<String> {
        let units = buf.get(..usize::try_from(len).ok()?)?;
        Some(String::from_utf16_lossy(units)).filter(|s| !s.is_empty())
    }

    /// Whether process `pid` exists: it opens and has not exited, or opening it is refused
    /// (only an existing process refuses); no such pid is `Some(false)`.
    pub fn exists(pid: u32) -> Option<bool> {
        use windows::Win32::Foundation::{
            ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER, STILL_ACTIVE,
        };
        use windows::Win32::System::Threading::GetExitCodeProcess;
        // SAFETY: OpenProcess takes plain values; the handle it returns is owned by Process.
        match unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) } {
            Ok(h) => {
                let process = Process(h);
                let mut code = 0_u32;
                // SAFETY: the handle is open for the call; `code` is a writable u32.
                unsafe { GetExitCodeProcess(process.0, &raw mut code) }.ok()?;
                // A process that exited with 259 reads as running: Windows cannot tell them apart.
                Some(i32::try_from(code).ok() == Some(STILL_ACTIVE.0))
            }
            Err(e) if e.code() == ERROR_INVALID_PARAMETER.to_hresult() => Some(false),
            Err(e) if e.code() == ERROR_ACCESS_DENIED.to_hresult() => Some(true),
            Err(_) => None,
        }
    }

    impl Process {
        pub fn open(pid: u32) -> Option<Self> {
            // SAFETY: OpenProcess takes plain values; the handle it returns is owned by Self.
            unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) }
                .ok()
                .map(Self)
        }

        /// The full path of the process's executable.
        pub fn image_path(&self) -> Option<String> {
            let mut buf = vec![0_u16; 32_768];
            let mut len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
            // SAFETY: `buf` holds `len` writable UTF-16 units for the call; `len` is updated to
            // the units written.
            unsafe {
                QueryFullProcessImageNameW(
                    self.0,
                    PROCESS_NAME_WIN32,
                    PWSTR(buf.as_mut_ptr()),
                    &raw mut len,
                )
            }
            .ok()?;
            text(&buf, len)
        }

        /// The working set, bytes.
        pub fn working_set(&self) -> Option<u64> {
            let mut counters = PROCESS_MEMORY_COUNTERS::default();
            let size = u32::try_from(size_of::<PROCESS_MEMORY_COUNTERS>()).ok()?;
            // SAFETY: `counters` is a writable PROCESS_MEMORY_COUNTERS of `size` bytes.
            let ok = unsafe { K32GetProcessMemoryInfo(self.0, &raw mut counters, size) };
            ok.as_bool().then_some(counters.WorkingSetSize as u64)
        }

        /// CPU time used, kernel and user together.
        pub fn cpu_time(&self) -> Option<std::time::Duration> {
            let (mut created, mut exited) = (FILETIME::default(), FILETIME::default());
            let (mut kernel, mut user) = (FILETIME::default(), FILETIME::default());
            // SAFETY: the four FILETIMEs are writable for the call to fill.
            unsafe {
                GetProcessTimes(
                    self.0,
                    &raw mut created,
                    &raw mut exited,
                    &raw mut kernel,
                    &raw mut user,
                )
            }
            .ok()?;
            // FILETIME durations count 100-nanosecond intervals.
            let hundreds =
                |t: FILETIME| u64::from(t.dwHighDateTime) << 32 | u64::from(t.dwLowDateTime);
            let total = hundreds(kernel).checked_add(hundreds(user))?;
            Some(std::time::Duration::from_nanos(total.checked_mul(100)?))
        }

        /// The name of the account the process runs as.
        pub fn owner(&self) -> Option<String> {
            let mut token = HANDLE::default();
            // SAFETY: `token` receives a new handle, closed below.
            unsafe { OpenProcessToken(self.0, TOKEN_QUERY, &raw mut token) }.ok()?;
            let token = Process(token);
            // TOKEN_USER and the SID after it; 256 bytes hold any SID (68 at most) with room.
            let mut buf = vec![0_u64; 32];
            let bytes = u32::try_from(buf.len() * 8).ok()?;
            let mut needed = 0_u32;
            // SAFETY: `buf` is `bytes` writable bytes, aligned for TOKEN_USER.
            unsafe {
                GetTokenInformation(
                    token.0,
                    TokenUser,
                    Some(buf.as_mut_ptr().cast()),
                    bytes,
                    &raw mut needed,
                )
            }
            .ok()?;
            // SAFETY: the call succeeded, so `buf` starts with a TOKEN_USER whose SID pointer
            // points into `buf`, which lives until the end of this function.
            let sid = unsafe { &*buf.as_ptr().cast::<TOKEN_USER>() }.User.Sid;
            let mut name = vec![0_u16; 256];
            let mut name_len = u32::try_from(name.len()).ok()?;
            let mut domain = vec![0_u16; 256];
            let mut domain_len = u32::try_from(domain.len()).ok()?;
            let mut kind = SID_NAME_USE::default();
            // SAFETY: both buffers hold the given number of UTF-16 units; the lengths are
            // updated to what was written (without the terminating NUL).
            unsafe {
                LookupAccountSidW(
                    PCWSTR::null(),
                    sid,
                    Some(PWSTR(name.as_mut_ptr())),
                    &raw mut name_len,
                    Some(PWSTR(domain.as_mut_ptr())),
                    &raw mut domain_len,
                    &raw mut kind,
                )
            }
            .ok()?;
            text(&name, name_len)
        }
    }
}
