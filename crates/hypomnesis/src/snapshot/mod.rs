//! `Snapshot`: RAM (mandatory) and GPU memory (optional) of the calling process at one moment,
//! defined, built and formatted here. The module also names the data types a snapshot and the
//! GPU functions return, as the 0.2.x paths (`hypomnesis::snapshot::GpuDeviceInfo`, …) do.

pub use crate::types::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, GpuQuerySource, GpuVendor,
    ProcessGpuInfo,
};
#[cfg(feature = "test-helpers")]
pub use crate::types::{
    GpuDeviceInfoBuilder, GpuProcessEntryBuilder, GpuProcessListingBuilder, ProcessGpuInfoBuilder,
};
use crate::{
    error::HypomnesisError, error::Result, gpu::device_count, gpu::device_info,
    gpu::process_gpu_info, host::memory::process_rss,
};

/// RAM and GPU memory of the calling process at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Snapshot {
    /// Resident set size of the calling process, bytes.
    pub ram_bytes: u64,
    /// This process's GPU memory on the device; `None` when no source could tell.
    pub gpu: Option<ProcessGpuInfo>,
    /// Device-wide figures of the device; `None` when no source could tell.
    pub gpu_device: Option<GpuDeviceInfo>,
}

#[cfg(feature = "test-helpers")]
crate::types::builders::builder! {
    /// Builds a [`Snapshot`] for tests.
    SnapshotBuilder => Snapshot {
        @const ram_bytes: u64 = 0,
        @const gpu: Option<ProcessGpuInfo> = None,
        gpu_device: Option<GpuDeviceInfo> = None,
    }
}

impl Snapshot {
    /// RAM of this process, plus its GPU memory and the device's figures on `device_index`
    /// when a GPU source can tell (`None` otherwise: a GPU failure never fails the snapshot).
    ///
    /// # Errors
    ///
    /// Only when the RAM measurement fails (see [`process_rss`]).
    pub fn now(device_index: u32) -> Result<Self> {
        let ram_bytes = process_rss()?;
        Ok(Self {
            ram_bytes,
            gpu: process_gpu_info(device_index).ok(),
            gpu_device: device_info(device_index).ok(),
        })
    }

    /// One snapshot per GPU, in index order; an **empty** list when there is no GPU (no GPU
    /// source at all, or one that finds no device: the driver not loaded, no GPU found).
    ///
    /// # Errors
    ///
    /// When the RAM measurement fails, and when a GPU source exists but cannot count its
    /// devices (NVML loads but `nvmlInit_v2` or the count fails, e.g.
    /// `NVML_ERROR_LIB_RM_VERSION_MISMATCH` after a driver upgrade without a reboot): that
    /// source's error, never an empty list that would read as "no GPU".
    pub fn all() -> Result<Vec<Self>> {
        let count = match device_count() {
            Ok(n) => n,
            Err(HypomnesisError::NoGpuSource) => 0,
            Err(e) => return Err(e),
        };
        // RAM is measured whatever the GPUs say: its failure is the one error of a GPU-less host.
        process_rss()?;
        (0..count).map(Self::now).collect()
    }
}

/// The figures of the `report` feature, in MiB (as [`crate::report::MemoryReport`] prints them).
#[cfg(feature = "report")]
impl Snapshot {
    /// Resident RAM in MiB.
    #[must_use]
    pub const fn ram_mb(&self) -> f64 {
        mb(self.ram_bytes)
    }

    /// This process's GPU memory in MiB (`gpu.used_bytes`); `None` when unknown.
    #[must_use]
    pub const fn vram_mb(&self) -> Option<f64> {
        match self.gpu {
            Some(g) => Some(mb(g.used_bytes)),
            None => None,
        }
    }
}

/// Bytes in MiB, the unit of the `report` feature's figures.
#[cfg(feature = "report")]
#[allow(clippy::cast_precision_loss)] // display figures: exact below 2^53 bytes
pub(crate) const fn mb(bytes: u64) -> f64 {
    const MIB: f64 = 1_048_576.0;
    bytes as f64 / MIB
}
