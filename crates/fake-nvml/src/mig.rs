//! MIG (all present since R450.51): mode, MIG device handles, instance ids, parents.

use std::ffi::c_uint;

use crate::abi::{
    NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NvmlReturn,
};
use crate::entry::{any_call, device_call, put};
use crate::handles::{NvmlDevice, Target, alias_for, handle_for, mig_handle_for};
use crate::scenario;

/// The scenario's `mig_mode`/`mig_pending`; NOT_SUPPORTED for a GPU without `mig_mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMigMode", device, |l, i| {
        if current_mode.is_null() || pending_mode.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let d = &l.sc.devices[i];
        let Some(current) = d.mig_mode else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: both out-pointers are non-null (checked above), per the NVML contract.
        unsafe {
            put(current_mode, current);
            put(pending_mode, d.mig_pending.unwrap_or(current))
        }
    })
}

/// `max_mig_devices` for a GPU that supports MIG; NOT_SUPPORTED otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: NvmlDevice,
    count: *mut c_uint,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMaxMigDeviceCount", device, |l, i| {
        let d = &l.sc.devices[i];
        if d.mig_mode.is_none() {
            return NVML_ERROR_NOT_SUPPORTED;
        }
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(count, d.max_mig_devices) }
    })
}

/// The MIG device at `index`: NOT_FOUND for an empty slot below the maximum, INVALID_ARGUMENT
/// at or past it, NOT_SUPPORTED while MIG is off.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: NvmlDevice,
    index: c_uint,
    mig_device: *mut NvmlDevice,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMigDeviceHandleByIndex", device, |l, i| {
        if mig_device.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let d = &l.sc.devices[i];
        if !d.mig_on() {
            return NVML_ERROR_NOT_SUPPORTED;
        }
        if index >= d.max_mig_devices {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        match d.mig_devices.iter().position(|m| m.slot == index) {
            // SAFETY: out-pointer per the NVML contract.
            Some(k) => unsafe { put(mig_device, mig_handle_for(i, k)) },
            None => NVML_ERROR_NOT_FOUND,
        }
    })
}

/// A MIG device's id (`pick` chooses which); NOT_SUPPORTED on a GPU handle.
fn instance_id(
    name: &'static str,
    device: NvmlDevice,
    id: *mut c_uint,
    pick: fn(&scenario::MigDevice) -> u32,
) -> NvmlReturn {
    any_call(name, device, |l, t| match t {
        Target::Gpu(_) => NVML_ERROR_NOT_SUPPORTED,
        // SAFETY: out-pointer per the NVML contract.
        Target::Mig(i, k) => unsafe { put(id, pick(&l.sc.devices[i].mig_devices[k])) },
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> NvmlReturn {
    instance_id("nvmlDeviceGetGpuInstanceId", device, id, |m| {
        m.gpu_instance_id
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> NvmlReturn {
    instance_id("nvmlDeviceGetComputeInstanceId", device, id, |m| {
        m.compute_instance_id
    })
}

/// 1 for a MIG device handle, 0 for a GPU's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: NvmlDevice,
    is_mig: *mut c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceIsMigDeviceHandle", device, |_, t| {
        let v = c_uint::from(matches!(t, Target::Mig(..)));
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(is_mig, v) }
    })
}

/// The GPU of a MIG device handle; INVALID_ARGUMENT for a GPU handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: NvmlDevice,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    any_call(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        mig_device,
        |l, t| match t {
            Target::Gpu(_) => NVML_ERROR_INVALID_ARGUMENT,
            Target::Mig(i, _) => {
                let parent = if l.sc.garbage.parent_handle_alias {
                    alias_for(i)
                } else {
                    handle_for(i)
                };
                // SAFETY: out-pointer per the NVML contract.
                unsafe { put(device, parent) }
            }
        },
    )
}
