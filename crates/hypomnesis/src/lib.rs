//! # hypomnesis
//!
//! Measure RAM and GPU memory from outside any framework: the calling process's resident set
//! and GPU memory, each GPU's total, free, used and **driver-reserved** memory, and which
//! processes hold it.
//!
//! ```no_run
//! # fn main() -> hypomnesis::Result<()> {
//! let rss = hypomnesis::process_rss()?;
//! println!("RSS {} MiB", rss >> 20);
//! if let Ok(gpu) = hypomnesis::device_info(0) {
//!     // reserved is a subset of total: allocation headroom is total - reserved.
//!     println!("{}: {} of {} MiB free, {:?} MiB reserved",
//!         gpu.name_or_unknown(), gpu.free_bytes >> 20, gpu.total_bytes >> 20,
//!         gpu.reserved_bytes.map(|r| r >> 20));
//! }
//! # Ok(()) }
//! ```
//!
//! ## Memory semantics (NVIDIA)
//!
//! `total_bytes` is NVML's v1 total (= `nvidia-smi` "Total"); `used_bytes = total - free` and
//! so includes the driver reservation; `reserved_bytes` is that reservation, read from
//! `nvmlDeviceGetMemoryInfo_v2` (R510+ drivers) or `nvidia-smi --query-gpu=memory.reserved`,
//! never inferred. Whenever it is `Some`: `reserved <= used <= total` and `free + used == total`.
//!
//! ## Capabilities
//!
//! | | Linux | Windows | macOS (Apple silicon) |
//! |---|---|---|---|
//! | process RSS | `/proc/self/statm` | working set (`K32GetProcessMemoryInfo`) | `phys_footprint` |
//! | NVIDIA devices, reserved memory | NVML (`libnvidia-ml.so.1`), `nvidia-smi` fallback | NVML (`nvml.dll` by absolute path), `nvidia-smi.exe`, DXGI | — |
//! | this process's GPU memory | NVML process lists | DXGI `QueryVideoMemoryInfo` | `graphics_footprint` ledger |
//! | process lists | NVML compute + graphics + MPS clients | PDH `GPU Process Memory` | `graphics_footprint` of visible processes |
//! | MIG instances | NVML MIG handles, `nvidia-smi -q` / `-L` | — | — |
//! | other vendors | AMD / Intel from sysfs, processes from DRM fdinfo | DXGI + PDH | the Apple GPU (Metal working-set budget) |
//! | MIG instances (A100/H100/H200) | NVML MIG device handles, `nvidia-smi -q`/`-L` fallback | — | — |
//!
//! ## Features
//!
//! The measuring backends `nvml`, `nvidia-smi-fallback`, `dxgi`, `pdh` (implies `dxgi`), `metal`
//! and `drm` are on by default, and nothing else: the library pulls no command-line crates.
//! `report`, `sampling` (the `sampling` module: the sampler, its ticker, timelines and a
//! journal), `test-helpers`, `serde`, `debug-output` are off. `--no-default-features` builds
//! the RSS part alone. Platform features are no-ops on other platforms. `cli`, `serve` and `top`
//! select nothing: the `hmn` command is the `hypomnesis-cli` package, and the names stay so that
//! a 0.2.x manifest naming them still resolves.
//!
//! ## Environment
//!
//! - `HYPOMNESIS_NVML_LIBRARY`: absolute path of the NVML library; when set, nothing else is tried.
//! - `HYPOMNESIS_NVIDIA_SMI`: path of `nvidia-smi` (else `PATH`).
//! - `HYPOMNESIS_NVIDIA_SMI_TIMEOUT`: limit of one `nvidia-smi` run (`2s`, `500ms`; default 10 s).
//! - `HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS`: where `/proc` and `/sys` are (a host's, mounted in a
//!   container); [`set_roots`] does the same from code.
//! - `HYPOMNESIS_ROOTFS`: where the node's root filesystem is (default `/`; a host's mounted in a
//!   container, e.g. `/host`): the kubelet's logs under its `var/log` give a container in a pod
//!   its namespace, pod and container names ([`Container`], [`kubelet_logs`]); [`set_rootfs`]
//!   does the same from code.

pub mod bounded;
mod duration;
pub mod error;
pub mod ghost;
pub mod gpu;
mod host;
mod inflight;
pub mod ram;
#[cfg(feature = "report")]
pub mod report;
#[cfg(feature = "sampling")]
pub mod sampling;
pub mod snapshot;
pub mod spill;
mod types;

