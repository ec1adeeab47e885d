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
    /// Whether the GPU runs in MIG (Multi-Instance GPU) mode: `Some(true)` on, `Some(false)` off;
    /// `None` when the GPU cannot be split (or the source does not say, e.g. the `nvidia-smi`
    /// fallback, which answers through [`crate::mig_state`] instead). When it is on, the
    /// figures above are the whole GPU's; [`crate::mig_instances`] has each instance's.
    pub mig_enabled: Option<bool>,
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
            mig_enabled: None,
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
    /// The MIG GPU instance the process runs in; `None` when MIG is off or the source does not
    /// say (NVML reports `0xFFFFFFFF` then).
    pub gpu_instance_id: Option<u32>,
    /// The MIG compute instance (inside [`Self::gpu_instance_id`]) the process runs in; `None`
    /// when MIG is off or the source does not say.
    pub compute_instance_id: Option<u32>,
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
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }
}

/// One MIG device of a GPU in MIG (Multi-Instance GPU) mode: a compute instance inside a GPU
/// instance, with the memory it can use.
///
/// Memory belongs to the **GPU instance**: compute instances of the same GPU instance report
/// the same figures (an H200's GI 2 split into CI 0 and CI 1 shows 71424 MiB total on both).
/// Never add up the figures of a list of instances; [`crate::mig_gpu_instances`] groups them
/// per GPU instance, counting shared memory once.
///
/// Memory figures are all `Some` or all `None` together; `used_bytes = total_bytes -
/// free_bytes` as for whole devices, so it includes the instance's reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigInstance {
    /// Index of the GPU the instance is part of (as in [`crate::device_info`]).
    pub parent_index: u32,
    /// The MIG device's index on its GPU (NVML's `nvmlDeviceGetMigDeviceHandleByIndex` index;
    /// `Device N` in `nvidia-smi -L`).
    pub slot: u32,
    /// MIG device UUID (`MIG-…`); `None` when unknown. [`crate::mig_instance`] finds it by this.
    pub uuid: Option<String>,
    /// The MIG device's name as the source gives it, e.g. `NVIDIA H200 MIG 1c.3g.71gb`;
    /// `None` when unknown.
    pub name: Option<String>,
    /// Profile, e.g. `1g.18gb`, `2g.35gb`, or `1c.3g.71gb` for one compute instance of a
    /// `3g.71gb` GPU instance; `None` when unknown.
    pub profile: Option<String>,
    /// GPU instance id (`GI` in `nvidia-smi`); `None` when unknown.
    pub gpu_instance_id: Option<u32>,
    /// Compute instance id within the GPU instance (`CI`); `None` when unknown.
    pub compute_instance_id: Option<u32>,
    /// Memory of the GPU instance, bytes; `None` when the source could not read it (then
    /// `memory_error` says why).
    pub total_bytes: Option<u64>,
    /// Free memory of the GPU instance, bytes; `None` with `total_bytes`.
    pub free_bytes: Option<u64>,
    /// `total_bytes - free_bytes`, bytes; `None` with `total_bytes`.
    pub used_bytes: Option<u64>,
    /// The instance's driver reservation, bytes (a subset of `used_bytes`); `None` when the
    /// source does not give it.
    pub reserved_bytes: Option<u64>,
    /// Why the memory figures are `None` (e.g. `NVML_ERROR_UNKNOWN`); `None` when they were read.
    pub memory_error: Option<String>,
    /// Which source produced these figures.
    pub source: GpuQuerySource,
}

impl MigInstance {
    /// An instance with nothing known, for the crate's constructors.
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank(parent_index: u32, slot: u32, source: GpuQuerySource) -> Self {
        Self {
            parent_index,
            slot,
            uuid: None,
            name: None,
            profile: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            total_bytes: None,
            free_bytes: None,
            used_bytes: None,
            reserved_bytes: None,
            memory_error: None,
            source,
        }
    }

