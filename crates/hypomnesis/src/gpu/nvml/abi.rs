//! NVML's C ABI as data: the return codes, the `#[repr(C)]` layouts of `nvml.h` (and the wider
//! process-list element of drivers 535.43–535.86) and the other constants of `nvml.h`
//! (facts-nvml.md §1–§3). No `unsafe` and no behaviour here: the calls are in `ffi/`, the
//! reading of what NVML wrote in `decode.rs`.
//!
//! This file is the one declaration of the ABI: the test stand-in `crates/fake-nvml` compiles
//! it too (`#[path]`), so the library and the fake cannot disagree on a layout. Keep it to
//! items both use, written so that it compiles as a module of either crate.

use std::ffi::{c_char, c_uint};

/// `nvmlReturn_t`.
pub(crate) type NvmlReturn = c_uint;

pub(crate) const NVML_SUCCESS: NvmlReturn = 0;
pub(crate) const NVML_ERROR_UNINITIALIZED: NvmlReturn = 1;
pub(crate) const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
pub(crate) const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
pub(crate) const NVML_ERROR_NO_PERMISSION: NvmlReturn = 4;
pub(crate) const NVML_ERROR_ALREADY_INITIALIZED: NvmlReturn = 5;
pub(crate) const NVML_ERROR_NOT_FOUND: NvmlReturn = 6;
pub(crate) const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
pub(crate) const NVML_ERROR_INSUFFICIENT_POWER: NvmlReturn = 8;
pub(crate) const NVML_ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;
pub(crate) const NVML_ERROR_TIMEOUT: NvmlReturn = 10;
pub(crate) const NVML_ERROR_IRQ_ISSUE: NvmlReturn = 11;
pub(crate) const NVML_ERROR_LIBRARY_NOT_FOUND: NvmlReturn = 12;
pub(crate) const NVML_ERROR_FUNCTION_NOT_FOUND: NvmlReturn = 13;
pub(crate) const NVML_ERROR_CORRUPTED_INFOROM: NvmlReturn = 14;
pub(crate) const NVML_ERROR_GPU_IS_LOST: NvmlReturn = 15;
pub(crate) const NVML_ERROR_RESET_REQUIRED: NvmlReturn = 16;
pub(crate) const NVML_ERROR_OPERATING_SYSTEM: NvmlReturn = 17;
pub(crate) const NVML_ERROR_LIB_RM_VERSION_MISMATCH: NvmlReturn = 18;
pub(crate) const NVML_ERROR_IN_USE: NvmlReturn = 19;
pub(crate) const NVML_ERROR_MEMORY: NvmlReturn = 20;
pub(crate) const NVML_ERROR_NO_DATA: NvmlReturn = 21;
pub(crate) const NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: NvmlReturn = 22;
pub(crate) const NVML_ERROR_INSUFFICIENT_RESOURCES: NvmlReturn = 23;
pub(crate) const NVML_ERROR_FREQ_NOT_SUPPORTED: NvmlReturn = 24;
pub(crate) const NVML_ERROR_ARGUMENT_VERSION_MISMATCH: NvmlReturn = 25;
pub(crate) const NVML_ERROR_DEPRECATED: NvmlReturn = 26;
pub(crate) const NVML_ERROR_NOT_READY: NvmlReturn = 27;
pub(crate) const NVML_ERROR_GPU_NOT_FOUND: NvmlReturn = 28;
pub(crate) const NVML_ERROR_INVALID_STATE: NvmlReturn = 29;
pub(crate) const NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: NvmlReturn = 30;
pub(crate) const NVML_ERROR_UNKNOWN: NvmlReturn = 999;

/// `NVML_DEVICE_MIG_ENABLE`: the MIG mode value meaning "on".
pub(crate) const NVML_DEVICE_MIG_ENABLE: c_uint = 1;
/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned int` (the GI/CI ids of a process when MIG is off).
pub(crate) const NVML_VALUE_NOT_AVAILABLE_U32: u32 = u32::MAX;

/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned long long` (`usedGpuMemory` under WDDM).
pub(crate) const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;

/// `nvmlUtilization_t`: 8 bytes, percent over the driver's last sample period.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UtilizationRates {
    pub gpu: u32,
    pub memory: u32,
}

/// `nvmlDeviceAddressingMode_t` (v1): 8 bytes, the version tag, then the mode.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AddressingMode {
    pub version: u32,
    pub value: u32,
}

/// `nvmlDeviceAddressingMode_v1`: `NVML_STRUCT_VERSION(DeviceAddressingMode, 1)`, the size (8)
/// with the version in the top byte.
pub(crate) const NVML_ADDRESSING_MODE_V1: u32 = 0x0100_0008;

/// `nvmlMemory_t` (v1): 24 bytes. `used` includes the driver reservation.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlMemory_v2_t`: 40 bytes (4 bytes of padding after `version`), `version` must be
/// [`NVML_MEMORY_V2_VERSION`]. `used` is allocated memory only (excludes `reserved`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemoryV2 {
    pub version: c_uint,
    pub total: u64,
    pub reserved: u64,
    pub free: u64,
    pub used: u64,
}