pub use duration::{format_duration, parse_duration};
pub use error::{ErrorKind, Failure, HypomnesisError, Result};
pub use ghost::{
    Ghost, GhostClass, GhostFact, GhostOptions, GhostReport, GhostWatch, HolderScan, Remedy,
    ghosts, ghosts_with, nvidia_device_minors,
};
#[cfg(feature = "nvml")]
pub use gpu::nvml::NVML_MEMORY_V2_VERSION;
pub use gpu::{
    adapter_residency, device_count, device_info, device_used_bytes, device_utilization,
    dropped_process_rows, gpu_process_listing, gpu_processes, gpu_processes_unnamed,
    is_spill_measurable, mig_gpu_instances, mig_instance, mig_instances, mig_state, probe_source,
    process_activity, process_gpu_info, sources, sources_where,
};
pub use host::kube::{is_dns1123_label, is_dns1123_subdomain, kubelet_logs};
pub use host::memory::host::{HostMemory, host_memory};
pub use host::memory::process_rss;
pub use host::numa::{numa_node, process_numa_bytes};
pub use host::process::context::{
    Container, ContextParts, ProcessContext, parse_cgroup, parse_cmdline, parse_passwd,
    process_context, process_contexts, process_contexts_with,
};
#[cfg(unix)]
pub use host::process::send_signal;
pub use host::process::visibility::{
    DriverPidNumbering, driver_pid_numbering, in_initial_pid_namespace, procfs_mount,
};
pub use host::process::{
    TreeWalker, descendants, parse_stat, process_cpu_time, process_exists, process_name,
    process_pss_of, process_rss_of, process_start_time, process_tree, started_ago,
};
pub use host::roots::{procfs_is_own, roots, set_rootfs, set_roots};
pub use inflight::{InFlight, InFlightGuard, in_flight, in_flight_reading};
#[cfg(feature = "report")]
pub use report::MemoryReport;
pub use snapshot::Snapshot;
#[cfg(feature = "test-helpers")]
pub use snapshot::SnapshotBuilder;
#[cfg(feature = "test-helpers")]
pub use spill::SpillReportBuilder;
pub use spill::{SpillEpisode, SpillReport, SpillTracker, snapshot_is_spilling};
pub use types::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, GpuQuerySource, GpuVendor,
    Hidepid, KubeletDirState, KubeletLogs, MemoryModel, MigGpuInstance, MigInstance, MigState,
    NumaNode, ProcessActivity, ProcessActivitySample, ProcessGpuInfo, ProcfsMount, Residency, Root,
    RootOrigin, Roots, SourceReport, SourceState, UnreadableReason, Utilization,
    driver_overhead_allowance,
};
#[cfg(feature = "test-helpers")]
pub use types::{
    GpuDeviceInfoBuilder, GpuProcessEntryBuilder, GpuProcessListingBuilder, KubeletLogsBuilder,
    MigGpuInstanceBuilder, MigInstanceBuilder, MigStateBuilder, ProcessGpuInfoBuilder,
    ProcfsMountBuilder, ResidencyBuilder, RootBuilder, RootsBuilder, SourceReportBuilder,
};

/// Pure parsers, exposed for property tests, fuzzing and the live cross-checks. Not part of the
/// stable API.
#[doc(hidden)]
pub mod __parsers {
    pub use crate::duration::parse_duration;
    pub use crate::gpu::drm::parse::{
        FdInfo, Region, RegionKind, client_usage, parse_fdinfo, parse_pci_id, parse_size,
        parse_sysfs_u64, parse_uevent, region_kind,
    };
    #[cfg(all(target_os = "linux", feature = "drm"))]
    pub use crate::gpu::drm::{Sweep, sweep_tree};
    /// A `--query-gpu` row made into device figures, as the `nvidia-smi` fallback does.
    #[cfg(feature = "nvidia-smi-fallback")]
    pub use crate::gpu::nvidia_smi::device_info_of as smi_device_info;
    #[cfg(feature = "nvidia-smi-fallback")]
    pub use crate::gpu::nvidia_smi::parse::{
        QMemory, SmiApp, SmiGpu, parse_apps, parse_gpus, parse_q_memory, parse_version,
    };
    #[cfg(feature = "nvidia-smi-fallback")]
    pub use crate::gpu::nvidia_smi::parse_mig::{
        ListGpu, ListMig, QGpuMig, QMemoryLines, QMigDevice, QProcess, SmiMigMode, parse_list,
        parse_mig_modes, parse_q_mig,
    };
    pub use crate::gpu::pci::PciAddress;
    pub use crate::gpu::winparse::{parse_pdh_instance, utf16_until_nul};
    /// Kubernetes names: a namespace or container name is a DNS-1123 label, a pod name a
    /// DNS-1123 subdomain (what the kubelet's log layout and its API must hold).
    pub use crate::host::parse::kube::{
        ContainerLogLink, PodLogDir, is_label as is_dns1123_label,
        is_subdomain as is_dns1123_subdomain, parse_container_log_link, parse_pod_log_dir,
    };
    pub use crate::host::parse::memory::{
        meminfo, smaps_rollup_rss_pss, statm_resident_bytes, status_tgid, status_vmrss_bytes,
    };
    /// The mountinfo parsers: a line, the mount a path is on, a procfs mount's options, and
    /// the credentials of a `status` file that decide whether `hidepid` applies.
    pub use crate::host::parse::mountinfo::{
        Credentials, MountLine, credentials as status_credentials, hides_other_users, mount_of,
        parse_line as parse_mountinfo_line, procfs_options, unescape as unescape_mountinfo,
    };
    /// The NUMA parsers: a node's `meminfo` and `cpulist`, a line of a process's `numa_maps`.
    pub use crate::host::parse::numa::{cpulist_has_cpus, node_meminfo, numa_maps_line};
    pub use crate::host::parse::stat::parse_stat_cpu_ticks;
    /// The process tree below a pid through `children` files (`None` where the kernel has
    /// none), and through a scan of every process's `stat` (what `process_tree` did before).
    #[cfg(target_os = "linux")]
    pub use crate::host::process::linux::{
        by_children as tree_by_children, by_scan as tree_by_scan,
    };
}

/// Print a diagnostic to stderr when the `debug-output` feature is on; nothing otherwise.
#[macro_export]
#[doc(hidden)]
macro_rules! debug_log {
    ($($arg:tt)*) => {
        if cfg!(feature = "debug-output") {
            eprintln!("[hypomnesis] {}", format_args!($($arg)*));
        }
    };
}

/// The README's Rust examples, compiled as doctests so they cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
