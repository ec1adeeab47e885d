//! NVML's foreign calls: the library handle, the symbol table, and one small wrapper per call.
//! The only `unsafe` of the NVML backend lives here, split by concern: `call` (the handle,
//! function types, symbol lookup, return codes, string buffers), `processes` (the process
//! lists' versions and calls), `device` (memory, utilization, identity), `mig`; this file
//! loads the library and holds the session's and the system's calls. The types and constants
//! are `abi.rs`'s.
//!
//! Layouts and values follow `nvml.h` (facts-nvml.md §1–§3); sizes are asserted in the tests.
#![allow(unsafe_code)]

mod call;
mod device;
mod mig;
mod processes;

use std::ffi::{c_int, c_uint, c_void};
use std::path::Path;

use libloading::Library;

pub(crate) use call::{Device, UNTERMINATED};
pub(crate) use processes::ProcessFn;
use processes::{ProcessFns, process_fns};

use crate::gpu::nvml::abi::{NVML_ERROR_INVALID_ARGUMENT, NvmlReturn};
use call::{
    FnAddressingMode, FnCount, FnDeviceString, FnDeviceUint, FnErrorString, FnHandleByIndex,
    FnHandleByUuid, FnInt, FnMemory, FnMemoryV2, FnMigHandle, FnMigMode, FnParentHandle, FnPci,
    FnProcessName, FnProcessUtilization, FnSystemString, FnUtilization, FnVoid,
    PROCESS_NAME_BUFFER, SYSTEM_VERSION_BUFFER, bounded_cstr, buffer_len, first_sym, ok, sym,
    system_string, until_nul,
};

/// The library, kept loaded for the process lifetime, and its resolved symbols.
pub(crate) struct Nvml {
    init: FnVoid,
    pub init_name: &'static str,
    shutdown: Option<FnVoid>,
    error_string: Option<FnErrorString>,
    count: FnCount,
    pub count_name: &'static str,
    handle_by_index: FnHandleByIndex,
    pub handle_name: &'static str,
    memory: Option<FnMemory>,
    memory_v2: Option<FnMemoryV2>,
    name: Option<FnDeviceString>,
    uuid: Option<FnDeviceString>,
    pci: Option<(FnPci, &'static str)>,
    driver_version: Option<FnSystemString>,
    lib_version: Option<FnSystemString>,
    cuda_version: Option<FnInt>,
    pub compute: Option<ProcessFn>,
    pub graphics: Option<ProcessFn>,
    /// The MPS clients' list (`nvmlDeviceGetMPSComputeRunningProcesses*`).
    pub mps: Option<ProcessFn>,
    process_name: Option<FnProcessName>,
    mig_mode: Option<FnMigMode>,
    max_mig_devices: Option<FnDeviceUint>,
    mig_handle: Option<FnMigHandle>,
    gpu_instance_id: Option<FnDeviceUint>,
    compute_instance_id: Option<FnDeviceUint>,
    is_mig_handle: Option<FnDeviceUint>,
    mig_parent: Option<FnParentHandle>,
    handle_by_uuid: Option<FnHandleByUuid>,
    utilization: Option<FnUtilization>,
    process_utilization: Option<FnProcessUtilization>,
    addressing_mode: Option<FnAddressingMode>,
    numa_node_id: Option<FnDeviceUint>,
    minor_number: Option<FnDeviceUint>,
    // Declared last so it is dropped after the function pointers above (which point into it).
    _lib: Library,
}

impl Nvml {
    /// Load the library at `path` and resolve its symbols. `nvmlInit*`, the device count and
    /// the handle lookup are required; everything else is optional.
    pub(crate) fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading a shared library runs its initialisers; the path is the NVML library the
        // user or the documented search order names, which is the trust model of every NVML tool.
        let lib =
            unsafe { Library::new(path) }.map_err(|e| match std::error::Error::source(&e) {
                Some(cause) => cause.to_string(),
                None => e.to_string(),
            })?;
        let (init, init_name) = first_sym::<FnVoid>(&lib, &[b"nvmlInit_v2\0", b"nvmlInit\0"])
            .ok_or("the library exports neither nvmlInit_v2 nor nvmlInit: not an NVML library")?;
        let (count, count_name) =
            first_sym::<FnCount>(&lib, &[b"nvmlDeviceGetCount_v2\0", b"nvmlDeviceGetCount\0"])
                .ok_or("the library exports no nvmlDeviceGetCount")?;
        let (handle_by_index, handle_name) = first_sym::<FnHandleByIndex>(
            &lib,
            &[
                b"nvmlDeviceGetHandleByIndex_v2\0",
                b"nvmlDeviceGetHandleByIndex\0",
            ],
        )
        .ok_or("the library exports no nvmlDeviceGetHandleByIndex")?;
        let ProcessFns {
            compute,
            graphics,
            mps,
        } = process_fns(&lib);
        Ok(Self {
            init,
            init_name,
            shutdown: sym(&lib, b"nvmlShutdown\0"),
            error_string: sym(&lib, b"nvmlErrorString\0"),
            count,
            count_name,
            handle_by_index,
            handle_name,
            memory: sym(&lib, b"nvmlDeviceGetMemoryInfo\0"),
            memory_v2: sym(&lib, b"nvmlDeviceGetMemoryInfo_v2\0"),
            name: sym(&lib, b"nvmlDeviceGetName\0"),
            uuid: sym(&lib, b"nvmlDeviceGetUUID\0"),
            pci: first_sym(
                &lib,
                &[b"nvmlDeviceGetPciInfo_v3\0", b"nvmlDeviceGetPciInfo_v2\0"],
            ),
            driver_version: sym(&lib, b"nvmlSystemGetDriverVersion\0"),
            lib_version: sym(&lib, b"nvmlSystemGetNVMLVersion\0"),
            cuda_version: first_sym(
                &lib,
                &[
                    b"nvmlSystemGetCudaDriverVersion_v2\0",
                    b"nvmlSystemGetCudaDriverVersion\0",
                ],
            )
            .map(|(f, _)| f),
            compute,
            graphics,
            mps,
            process_name: sym(&lib, b"nvmlSystemGetProcessName\0"),
            mig_mode: sym(&lib, b"nvmlDeviceGetMigMode\0"),
            max_mig_devices: sym(&lib, b"nvmlDeviceGetMaxMigDeviceCount\0"),
            mig_handle: sym(&lib, b"nvmlDeviceGetMigDeviceHandleByIndex\0"),
            gpu_instance_id: sym(&lib, b"nvmlDeviceGetGpuInstanceId\0"),
            compute_instance_id: sym(&lib, b"nvmlDeviceGetComputeInstanceId\0"),
            is_mig_handle: sym(&lib, b"nvmlDeviceIsMigDeviceHandle\0"),
            mig_parent: sym(&lib, b"nvmlDeviceGetDeviceHandleFromMigDeviceHandle\0"),
            handle_by_uuid: sym(&lib, b"nvmlDeviceGetHandleByUUID\0"),
            utilization: sym(&lib, b"nvmlDeviceGetUtilizationRates\0"),
            process_utilization: sym(&lib, b"nvmlDeviceGetProcessUtilization\0"),
            addressing_mode: sym(&lib, b"nvmlDeviceGetAddressingMode\0"),
            numa_node_id: sym(&lib, b"nvmlDeviceGetNumaNodeId\0"),
            minor_number: sym(&lib, b"nvmlDeviceGetMinorNumber\0"),
            _lib: lib,
        })
    }

