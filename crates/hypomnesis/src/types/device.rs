//! Whole-device figures, where a GPU's memory resides, and one process's snapshot.

use super::{GpuProcessEntry, GpuQuerySource, GpuVendor, MemoryModel};

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
    /// fallback, which answers through [`crate::gpu::mig_state`] instead). When it is on, the
    /// figures above are the whole GPU's; [`crate::gpu::mig_instances`] has each instance's.
    pub mig_enabled: Option<bool>,
    /// Whether the GPU has memory of its own, shares one pool with the CPU, or has its own
    /// with coherent access to the CPU's; `None` when the driver does not tell. For a
    /// [`MemoryModel::Unified`] GPU the figures above are the pool's (for NVIDIA, the host's
    /// `MemTotal` and `MemAvailable`, and `reserved_bytes` is `None`).
    pub memory_model: Option<MemoryModel>,
    /// What [`Self::memory_model`] was told from, in a sentence (`None` with it).
    pub memory_model_evidence: Option<String>,
    /// The NUMA node that is this GPU's memory, where the driver hands that memory to the
    /// kernel as a node with no CPUs (Grace Hopper and Grace Blackwell in NUMA mode; NVML's
    /// `nvmlDeviceGetNumaNodeId`); `None` elsewhere. [`crate::process_numa_bytes`] says how
    /// much of a process's memory lies there.
    pub numa_node: Option<u32>,
    /// That node's memory as the kernel counts it (its `MemTotal`), bytes; `None` without a
    /// node, or when its files cannot be read.
    pub numa_node_total_bytes: Option<u64>,
    /// That node's memory in use (`MemTotal - MemFree`), bytes: what the kernel has placed in
    /// the GPU's memory (`malloc`'d and `mmap`'d pages, pages migrated there), which the
    /// figures above, the driver's, do not count as the GPU's; `None` as above.
    pub numa_node_used_bytes: Option<u64>,
}

impl GpuDeviceInfo {
    /// All-unknown figures, for the crate's constructors (`..GpuDeviceInfo::blank(source)`).
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank(source: GpuQuerySource) -> Self {
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
            source,
            gtt_total_bytes: None,
            gtt_used_bytes: None,
            visible_vram_total_bytes: None,
            visible_vram_used_bytes: None,
            mig_enabled: None,
            memory_model: None,
            memory_model_evidence: None,
            numa_node: None,
            numa_node_total_bytes: None,
            numa_node_used_bytes: None,
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

    /// Memory allocated on the device, the driver reservation left out:
    /// `total_bytes - reserved_bytes - free_bytes`. This is what `nvidia-smi` (R510+), DCGM
    /// (`FB_USED`), gpustat and nvitop call "used"; [`Self::used_bytes`] includes the
    /// reservation. `None` when the reservation is unknown, or when the figures disagree by more
    /// than the 2 MiB `nvidia-smi`'s whole-MiB rounding can explain (below that it is 0).
    #[must_use]
    pub fn allocated_bytes(&self) -> Option<u64> {
        let not_allocated = self.reserved_bytes?.checked_add(self.free_bytes)?;
        match self.total_bytes.checked_sub(not_allocated) {
            Some(a) => Some(a),
            None if not_allocated - self.total_bytes <= ROUNDING_SLACK => Some(0),
            None => None,
        }
    }

    /// Allocated memory that none of `processes` (the rows of this device, as
    /// [`crate::gpu::gpu_processes`] gives them; rows of other devices are ignored) accounts for:
    /// [`Self::allocated_bytes`] minus their sum, 0 when they account for all of it. Processes
    /// the driver hides (those of other PID namespaces, or of other users on some systems) show
    /// here, as does the driver's own small overhead per process (see
    /// [`driver_overhead_allowance`]). `None` when the allocated figure is unknown.
    #[must_use]
    pub fn unattributed_bytes(&self, processes: &[GpuProcessEntry]) -> Option<u64> {
        let listed = processes
            .iter()
            .filter(|p| p.device_index == self.index)
            .fold(0_u64, |sum, p| sum.saturating_add(p.used_bytes));
        Some(self.allocated_bytes()?.saturating_sub(listed))
    }

    /// [`Self::unattributed_bytes`] when it is more than the driver's own overhead for that
    /// many processes ([`driver_overhead_allowance`]), else 0: memory held by processes this
    /// caller cannot see, or by none (what `hmn ps` shows as "not visible from here", the
    /// exporter as `gpu_memory_not_visible_bytes`, and a ghost of the `unaccounted` class).
    /// `None` when the allocated figure is unknown.
    #[must_use]
    pub fn unaccounted_bytes(&self, processes: &[GpuProcessEntry]) -> Option<u64> {
        let beyond = self.unattributed_bytes(processes)?;
        let listed = processes
            .iter()
            .filter(|p| p.device_index == self.index)
            .count();
        Some(if beyond > driver_overhead_allowance(listed) {
            beyond
        } else {
            0
        })
    }
}

/// Whole-MiB rounding of `nvidia-smi`'s figures: total, reserved and free may disagree by this.
const ROUNDING_SLACK: u64 = 2 << 20;

/// How much unattributed memory ([`GpuDeviceInfo::unattributed_bytes`]) the driver's own
/// bookkeeping explains when `visible` processes hold memory on a GPU: 64 MiB, plus 8 MiB per
/// visible process. Measured: 20 MiB on an H200 with three CUDA processes listed, 35 MiB on an
/// RTX 2080 SUPER with a desktop and two processes. Above it, memory is held by processes this
/// caller cannot see.
#[must_use]
pub fn driver_overhead_allowance(visible: usize) -> u64 {
    let per_process = u64::try_from(visible)
        .unwrap_or(u64::MAX)
        .saturating_mul(8 << 20);
    per_process.saturating_add(64 << 20)
}

/// How busy a GPU is, as its driver samples it: the share of the last sample period (about a
/// second on NVIDIA) in which a kernel ran, and in which device memory was read or written. See
/// [`crate::gpu::device_utilization`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Utilization {
    /// GPU (compute/graphics engine) utilization, percent; `None` where the driver does not say.
    pub gpu_percent: Option<u32>,
    /// Memory-controller utilization, percent; `None` where the driver does not say.
    pub memory_percent: Option<u32>,
    /// Which source answered.
    pub source: GpuQuerySource,
}

