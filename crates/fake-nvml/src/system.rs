//! System queries: driver, NVML and CUDA versions, process names.

use std::ffi::{c_char, c_int, c_uint};

use crate::abi::{NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NvmlReturn};
use crate::entry::{entry, put, system_call, write_str};
use crate::scenario;
use crate::state::ensure_loaded;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    system_call("nvmlSystemGetDriverVersion", None, |l| {
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(version, length, &l.sc.driver_version) }
    })
}

/// Works without init (as in real NVML): the scenario is read if possible, else the default.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    let name = "nvmlSystemGetNVMLVersion";
    entry(name, |g| {
        let _ = ensure_loaded(g);
        let text = match g.loaded.as_mut() {
            Some(l) => {
                if let Some(code) = l.take_failure(name, None) {
                    return code;
                }
                l.sc.nvml_version.clone()
            }
            None => scenario::DEFAULT_NVML_VERSION.to_owned(),
        };
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(version, length, &text) }
    })
}

fn cuda_version(name: &'static str, out: *mut c_int) -> NvmlReturn {
    system_call(name, None, |l| {
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, l.sc.cuda_driver_version) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    cuda_version("nvmlSystemGetCudaDriverVersion", version)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    cuda_version("nvmlSystemGetCudaDriverVersion_v2", version)
}

/// Unknown pid gives NOT_FOUND.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    system_call("nvmlSystemGetProcessName", None, |l| {
        if name.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        match l.sc.process_names.get(&pid) {
            // SAFETY: caller buffer of `length` bytes (NVML contract).
            Some(text) => unsafe { write_str(name, length, text) },
            None => NVML_ERROR_NOT_FOUND,
        }
    })
}
