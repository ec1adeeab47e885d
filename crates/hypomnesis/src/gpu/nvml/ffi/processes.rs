//! The process lists' calls: which version of each list the library exports, with the
//! element layout that version writes, and one call of it.
#![allow(unsafe_code)]

use std::ffi::c_void;

use libloading::Library;

use crate::gpu::nvml::abi::NvmlReturn;
use crate::gpu::nvml::decode::{ProcessLayout, ProcessRecord, v3_layout};
use crate::gpu::nvml::ffi::call::{Device, FnProcesses, FnVoid, buffer_len, first_sym, sym};

/// A resolved process-list function with its symbol name and element layout.
#[derive(Clone, Copy)]
pub(crate) struct ProcessFn {
    f: FnProcesses,
    pub name: &'static str,
    pub layout: ProcessLayout,
}

/// The process lists of `lib` (compute, graphics, MPS clients), each the newest version it
/// exports, with the element layout that version writes (see [`v3_layout`]).
pub(super) struct ProcessFns {
    pub(super) compute: Option<ProcessFn>,
    pub(super) graphics: Option<ProcessFn>,
    pub(super) mps: Option<ProcessFn>,
}

pub(super) fn process_fns(lib: &Library) -> ProcessFns {
    let layout_v3 = v3_layout(
        sym::<FnVoid>(lib, b"nvmlDeviceGetConfComputeMemSizeInfo\0").is_some(),
        sym::<FnVoid>(lib, b"nvmlDeviceGetRunningProcessDetailList\0").is_some(),
    );
    let procs = |v3: &'static [u8], v2: &'static [u8], v1: &'static [u8]| {
        [
            (v3, layout_v3),
            (v2, ProcessLayout::V2),
            (v1, ProcessLayout::V1),
        ]
        .into_iter()
        .find_map(|(n, layout)| {
            first_sym::<FnProcesses>(lib, &[n]).map(|(f, name)| ProcessFn { f, name, layout })
        })
    };
    ProcessFns {
        compute: procs(
            b"nvmlDeviceGetComputeRunningProcesses_v3\0",
            b"nvmlDeviceGetComputeRunningProcesses_v2\0",
            b"nvmlDeviceGetComputeRunningProcesses\0",
        ),
        graphics: procs(
            b"nvmlDeviceGetGraphicsRunningProcesses_v3\0",
            b"nvmlDeviceGetGraphicsRunningProcesses_v2\0",
            b"nvmlDeviceGetGraphicsRunningProcesses\0",
        ),
        mps: procs(
            b"nvmlDeviceGetMPSComputeRunningProcesses_v3\0",
            b"nvmlDeviceGetMPSComputeRunningProcesses_v2\0",
            b"nvmlDeviceGetMPSComputeRunningProcesses\0",
        ),
    }
}

impl ProcessFn {
    /// One call of a process-list function with `buf.len()` as the capacity. Returns the code
    /// and the count NVML wrote back. With an empty `buf`, a NULL array is passed (sizing call).
    pub(crate) fn call<T: ProcessRecord>(self, dev: Device, buf: &mut [T]) -> (NvmlReturn, u32) {
        debug_assert_eq!(size_of::<T>(), self.layout.stride());
        let mut count = buffer_len(buf);
        let ptr: *mut c_void = if buf.is_empty() {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr().cast()
        };
        let _waiting = crate::inflight::calling(self.name);
        // SAFETY: `ptr` is NULL with capacity 0, or points to `count` writable elements of the
        // stride this symbol writes (the caller picks T from `self.layout`); NVML writes at most
        // `count` elements and updates `count`.
        let rc = unsafe { (self.f)(dev.0, &raw mut count, ptr) };
        (rc, count)
    }
}