    pub(crate) fn has_memory_v2(&self) -> bool {
        self.memory_v2.is_some()
    }

    pub(crate) fn pci_symbol(&self) -> Option<&'static str> {
        self.pci.map(|(_, n)| n)
    }

    pub(crate) fn init(&self) -> NvmlReturn {
        let _waiting = crate::inflight::calling(self.init_name);
        // SAFETY: nvmlInit takes no arguments; the library is loaded.
        unsafe { (self.init)() }
    }

    pub(crate) fn shutdown(&self) -> Option<NvmlReturn> {
        let f = self.shutdown?;
        let _waiting = crate::inflight::calling("nvmlShutdown");
        // SAFETY: nvmlShutdown takes no arguments; extra calls only return an error code.
        Some(unsafe { f() })
    }

    /// NVML's own description of a code, if it gives one.
    pub(crate) fn error_string(&self, code: NvmlReturn) -> Option<String> {
        let f = self.error_string?;
        // SAFETY: nvmlErrorString takes any code and returns a pointer to static storage or NULL.
        let p = unsafe { f(code) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null pointers from nvmlErrorString are NUL-terminated static strings. We
        // copy at most 256 bytes so a missing terminator cannot run us far off.
        let bytes = unsafe { bounded_cstr(p, 256) };
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(crate) fn device_count(&self) -> Result<u32, NvmlReturn> {
        let mut n: c_uint = 0;
        let _waiting = crate::inflight::calling(self.count_name);
        // SAFETY: `n` is a valid, writable c_uint for the duration of the call.
        let rc = unsafe { (self.count)(&raw mut n) };
        ok(rc).map(|()| n)
    }

    pub(crate) fn handle(&self, index: u32) -> Result<Device, NvmlReturn> {
        let mut h: *mut c_void = std::ptr::null_mut();
        let _waiting = crate::inflight::calling(self.handle_name);
        // SAFETY: `h` is a valid, writable pointer slot for the duration of the call.
        let rc = unsafe { (self.handle_by_index)(index, &raw mut h) };
        ok(rc)?;
        if h.is_null() {
            return Err(NVML_ERROR_INVALID_ARGUMENT);
        }
        Ok(Device(h))
    }

    pub(crate) fn driver_version(&self) -> Option<Result<Vec<u8>, NvmlReturn>> {
        Some(system_string(
            "nvmlSystemGetDriverVersion",
            self.driver_version?,
            SYSTEM_VERSION_BUFFER,
        ))
    }

    pub(crate) fn lib_version(&self) -> Option<Result<Vec<u8>, NvmlReturn>> {
        Some(system_string(
            "nvmlSystemGetNVMLVersion",
            self.lib_version?,
            SYSTEM_VERSION_BUFFER,
        ))
    }

    pub(crate) fn cuda_driver_version(&self) -> Option<Result<i32, NvmlReturn>> {
        let f = self.cuda_version?;
        let mut v: c_int = 0;
        let _waiting = crate::inflight::calling("nvmlSystemGetCudaDriverVersion");
        // SAFETY: `v` is a writable int for the duration of the call.
        let rc = unsafe { f(&raw mut v) };
        Some(ok(rc).map(|()| v))
    }

    pub(crate) fn process_name(&self, pid: u32) -> Option<Result<Vec<u8>, NvmlReturn>> {
        let f = self.process_name?;
        let mut buf = vec![0_u8; PROCESS_NAME_BUFFER];
        let _waiting = crate::inflight::calling("nvmlSystemGetProcessName");
        // SAFETY: `buf` is writable for PROCESS_NAME_BUFFER bytes, the length we pass.
        let rc = unsafe { f(pid, buf.as_mut_ptr().cast(), buffer_len(&buf)) };
        Some(ok(rc).and_then(|()| until_nul(buf)))
    }
}
