//! Public data types. All are `#[non_exhaustive]`: fields may be added, never changed.
//! Downstream tests can fabricate them with the builders of the `test-helpers` feature.

use std::fmt;

pub(crate) mod builders;
mod device;
mod memory_model;
mod mig;
mod numa;
mod process;
mod source;
#[cfg(test)]
mod tests;
mod visibility;

#[cfg(feature = "test-helpers")]
pub use builders::{
    GpuDeviceInfoBuilder, GpuProcessEntryBuilder, GpuProcessListingBuilder, KubeletLogsBuilder,
    MigGpuInstanceBuilder, MigInstanceBuilder, MigStateBuilder, ProcessGpuInfoBuilder,
    ProcfsMountBuilder, ResidencyBuilder, RootBuilder, RootsBuilder, SourceReportBuilder,
};
pub use device::{
    GpuDeviceInfo, ProcessActivity, ProcessActivitySample, Residency, Utilization,
    driver_overhead_allowance,
};
pub use memory_model::MemoryModel;
pub use mig::{MigGpuInstance, MigInstance, MigState};
pub use numa::NumaNode;
pub use process::{GpuContextKind, GpuProcessEntry, GpuProcessListing, ProcessGpuInfo};
pub use source::{
    KubeletDirState, KubeletLogs, Root, RootOrigin, Roots, SourceReport, SourceState,
};
pub use visibility::{Hidepid, ProcfsMount, UnreadableReason};

/// One mebibyte and one gibibyte, in bytes: the units every figure of this crate is converted
/// from (`nvidia-smi`'s MiB, DXGI's) and tested in.
#[cfg_attr(
    not(any(feature = "nvidia-smi-fallback", all(windows, feature = "dxgi"))),
    allow(dead_code)
)]
pub(crate) const MIB: u64 = 1 << 20;
#[cfg(test)]
pub(crate) const GIB: u64 = 1 << 30;

/// Where a figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum GpuQuerySource {
    /// DXGI adapter queries (Windows).
    Dxgi,
    /// NVIDIA Management Library, loaded at run time.
    Nvml,
    /// Windows PDH "GPU Process Memory" counters.
    Pdh,
    /// The `nvidia-smi` executable, run as a subprocess.
    NvidiaSmi,
    /// Apple's Metal / libSystem (macOS).
    Metal,
    /// Linux DRM: sysfs device files and `/proc/<pid>/fdinfo` (AMD, Intel).
    Drm,
}

impl GpuQuerySource {
    /// A short stable name: `nvml`, `nvidia-smi`, `dxgi`, `pdh`, `metal`, `drm`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dxgi => "dxgi",
            Self::Nvml => "nvml",
            Self::Pdh => "pdh",
            Self::NvidiaSmi => "nvidia-smi",
            Self::Metal => "metal",
            Self::Drm => "drm",
        }
    }

    /// An error of this source: `failure` in the variant that names it.
    pub(crate) fn error(self, failure: crate::error::Failure) -> crate::error::HypomnesisError {
        use crate::error::HypomnesisError as E;
        let crate::error::Failure { kind, message, .. } = failure;
        match self {
            Self::Nvml => E::nvml(kind, message),
            Self::NvidiaSmi => E::nvidia_smi(kind, message),
            Self::Dxgi => E::dxgi(kind, message),
            Self::Pdh => E::pdh(kind, message),
            Self::Metal => E::metal(kind, message),
            Self::Drm => E::drm(kind, message),
        }
    }
}

impl fmt::Display for GpuQuerySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who made the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum GpuVendor {
    /// NVIDIA (PCI vendor 0x10DE).
    Nvidia,
    /// AMD (PCI vendor 0x1002).
    Amd,
    /// Intel (PCI vendor 0x8086).
    Intel,
    /// Apple silicon.
    Apple,
}

impl GpuVendor {
    /// The vendor of a PCI vendor id, when it is one we know.
    #[must_use]
    pub fn from_pci_vendor_id(id: u16) -> Option<Self> {
        match id {
            0x10DE => Some(Self::Nvidia),
            0x1002 => Some(Self::Amd),
            0x8086 => Some(Self::Intel),
            0x106B => Some(Self::Apple),
            _ => None,
        }
    }

    /// A short stable name: `nvidia`, `amd`, `intel`, `apple`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Nvidia => "nvidia",
            Self::Amd => "amd",
            Self::Intel => "intel",
            Self::Apple => "apple",
        }
    }
}

impl fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
