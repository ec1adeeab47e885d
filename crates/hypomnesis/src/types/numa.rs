//! A NUMA node of the host's memory, as the kernel describes it.

/// One NUMA node of the host's memory (`/sys/devices/system/node/node<id>/`), in bytes.
///
/// On a coherent machine whose driver hands the GPU's memory to the kernel (Grace Hopper and
/// Grace Blackwell in NUMA mode) that memory is a node of its own with no CPUs:
/// [`crate::GpuDeviceInfo::numa_node`] names it, and what the kernel has placed there
/// (memory allocated with `malloc` or `mmap` that lives in the GPU's memory, pages migrated
/// to it) is in its `used_bytes`, and in each process's [`crate::process_numa_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct NumaNode {
    /// The node's number, as in `numactl --hardware`.
    pub id: u32,
    /// `MemTotal` of the node's `meminfo`: the memory the kernel manages on it.
    pub total_bytes: u64,
    /// `MemFree` of the node's `meminfo`.
    pub free_bytes: u64,
    /// `total_bytes - free_bytes` (the kernel's `MemUsed`).
    pub used_bytes: u64,
    /// Whether any CPU belongs to the node (its `cpulist` is not empty); a GPU's memory onlined
    /// as a node has none.
    pub has_cpus: bool,
}
