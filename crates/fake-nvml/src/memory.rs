//! Memory and utilization: `nvmlDeviceGetMemoryInfo` (v1, and v2 from R510) and
//! `nvmlDeviceGetUtilizationRates`.

use crate::abi::{
    AddressingMode, Memory, MemoryV2, NVML_ADDRESSING_MODE_V1,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH, NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED, NVML_MEMORY_V2_VERSION, NvmlReturn,
    UtilizationRates,
};
use crate::entry::{any_call, put};
use crate::handles::{NvmlDevice, Target};
use crate::state::Loaded;

/// The figures a handle's memory functions give: (total, free, reserved), or an error code.
/// A GPU in MIG mode with `aggregate_error` refuses; a MIG device gives its own.
fn memory_of(l: &Loaded, t: Target) -> Result<(u64, u64, u64), NvmlReturn> {
    match t {
        Target::Gpu(i) => {
            let d = &l.sc.devices[i];
            if let Some(code) = d.aggregate_error.filter(|_| d.mig_on()) {
                return Err(code);
            }
            let free = d
                .free_file
                .as_ref()
                .and_then(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
                .unwrap_or(d.free);
            match d.memory_error {
                Some(code) => Err(code),
                None => Ok((d.total, free, d.reserved)),
            }
        }
        Target::Mig(i, k) => {
            let m = &l.sc.devices[i].mig_devices[k];
            match m.memory_error {
                Some(code) => Err(code),
                None => Ok((m.total, m.free, m.reserved)),
            }
        }
    }
}

/// The scenario's `addressing_mode`, NOT_SUPPORTED without one; a version tag other than
/// v1's is refused as the driver does (`NVML_ERROR_ARGUMENT_VERSION_MISMATCH`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetAddressingMode(
    device: NvmlDevice,
    out: *mut AddressingMode,
) -> NvmlReturn {
    any_call("nvmlDeviceGetAddressingMode", device, |l, t| {
        if out.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: out-pointer per the NVML contract; the caller sets the version before the call.
        let version = unsafe { (*out).version };
        if version != NVML_ADDRESSING_MODE_V1 {
            return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        }
        let mode = match t {
            Target::Gpu(i) => l.sc.devices[i].addressing_mode,
            Target::Mig(i, _) => l.sc.devices[i].addressing_mode,
        };
        let Some(value) = mode else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, AddressingMode { version, value }) }
    })
}

/// The scenario's `numa_node` (a GPU whose memory is a NUMA node), NOT_SUPPORTED without one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetNumaNodeId(
    device: NvmlDevice,
    out: *mut std::ffi::c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceGetNumaNodeId", device, |l, t| {
        if out.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let (Target::Gpu(i) | Target::Mig(i, _)) = t;
        let Some(node) = l.sc.devices[i].numa_node else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, node) }
    })
}

/// The scenario's `utilization`, NOT_SUPPORTED without one (and on MIG devices, as the
/// driver does).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    out: *mut UtilizationRates,
) -> NvmlReturn {
    any_call("nvmlDeviceGetUtilizationRates", device, |l, t| {
        if out.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let u = match t {
            Target::Gpu(i) => l.sc.devices[i].utilization,
            Target::Mig(..) => None,
        };
        let Some(u) = u else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        let value = UtilizationRates {
            gpu: u.gpu,
            memory: u.memory,
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, value) }
    })
}

/// v1: `used = total - free` (includes reserved).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory: *mut Memory,
) -> NvmlReturn {
    any_call("nvmlDeviceGetMemoryInfo", device, |l, t| {
        if memory.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let (total, free, _) = match memory_of(l, t) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let value = Memory {
            total,
            free,
            used: total.saturating_sub(free),
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(memory, value) }
    })
}

/// v2: only `version == 0x0200_0028` is accepted (else FUNCTION_NOT_FOUND, as real drivers do);
/// `used = total - reserved - free` (allocated only).
#[cfg(feature = "r510")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut MemoryV2,
) -> NvmlReturn {
    any_call("nvmlDeviceGetMemoryInfo_v2", device, |l, t| {
        if memory.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: non-null; the caller passes an nvmlMemory_v2_t (version is its first field).
        let version = unsafe { memory.cast::<u32>().read_unaligned() };
        if version != NVML_MEMORY_V2_VERSION {
            return NVML_ERROR_FUNCTION_NOT_FOUND;
        }
        let (total, free, reserved) = match memory_of(l, t) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let v2_total = match t {
            Target::Gpu(i) => l.sc.devices[i].v2_total.unwrap_or(total),
            Target::Mig(..) => total,
        };
        let value = MemoryV2 {
            version,
            total: v2_total,
            reserved,
            free,
            used: total.saturating_sub(reserved).saturating_sub(free),
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(memory, value) }
    })
}
