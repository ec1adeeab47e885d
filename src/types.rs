//! Public data types. All are `#[non_exhaustive]`: fields may be added, never changed.
//! Downstream tests can fabricate them with the builders of the `test-helpers` feature.

use std::fmt;

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

/// Device-wide memory of one GPU, in bytes.
///
/// On NVIDIA, `total_bytes` is the NVML v1 total (what `nvidia-smi` calls Total), `free_bytes`
/// the v1 free figure, and `used_bytes = total_bytes - free_bytes` on every path, so `used_bytes`
/// *includes* the driver reservation. `reserved_bytes` breaks that reservation out: it is a
/// **subset** of `total_bytes` (and of `used_bytes`), never an amount on top of it. Allocation
/// headroom is `total_bytes - reserved_bytes`; `free_bytes` already reflects it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GpuDeviceInfo {
    /// Index of the device (NVML order on NVIDIA hosts).
    pub index: u32,
    /// Product name, e.g. `NVIDIA H200`; `None` when the source cannot tell.
    pub name: Option<String>,
    /// Total memory the driver reports, bytes.
    pub total_bytes: u64,
    /// Free memory, bytes.
    pub free_bytes: u64,
    /// `total_bytes - free_bytes`, bytes (includes the driver reservation).
    pub used_bytes: u64,
    /// Driver/firmware reservation, bytes, a subset of `total_bytes`; `None` when the source does
    /// not report it (pre-R510 NVIDIA drivers, non-NVIDIA sources). Read from NVML's
    /// `nvmlDeviceGetMemoryInfo_v2` or `nvidia-smi --query-gpu=memory.reserved`, never inferred.
    /// From NVML `reserved_bytes <= used_bytes` holds exactly; from `nvidia-smi`, whose
    /// figures are rounded to whole MiB, to within 2 MiB.
    pub reserved_bytes: Option<u64>,
    /// Driver version in the vendor's own form (e.g. `590.48.01`); `None` when unknown.
    pub driver_version: Option<String>,
    /// Device UUID (`GPU-…` on NVIDIA); `None` when unknown.
    pub uuid: Option<String>,
    /// PCI bus id as the source prints it (NVML: `00000000:01:00.0`); `None` when unknown.
    pub pci_bus_id: Option<String>,
    /// Maker of the device; `None` when unknown.
    pub vendor: Option<GpuVendor>,
    /// Which source produced these figures.
    pub source: GpuQuerySource,
    /// GTT (system memory the GPU maps) size, bytes — amdgpu; `None` elsewhere.
    pub gtt_total_bytes: Option<u64>,
    /// GTT in use, bytes — amdgpu; `None` elsewhere.
    pub gtt_used_bytes: Option<u64>,
    /// CPU-visible VRAM (the BAR window) size, bytes — amdgpu; `None` elsewhere.
    pub visible_vram_total_bytes: Option<u64>,
    /// CPU-visible VRAM in use, bytes — amdgpu; `None` elsewhere.
    pub visible_vram_used_bytes: Option<u64>,
}

impl GpuDeviceInfo {
    /// All-unknown figures, for the crate's constructors (`..GpuDeviceInfo::blank()`).
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank() -> Self {
        Self {
            index: 0,
            name: None,
            total_bytes: 0,
            free_bytes: 0,
            used_bytes: 0,
            reserved_bytes: None,
            driver_version: None,
            uuid: None,
            pci_bus_id: None,
            vendor: None,
            source: GpuQuerySource::Nvml,
            gtt_total_bytes: None,
            gtt_used_bytes: None,
            visible_vram_total_bytes: None,
            visible_vram_used_bytes: None,
        }
    }

    /// The device name, or `unknown GPU` when there is none.
    #[must_use]
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("unknown GPU")
    }

    /// Memory that allocations can ever use: `total_bytes - reserved_bytes`; `None` when the
    /// reservation is unknown.
    #[must_use]
    pub fn allocatable_bytes(&self) -> Option<u64> {
        self.reserved_bytes
            .and_then(|r| self.total_bytes.checked_sub(r))
    }
}

/// GPU memory of the calling process on one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProcessGpuInfo {
    /// Bytes. When `is_per_process` is false this is the whole device's usage.
    pub used_bytes: u64,
    /// `true`: `used_bytes` is this process's own usage. `false`: the source could not attribute
    /// memory to this process, and `used_bytes` is the device-wide usage (a fallback).
    pub is_per_process: bool,
    /// Which source produced the figure.
    pub source: GpuQuerySource,
}

