//! NVML's foreign calls: the library handle, the symbol table, and one small wrapper per call.
//! The only `unsafe` of the NVML backend lives here; the types and constants are `abi.rs`'s.
//!
//! Layouts and values follow `nvml.h` (facts-nvml.md §1–§3); sizes are asserted in the tests.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::path::Path;

use libloading::Library;

use super::abi::{
    Memory, MemoryV2, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NVML_SUCCESS, NvmlReturn,
    PciInfo, UtilizationRates,
};
use super::decode::{ProcessLayout, ProcessRecord, v3_layout};

/// Buffer sizes for string queries (`NVML_DEVICE_NAME_V2_BUFFER_SIZE`, …).
const DEVICE_NAME_BUFFER: usize = 96;
const DEVICE_UUID_BUFFER: usize = 96;
const SYSTEM_VERSION_BUFFER: usize = 80;
const PROCESS_NAME_BUFFER: usize = 256;

/// `nvmlDevice_t`: an opaque handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Device(*mut c_void);

// SAFETY: an nvmlDevice_t is an opaque token that NVML documents as usable from any thread
// (NVML is thread-safe); we never dereference it ourselves.
unsafe impl Send for Device {}
// SAFETY: as above; sharing the token between threads only passes it back to NVML.
unsafe impl Sync for Device {}

type FnVoid = unsafe extern "C" fn() -> NvmlReturn;
type FnErrorString = unsafe extern "C" fn(NvmlReturn) -> *const c_char;
type FnCount = unsafe extern "C" fn(*mut c_uint) -> NvmlReturn;
type FnHandleByIndex = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> NvmlReturn;
type FnMemory = unsafe extern "C" fn(*mut c_void, *mut Memory) -> NvmlReturn;
type FnUtilization = unsafe extern "C" fn(*mut c_void, *mut UtilizationRates) -> NvmlReturn;
type FnMemoryV2 = unsafe extern "C" fn(*mut c_void, *mut MemoryV2) -> NvmlReturn;
type FnDeviceString = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> NvmlReturn;
type FnSystemString = unsafe extern "C" fn(*mut c_char, c_uint) -> NvmlReturn;
type FnPci = unsafe extern "C" fn(*mut c_void, *mut PciInfo) -> NvmlReturn;
type FnInt = unsafe extern "C" fn(*mut c_int) -> NvmlReturn;
type FnProcesses = unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut c_void) -> NvmlReturn;
type FnProcessName = unsafe extern "C" fn(c_uint, *mut c_char, c_uint) -> NvmlReturn;
type FnMigMode = unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut c_uint) -> NvmlReturn;
type FnDeviceUint = unsafe extern "C" fn(*mut c_void, *mut c_uint) -> NvmlReturn;
type FnMigHandle = unsafe extern "C" fn(*mut c_void, c_uint, *mut *mut c_void) -> NvmlReturn;
type FnParentHandle = unsafe extern "C" fn(*mut c_void, *mut *mut c_void) -> NvmlReturn;
type FnHandleByUuid = unsafe extern "C" fn(*const c_char, *mut *mut c_void) -> NvmlReturn;

/// A resolved process-list function with its symbol name and element layout.
#[derive(Clone, Copy)]
pub(crate) struct ProcessFn {
    f: FnProcesses,
    pub name: &'static str,
    pub layout: ProcessLayout,
}

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
    // Declared last so it is dropped after the function pointers above (which point into it).
    _lib: Library,
}

/// Resolve `name` (a NUL-terminated byte string) to a function pointer of type `T`.
fn sym<T: Copy>(lib: &Library, name: &'static [u8]) -> Option<T> {
    // SAFETY: each call site pairs a symbol name with the function type nvml.h declares for it
    // (the type aliases above); the pointer is only used while `lib` (stored alongside) lives.
    unsafe { lib.get::<T>(name).ok().map(|s| *s) }
}

