//! The one internal trait every GPU backend implements.
// A build without any GPU feature has the trait but no implementation of it.
#![cfg_attr(
    not(any(feature = "nvml", feature = "nvidia-smi-fallback")),
    allow(dead_code)
)]

use crate::{GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, ProcessGpuInfo, Result, SourceReport};

/// Whether a backend's source exists on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presence {
    /// It exists (it may still fail when asked).
    Present,
    /// It does not exist here; the reason says where it was looked for.
    Absent(String),
}

/// A question the dispatcher asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    DeviceCount,
    DeviceInfo,
    ProcessGpuInfo,
    GpuProcesses,
}

/// Which devices a backend enumerates: NVIDIA GPUs (the NVML order, shared by every NVIDIA
/// source), or the other vendors' devices, which follow the NVIDIA ones in the device list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Nvidia,
    Others,
}

/// A source of GPU figures (NVML, `nvidia-smi`, DXGI, …). Indices are the source's own device
/// indices; the dispatcher asks backends in priority order.
pub(crate) trait Backend: Send + Sync {
    /// Which source this is.
    fn source(&self) -> GpuQuerySource;
    /// Whether the source exists (cheap after the first call).
    fn presence(&self) -> Presence;
    /// Number of devices the source sees.
    fn device_count(&self) -> Result<u32>;
    /// Device-wide memory of one device.
    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo>;
    /// The calling process's memory on one device.
    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo>;
    /// Every process holding memory on one device, sorted by pid.
    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>>;
    /// What the source says about itself, for `hmn doctor`.
    fn report(&self) -> SourceReport;
    /// Whether this source answers `op` on this platform at all (NVML's per-process figures are
    /// N/A under Windows WDDM, for instance); the dispatcher skips it silently when not.
    fn answers(&self, _op: Op) -> bool {
        true
    }
    /// Which devices this backend enumerates.
    fn scope(&self) -> Scope {
        Scope::Nvidia
    }
}