/// The kind of GPU context a process holds, where the source knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum GpuContextKind {
    /// A compute (CUDA/OpenCL) context only.
    Compute,
    /// A graphics (GL/Vulkan/DirectX) context only.
    Graphics,
    /// Both (what `nvidia-smi` prints as `C+G`).
    ComputeAndGraphics,
}

/// One process holding memory on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GpuProcessEntry {
    /// Process id as the source reports it (NVML reports pids of the host's PID namespace).
    pub pid: u32,
    /// Short process name; `None` when it cannot be resolved (e.g. the pid lives in another PID
    /// namespace, or belongs to another user and the source does not name it).
    pub name: Option<String>,
    /// Dedicated device memory held, bytes.
    pub used_bytes: u64,
    /// Which source listed it.
    pub source: GpuQuerySource,
    /// Index of the device the memory is on.
    pub device_index: u32,
    /// Resident shared (system) memory used by the GPU for this process, bytes (Windows);
    /// 0 where the platform has no such notion.
    pub shared_used_bytes: u64,
    /// Compute, graphics or both; `None` when the source does not say.
    pub context: Option<GpuContextKind>,
    /// The pid in the host's PID namespace, when the source reported that one and `pid` is its
    /// number in the caller's namespace; `None` when no mapping was made.
    pub host_pid: Option<u32>,
    /// `true` when the process is not visible from the caller's PID namespace (it runs in
    /// another container, or the caller's container does not share the host's pids): `pid` is
    /// then the source's number for it, and its memory is still counted.
    pub outside_pid_namespace: bool,
}

impl GpuProcessEntry {
    /// An empty row, for the crate's constructors (`..GpuProcessEntry::blank()`).
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank() -> Self {
        Self {
            pid: 0,
            name: None,
            used_bytes: 0,
            source: GpuQuerySource::Nvml,
            device_index: 0,
            shared_used_bytes: 0,
            context: None,
            host_pid: None,
            outside_pid_namespace: false,
        }
    }
}

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

/// How a GPU source fared when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", tag = "state", content = "reason")
)]
#[non_exhaustive]
pub enum SourceState {
    /// The source exists and answered.
    Answered,
    /// The source exists but failed; the reason is what it said.
    Failed(String),
    /// The source does not exist on this host (or was not compiled in); the reason says where it
    /// was looked for.
    Absent(String),
}

/// One GPU source, whether it answered, and what it said about itself (library path, driver and
/// library versions, optional features…). What `hmn doctor` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SourceReport {
    /// The source.
    pub source: GpuQuerySource,
    /// Answered, failed (why), or absent (why).
    pub state: SourceState,
    /// Facts the source gave, as (label, value) pairs in a stable order.
    pub details: Vec<(String, String)>,
}

/// Generates a consuming builder for a non-exhaustive struct (feature `test-helpers`).
macro_rules! builder {
    ($(#[$meta:meta])* $builder:ident => $target:ident { $($field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$meta])*
        #[cfg(feature = "test-helpers")]
        #[derive(Debug, Clone)]
        #[must_use]
        pub struct $builder {
            inner: $target,
        }

        #[cfg(feature = "test-helpers")]
        impl $target {
            #[doc = concat!("A builder for [`", stringify!($target), "`], every field at its default (0, `None`, `false`, `Nvml`).")]
            pub fn builder() -> $builder {
                $builder { inner: $target { $($field: $default),* } }
            }
        }

        #[cfg(feature = "test-helpers")]
        impl $builder {
            $(
                #[doc = concat!("Sets `", stringify!($field), "`.")]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.inner.$field = value;
                    self
                }
            )*

            #[doc = concat!("The finished [`", stringify!($target), "`].")]
            #[must_use]
            pub fn build(self) -> $target {
                self.inner
            }
        }
    };
}

builder! {
    /// Builds a [`GpuDeviceInfo`] for tests.
    GpuDeviceInfoBuilder => GpuDeviceInfo {
        index: u32 = 0,
        name: Option<String> = None,
        total_bytes: u64 = 0,
        free_bytes: u64 = 0,
        used_bytes: u64 = 0,
        reserved_bytes: Option<u64> = None,
        driver_version: Option<String> = None,
        uuid: Option<String> = None,
        pci_bus_id: Option<String> = None,
        vendor: Option<GpuVendor> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
        gtt_total_bytes: Option<u64> = None,
        gtt_used_bytes: Option<u64> = None,
        visible_vram_total_bytes: Option<u64> = None,
        visible_vram_used_bytes: Option<u64> = None,
    }
}

