//! The only foreign calls of the Metal backend: the XNU `ledger` system call, `libproc`,
//! `sysctlbyname` and Metal's default device.
//!
//! Layouts and constants are those of XNU's `osfmk/kern/ledger.h`, `<libproc.h>` and
//! `<sys/syscall.h>`; the `ledger` call has no public header, so it is made through `syscall`.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::mem::size_of;
use std::ptr;

use objc2_metal::MTLDevice as _;

// `MTLCreateSystemDefaultDevice` returns no device unless CoreGraphics is linked (objc2-metal
// documents this); the empty block only adds the framework to the link line.
#[link(name = "CoreGraphics", kind = "framework")]
unsafe extern "C" {}

/// `SYS_ledger` of `<sys/syscall.h>`.
const SYS_LEDGER: libc::c_int = 373;
/// `LEDGER_ENTRY_INFO`: balances of one task's entries, in template order.
const LEDGER_ENTRY_INFO: libc::c_int = 1;
/// `LEDGER_TEMPLATE_INFO`: names of the task ledger's entries.
const LEDGER_TEMPLATE_INFO: libc::c_int = 2;
/// `LEDGER_NAME_MAX`.
const LEDGER_NAME_MAX: usize = 32;
/// `PROC_ALL_PIDS` of `<libproc.h>`.
const PROC_ALL_PIDS: u32 = 1;
/// `PROC_PIDPATHINFO_MAXSIZE` of `<libproc.h>` (4 × `MAXPATHLEN`).
const PID_PATH_MAX: usize = 4096;

/// First capacity of the template buffer (macOS 15 has about 50 entries).
const FIRST_TEMPLATE_CAPACITY: usize = 128;
/// A ledger template larger than this is garbage.
const MAX_TEMPLATE_ENTRIES: usize = 1 << 14;
/// A process table larger than this is garbage (`kern.maxproc` is a few thousand).
const MAX_PIDS: usize = 1 << 22;
/// A `sysctl` string longer than this is garbage.
const MAX_SYSCTL_STRING: usize = 4096;
/// Tries of a buffer-sizing protocol before a list that keeps growing is given up on.
const MAX_ATTEMPTS: usize = 8;

/// `struct ledger_template_info`.
#[allow(dead_code)] // the kernel fills every field; only some are read
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct LedgerTemplateInfo {
    name: [u8; LEDGER_NAME_MAX],
    group: [u8; LEDGER_NAME_MAX],
    units: [u8; LEDGER_NAME_MAX],
}

/// `struct ledger_entry_info` (the first, 48-byte version the command `LEDGER_ENTRY_INFO`
/// returns; `LEDGER_ENTRY_INFO_V2` returns a longer one).
#[allow(dead_code)] // the kernel fills every field; only some are read
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct LedgerEntryInfo {
    balance: i64,
    credit: i64,
    debit: i64,
    limit: u64,
    refill_period: u64,
    last_refill: u64,
}

const _: () = assert!(size_of::<LedgerTemplateInfo>() == 96);
const _: () = assert!(size_of::<LedgerEntryInfo>() == 48);

const EMPTY_TEMPLATE: LedgerTemplateInfo = LedgerTemplateInfo {
    name: [0; LEDGER_NAME_MAX],
    group: [0; LEDGER_NAME_MAX],
    units: [0; LEDGER_NAME_MAX],
};

/// The `errno` of the last failed call (`EIO` if the OS gave none).
fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Why a ledger read gave no balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LedgerError {
    /// The system call failed with this `errno` (`EPERM`: another user's process; `ESRCH`: gone).
    Errno(i32),
    /// The process's ledger has only this many entries, not enough to hold the one asked for.
    Short(usize),
}

