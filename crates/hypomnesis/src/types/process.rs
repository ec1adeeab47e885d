//! GPU memory of processes: the calling one, and each one a device lists.

use super::{GpuQuerySource, UnreadableReason};

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
    /// An MPS client: listed by the driver's MPS list only (`M`). Its memory is allocated
    /// through the MPS server on its behalf.
    Mps,
    /// An MPS client also in the compute list (`M+C`).
    MpsAndCompute,
    /// An MPS client also in the graphics list (`M+G`).
    MpsAndGraphics,
    /// An MPS client in all three lists (`M+C+G`).
    MpsComputeAndGraphics,
}

impl GpuContextKind {
    /// The kind of a process listed by the compute, graphics and MPS lists as said; `None`
    /// when by none.
    #[must_use]
    pub fn from_lists(compute: bool, graphics: bool, mps: bool) -> Option<Self> {
        Some(match (mps, compute, graphics) {
            (false, true, false) => Self::Compute,
            (false, false, true) => Self::Graphics,
            (false, true, true) => Self::ComputeAndGraphics,
            (true, false, false) => Self::Mps,
            (true, true, false) => Self::MpsAndCompute,
            (true, false, true) => Self::MpsAndGraphics,
            (true, true, true) => Self::MpsComputeAndGraphics,
            (false, false, false) => return None,
        })
    }

    /// Whether the compute list has the process.
    #[must_use]
    pub fn compute(self) -> bool {
        matches!(
            self,
            Self::Compute
                | Self::ComputeAndGraphics
                | Self::MpsAndCompute
                | Self::MpsComputeAndGraphics
        )
    }

    /// Whether the graphics list has the process.
    #[must_use]
    pub fn graphics(self) -> bool {
        matches!(
            self,
            Self::Graphics
                | Self::ComputeAndGraphics
                | Self::MpsAndGraphics
                | Self::MpsComputeAndGraphics
        )
    }

    /// Whether the process is an MPS client (the MPS list has it).
    #[must_use]
    pub fn mps(self) -> bool {
        matches!(
            self,
            Self::Mps | Self::MpsAndCompute | Self::MpsAndGraphics | Self::MpsComputeAndGraphics
        )
    }

    /// A process listed as both `self` and `other` (a pid in several lists).
    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self::from_lists(
            self.compute() || other.compute(),
            self.graphics() || other.graphics(),
            self.mps() || other.mps(),
        )
        .unwrap_or(self)
    }

    /// What `nvidia-smi` prints in its type column: `C`, `G`, `C+G`, `M`, `M+C`, `M+G`,
    /// `M+C+G`.
    #[must_use]
    pub fn short(self) -> &'static str {
        match self {
            Self::Compute => "C",
            Self::Graphics => "G",
            Self::ComputeAndGraphics => "C+G",
            Self::Mps => "M",
            Self::MpsAndCompute => "M+C",
            Self::MpsAndGraphics => "M+G",
            Self::MpsComputeAndGraphics => "M+C+G",
        }
    }
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
    /// Why the process's files (owner, command line, resident set) cannot be read from here:
    /// outside this PID namespace (then [`Self::outside_pid_namespace`] is `true`), hidden by
    /// the procfs mount's `hidepid`, exited since the list, or not readable; `None` when they
    /// can be (or the platform has no procfs to read).
    pub unreadable: Option<UnreadableReason>,
    /// The MIG GPU instance the process runs in; `None` when MIG is off or the source does not
    /// say (NVML reports `0xFFFFFFFF` then).
    pub gpu_instance_id: Option<u32>,
    /// The MIG compute instance (inside [`Self::gpu_instance_id`]) the process runs in; `None`
    /// when MIG is off or the source does not say.
    pub compute_instance_id: Option<u32>,
    /// `true` for the MPS server (`nvidia-cuda-mps-server`): it holds the MPS clients'
    /// contexts, and the driver lists it in the compute list. `false` when the process is
    /// another one, or its name cannot be read.
    pub mps_server: bool,
}

impl GpuProcessEntry {
    /// An empty row, for the crate's constructors (`..GpuProcessEntry::blank(source)`).
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank(source: GpuQuerySource) -> Self {
        Self {
            pid: 0,
            name: None,
            used_bytes: 0,
            source,
            device_index: 0,
            shared_used_bytes: 0,
            context: None,
            host_pid: None,
            outside_pid_namespace: false,
            unreadable: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            mps_server: false,
        }
    }

    /// The pid under which this process's files can be read here (the host's, where the
    /// source mapped it), or `None` when they cannot be: outside this PID namespace, hidden by
    /// the procfs mount's `hidepid`, or exited since it was listed.
    #[must_use]
    pub fn readable_pid(&self) -> Option<u32> {
        use crate::types::UnreadableReason as R;
        let unreadable = self.outside_pid_namespace
            || matches!(
                self.unreadable,
                Some(R::OutsidePidNamespace | R::HiddenByHidepid | R::Exited | R::NoSuchPid)
            );
        (!unreadable).then_some(self.host_pid.unwrap_or(self.pid))
    }

    /// The process's number in the caller's PID namespace (what `kill` or a walk of this
    /// namespace's process tree names), or `None` when it has none here: outside this PID
    /// namespace, `pid` is the driver's number, which a local process may have too; a number
    /// no process here can have is none either.
    #[must_use]
    pub fn local_pid(&self) -> Option<u32> {
        let outside = self.outside_pid_namespace
            || matches!(
                self.unreadable,
                Some(
                    crate::types::UnreadableReason::OutsidePidNamespace
                        | crate::types::UnreadableReason::NoSuchPid
                )
            );
        (!outside).then_some(self.pid)
    }
}

/// What [`crate::gpu::gpu_process_listing`] gives: the processes holding memory on one device, and
/// those the platform would not let the caller read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct GpuProcessListing {
    /// The rows [`crate::gpu::gpu_processes`] returns, sorted by pid.
    pub entries: Vec<GpuProcessEntry>,
    /// Pids of processes the system refused to let this process read, sorted, no duplicates.
    /// Always empty on Linux and Windows: only macOS refuses (other users' processes).
    pub denied_pids: Vec<u32>,
}