/// `NVML_STRUCT_VERSION(Memory, 2)`: the struct size with the version number in the top byte,
/// `40 + (2 << 24) = 0x0200_0028`. Real drivers answer any other tag with
/// `NVML_ERROR_FUNCTION_NOT_FOUND`.
#[allow(clippy::cast_possible_truncation)] // 40 fits in u32
pub const NVML_MEMORY_V2_VERSION: u32 = (size_of::<MemoryV2>() as u32) + (2 << 24);

/// `nvmlProcessInfo_v1_t`: 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
}

/// `nvmlProcessInfo_v2_t` == `nvmlProcessInfo_t` (used by `_v2` and `_v3`): 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcessInfoV2 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// The 32-byte element that drivers 535.43–535.86 used for `_v3` without a version bump:
/// `nvmlProcessInfo_t` with `usedGpuCcProtectedMemory` appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcessInfoV3Wide {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
    pub used_gpu_cc_protected_memory: u64,
}

/// `nvmlProcessUtilizationSample_t`: 32 bytes, one process's activity in one of the driver's
/// sample periods, percent of each engine (`timeStamp` in CPU microseconds since the epoch).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ProcessUtilizationSample {
    pub pid: c_uint,
    pub time_stamp: u64,
    pub sm_util: c_uint,
    pub mem_util: c_uint,
    pub enc_util: c_uint,
    pub dec_util: c_uint,
}

/// `nvmlPciInfo_t` (v3 layout, also what `_v2` takes): 68 bytes, align 4.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_subsystem_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// The same layout facts at compile time: a changed layout fails the build of both crates.
const _: () = {
    use std::mem::{align_of, offset_of};
    assert!(size_of::<UtilizationRates>() == 8);
    assert!(size_of::<AddressingMode>() == 8);
    assert!(size_of::<Memory>() == 24);
    assert!(size_of::<MemoryV2>() == 40 && offset_of!(MemoryV2, total) == 8);
    assert!(size_of::<ProcessInfoV1>() == 16 && offset_of!(ProcessInfoV1, used_gpu_memory) == 8);
    assert!(size_of::<ProcessInfoV2>() == 24 && offset_of!(ProcessInfoV2, gpu_instance_id) == 16);
    assert!(size_of::<ProcessInfoV3Wide>() == 32);
    assert!(offset_of!(ProcessInfoV3Wide, used_gpu_cc_protected_memory) == 24);
    assert!(size_of::<PciInfo>() == 68 && align_of::<PciInfo>() == 4);
    assert!(size_of::<ProcessUtilizationSample>() == 32);
    assert!(offset_of!(ProcessUtilizationSample, time_stamp) == 8);
    assert!(offset_of!(ProcessUtilizationSample, dec_util) == 28);
    assert!(offset_of!(PciInfo, bus_id) == 36);
    assert!(NVML_MEMORY_V2_VERSION == 0x0200_0028);
};

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of};

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<UtilizationRates>(), 8);
        assert_eq!(offset_of!(UtilizationRates, memory), 4);
        assert_eq!(size_of::<Memory>(), 24);
        assert_eq!(offset_of!(Memory, free), 8);
        assert_eq!(offset_of!(Memory, used), 16);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(offset_of!(MemoryV2, total), 8);
        assert_eq!(offset_of!(MemoryV2, reserved), 16);
        assert_eq!(offset_of!(MemoryV2, free), 24);
        assert_eq!(offset_of!(MemoryV2, used), 32);
        assert_eq!(size_of::<ProcessInfoV1>(), 16);
        assert_eq!(offset_of!(ProcessInfoV1, used_gpu_memory), 8);
        assert_eq!(size_of::<ProcessInfoV2>(), 24);
        assert_eq!(offset_of!(ProcessInfoV2, used_gpu_memory), 8);
        assert_eq!(offset_of!(ProcessInfoV2, gpu_instance_id), 16);
        assert_eq!(offset_of!(ProcessInfoV2, compute_instance_id), 20);
        assert_eq!(size_of::<ProcessInfoV3Wide>(), 32);
        assert_eq!(offset_of!(ProcessInfoV3Wide, compute_instance_id), 20);
        assert_eq!(
            offset_of!(ProcessInfoV3Wide, used_gpu_cc_protected_memory),
            24
        );
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(align_of::<PciInfo>(), 4);
        assert_eq!(offset_of!(PciInfo, domain), 16);
        assert_eq!(offset_of!(PciInfo, pci_device_id), 28);
        assert_eq!(offset_of!(PciInfo, pci_subsystem_id), 32);
        assert_eq!(offset_of!(PciInfo, bus_id), 36);
        assert_eq!(NVML_MEMORY_V2_VERSION, 0x0200_0028);
        assert_eq!(NVML_MEMORY_V2_VERSION, 33_554_472);
    }
}
