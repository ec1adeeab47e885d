//! macOS: a process's owner, executable and resident set through `proc_pidinfo`.

use super::ProcessContext;

pub fn context(pid: u32) -> ProcessContext {
    let mut ctx = ProcessContext::default();
    let Ok(pid) = i32::try_from(pid) else {
        return ctx;
    };
    ctx.uid = ffi::uid(pid);
    ctx.user = ctx
        .uid
        .map(|u| ffi::user_name(u).unwrap_or_else(|| u.to_string()));
    ctx.command = ffi::path(pid);
    ctx.rss_bytes = ffi::resident(pid).filter(|&b| b > 0);
    ctx
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

    /// The effective uid.
    pub fn uid(pid: i32) -> Option<u32> {
        pidinfo::<libc::proc_bsdinfo>(pid, libc::PROC_PIDTBSDINFO).map(|i| i.pbi_uid)
    }

    /// The resident set, bytes.
    pub fn resident(pid: i32) -> Option<u64> {
        pidinfo::<libc::proc_taskinfo>(pid, libc::PROC_PIDTASKINFO).map(|i| i.pti_resident_size)
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
