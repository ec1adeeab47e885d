//! Reading what NVML wrote: the names of return codes, strings from caller buffers, the
//! process-list element layouts as one trait, and which layout a `_v3` symbol writes. The ABI
//! itself (codes, layouts, constants) is `abi.rs`'s, shared with the test stand-in; this is the
//! library's side only.

use super::abi::{
    NVML_ERROR_ALREADY_INITIALIZED, NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_CORRUPTED_INFOROM, NVML_ERROR_DEPRECATED, NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FREQ_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_GPU_NOT_FOUND, NVML_ERROR_IN_USE, NVML_ERROR_INSUFFICIENT_POWER,
    NVML_ERROR_INSUFFICIENT_RESOURCES, NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_INVALID_STATE, NVML_ERROR_IRQ_ISSUE, NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND, NVML_ERROR_MEMORY, NVML_ERROR_NO_DATA, NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_READY, NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_OPERATING_SYSTEM, NVML_ERROR_RESET_REQUIRED, NVML_ERROR_RESET_TYPE_NOT_SUPPORTED,
    NVML_ERROR_TIMEOUT, NVML_ERROR_UNINITIALIZED, NVML_ERROR_UNKNOWN,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED, NVML_SUCCESS, NVML_VALUE_NOT_AVAILABLE_U32, NvmlReturn,
    ProcessInfoV1, ProcessInfoV2, ProcessInfoV3Wide,
};
use crate::error::ErrorKind;

/// Maps a code to the name of the first constant it equals.
macro_rules! name_of {
    ($code:expr; $($name:ident),* $(,)?) => {
        match $code {
            $($name => stringify!($name),)*
            _ => "an NVML return code this crate does not know",
        }
    };
}

/// The name of an `nvmlReturn_t`, as in `nvml.h`; codes this crate has never seen get a
/// generic name with the number.
pub(crate) fn return_name(code: NvmlReturn) -> &'static str {
    name_of!(code;
        NVML_SUCCESS,
        NVML_ERROR_UNINITIALIZED,
        NVML_ERROR_INVALID_ARGUMENT,
        NVML_ERROR_NOT_SUPPORTED,
        NVML_ERROR_NO_PERMISSION,
        NVML_ERROR_ALREADY_INITIALIZED,
        NVML_ERROR_NOT_FOUND,
        NVML_ERROR_INSUFFICIENT_SIZE,
        NVML_ERROR_INSUFFICIENT_POWER,
        NVML_ERROR_DRIVER_NOT_LOADED,
        NVML_ERROR_TIMEOUT,
        NVML_ERROR_IRQ_ISSUE,
        NVML_ERROR_LIBRARY_NOT_FOUND,
        NVML_ERROR_FUNCTION_NOT_FOUND,
        NVML_ERROR_CORRUPTED_INFOROM,
        NVML_ERROR_GPU_IS_LOST,
        NVML_ERROR_RESET_REQUIRED,
        NVML_ERROR_OPERATING_SYSTEM,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH,
        NVML_ERROR_IN_USE,
        NVML_ERROR_MEMORY,
        NVML_ERROR_NO_DATA,
        NVML_ERROR_VGPU_ECC_NOT_SUPPORTED,
        NVML_ERROR_INSUFFICIENT_RESOURCES,
        NVML_ERROR_FREQ_NOT_SUPPORTED,
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
        NVML_ERROR_DEPRECATED,
        NVML_ERROR_NOT_READY,
        NVML_ERROR_GPU_NOT_FOUND,
        NVML_ERROR_INVALID_STATE,
        NVML_ERROR_RESET_TYPE_NOT_SUPPORTED,
        NVML_ERROR_UNKNOWN,
    )
}

/// A string NVML wrote (its bytes up to the NUL) as trimmed UTF-8; `None` when empty.
pub(crate) fn text(bytes: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
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

/// The kind of a failure NVML reported with `code`: decided here, where the code is read, by
/// the code alone.
pub(crate) fn kind_of_return(code: NvmlReturn) -> ErrorKind {
    match code {
        NVML_ERROR_DRIVER_NOT_LOADED => ErrorKind::DriverNotLoaded,
        NVML_ERROR_LIB_RM_VERSION_MISMATCH => ErrorKind::DriverVersionMismatch,
        NVML_ERROR_NO_PERMISSION => ErrorKind::NoPermission,
        NVML_ERROR_GPU_IS_LOST | NVML_ERROR_RESET_REQUIRED => ErrorKind::GpuLost,
        NVML_ERROR_NOT_SUPPORTED => ErrorKind::NotSupported,
        NVML_ERROR_LIBRARY_NOT_FOUND => ErrorKind::NotInstalled,
        NVML_ERROR_NOT_FOUND => ErrorKind::NoSuchDevice,
        NVML_ERROR_TIMEOUT => ErrorKind::TimedOut,
        NVML_ERROR_GPU_NOT_FOUND => ErrorKind::NoGpu,
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_layout_strides() {
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
