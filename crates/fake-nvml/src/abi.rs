//! NVML C ABI: return codes, struct layouts and error strings (x86-64 / LP64 and LLP64 alike).

use std::ffi::CStr;

pub const NVML_SUCCESS: u32 = 0;
pub const NVML_ERROR_UNINITIALIZED: u32 = 1;
pub const NVML_ERROR_INVALID_ARGUMENT: u32 = 2;
pub const NVML_ERROR_NOT_SUPPORTED: u32 = 3;
pub const NVML_ERROR_NOT_FOUND: u32 = 6;
pub const NVML_ERROR_INSUFFICIENT_SIZE: u32 = 7;
pub const NVML_ERROR_FUNCTION_NOT_FOUND: u32 = 13;
pub const NVML_ERROR_UNKNOWN: u32 = 999;

/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned int` (MIG instance ids when MIG is off).
pub const VALUE_NOT_AVAILABLE_U32: u32 = u32::MAX;
/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned long long` (`usedGpuMemory` under WDDM).
pub const VALUE_NOT_AVAILABLE_U64: u64 = u64::MAX;

/// `nvmlUtilization_t`: 8 bytes, percent over the driver's last sample period.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Utilization {
    pub gpu: u32,
    pub memory: u32,
}

/// `nvmlMemory_t` (v1): 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub free: u64,
    /// Includes driver-reserved memory.
    pub used: u64,
}

/// `nvmlMemory_v2_t`: 40 bytes (4 bytes of padding after `version`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryV2 {
    pub version: u32,
    pub total: u64,
    pub reserved: u64,
    pub free: u64,
    /// Allocated only (excludes reserved).
    pub used: u64,
}

/// `nvmlMemory_v2` = `NVML_STRUCT_VERSION(Memory, 2)` = sizeof | (2 << 24) = 0x0200_0028.
#[allow(clippy::cast_possible_truncation)]
pub const MEMORY_V2_VERSION: u32 = (size_of::<MemoryV2>() as u32) | (2 << 24);

/// `nvmlProcessInfo_v1_t`: 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfoV1 {
    pub pid: u32,
    pub used_gpu_memory: u64,
}

/// `nvmlProcessInfo_v2_t` == `nvmlProcessInfo_t` (used by `_v2` and `_v3`): 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfoV2 {
    pub pid: u32,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// The 32-byte `_v3` element of drivers 535.43–535.86: `nvmlProcessInfo_t` with
/// `usedGpuCcProtectedMemory` appended.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessInfoV3Wide {
    pub pid: u32,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub used_gpu_cc_protected_memory: u64,
}

/// `nvmlPciInfo_t` (v3 layout, also what `_v2` takes): 68 bytes, align 4.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciInfo {
    pub bus_id_legacy: [u8; 16],
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub pci_device_id: u32,
    pub pci_sub_system_id: u32,
    pub bus_id: [u8; 32],
}

/// The static text `nvmlErrorString` returns for `code`.
pub fn error_string(code: u32) -> &'static CStr {
    match code {
        0 => c"Success",
        1 => c"Uninitialized",
        2 => c"Invalid Argument",
        3 => c"Not Supported",
        4 => c"Insufficient Permissions",
        5 => c"Already Initialized",
        6 => c"Not Found",
        7 => c"Insufficient Size",
        8 => c"Insufficient External Power",
        9 => c"Driver Not Loaded",
        10 => c"Timeout",
        11 => c"Interrupt request issue",
        12 => c"NVML Shared Library Not Found",
        13 => c"Function Not Found",
        14 => c"Corrupted infoROM",
        15 => c"GPU is lost",
        16 => c"GPU requires reset",
        17 => c"GPU access blocked by the operating system",
        18 => c"RM has detected an NVML/RM version mismatch",
        19 => c"In use by another client",
        20 => c"Insufficient Memory",
        21 => c"No data",
        22 => c"vGPU operation not available while ECC is enabled",
        23 => c"Insufficient resources",
        24 => c"Frequency not supported",
        25 => c"Argument version mismatch",
        26 => c"Deprecated",
        27 => c"Not Ready",
        28 => c"GPU not found",
        29 => c"Invalid state",
        30 => c"Reset type not supported",
        999 => c"Unknown Error",
        _ => c"Unrecognized NVML return code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of};

    #[test]
    fn struct_sizes_match_nvml_h() {
        assert_eq!(size_of::<Memory>(), 24);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(offset_of!(MemoryV2, total), 8);
        assert_eq!(offset_of!(MemoryV2, reserved), 16);
        assert_eq!(offset_of!(MemoryV2, free), 24);
        assert_eq!(offset_of!(MemoryV2, used), 32);
        assert_eq!(size_of::<ProcessInfoV1>(), 16);
        assert_eq!(offset_of!(ProcessInfoV1, used_gpu_memory), 8);
        assert_eq!(size_of::<ProcessInfoV2>(), 24);
        assert_eq!(size_of::<ProcessInfoV3Wide>(), 32);
        assert_eq!(
            offset_of!(ProcessInfoV3Wide, used_gpu_cc_protected_memory),
            24
        );
        assert_eq!(offset_of!(ProcessInfoV2, gpu_instance_id), 16);
        assert_eq!(offset_of!(ProcessInfoV2, compute_instance_id), 20);
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(align_of::<PciInfo>(), 4);
        assert_eq!(offset_of!(PciInfo, domain), 16);
        assert_eq!(offset_of!(PciInfo, pci_sub_system_id), 32);
        assert_eq!(offset_of!(PciInfo, bus_id), 36);
    }

    #[test]
    fn memory_v2_version_constant() {
        assert_eq!(MEMORY_V2_VERSION, 0x0200_0028);
        assert_eq!(MEMORY_V2_VERSION, 33_554_472);
    }

    #[test]
    fn every_code_has_a_string() {
        for code in (0..=40).chain([77, 999, u32::MAX]) {
            assert!(!error_string(code).to_bytes().is_empty());
        }
    }
}
