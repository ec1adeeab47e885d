//! `nvmlInit*`, `nvmlShutdown` and `nvmlErrorString`.

use std::ffi::{c_char, c_uint};
use std::panic::catch_unwind;

use crate::abi::{NVML_ERROR_UNINITIALIZED, NVML_ERROR_UNKNOWN, NVML_SUCCESS};
use crate::entry::entry;
use crate::state::{ensure_loaded, lock};
use crate::{NvmlReturn, abi};

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
    abi::error_string(result).as_ptr()
}