/// The names of the task ledger's entries, in entry order (`LEDGER_TEMPLATE_INFO`).
pub(crate) fn ledger_template_names() -> Result<Vec<[u8; LEDGER_NAME_MAX]>, i32> {
    let mut capacity = FIRST_TEMPLATE_CAPACITY;
    for _ in 0..MAX_ATTEMPTS {
        let mut buf = vec![EMPTY_TEMPLATE; capacity];
        let mut count = libc::c_int::try_from(capacity).map_err(|_| libc::EOVERFLOW)?;
        // SAFETY: `buf` is a live, writable array of `capacity` `ledger_template_info` records
        // and `count` (a live `int`) says so; the kernel copies out at most `count` records and
        // stores the number it wrote in `count`. The third argument is unused by this command.
        let rc = unsafe {
            libc::syscall(
                SYS_LEDGER,
                LEDGER_TEMPLATE_INFO,
                buf.as_mut_ptr(),
                &raw mut count,
                ptr::null_mut::<libc::c_char>(),
            )
        };
        if rc != 0 {
            return Err(errno());
        }
        let filled = usize::try_from(count).map_err(|_| libc::EINVAL)?;
        if filled < capacity {
            buf.truncate(filled);
            return Ok(buf.into_iter().map(|t| t.name).collect());
        }
        // Full: there may be more entries than room.
        capacity = capacity.saturating_mul(2);
        if capacity > MAX_TEMPLATE_ENTRIES {
            break;
        }
    }
    Err(libc::E2BIG)
}

/// The balance of ledger entry `index` of process `pid` (`LEDGER_ENTRY_INFO`).
pub(crate) fn ledger_balance(pid: i32, index: usize) -> Result<i64, LedgerError> {
    let capacity = index.saturating_add(1);
    let mut buf = vec![LedgerEntryInfo::default(); capacity];
    let mut count =
        libc::c_int::try_from(capacity).map_err(|_| LedgerError::Errno(libc::EOVERFLOW))?;
    // The kernel reads the pid from a pointer-sized (`caddr_t`) argument: 64 bits on macOS.
    let pid_arg = i64::from(pid);
    // SAFETY: `buf` is a live, writable array of `capacity` `ledger_entry_info` records and
    // `count` (a live `int`) says so; the kernel copies out at most `count` records and stores
    // the number it wrote in `count`. `pid_arg` is a plain integer.
    let rc = unsafe {
        libc::syscall(
            SYS_LEDGER,
            LEDGER_ENTRY_INFO,
            pid_arg,
            buf.as_mut_ptr(),
            &raw mut count,
        )
    };
    if rc != 0 {
        return Err(LedgerError::Errno(errno()));
    }
    let filled = usize::try_from(count).unwrap_or(0).min(capacity);
    if filled <= index {
        return Err(LedgerError::Short(filled));
    }
    buf.get(index)
        .map(|e| e.balance)
        .ok_or(LedgerError::Short(filled))
}

/// Every process id on the host (`proc_listpids(PROC_ALL_PIDS)`), sorted, without duplicates.
pub(crate) fn all_pids() -> Result<Vec<i32>, i32> {
    // SAFETY: a null buffer of size 0 asks only for the size needed; nothing is written.
    let needed = unsafe { libc::proc_listpids(PROC_ALL_PIDS, 0, ptr::null_mut(), 0) };
    if needed <= 0 {
        return Err(errno());
    }
    let mut capacity = usize::try_from(needed)
        .unwrap_or(0)
        .div_ceil(size_of::<libc::c_int>())
        .saturating_add(64);
    for _ in 0..MAX_ATTEMPTS {
        let mut buf: Vec<libc::c_int> = vec![0; capacity];
        let bytes = libc::c_int::try_from(capacity.saturating_mul(size_of::<libc::c_int>()))
            .map_err(|_| libc::EOVERFLOW)?;
        // SAFETY: `buf` is a live, writable array of `capacity` ints, `bytes` long; the kernel
        // writes at most `bytes` bytes and returns how many it wrote.
        let rc = unsafe { libc::proc_listpids(PROC_ALL_PIDS, 0, buf.as_mut_ptr().cast(), bytes) };
        if rc < 0 {
            return Err(errno());
        }
        let filled = usize::try_from(rc).unwrap_or(0) / size_of::<libc::c_int>();
        if filled < capacity {
            buf.truncate(filled);
            buf.sort_unstable();
            buf.dedup();
            return Ok(buf);
        }
        // Full: processes appeared since the sizing call.
        capacity = capacity.saturating_mul(2);
        if capacity > MAX_PIDS {
            break;
        }
    }
    Err(libc::E2BIG)
}

