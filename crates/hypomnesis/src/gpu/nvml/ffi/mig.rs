//! The MIG calls: mode, slots and handles, instance ids, parents, and handles by UUID.
#![allow(unsafe_code)]

use std::ffi::{c_uint, c_void};

use crate::gpu::nvml::abi::{NVML_ERROR_NOT_FOUND, NvmlReturn};
use crate::gpu::nvml::ffi::Nvml;
use crate::gpu::nvml::ffi::call::{Device, device_uint, non_null, ok};

impl Nvml {
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
}
