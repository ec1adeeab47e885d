//! The per-device figures' calls: memory (v1 and v2), utilization, name, UUID, PCI.
#![allow(unsafe_code)]

use crate::gpu::nvml::abi::{
    AddressingMode, Memory, MemoryV2, NVML_ADDRESSING_MODE_V1, NvmlReturn, PciInfo,
    ProcessUtilizationSample, UtilizationRates,
};
use crate::gpu::nvml::ffi::Nvml;
use crate::gpu::nvml::ffi::call::{
    DEVICE_NAME_BUFFER, DEVICE_UUID_BUFFER, Device, buffer_len, device_string, device_uint, ok,
};

impl Nvml {
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

    /// The addressing mode (`NVML_DEVICE_ADDRESSING_MODE_*`); `None` when the symbol is
    /// missing (drivers before R580).
    pub(crate) fn addressing_mode(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        let f = self.addressing_mode?;
        let mut m = AddressingMode {
            version: NVML_ADDRESSING_MODE_V1,
            value: 0,
        };
        let _waiting = crate::inflight::calling("nvmlDeviceGetAddressingMode");
        // SAFETY: `m` is a writable nvmlDeviceAddressingMode_t (8 bytes, asserted in abi.rs)
        // carrying its version; `dev` came from NVML.
        let rc = unsafe { f(dev.0, &raw mut m) };
        Some(ok(rc).map(|()| m.value))
    }

    /// The NUMA node that is the GPU (`nvmlDeviceGetNumaNodeId`: on platforms whose GPUs are
    /// NUMA nodes); `None` when the symbol is missing.
    pub(crate) fn numa_node_id(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        Some(device_uint(
            "nvmlDeviceGetNumaNodeId",
            self.numa_node_id?,
            dev,
        ))
    }

    /// The minor number of the GPU's device file, `/dev/nvidia<minor>`
    /// (`nvmlDeviceGetMinorNumber`); `None` when the symbol is missing.
    pub(crate) fn minor_number(&self, dev: Device) -> Option<Result<u32, NvmlReturn>> {
        Some(device_uint(
            "nvmlDeviceGetMinorNumber",
            self.minor_number?,
            dev,
        ))
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

    /// One call of `nvmlDeviceGetProcessUtilization` for the samples newer than `since` (CPU
    /// microseconds; 0: all the driver keeps), with `buf.len()` as the capacity (an empty
    /// `buf` passes NULL: the sizing call). The code and the count NVML wrote back; `None`
    /// when the symbol is missing.
    pub(crate) fn process_utilization(
        &self,
        dev: Device,
        since: u64,
        buf: &mut [ProcessUtilizationSample],
    ) -> Option<(NvmlReturn, u32)> {
        let f = self.process_utilization?;
        let mut count = buffer_len(buf);
        let ptr = if buf.is_empty() {
            std::ptr::null_mut()
        } else {
            buf.as_mut_ptr()
        };
        let _waiting = crate::inflight::calling("nvmlDeviceGetProcessUtilization");
        // SAFETY: `ptr` is NULL with a capacity of 0, or points to `count` writable 32-byte
        // samples (the layout asserted in abi.rs); NVML writes at most `count` and updates it.
        let rc = unsafe { f(dev.0, ptr, &raw mut count, since) };
        Some((rc, count))
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
}
