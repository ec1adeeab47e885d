//! NVML's C ABI as data: return codes and their names, `#[repr(C)]` layouts (sizes asserted
//! in `ffi.rs`'s tests), the process-list element layouts of each driver generation, and the
//! constants of `nvml.h` (facts-nvml.md §1–§3). No `unsafe` here: the calls are in `ffi.rs`.

use std::ffi::{c_char, c_uint};

/// `nvmlReturn_t`.
pub(crate) type NvmlReturn = c_uint;

pub(crate) const NVML_SUCCESS: NvmlReturn = 0;
pub(crate) const NVML_ERROR_UNINITIALIZED: NvmlReturn = 1;
pub(crate) const NVML_ERROR_INVALID_ARGUMENT: NvmlReturn = 2;
pub(crate) const NVML_ERROR_NOT_SUPPORTED: NvmlReturn = 3;
pub(crate) const NVML_ERROR_NOT_FOUND: NvmlReturn = 6;
pub(crate) const NVML_ERROR_INSUFFICIENT_SIZE: NvmlReturn = 7;
pub(crate) const NVML_ERROR_DRIVER_NOT_LOADED: NvmlReturn = 9;

/// `NVML_DEVICE_MIG_ENABLE`: the MIG mode value meaning "on".
pub(crate) const NVML_DEVICE_MIG_ENABLE: c_uint = 1;
/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned int` (the GI/CI ids of a process when MIG is off).
pub(crate) const NVML_VALUE_NOT_AVAILABLE_U32: u32 = u32::MAX;

/// `NVML_VALUE_NOT_AVAILABLE` as an `unsigned long long`.
pub(crate) const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;

/// Buffer sizes for string queries (`NVML_DEVICE_NAME_V2_BUFFER_SIZE`, …).
pub(crate) const DEVICE_NAME_BUFFER: usize = 96;
pub(crate) const DEVICE_UUID_BUFFER: usize = 96;
pub(crate) const SYSTEM_VERSION_BUFFER: usize = 80;
pub(crate) const PROCESS_NAME_BUFFER: usize = 256;

/// The name of an `nvmlReturn_t`, as in `nvml.h`; codes this crate has never seen get a
/// generic name with the number.
pub(crate) fn return_name(code: NvmlReturn) -> &'static str {
    match code {
        0 => "NVML_SUCCESS",
        1 => "NVML_ERROR_UNINITIALIZED",
        2 => "NVML_ERROR_INVALID_ARGUMENT",
        3 => "NVML_ERROR_NOT_SUPPORTED",
        4 => "NVML_ERROR_NO_PERMISSION",
        5 => "NVML_ERROR_ALREADY_INITIALIZED",
        6 => "NVML_ERROR_NOT_FOUND",
        7 => "NVML_ERROR_INSUFFICIENT_SIZE",
        8 => "NVML_ERROR_INSUFFICIENT_POWER",
        9 => "NVML_ERROR_DRIVER_NOT_LOADED",
        10 => "NVML_ERROR_TIMEOUT",
        11 => "NVML_ERROR_IRQ_ISSUE",
        12 => "NVML_ERROR_LIBRARY_NOT_FOUND",
        13 => "NVML_ERROR_FUNCTION_NOT_FOUND",
        14 => "NVML_ERROR_CORRUPTED_INFOROM",
        15 => "NVML_ERROR_GPU_IS_LOST",
        16 => "NVML_ERROR_RESET_REQUIRED",
        17 => "NVML_ERROR_OPERATING_SYSTEM",
        18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        19 => "NVML_ERROR_IN_USE",
        20 => "NVML_ERROR_MEMORY",
        21 => "NVML_ERROR_NO_DATA",
        22 => "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
        23 => "NVML_ERROR_INSUFFICIENT_RESOURCES",
        24 => "NVML_ERROR_FREQ_NOT_SUPPORTED",
        25 => "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
        26 => "NVML_ERROR_DEPRECATED",
        27 => "NVML_ERROR_NOT_READY",
        28 => "NVML_ERROR_GPU_NOT_FOUND",
        29 => "NVML_ERROR_INVALID_STATE",
        30 => "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
        999 => "NVML_ERROR_UNKNOWN",
        _ => "an NVML return code this crate does not know",
    }
}

/// A string NVML wrote (its bytes up to the NUL) as trimmed UTF-8; `None` when empty.
pub(crate) fn text(bytes: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `nvmlUtilization_t`: 8 bytes, percent over the driver's last sample period.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UtilizationRates {
    pub gpu: u32,
    pub memory: u32,
}

/// `nvmlMemory_t` (v1): 24 bytes. `used` includes the driver reservation.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    pub total: u64,
    pub free: u64,
    pub used: u64,
}

/// `nvmlMemory_v2_t`: 40 bytes, `version` must be [`NVML_MEMORY_V2_VERSION`].
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
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessInfoV1 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
}

/// `nvmlProcessInfo_v2_t` == `nvmlProcessInfo_t` (used by `_v2` and `_v3`): 24 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessInfoV2 {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}

/// The 32-byte element that drivers 535.43–535.86 used for `_v3` without a version bump.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProcessInfoV3Wide {
    pub pid: c_uint,
    pub used_gpu_memory: u64,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
    pub used_gpu_cc_protected_memory: u64,
}

/// `nvmlPciInfo_t` (v3 layout): 68 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_subsystem_id: c_uint,
    pub bus_id: [c_char; 32],
}

/// One element of a process list, whatever its layout.
pub(crate) trait ProcessRecord: Copy + Default {
    fn pid(&self) -> u32;
    fn used(&self) -> u64;
    /// GPU instance id as NVML wrote it (`0xFFFFFFFF` when MIG is off; v1 has no such field).
    fn gpu_instance(&self) -> u32;
    /// Compute instance id as NVML wrote it.
    fn compute_instance(&self) -> u32;
}

impl ProcessRecord for ProcessInfoV1 {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn used(&self) -> u64 {
        self.used_gpu_memory
    }
    fn gpu_instance(&self) -> u32 {
        NVML_VALUE_NOT_AVAILABLE_U32
    }
    fn compute_instance(&self) -> u32 {
        NVML_VALUE_NOT_AVAILABLE_U32
    }
}

/// The layouts with instance ids read them the same way, whatever follows them.
macro_rules! record_with_instance_ids {
    ($($t:ty),*) => {$(
        impl ProcessRecord for $t {
            fn pid(&self) -> u32 {
                self.pid
            }
            fn used(&self) -> u64 {
                self.used_gpu_memory
            }
            fn gpu_instance(&self) -> u32 {
                self.gpu_instance_id
            }
            fn compute_instance(&self) -> u32 {
                self.compute_instance_id
            }
        }
    )*};
}

record_with_instance_ids!(ProcessInfoV2, ProcessInfoV3Wide);

/// Element layout a process-list function writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcessLayout {
    /// Unversioned function, 16-byte elements.
    V1,
    /// `_v2`, or `_v3` with the 24-byte element.
    V2,
    /// `_v3` of drivers 535.43–535.86: 32-byte elements.
    V3Wide,
}

impl ProcessLayout {
    pub(crate) fn stride(self) -> usize {
        match self {
            Self::V1 => size_of::<ProcessInfoV1>(),
            Self::V2 => size_of::<ProcessInfoV2>(),
            Self::V3Wide => size_of::<ProcessInfoV3Wide>(),
        }
    }
}

/// Which layout the `_v3` symbols use, from which other symbols the library exports (the rule
/// nvitop uses): `_v3` + `nvmlDeviceGetConfComputeMemSizeInfo` without
/// `nvmlDeviceGetRunningProcessDetailList` means a 535.43–535.86 library with 32-byte elements.
pub(crate) fn v3_layout(has_conf_compute_mem: bool, has_detail_list: bool) -> ProcessLayout {
    if has_conf_compute_mem && !has_detail_list {
        ProcessLayout::V3Wide
    } else {
        ProcessLayout::V2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_nvml_h() {
        assert_eq!(size_of::<Memory>(), 24);
        assert_eq!(size_of::<MemoryV2>(), 40);
        assert_eq!(std::mem::offset_of!(MemoryV2, total), 8);
        assert_eq!(std::mem::offset_of!(MemoryV2, reserved), 16);
        assert_eq!(std::mem::offset_of!(MemoryV2, free), 24);
        assert_eq!(std::mem::offset_of!(MemoryV2, used), 32);
        assert_eq!(size_of::<ProcessInfoV1>(), 16);
        assert_eq!(size_of::<ProcessInfoV2>(), 24);
        assert_eq!(std::mem::offset_of!(ProcessInfoV2, gpu_instance_id), 16);
        assert_eq!(size_of::<ProcessInfoV3Wide>(), 32);
        assert_eq!(
            std::mem::offset_of!(ProcessInfoV3Wide, compute_instance_id),
            20
        );
        assert_eq!(size_of::<PciInfo>(), 68);
        assert_eq!(std::mem::offset_of!(PciInfo, bus_id), 36);
        assert_eq!(std::mem::offset_of!(PciInfo, pci_device_id), 28);
        assert_eq!(NVML_MEMORY_V2_VERSION, 0x0200_0028);
        assert_eq!(ProcessLayout::V1.stride(), 16);
        assert_eq!(ProcessLayout::V2.stride(), 24);
        assert_eq!(ProcessLayout::V3Wide.stride(), 32);
    }

    #[test]
    fn every_return_code_has_its_nvml_h_name() {
        let names = [
            "SUCCESS",
            "ERROR_UNINITIALIZED",
            "ERROR_INVALID_ARGUMENT",
            "ERROR_NOT_SUPPORTED",
            "ERROR_NO_PERMISSION",
            "ERROR_ALREADY_INITIALIZED",
            "ERROR_NOT_FOUND",
            "ERROR_INSUFFICIENT_SIZE",
            "ERROR_INSUFFICIENT_POWER",
            "ERROR_DRIVER_NOT_LOADED",
            "ERROR_TIMEOUT",
            "ERROR_IRQ_ISSUE",
            "ERROR_LIBRARY_NOT_FOUND",
            "ERROR_FUNCTION_NOT_FOUND",
            "ERROR_CORRUPTED_INFOROM",
            "ERROR_GPU_IS_LOST",
            "ERROR_RESET_REQUIRED",
            "ERROR_OPERATING_SYSTEM",
            "ERROR_LIB_RM_VERSION_MISMATCH",
            "ERROR_IN_USE",
            "ERROR_MEMORY",
            "ERROR_NO_DATA",
            "ERROR_VGPU_ECC_NOT_SUPPORTED",
            "ERROR_INSUFFICIENT_RESOURCES",
            "ERROR_FREQ_NOT_SUPPORTED",
            "ERROR_ARGUMENT_VERSION_MISMATCH",
            "ERROR_DEPRECATED",
            "ERROR_NOT_READY",
            "ERROR_GPU_NOT_FOUND",
            "ERROR_INVALID_STATE",
            "ERROR_RESET_TYPE_NOT_SUPPORTED",
        ];
        for (code, name) in (0..).zip(names) {
            assert_eq!(return_name(code), format!("NVML_{name}"), "code {code}");
        }
        assert_eq!(return_name(999), "NVML_ERROR_UNKNOWN");
        assert_eq!(
            return_name(31),
            "an NVML return code this crate does not know"
        );
    }

    #[test]
    fn v3_layout_rule() {
        assert_eq!(v3_layout(false, false), ProcessLayout::V2);
        assert_eq!(v3_layout(true, true), ProcessLayout::V2);
        assert_eq!(v3_layout(false, true), ProcessLayout::V2);
        assert_eq!(v3_layout(true, false), ProcessLayout::V3Wide);
    }

    #[test]
    fn names_and_strings() {
        assert_eq!(return_name(9), "NVML_ERROR_DRIVER_NOT_LOADED");
        assert_eq!(return_name(18), "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
        assert_eq!(
            return_name(77),
            "an NVML return code this crate does not know"
        );
        assert_eq!(text(b"  NVIDIA H200 "), Some("NVIDIA H200".into()));
        assert_eq!(text(b" "), None);
    }
}