    /// The GPU-instance part of the profile: `3g.71gb` for `1c.3g.71gb`, the profile itself
    /// when it names no compute-instance share; `None` without a profile.
    #[must_use]
    pub fn gpu_instance_profile(&self) -> Option<&str> {
        let p = self.profile.as_deref()?;
        Some(match p.split_once('.') {
            Some((head, rest))
                if head
                    .strip_suffix('c')
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                rest
            }
            _ => p,
        })
    }
}

/// The MIG view of one GPU: whether MIG is on, and its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigState {
    /// Index of the GPU (as in [`crate::device_info`]).
    pub index: u32,
    /// Product name of the GPU, e.g. `NVIDIA H200`; `None` when unknown.
    pub name: Option<String>,
    /// GPU UUID (`GPU-…`); `None` when unknown.
    pub uuid: Option<String>,
    /// Current MIG mode: `Some(true)` on, `Some(false)` off, `None` when the GPU cannot be split
    /// or the source does not say.
    pub enabled: Option<bool>,
    /// MIG mode after the next GPU reset, where the source reports it.
    pub pending: Option<bool>,
    /// The MIG devices, sorted by GPU instance id, then compute instance id, then slot; empty
    /// when MIG is off.
    pub instances: Vec<MigInstance>,
    /// With MIG on: why the GPU's device-wide memory could not be read, in the source's words
    /// (`NVML_ERROR_NO_PERMISSION` for unprivileged callers of NVML); `None` when it could be
    /// read, or MIG is off. [`crate::device_info`] fails with the full error in that case.
    pub device_memory_error: Option<String>,
    /// Which source answered.
    pub source: GpuQuerySource,
}

impl MigState {
    /// Nothing known yet about GPU `index`'s MIG mode: the start value a source fills in, and
    /// what sources that know nothing of MIG (and other vendors' devices) answer.
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn unknown(index: u32, source: GpuQuerySource) -> Self {
        Self {
            index,
            name: None,
            uuid: None,
            enabled: None,
            pending: None,
            instances: Vec::new(),
            device_memory_error: None,
            source,
        }
    }
}

impl MigState {
    /// What kind of failure `device_memory_error` is (see [`crate::ErrorKind`]), when there is
    /// one: `NoPermission` when the whole GPU's figures are refused to this user.
    #[must_use]
    pub fn device_memory_error_kind(&self) -> Option<crate::ErrorKind> {
        self.device_memory_error
            .as_deref()
            .map(crate::error::kind_of_message)
    }
}

impl MigInstance {
    /// What kind of failure `memory_error` is, when there is one.
    #[must_use]
    pub fn memory_error_kind(&self) -> Option<crate::ErrorKind> {
        self.memory_error
            .as_deref()
            .map(crate::error::kind_of_message)
    }
}

/// The memory of one MIG GPU instance, counted once however many compute instances share it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigGpuInstance {
    /// Index of the GPU it is part of.
    pub parent_index: u32,
    /// GPU instance id; `None` when the source did not give one (then the group holds one MIG
    /// device, since instances without an id cannot be matched up).
    pub gpu_instance_id: Option<u32>,
    /// GPU-instance profile, e.g. `3g.71gb` (see [`MigInstance::gpu_instance_profile`]).
    pub profile: Option<String>,
    /// The MIG device slots of its compute instances, in [`MigState::instances`] order.
    pub slots: Vec<u32>,
    /// Its compute instance ids, where known, in the same order.
    pub compute_instance_ids: Vec<u32>,
    /// Memory of the GPU instance, bytes (from the first compute instance that had figures);
    /// `None` when none had.
    pub total_bytes: Option<u64>,
    /// Free memory, bytes; `None` with `total_bytes`.
    pub free_bytes: Option<u64>,
    /// `total_bytes - free_bytes`, bytes; `None` with `total_bytes`.
    pub used_bytes: Option<u64>,
    /// Reservation, bytes, where the source gives it.
    pub reserved_bytes: Option<u64>,
}