/// The first of several alternative symbols that the library exports, with its name.
fn first_sym<T: Copy>(lib: &Library, names: &[&'static [u8]]) -> Option<(T, &'static str)> {
    names.iter().find_map(|n| {
        sym::<T>(lib, n).map(|f| {
            (
                f,
                std::str::from_utf8(n.strip_suffix(b"\0").unwrap_or(n)).unwrap_or("?"),
            )
        })
    })
}

/// The process lists of `lib` (compute, graphics, MPS clients), each the newest version it
/// exports, with the element layout that version writes (see [`v3_layout`]).
struct ProcessFns {
    compute: Option<ProcessFn>,
    graphics: Option<ProcessFn>,
    mps: Option<ProcessFn>,
}

fn process_fns(lib: &Library) -> ProcessFns {
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

    /// v1 memory; `None` when the symbol is missing.
    pub(crate) fn memory(&self, dev: Device) -> Option<Result<Memory, NvmlReturn>> {
        let f = self.memory?;
        let mut m = Memory::default();
        let _waiting = crate::inflight::calling("nvmlDeviceGetMemoryInfo");
        // SAFETY: `m` is a writable nvmlMemory_t (24 bytes, asserted in tests); `dev` came from NVML.
        let rc = unsafe { f(dev.0, &raw mut m) };
        Some(ok(rc).map(|()| m))
    }

    /// v2 memory with the given version tag; `None` when the symbol is missing (pre-R510).
    pub(crate) fn memory_v2(
        &self,
        dev: Device,
        version: u32,
    ) -> Option<Result<MemoryV2, NvmlReturn>> {
        let f = self.memory_v2?;
        let mut m = MemoryV2 {
            version,
            ..MemoryV2::default()
        };
        let _waiting = crate::inflight::calling("nvmlDeviceGetMemoryInfo_v2");
        // SAFETY: `m` is a writable nvmlMemory_v2_t (40 bytes, asserted in tests); `dev` came from NVML.
        let rc = unsafe { f(dev.0, &raw mut m) };
        Some(ok(rc).map(|()| m))
    }

    /// GPU and memory utilization; `None` when the symbol is missing.
    pub(crate) fn utilization(&self, dev: Device) -> Option<Result<UtilizationRates, NvmlReturn>> {
        let f = self.utilization?;
        let mut u = UtilizationRates::default();
        let _waiting = crate::inflight::calling("nvmlDeviceGetUtilizationRates");
        // SAFETY: `u` is a writable nvmlUtilization_t (8 bytes); `dev` came from NVML.
        let rc = unsafe { f(dev.0, &raw mut u) };
        Some(ok(rc).map(|()| u))
    }

    pub(crate) fn device_name(&self, dev: Device) -> Option<Result<Vec<u8>, NvmlReturn>> {
        let f = self.name?;
        Some(device_string(
            "nvmlDeviceGetName",
            f,
            dev,
            DEVICE_NAME_BUFFER,
        ))
    }

    pub(crate) fn device_uuid(&self, dev: Device) -> Option<Result<Vec<u8>, NvmlReturn>> {
        let f = self.uuid?;
        Some(device_string(
            "nvmlDeviceGetUUID",
            f,
            dev,
            DEVICE_UUID_BUFFER,
        ))
    }

    pub(crate) fn pci_info(&self, dev: Device) -> Option<Result<PciInfo, NvmlReturn>> {
        let (f, name) = self.pci?;
        let mut p = PciInfo::default();
        let _waiting = crate::inflight::calling(name);
        // SAFETY: `p` is a writable nvmlPciInfo_t (68 bytes, asserted in tests).
        let rc = unsafe { f(dev.0, &raw mut p) };
        Some(ok(rc).map(|()| p))
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

    /// `nvmlDeviceGetMigMode`: (current, pending); `None` when the symbol is missing.
    pub(crate) fn mig_mode(&self, dev: Device) -> Option<Result<(u32, u32), NvmlReturn>> {
        let f = self.mig_mode?;
        let (mut current, mut pending): (c_uint, c_uint) = (0, 0);
        let _waiting = crate::inflight::calling("nvmlDeviceGetMigMode");
        // SAFETY: both out-pointers are valid, writable c_uints for the call; `dev` came from NVML.
        let rc = unsafe { f(dev.0, &raw mut current, &raw mut pending) };
        Some(ok(rc).map(|()| (current, pending)))
    }

    /// `nvmlDeviceGetMaxMigDeviceCount`; `None` when the symbol is missing.
    pub(crate) fn max_mig_devices(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        Some(device_uint(
            "nvmlDeviceGetMaxMigDeviceCount",
            self.max_mig_devices?,
            dev,
        ))
    }

    /// `nvmlDeviceGetMigDeviceHandleByIndex`; `None` when the symbol is missing. An empty slot
    /// is `Err(NVML_ERROR_NOT_FOUND)`.
    pub(crate) fn mig_handle(&self, dev: Device, slot: u32) -> Option<Result<Device, NvmlReturn>> {
        let f = self.mig_handle?;
        let mut h: *mut c_void = std::ptr::null_mut();
        let _waiting = crate::inflight::calling("nvmlDeviceGetMigDeviceHandleByIndex");
        // SAFETY: `h` is a valid, writable pointer slot for the call; `dev` came from NVML.
        let rc = unsafe { f(dev.0, slot, &raw mut h) };
        Some(ok(rc).and_then(|()| non_null(h)))
    }

    /// `nvmlDeviceGetGpuInstanceId` of a MIG handle; `None` when the symbol is missing.
    pub(crate) fn gpu_instance_id(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        Some(device_uint(
            "nvmlDeviceGetGpuInstanceId",
            self.gpu_instance_id?,
            dev,
        ))
    }

    /// `nvmlDeviceGetComputeInstanceId` of a MIG handle; `None` when the symbol is missing.
    pub(crate) fn compute_instance_id(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        Some(device_uint(
            "nvmlDeviceGetComputeInstanceId",
            self.compute_instance_id?,
            dev,
        ))
    }

    /// `nvmlDeviceIsMigDeviceHandle`; `None` when the symbol is missing.
    pub(crate) fn is_mig_handle(&self, dev: Device) -> Option<Result<bool, NvmlReturn>> {
        Some(device_uint("nvmlDeviceIsMigDeviceHandle", self.is_mig_handle?, dev).map(|v| v != 0))
    }

    /// `nvmlDeviceGetDeviceHandleFromMigDeviceHandle`; `None` when the symbol is missing.
    pub(crate) fn mig_parent(&self, mig: Device) -> Option<Result<Device, NvmlReturn>> {
        let f = self.mig_parent?;
        let mut h: *mut c_void = std::ptr::null_mut();
        let _waiting = crate::inflight::calling("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
        // SAFETY: `h` is a valid, writable pointer slot for the call; `mig` came from NVML.
        let rc = unsafe { f(mig.0, &raw mut h) };
        Some(ok(rc).and_then(|()| non_null(h)))
    }

    /// `nvmlDeviceGetHandleByUUID` (GPU or MIG UUID); `None` when the symbol is missing. A UUID
    /// with an interior NUL cannot match anything: `Err(NVML_ERROR_NOT_FOUND)`.
    pub(crate) fn handle_by_uuid(&self, uuid: &str) -> Option<Result<Device, NvmlReturn>> {
        let f = self.handle_by_uuid?;
        let Ok(c) = std::ffi::CString::new(uuid) else {
            return Some(Err(NVML_ERROR_NOT_FOUND));
        };
        let mut h: *mut c_void = std::ptr::null_mut();
        let _waiting = crate::inflight::calling("nvmlDeviceGetHandleByUUID");
        // SAFETY: `c` is a NUL-terminated string alive for the call; `h` is a writable slot.
        let rc = unsafe { f(c.as_ptr(), &raw mut h) };
        Some(ok(rc).and_then(|()| non_null(h)))
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

fn ok(rc: NvmlReturn) -> Result<(), NvmlReturn> {
    if rc == NVML_SUCCESS { Ok(()) } else { Err(rc) }
}

fn non_null(h: *mut c_void) -> Result<Device, NvmlReturn> {
    if h.is_null() {
        Err(NVML_ERROR_INVALID_ARGUMENT)
    } else {
        Ok(Device(h))
    }
}

/// A call of `name` (its NVML function name) that writes one unsigned int.
fn device_uint(name: &'static str, f: FnDeviceUint, dev: Device) -> Result<u32, NvmlReturn> {
    let mut v: c_uint = 0;
    let _waiting = crate::inflight::calling(name);
    // SAFETY: `v` is a valid, writable c_uint for the call; `dev` came from NVML.
    let rc = unsafe { f(dev.0, &raw mut v) };
    ok(rc).map(|()| v)
}

fn buffer_len<T>(buf: &[T]) -> c_uint {
    c_uint::try_from(buf.len()).unwrap_or(c_uint::MAX)
}

fn device_string(
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

fn system_string(
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
fn until_nul(mut buf: Vec<u8>) -> Result<Vec<u8>, NvmlReturn> {
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
unsafe fn bounded_cstr(p: *const c_char, max: usize) -> Vec<u8> {
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
