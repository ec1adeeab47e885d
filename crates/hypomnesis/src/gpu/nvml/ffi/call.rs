//! The pieces every NVML call is made of: the device handle, the function types, symbol
//! lookup, return codes, and the buffers strings come back in.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use libloading::Library;

use crate::gpu::nvml::abi::{
    AddressingMode, Memory, MemoryV2, NVML_ERROR_INVALID_ARGUMENT, NVML_SUCCESS, NvmlReturn,
    PciInfo, ProcessUtilizationSample, UtilizationRates,
};

/// Buffer sizes for string queries (`NVML_DEVICE_NAME_V2_BUFFER_SIZE`, …).
pub(super) const DEVICE_NAME_BUFFER: usize = 96;
pub(super) const DEVICE_UUID_BUFFER: usize = 96;
pub(super) const SYSTEM_VERSION_BUFFER: usize = 80;
pub(super) const PROCESS_NAME_BUFFER: usize = 256;

/// `nvmlDevice_t`: an opaque handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Device(pub(super) *mut c_void);

// SAFETY: an nvmlDevice_t is an opaque token that NVML documents as usable from any thread
// (NVML is thread-safe); we never dereference it ourselves.
unsafe impl Send for Device {}
// SAFETY: as above; sharing the token between threads only passes it back to NVML.
unsafe impl Sync for Device {}

pub(super) type FnVoid = unsafe extern "C" fn() -> NvmlReturn;
pub(super) type FnErrorString = unsafe extern "C" fn(NvmlReturn) -> *const c_char;
pub(super) type FnCount = unsafe extern "C" fn(*mut c_uint) -> NvmlReturn;
pub(super) type FnHandleByIndex = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> NvmlReturn;
pub(super) type FnMemory = unsafe extern "C" fn(*mut c_void, *mut Memory) -> NvmlReturn;
pub(super) type FnAddressingMode =
    unsafe extern "C" fn(*mut c_void, *mut AddressingMode) -> NvmlReturn;
pub(super) type FnUtilization =
    unsafe extern "C" fn(*mut c_void, *mut UtilizationRates) -> NvmlReturn;
pub(super) type FnProcessUtilization = unsafe extern "C" fn(
    *mut c_void,
    *mut ProcessUtilizationSample,
    *mut c_uint,
    u64,
) -> NvmlReturn;
pub(super) type FnMemoryV2 = unsafe extern "C" fn(*mut c_void, *mut MemoryV2) -> NvmlReturn;
pub(super) type FnDeviceString =
    unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> NvmlReturn;
pub(super) type FnSystemString = unsafe extern "C" fn(*mut c_char, c_uint) -> NvmlReturn;
pub(super) type FnPci = unsafe extern "C" fn(*mut c_void, *mut PciInfo) -> NvmlReturn;
pub(super) type FnInt = unsafe extern "C" fn(*mut c_int) -> NvmlReturn;
pub(super) type FnProcesses =
    unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut c_void) -> NvmlReturn;
pub(super) type FnProcessName = unsafe extern "C" fn(c_uint, *mut c_char, c_uint) -> NvmlReturn;
pub(super) type FnMigMode =
    unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut c_uint) -> NvmlReturn;
pub(super) type FnDeviceUint = unsafe extern "C" fn(*mut c_void, *mut c_uint) -> NvmlReturn;
pub(super) type FnMigHandle =
    unsafe extern "C" fn(*mut c_void, c_uint, *mut *mut c_void) -> NvmlReturn;
pub(super) type FnParentHandle = unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> NvmlReturn;
pub(super) type FnHandleByUuid =
    unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> NvmlReturn;

/// Resolve `name` (a NUL-terminated byte string) to a function pointer of type `T`.
pub(super) fn sym<T: Copy>(lib: &Library, name: &'static [u8]) -> Option<T> {
    // SAFETY: each call site pairs a symbol name with the function type nvml.h declares for it
    // (the type aliases above); the pointer is only used while `lib` (stored alongside) lives.
    unsafe { lib.get::<T>(name).ok().map(|s| *s) }
}

