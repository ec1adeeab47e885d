//! macOS: a process's owner, executable and resident set through `proc_pidinfo`.

use super::{ContextParts, ProcessContext};

pub fn context(pid: u32, parts: ContextParts) -> ProcessContext {
    let mut ctx = ProcessContext::default();
    let Ok(pid) = i32::try_from(pid) else {
        return ctx;
    };
    if parts.user {
        ctx.uid = ffi::uid(pid);
        ctx.user = ctx
            .uid
            .map(|u| ffi::user_name(u).unwrap_or_else(|| u.to_string()));
    }
    if parts.command {
        ctx.command = ffi::path(pid);
    }
    if parts.rss || parts.cpu_time {
        let task = ffi::task_info(pid);
        if parts.rss {
            ctx.rss_bytes = task.map(|t| t.pti_resident_size).filter(|&b| b > 0);
        }
        if parts.cpu_time {
            ctx.cpu_time = task.and_then(|t| {
                ffi::mach_to_duration(t.pti_total_user.checked_add(t.pti_total_system)?)
            });
        }
    }
    ctx
}

/// Whether process `pid` exists (see [`crate::host::process::process_exists`]). Pid 0 is the kernel's task,
/// which always exists; a pid past `pid_t` cannot.
pub(crate) fn exists(pid: u32) -> Option<bool> {
    match i32::try_from(pid) {
        Ok(0) => Some(true),
        Ok(pid) => ffi::exists(pid),
        Err(_) => Some(false),
    }
}

mod ffi {
    //! The foreign calls of the macOS process context.
    #![allow(unsafe_code)]

    use std::ffi::CStr;

    /// `proc_pidinfo` of flavor `flavor` into a `T`, when the kernel filled all of it.
    fn pidinfo<T: Default>(pid: i32, flavor: i32) -> Option<T> {
        let mut info = T::default();
        let size = i32::try_from(size_of::<T>()).ok()?;
        // SAFETY: `info` is a writable T of `size` bytes, the structure the flavor asks for.
        let n = unsafe { libc::proc_pidinfo(pid, flavor, 0, (&raw mut info).cast(), size) };
        (n == size).then_some(info)
    }

    /// `kill(pid, 0)`: 0 or `EPERM` (another user's) is a process; `ESRCH` is none.
    pub fn exists(pid: i32) -> Option<bool> {
        // SAFETY: signal 0 sends nothing: the call only checks that `pid` (> 0) can be signalled.
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

    /// The effective uid.
    pub fn uid(pid: i32) -> Option<u32> {
        pidinfo::<libc::proc_bsdinfo>(pid, libc::PROC_PIDTBSDINFO).map(|i| i.pbi_uid)
    }

    /// The task's figures: resident set (bytes), CPU times (Mach absolute time units).
    pub fn task_info(pid: i32) -> Option<libc::proc_taskinfo> {
        pidinfo::<libc::proc_taskinfo>(pid, libc::PROC_PIDTASKINFO)
    }

    /// Mach absolute time units as a duration (nanoseconds on Intel; on Apple silicon a
    /// tick is 125/3 ns, which the timebase says).
    #[allow(deprecated)] // libc points to the mach2 crate for these; one call is not worth a crate
    pub fn mach_to_duration(ticks: u64) -> Option<std::time::Duration> {
        let mut base = libc::mach_timebase_info { numer: 0, denom: 0 };
        // SAFETY: `base` is a writable mach_timebase_info for the call to fill.
        #[allow(deprecated)]
        // libc marks the mach time calls deprecated in favour of the mach2 crate
        let rc = unsafe { libc::mach_timebase_info(&raw mut base) };
        if rc != 0 || base.denom == 0 {
            return None;
        }
        let nanos = u128::from(ticks) * u128::from(base.numer) / u128::from(base.denom);
        Some(std::time::Duration::from_nanos(u64::try_from(nanos).ok()?))
    }

    /// The executable's path.
    pub fn path(pid: i32) -> Option<String> {
        let mut buf = vec![0_u8; 4 * 1024];
        let size = u32::try_from(buf.len()).ok()?;
        // SAFETY: `buf` holds `size` writable bytes; the call writes a NUL-terminated path.
        let n = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), size) };
        let n = usize::try_from(n).ok().filter(|&n| n > 0)?;
        Some(String::from_utf8_lossy(buf.get(..n)?).into_owned())
    }

    /// The user database's name for `uid`.
    pub fn user_name(uid: u32) -> Option<String> {
        // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut buf = vec![0_u8; 4096];
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: `pwd` and `buf` are writable for the call; on success `found` points at
        // `pwd`, whose strings point into `buf`, both alive while they are read below.
        let rc = unsafe {
            libc::getpwuid_r(
                uid,
                &raw mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &raw mut found,
            )
        };
        if rc != 0 || found.is_null() || pwd.pw_name.is_null() {
            return None;
        }
        // SAFETY: pw_name is a NUL-terminated string in `buf`.
        let name = unsafe { CStr::from_ptr(pwd.pw_name) };
        Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
    }
}