/// The executable path of `pid` (`proc_pidpath`) as raw bytes; `None` when it cannot be read.
pub(crate) fn pid_path(pid: i32) -> Option<Vec<u8>> {
    let mut buf = vec![0_u8; PID_PATH_MAX];
    let size = u32::try_from(buf.len()).ok()?;
    // SAFETY: `buf` is a live, writable buffer of `size` bytes; the call writes at most `size`
    // bytes and returns the length of the path it wrote.
    let rc = unsafe { libc::proc_pidpath(pid, buf.as_mut_ptr().cast(), size) };
    let len = usize::try_from(rc).ok().filter(|&n| n > 0)?;
    buf.truncate(len.min(PID_PATH_MAX));
    Some(buf)
}

/// A 64-bit integer `sysctl` (`hw.memsize`).
pub(crate) fn sysctl_u64(name: &CStr) -> Result<u64, i32> {
    let mut value = 0_u64;
    let mut len = size_of::<u64>();
    // SAFETY: `name` is NUL-terminated; `value` is a live, writable `u64` and `len` (a live
    // `size_t`) gives its size; the kernel writes at most `len` bytes and updates `len`. Nothing
    // is set (null new value, length 0).
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            (&raw mut value).cast(),
            &raw mut len,
            ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    if len != size_of::<u64>() {
        return Err(libc::EINVAL);
    }
    Ok(value)
}

/// A 32-bit integer `sysctl` (`sysctl.proc_translated`).
pub(crate) fn sysctl_i32(name: &CStr) -> Result<i32, i32> {
    let mut value = 0_i32;
    let mut len = size_of::<i32>();
    // SAFETY: as `sysctl_u64`, for a live, writable `i32`.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            (&raw mut value).cast(),
            &raw mut len,
            ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    if len != size_of::<i32>() {
        return Err(libc::EINVAL);
    }
    Ok(value)
}

/// A string `sysctl` (`machdep.cpu.brand_string`) as the raw bytes it returned (usually with a
/// terminating NUL).
pub(crate) fn sysctl_bytes(name: &CStr) -> Result<Vec<u8>, i32> {
    let mut len = 0_usize;
    // SAFETY: `name` is NUL-terminated; a null old value asks only for the size, written to the
    // live `len`. Nothing is set.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            ptr::null_mut(),
            &raw mut len,
            ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    if len > MAX_SYSCTL_STRING {
        return Err(libc::E2BIG);
    }
    // Room for a value that grew since the sizing call.
    let mut buf = vec![0_u8; len.saturating_add(64)];
    let mut len = buf.len();
    // SAFETY: `buf` is a live, writable buffer of `len` bytes and `len` (a live `size_t`) says
    // so; the kernel writes at most `len` bytes and stores how many in `len`. Nothing is set.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            &raw mut len,
            ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(errno());
    }
    buf.truncate(len);
    Ok(buf)
}

/// Metal's recommended working-set size of the system default device, bytes; `None` when Metal
/// has no default device (e.g. a virtual machine without a GPU).
pub(crate) fn recommended_working_set() -> Option<u64> {
    objc2::rc::autoreleasepool(|_| {
        objc2_metal::MTLCreateSystemDefaultDevice().map(|d| d.recommendedMaxWorkingSetSize())
    })
}