/// The first of several alternative symbols that the library exports, with its name.
pub(super) fn first_sym<T: Copy>(
    lib: &Library,
    names: &[&'static [u8]],
) -> Option<(T, &'static str)> {
    names.iter().find_map(|n| {
        sym::<T>(lib, n).map(|f| {
            (
                f,
                std::str::from_utf8(n.strip_suffix(b"\0").unwrap_or(n)).unwrap_or("?"),
            )
        })
    })
}

pub(super) fn ok(rc: NvmlReturn) -> Result<(), NvmlReturn> {
    if rc == NVML_SUCCESS { Ok(()) } else { Err(rc) }
}

pub(super) fn non_null(h: *mut c_void) -> Result<Device, NvmlReturn> {
    if h.is_null() {
        Err(NVML_ERROR_INVALID_ARGUMENT)
    } else {
        Ok(Device(h))
    }
}

/// A call of `name` (its NVML function name) that writes one unsigned int.
pub(super) fn device_uint(
    name: &'static str,
    f: FnDeviceUint,
    dev: Device,
) -> Result<u32, NvmlReturn> {
    let mut v: c_uint = 0;
    let _waiting = crate::inflight::calling(name);
    // SAFETY: `v` is a valid, writable c_uint for the call; `dev` came from NVML.
    let rc = unsafe { f(dev.0, &raw mut v) };
    ok(rc).map(|()| v)
}

pub(super) fn buffer_len<T>(buf: &[T]) -> c_uint {
    c_uint::try_from(buf.len()).unwrap_or(c_uint::MAX)
}

pub(super) fn device_string(
    name: &'static str,
    f: FnDeviceString,
    dev: Device,
    size: usize,
) -> Result<Vec<u8>, NvmlReturn> {
    let mut buf = vec![0_u8; size];
    let _waiting = crate::inflight::calling(name);
    // SAFETY: `buf` is writable for `size` bytes, the length we pass; `dev` came from NVML.
    let rc = unsafe { f(dev.0, buf.as_mut_ptr().cast(), buffer_len(&buf)) };
    ok(rc)?;
    until_nul(buf)
}

pub(super) fn system_string(
    name: &'static str,
    f: FnSystemString,
    size: usize,
) -> Result<Vec<u8>, NvmlReturn> {
    let mut buf = vec![0_u8; size];
    let _waiting = crate::inflight::calling(name);
    // SAFETY: `buf` is writable for `size` bytes, the length we pass.
    let rc = unsafe { f(buf.as_mut_ptr().cast(), buffer_len(&buf)) };
    ok(rc)?;
    until_nul(buf)
}

/// The bytes before the first NUL. A buffer NVML filled without a terminator is garbage:
/// reported as `NVML_ERROR_INSUFFICIENT_SIZE`-like failure by the caller (see `mod.rs`).
pub(super) fn until_nul(mut buf: Vec<u8>) -> Result<Vec<u8>, NvmlReturn> {
    match buf.iter().position(|&b| b == 0) {
        Some(n) => {
            buf.truncate(n);
            Ok(buf)
        }
        None => Err(UNTERMINATED),
    }
}

/// Internal pseudo-code (not an NVML value) for "the string came back without a NUL".
pub(crate) const UNTERMINATED: NvmlReturn = 0xDEAD_0001;

/// Copy a C string of at most `max` bytes.
///
/// # Safety
/// `p` must point to readable memory up to its NUL terminator or `max` bytes, whichever is first.
pub(super) unsafe fn bounded_cstr(p: *const c_char, max: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..max {
        // SAFETY: the caller guarantees `p..p+i` is readable until the first NUL.
        let b = unsafe { *p.add(i) }.cast_unsigned();
        if b == 0 {
            break;
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_need_their_nul() {
        assert_eq!(until_nul(b"abc\0zz".to_vec()), Ok(b"abc".to_vec()));
        assert_eq!(until_nul(b"abc".to_vec()), Err(UNTERMINATED));
    }
}
