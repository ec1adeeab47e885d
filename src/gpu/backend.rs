//! The one internal trait every GPU backend implements.
// A build without any GPU feature has the trait but no implementation of it.
#![cfg_attr(
    not(any(feature = "nvml", feature = "nvidia-smi-fallback")),
    allow(dead_code)
)]

use super::pci::PciAddress;
use crate::{
    GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, HypomnesisError, MigInstance, MigState,
    ProcessGpuInfo, Result, SourceReport,
};

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
    /// MIG mode and instances (NVIDIA sources that know MIG answer it).
    Mig,
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
    /// Process rows left out of the devices' latest lists (implausible or unknown figures),
    /// without asking the source anything.
    fn dropped_process_rows(&self) -> u64 {
        0
    }
    /// MIG mode and instances of one device. Sources that know nothing of MIG say "unknown".
    fn mig_state(&self, index: u32) -> Result<MigState> {
        Ok(MigState::unknown(index, self.source()))
    }
    /// The MIG device with this UUID (`MIG-…`).
    fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        Err(source_error(
            self.source(),
            format!("this source does not list MIG devices, so {uuid:?} cannot be looked up"),
        ))
    }
    /// Whether this source answers `op` on this platform at all (NVML's per-process figures are
    /// N/A under Windows WDDM, for instance); the dispatcher skips it silently when not.
    fn answers(&self, _op: Op) -> bool {
        true
    }
    /// Which devices this backend enumerates.
    fn scope(&self) -> Scope {
        Scope::Nvidia
    }
    /// Whether this backend lists devices the NVIDIA sources may measure too (a sysfs walk that
    /// meets NVIDIA cards; DXGI, whose NVIDIA adapters take NVML's order), and so wants
    /// [`Self::nvidia_devices`] before it is asked anything else.
    fn needs_nvidia_devices(&self) -> bool {
        false
    }
    /// The PCI addresses of the devices the NVIDIA sources measure, in their index order:
    /// given by the dispatcher once, before any other question, to the backends that want it.
    fn nvidia_devices(&self, _addresses: &[PciAddress]) {}
}

/// An error of `source`'s own kind.
pub(crate) fn source_error(source: GpuQuerySource, message: String) -> HypomnesisError {
    match source {
        GpuQuerySource::Nvml => HypomnesisError::Nvml(message),
        GpuQuerySource::NvidiaSmi => HypomnesisError::NvidiaSmi(message),
        GpuQuerySource::Dxgi => HypomnesisError::Dxgi(message),
        GpuQuerySource::Pdh => HypomnesisError::Pdh(message),
        GpuQuerySource::Metal => HypomnesisError::Metal(message),
        GpuQuerySource::Drm => HypomnesisError::Drm(message),
    }
}
