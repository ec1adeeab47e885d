//! `nvmlInit*`, `nvmlShutdown` and `nvmlErrorString`.

use std::ffi::{CStr, c_char, c_uint};
use std::panic::catch_unwind;

use crate::abi::*;
use crate::entry::entry;
use crate::state::{ensure_loaded, lock};

fn init(name: &'static str) -> NvmlReturn {
    entry(name, |g| {
        if let Err(msg) = ensure_loaded(g) {
            eprintln!("fake-nvml: {name}: {msg}");
            return NVML_ERROR_UNKNOWN;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNKNOWN;
        };
        if let Some(code) = l.take_failure(name, None) {
            return code;
        }
        if let Some(code) = l.sc.init_error {
            return code;
        }
        g.refcount += 1;
        g.init_count += 1;
        NVML_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init("nvmlInit_v2")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    init("nvmlInit")
}

/// Flags (NO_GPUS = 1, NO_ATTACH = 2, FORCE_INIT = 4) are accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    init("nvmlInitWithFlags")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    let name = "nvmlShutdown";
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        if let Some(code) = g.loaded.as_mut().and_then(|l| l.take_failure(name, None)) {
            return code;
        }
        g.refcount -= 1;
        NVML_SUCCESS
    })
}

/// Never NULL; works without init; not subject to fail rules (it returns a string).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let empty = catch_unwind(|| {
        let mut g = lock();
        *g.calls.entry("nvmlErrorString").or_insert(0) += 1;
        let _ = ensure_loaded(&mut g);
        g.loaded
            .as_ref()
            .is_some_and(|l| l.sc.garbage.empty_error_strings)
    })
    .unwrap_or(false);
    if empty {
        return c"".as_ptr();
    }
    error_string(result).as_ptr()
}

/// The static text `nvmlErrorString` returns for `code` (the driver's wording, which `nvml.h`
/// does not fix; hence here rather than in the shared ABI).
fn error_string(code: NvmlReturn) -> &'static CStr {
    match code {
        NVML_SUCCESS => c"Success",
        NVML_ERROR_UNINITIALIZED => c"Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT => c"Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED => c"Not Supported",
        NVML_ERROR_NO_PERMISSION => c"Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED => c"Already Initialized",
        NVML_ERROR_NOT_FOUND => c"Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE => c"Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER => c"Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED => c"Driver Not Loaded",
        NVML_ERROR_TIMEOUT => c"Timeout",
        NVML_ERROR_IRQ_ISSUE => c"Interrupt request issue",
        NVML_ERROR_LIBRARY_NOT_FOUND => c"NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND => c"Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM => c"Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST => c"GPU is lost",
        NVML_ERROR_RESET_REQUIRED => c"GPU requires reset",
        NVML_ERROR_OPERATING_SYSTEM => c"GPU access blocked by the operating system",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH => c"RM has detected an NVML/RM version mismatch",
        NVML_ERROR_IN_USE => c"In use by another client",
        NVML_ERROR_MEMORY => c"Insufficient Memory",
        NVML_ERROR_NO_DATA => c"No data",
        NVML_ERROR_VGPU_ECC_NOT_SUPPORTED => c"vGPU operation not available while ECC is enabled",
        NVML_ERROR_INSUFFICIENT_RESOURCES => c"Insufficient resources",
        NVML_ERROR_FREQ_NOT_SUPPORTED => c"Frequency not supported",
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        NVML_ERROR_DEPRECATED => c"Deprecated",
        NVML_ERROR_NOT_READY => c"Not Ready",
        NVML_ERROR_GPU_NOT_FOUND => c"GPU not found",
        NVML_ERROR_INVALID_STATE => c"Invalid state",
        NVML_ERROR_RESET_TYPE_NOT_SUPPORTED => c"Reset type not supported",
        NVML_ERROR_UNKNOWN => c"Unknown Error",
        _ => c"Unrecognized NVML return code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_string() {
        for code in (0..=40).chain([77, 999, u32::MAX]) {
            assert!(!error_string(code).to_bytes().is_empty());
        }
    }
}