/// Where a GPU's memory resides, as a whole (Windows WDDM): in dedicated video memory, or
/// spilled into shared system memory. See [`crate::adapter_residency`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Residency {
    /// Bytes resident in the adapter's dedicated memory.
    pub dedicated_bytes: u64,
    /// Bytes resident in shared system memory.
    pub shared_bytes: u64,
    /// The adapter's dedicated memory, bytes.
    pub capacity_bytes: u64,
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

/// Where a root in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RootOrigin {
    /// The built-in default (`/proc`, `/sys`).
    Default,
    /// The environment variable (`HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS`).
    Environment,
    /// [`crate::set_roots`] (`hmn --procfs`, `hmn --sysfs`).
    SetRoots,
}

impl fmt::Display for RootOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Environment => "environment",
            Self::SetRoots => "set_roots",
        })
    }
}

/// One root in use: its path and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Root {
    /// The directory (absolute).
    pub path: std::path::PathBuf,
    /// Where the path came from.
    pub origin: RootOrigin,
    /// The environment variable that sets it (`HYPOMNESIS_PROCFS` or `HYPOMNESIS_SYSFS`).
    pub variable: &'static str,
}

/// The procfs and sysfs roots in use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Roots {
    /// Where `/proc` is.
    pub procfs: Root,
    /// Where `/sys` is.
    pub sysfs: Root,
}

impl SourceReport {
    /// What kind of failure keeps this source from answering (see [`crate::ErrorKind`]):
    /// `None` when it answered, `NotInstalled` when it is not present (`NotBuiltIn` when its
    /// cargo feature is off), the failure's kind otherwise.
    #[must_use]
    pub fn kind(&self) -> Option<crate::ErrorKind> {
        match &self.state {
            SourceState::Answered => None,
            SourceState::Absent(why) if why.starts_with(crate::error::NOT_BUILT_IN) => {
                Some(crate::ErrorKind::NotBuiltIn)
            }
            SourceState::Absent(_) => Some(crate::ErrorKind::NotInstalled),
            SourceState::Failed(why) => Some(crate::error::kind_of_message(why)),
        }
    }
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
        mig_enabled: Option<bool> = None,
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
        gpu_instance_id: Option<u32> = None,
        compute_instance_id: Option<u32> = None,
    }
}