builder! {
    /// Builds a [`ProcessGpuInfo`] for tests.
    ProcessGpuInfoBuilder => ProcessGpuInfo {
        used_bytes: u64 = 0,
        is_per_process: bool = false,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`GpuProcessEntry`] for tests.
    GpuProcessEntryBuilder => GpuProcessEntry {
        pid: u32 = 0,
        name: Option<String> = None,
        used_bytes: u64 = 0,
        source: GpuQuerySource = GpuQuerySource::Nvml,
        device_index: u32 = 0,
        shared_used_bytes: u64 = 0,
        context: Option<GpuContextKind> = None,
        host_pid: Option<u32> = None,
        outside_pid_namespace: bool = false,
    }
}

builder! {
    /// Builds a [`SourceReport`] for tests.
    SourceReportBuilder => SourceReport {
        source: GpuQuerySource = GpuQuerySource::Nvml,
        state: SourceState = SourceState::Answered,
        details: Vec<(String, String)> = Vec::new(),
    }
}

builder! {
    /// Builds a [`Snapshot`] for tests.
    SnapshotBuilder => Snapshot {
        ram_bytes: u64 = 0,
        gpu: Option<ProcessGpuInfo> = None,
        gpu_device: Option<GpuDeviceInfo> = None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_ids() {
        assert_eq!(
            GpuVendor::from_pci_vendor_id(0x10DE),
            Some(GpuVendor::Nvidia)
        );
        assert_eq!(GpuVendor::from_pci_vendor_id(0x1002), Some(GpuVendor::Amd));
        assert_eq!(
            GpuVendor::from_pci_vendor_id(0x8086),
            Some(GpuVendor::Intel)
        );
        assert_eq!(GpuVendor::from_pci_vendor_id(0x1414), None);
    }

    #[cfg(feature = "test-helpers")]
    #[test]
    fn builder_round_trip_keeps_reserved_a_subset_of_total() {
        // The RTX 5060 Ti figures of the v0.2.4 validation: total 16311 MiB, reserved 259 MiB.
        let total = 17_103_323_136_u64;
        let reserved = 271_581_184_u64;
        let free = 13_284 * 1024 * 1024;
        let info = GpuDeviceInfo::builder()
            .index(0)
            .name(Some("NVIDIA GeForce RTX 5060 Ti".into()))
            .total_bytes(total)
            .free_bytes(free)
            .used_bytes(total - free)
            .reserved_bytes(Some(reserved))
            .build();
        assert_eq!(info.reserved_bytes, Some(reserved));
        let r = info.reserved_bytes.unwrap_or(u64::MAX);
        assert!(r < info.total_bytes);
        assert!(r <= info.used_bytes);
        assert_eq!(info.allocatable_bytes(), Some(total - reserved));
        assert_eq!(info.name_or_unknown(), "NVIDIA GeForce RTX 5060 Ti");
        let unnamed = GpuDeviceInfo::builder().build();
        assert_eq!(unnamed.name_or_unknown(), "unknown GPU");
        assert_eq!(unnamed.reserved_bytes, None);
        assert_eq!(unnamed.allocatable_bytes(), None);
    }

    #[cfg(feature = "test-helpers")]
    #[test]
    fn other_builders() {
        let p = ProcessGpuInfo::builder()
            .used_bytes(5)
            .is_per_process(true)
            .source(GpuQuerySource::Dxgi)
            .build();
        assert_eq!(
            (p.used_bytes, p.is_per_process, p.source),
            (5, true, GpuQuerySource::Dxgi)
        );
        let e = GpuProcessEntry::builder()
            .pid(7)
            .name(Some("python".into()))
            .used_bytes(9)
            .device_index(1)
            .shared_used_bytes(3)
            .context(Some(GpuContextKind::Compute))
            .build();
        assert_eq!(e.pid, 7);
        assert_eq!(e.shared_used_bytes, 3);
        let s = Snapshot::builder().ram_bytes(1).gpu(Some(p)).build();
        assert_eq!(s.gpu, Some(p));
        assert_eq!(s.gpu_device, None);
    }
}