impl Utilization {
    /// Nothing known, from `source`.
    #[must_use]
    pub const fn unknown(source: GpuQuerySource) -> Self {
        Self {
            gpu_percent: None,
            memory_percent: None,
            source,
        }
    }

    /// Given figures (a view's tests, a GPU measured elsewhere); a percent above 100 is no
    /// figure.
    #[must_use]
    pub fn new(
        gpu_percent: Option<u32>,
        memory_percent: Option<u32>,
        source: GpuQuerySource,
    ) -> Self {
        Self {
            gpu_percent: gpu_percent.filter(|&p| p <= 100),
            memory_percent: memory_percent.filter(|&p| p <= 100),
            source,
        }
    }
}

/// One process's activity in one of the driver's sample periods: percent of each engine's
/// time it used. See [`crate::gpu::process_activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProcessActivitySample {
    /// The process.
    pub pid: u32,
    /// When the driver took the sample: microseconds since the Unix epoch, on the CPU clock.
    pub timestamp_us: u64,
    /// Streaming multiprocessors (kernels running), percent.
    pub sm_percent: u32,
    /// Memory reads and writes, percent.
    pub memory_percent: u32,
    /// Video encoder, percent.
    pub encoder_percent: u32,
    /// Video decoder, percent.
    pub decoder_percent: u32,
}

impl ProcessActivitySample {
    /// A sample (a view's tests, figures measured elsewhere).
    #[must_use]
    pub const fn new(pid: u32, timestamp_us: u64, percents: [u32; 4]) -> Self {
        let [sm_percent, memory_percent, encoder_percent, decoder_percent] = percents;
        Self {
            pid,
            timestamp_us,
            sm_percent,
            memory_percent,
            encoder_percent,
            decoder_percent,
        }
    }

    /// Whether any engine did anything for the process in this period.
    #[must_use]
    pub const fn is_active(&self) -> bool {
        self.sm_percent > 0
            || self.memory_percent > 0
            || self.encoder_percent > 0
            || self.decoder_percent > 0
    }
}

/// What a GPU's driver keeps of its processes' activity.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "state"))]
#[non_exhaustive]
pub enum ProcessActivity {
    /// The samples newer than asked for; empty when the driver keeps none (a process that
    /// did nothing in a period has no sample in it).
    Samples {
        /// The samples, as the driver gave them.
        samples: Vec<ProcessActivitySample>,
    },
    /// The source does not give per-process activity for this GPU.
    Unknown {
        /// Why (the function missing, `NOT_SUPPORTED` on a GPU in MIG mode, another source).
        reason: String,
    },
}

/// Where a GPU's memory resides, as a whole (Windows WDDM): in dedicated video memory, or
/// spilled into shared system memory. See [`crate::gpu::adapter_residency`].
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
