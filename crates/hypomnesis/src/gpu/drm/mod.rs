//! AMD and Intel GPUs on Linux from sysfs and DRM fdinfo, unprivileged.
//!
//! Devices: `<sysfs>/class/drm/card<N>/device` (vendor by PCI id, slot from `uevent`); amdgpu
//! memory from `mem_info_vram_*` (plus GTT and CPU-visible VRAM); Intel where the kernel
//! publishes it. NVIDIA cards that NVML or `nvidia-smi` already measure are left out (matched
//! by PCI address). Processes: every `<procfs>/<pid>/fd/<fd>` whose link points into
//! `/dev/dri/` has its `fdinfo` read; clients are counted once per (`drm-pdev`,
//! `drm-client-id`). The sweep is skipped entirely when no device uses a driver that publishes
//! fdinfo memory statistics.

#[cfg(all(target_os = "linux", feature = "drm"))]
mod backend;
#[cfg(all(target_os = "linux", feature = "drm"))]
mod devices;
#[cfg(all(target_os = "linux", feature = "drm"))]
mod model;
#[cfg(all(target_os = "linux", feature = "drm"))]
mod sweep;

pub(crate) mod parse;

#[cfg(all(target_os = "linux", feature = "drm"))]
pub(crate) use backend::DrmBackend;
#[cfg(all(target_os = "linux", feature = "drm"))]
pub use sweep::{Sweep, sweep_tree};
