//! What every exported function goes through: counting, the init check, fail injection,
//! handle decoding, no unwinding; and the helpers that write through caller pointers.

use std::ffi::{c_char, c_uint};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{
    NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_UNINITIALIZED,
    NVML_ERROR_UNKNOWN, NVML_SUCCESS, NvmlReturn,
};
use crate::handles::{NvmlDevice, Target, index_of, target_of};
use crate::state::{Global, Loaded, lock, log_calls};

/// Runs `body` under the global lock after counting the call; a panic becomes 999.
pub(crate) fn entry(
    name: &'static str,
    body: impl FnOnce(&mut Global) -> NvmlReturn,
) -> NvmlReturn {
    catch_unwind(AssertUnwindSafe(|| {
        let delay = {
            let mut g = lock();
            let calls = g.calls.entry(name).or_insert(0);
            *calls += 1;
            let calls = *calls;
            log_calls(&mut g);
            g.loaded.as_ref().and_then(|l| {
                l.sc.slow
                    .iter()
                    .find(|r| r.function == name && calls > r.after)
                    .map(|r| std::time::Duration::from_millis(r.ms))
            })
        };
        // A blocking driver call: the other functions answer meanwhile.
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        body(&mut lock())
    }))
    .unwrap_or(NVML_ERROR_UNKNOWN)
}

/// An initialised-only function; `device` is the device index the fail rules may match.
pub(crate) fn system_call(
    name: &'static str,
    device: Option<usize>,
    body: impl FnOnce(&mut Loaded) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        if let Some(code) = l.take_failure(name, device) {
            return code;
        }
        body(l)
    })
}

/// A function taking an `nvmlDevice_t`: invalid handles give INVALID_ARGUMENT (after fail rules).
pub(crate) fn device_call(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&mut Loaded, usize) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        let index = index_of(handle).filter(|&i| i < l.sc.devices.len());
        if let Some(code) = l.take_failure(name, index) {
            return code;
        }
        match index {
            Some(i) => body(l, i),
            None => NVML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// A function taking a GPU or a MIG device handle; the fail rules see the GPU's index.
pub(crate) fn any_call(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&mut Loaded, Target) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        let target = target_of(l, handle);
        let mig = match target {
            Some(Target::Mig(_, k)) => Some(k),
            _ => None,
        };
        if let Some(code) = l.take_failure_on(name, target.map(Target::gpu), mig) {
            return code;
        }
        match target {
            Some(t) => body(l, t),
            None => NVML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// Writes `text` NUL-terminated into a caller buffer of `length` bytes.
///
/// # Safety
/// `buf` is NULL or valid for `length` bytes of writes.
pub(crate) unsafe fn write_str(buf: *mut c_char, length: c_uint, text: &str) -> NvmlReturn {
    if buf.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if (length as usize) < bytes.len() + 1 {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller's buffer holds `length` >= len + 1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    NVML_SUCCESS
}

/// Writes `value` through an out-pointer, or returns INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-null and valid per the caller's contract; unaligned is tolerated.
    unsafe { out.write_unaligned(value) };
    NVML_SUCCESS
}