builder! {
    /// Builds a [`MigInstance`] for tests.
    MigInstanceBuilder => MigInstance {
        parent_index: u32 = 0,
        slot: u32 = 0,
        uuid: Option<String> = None,
        name: Option<String> = None,
        profile: Option<String> = None,
        gpu_instance_id: Option<u32> = None,
        compute_instance_id: Option<u32> = None,
        total_bytes: Option<u64> = None,
        free_bytes: Option<u64> = None,
        used_bytes: Option<u64> = None,
        reserved_bytes: Option<u64> = None,
        memory_error: Option<String> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigState`] for tests.
    MigStateBuilder => MigState {
        index: u32 = 0,
        name: Option<String> = None,
        uuid: Option<String> = None,
        enabled: Option<bool> = None,
        pending: Option<bool> = None,
        instances: Vec<MigInstance> = Vec::new(),
        device_memory_error: Option<String> = None,
        source: GpuQuerySource = GpuQuerySource::Nvml,
    }
}

builder! {
    /// Builds a [`MigGpuInstance`] for tests.
    MigGpuInstanceBuilder => MigGpuInstance {
        parent_index: u32 = 0,
        gpu_instance_id: Option<u32> = None,
        profile: Option<String> = None,
        slots: Vec<u32> = Vec::new(),
        compute_instance_ids: Vec<u32> = Vec::new(),
        total_bytes: Option<u64> = None,
        free_bytes: Option<u64> = None,
        used_bytes: Option<u64> = None,
        reserved_bytes: Option<u64> = None,
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
    /// Builds a [`Root`] for tests.
    RootBuilder => Root {
        path: std::path::PathBuf = std::path::PathBuf::new(),
        origin: RootOrigin = RootOrigin::Default,
        variable: &'static str = "",
    }
}

builder! {
    /// Builds a [`Roots`] for tests.
    RootsBuilder => Roots {
        procfs: Root = Root::builder().build(),
        sysfs: Root = Root::builder().build(),
    }
}

builder! {
    /// Builds a [`Residency`] for tests.
    ResidencyBuilder => Residency {
        dedicated_bytes: u64 = 0,
        shared_bytes: u64 = 0,
        capacity_bytes: u64 = 0,
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
    #[allow(clippy::many_single_char_names, clippy::too_many_lines)] // one value per builder
    fn every_builder_sets_every_field() {
        // Each setter given a value no other field has, so a setter that wrote the wrong field
        // (or none) shows.
        let p = ProcessGpuInfo::builder()
            .used_bytes(5)
            .is_per_process(true)
            .source(GpuQuerySource::Dxgi)
            .build();
        assert_eq!(
            p,
            ProcessGpuInfo {
                used_bytes: 5,
                is_per_process: true,
                source: GpuQuerySource::Dxgi
            }
        );
        let d = GpuDeviceInfo::builder()
            .index(1)
            .name(Some("n".into()))
            .total_bytes(2)
            .free_bytes(3)
            .used_bytes(4)
            .reserved_bytes(Some(5))
            .driver_version(Some("d".into()))
            .uuid(Some("u".into()))
            .pci_bus_id(Some("b".into()))
            .vendor(Some(GpuVendor::Amd))
            .source(GpuQuerySource::Drm)
            .gtt_total_bytes(Some(6))
            .gtt_used_bytes(Some(7))
            .visible_vram_total_bytes(Some(8))
            .visible_vram_used_bytes(Some(9))
            .mig_enabled(Some(true))
            .build();
        assert_eq!(
            d,
            GpuDeviceInfo {
                index: 1,
                name: Some("n".into()),
                total_bytes: 2,
                free_bytes: 3,
                used_bytes: 4,
                reserved_bytes: Some(5),
                driver_version: Some("d".into()),
                uuid: Some("u".into()),
                pci_bus_id: Some("b".into()),
                vendor: Some(GpuVendor::Amd),
                source: GpuQuerySource::Drm,
                gtt_total_bytes: Some(6),
                gtt_used_bytes: Some(7),
                visible_vram_total_bytes: Some(8),
                visible_vram_used_bytes: Some(9),
                mig_enabled: Some(true),
            }
        );
        let e = GpuProcessEntry::builder()
            .pid(7)
            .name(Some("python".into()))
            .used_bytes(9)
            .source(GpuQuerySource::Pdh)
            .device_index(1)
            .shared_used_bytes(3)
            .context(Some(GpuContextKind::Graphics))
            .host_pid(Some(70))
            .outside_pid_namespace(true)
            .gpu_instance_id(Some(2))
            .compute_instance_id(Some(4))
            .build();
        assert_eq!(
            e,
            GpuProcessEntry {
                pid: 7,
                name: Some("python".into()),
                used_bytes: 9,
                source: GpuQuerySource::Pdh,
                device_index: 1,
                shared_used_bytes: 3,
                context: Some(GpuContextKind::Graphics),
                host_pid: Some(70),
                outside_pid_namespace: true,
                gpu_instance_id: Some(2),
                compute_instance_id: Some(4),
            }
        );
        let m = MigInstance::builder()
            .parent_index(1)
            .slot(2)
            .uuid(Some("MIG-u".into()))
            .name(Some("n".into()))
            .profile(Some("1g.18gb".into()))
            .gpu_instance_id(Some(3))
            .compute_instance_id(Some(4))
            .total_bytes(Some(5))
            .free_bytes(Some(6))
            .used_bytes(Some(7))
            .reserved_bytes(Some(8))
            .memory_error(Some("e".into()))
            .source(GpuQuerySource::NvidiaSmi)
            .build();
        assert_eq!(
            m,
            MigInstance {
                parent_index: 1,
                slot: 2,
                uuid: Some("MIG-u".into()),
                name: Some("n".into()),
                profile: Some("1g.18gb".into()),
                gpu_instance_id: Some(3),
                compute_instance_id: Some(4),
                total_bytes: Some(5),
                free_bytes: Some(6),
                used_bytes: Some(7),
                reserved_bytes: Some(8),
                memory_error: Some("e".into()),
                source: GpuQuerySource::NvidiaSmi,
            }
        );
        let st = MigState::builder()
            .index(1)
            .name(Some("n".into()))
            .uuid(Some("u".into()))
            .enabled(Some(true))
            .pending(Some(false))
            .instances(vec![m.clone()])
            .device_memory_error(Some("e".into()))
            .source(GpuQuerySource::NvidiaSmi)
            .build();
        assert_eq!(
            st,
            MigState {
                index: 1,
                name: Some("n".into()),
                uuid: Some("u".into()),
                enabled: Some(true),
                pending: Some(false),
                instances: vec![m],
                device_memory_error: Some("e".into()),
                source: GpuQuerySource::NvidiaSmi,
            }
        );
        let g = MigGpuInstance::builder()
            .parent_index(1)
            .gpu_instance_id(Some(2))
            .profile(Some("3g.71gb".into()))
            .slots(vec![3])
            .compute_instance_ids(vec![4])
            .total_bytes(Some(5))
            .free_bytes(Some(6))
            .used_bytes(Some(7))
            .reserved_bytes(Some(8))
            .build();
        assert_eq!(
            g,
            MigGpuInstance {
                parent_index: 1,
                gpu_instance_id: Some(2),
                profile: Some("3g.71gb".into()),
                slots: vec![3],
                compute_instance_ids: vec![4],
                total_bytes: Some(5),
                free_bytes: Some(6),
                used_bytes: Some(7),
                reserved_bytes: Some(8),
            }
        );
        let r = SourceReport::builder()
            .source(GpuQuerySource::Metal)
            .state(SourceState::Failed("x".into()))
            .details(vec![("k".into(), "v".into())])
            .build();
        assert_eq!(
            r,
            SourceReport {
                source: GpuQuerySource::Metal,
                state: SourceState::Failed("x".into()),
                details: vec![("k".into(), "v".into())],
            }
        );
        let root = Root::builder()
            .path("/host/proc".into())
            .origin(RootOrigin::Environment)
            .variable("HYPOMNESIS_PROCFS")
            .build();
        assert_eq!(
            root,
            Root {
                path: "/host/proc".into(),
                origin: RootOrigin::Environment,
                variable: "HYPOMNESIS_PROCFS",
            }
        );
        let sys = Root::builder().path("/host/sys".into()).build();
        let roots = Roots::builder()
            .procfs(root.clone())
            .sysfs(sys.clone())
            .build();
        assert_eq!(
            roots,
            Roots {
                procfs: root,
                sysfs: sys
            }
        );
        let s = Snapshot::builder()
            .ram_bytes(1)
            .gpu(Some(p))
            .gpu_device(Some(d.clone()))
            .build();
        assert_eq!(
            s,
            Snapshot {
                ram_bytes: 1,
                gpu: Some(p),
                gpu_device: Some(d)
            }
        );
        // Defaults: zero, `None`, `false`, `Nvml`.
        assert_eq!(GpuDeviceInfo::builder().build(), GpuDeviceInfo::blank());
        assert_eq!(GpuProcessEntry::builder().build(), GpuProcessEntry::blank());
    }
}
