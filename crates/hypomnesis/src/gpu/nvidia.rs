//! Rules the NVIDIA sources (NVML and `nvidia-smi`) share, written once.

// A build with only one of the two NVIDIA sources uses part of this.
#![cfg_attr(
    not(all(feature = "nvml", feature = "nvidia-smi-fallback")),
    allow(dead_code)
)]

use std::path::Path;

use super::backend::Op;
use crate::host::process::procfs;
use crate::{error::Result, types::GpuQuerySource, types::ProcessGpuInfo};

/// The host's memory as the figures of a GPU that has none of its own (one pool with the
/// CPU): `(total, free)`, `MemTotal` and `MemAvailable` (no larger than the total). `Err` says
/// why they are not known, worded to follow "GPU N: <why it has none of its own>, and ".
pub(crate) fn host_pool(
    host: Result<crate::host::memory::host::HostMemory>,
) -> std::result::Result<(u64, u64), String> {
    let host = host.map_err(|e| format!("the host's memory that it shares is not known: {e}"))?;
    let free = host.available_bytes.ok_or_else(|| {
        "the host does not say how much of the memory it shares is available (no MemAvailable)"
            .to_string()
    })?;
    Ok((host.total_bytes, free.min(host.total_bytes)))
}

/// Whether an NVIDIA source answers `op` on this platform: per-process figures are N/A under
/// Windows WDDM, where DXGI and PDH answer them instead.
/// Whether a process name is the MPS server's: `nvidia-cuda-mps-server`, or its `comm`, which
/// the kernel cuts to 15 bytes (`nvidia-cuda-mps`; the control daemon, which holds no GPU
/// memory, has the same `comm`, so this is asked only of processes that hold some).
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
pub(crate) fn is_mps_server(name: &str) -> bool {
    name == "nvidia-cuda-mps" || name == "nvidia-cuda-mps-server"
}

pub(crate) fn answers(op: Op) -> bool {
    !(cfg!(all(windows, feature = "dxgi")) && matches!(op, Op::ProcessGpuInfo | Op::GpuProcesses))
}

/// A reservation the source reported, kept only when it fits inside the device's used memory
/// (`total - free`, which includes it) give or take `slack` bytes of rounding: 0 for NVML's
/// exact figures, 2 MiB for `nvidia-smi`'s whole MiB.
pub(crate) fn consistent_reservation(reserved: u64, used: u64, slack: u64) -> Option<u64> {
    (reserved <= used.saturating_add(slack)).then_some(reserved)
}

/// This process's GPU memory on a device, from the rows an NVIDIA source listed there (pids
/// as the source reports them, bytes):
///
/// - listed (under its own pid, or a host pid that maps to it): its figure, per process;
/// - not listed, while every listed pid is visible here (the source sees the same pids as we
///   do; an idle GPU lists none), or this process holds no CUDA context: 0, per process;
/// - otherwise (another PID namespace hides us from the source): the device-wide figure from
///   `device_used`, flagged as not per process.
pub(crate) fn own_usage(
    source: GpuQuerySource,
    root: &Path,
    driver_version: Option<&str>,
    rows: &[(u32, u64)],
    device_used: impl FnOnce() -> Result<u64>,
) -> Result<ProcessGpuInfo> {
    let me = std::process::id();
    let own_root = crate::host::roots::procfs_is_own();
    let driver = procfs::DriverPids::of_driver(root, driver_version);
    // In a PID namespace of its own, this process's number is not the one the driver gives it
    // (and another process may have that number there): it cannot be found in the rows.
    let mine = rows.iter().find(|(pid, _)| {
        !driver.foreign()
            && if own_root {
                *pid == me
            } else {
                procfs::place(root, *pid).pid() == me
            }
    });
    if let Some((_, used)) = mine {
        return Ok(ProcessGpuInfo {
            used_bytes: *used,
            is_per_process: true,
            source,
        });
    }
    let same_view = rows
        .iter()
        .all(|(pid, _)| !driver.place(root, *pid).is_outside());
    if same_view || procfs::self_has_cuda_context(root) == Some(false) {
        return Ok(ProcessGpuInfo {
            used_bytes: 0,
            is_per_process: true,
            source,
        });
    }
    Ok(ProcessGpuInfo {
        used_bytes: device_used()?,
        is_per_process: false,
        source,
    })
}

/// `hmn doctor`'s line on a GPU in a known MIG mode: `on, 5 MIG devices`, `off`, with `; on
/// after the next GPU reset` when the pending mode differs. `devices` is the number of MIG
/// devices, or why they could not be listed.
pub(crate) fn mig_mode_line(
    current: bool,
    pending: bool,
    devices: std::result::Result<usize, String>,
) -> String {
    let mut s = if current {
        match devices {
            Ok(n) => format!("on, {n} MIG device{}", if n == 1 { "" } else { "s" }),
            Err(e) => format!("on (MIG devices unknown: {e})"),
        }
    } else {
        "off".to_string()
    };
    if pending != current {
        s.push_str(if pending {
            "; on after the next GPU reset"
        } else {
            "; off after the next GPU reset"
        });
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_within_used() {
        assert_eq!(consistent_reservation(614, 614, 0), Some(614), "idle GPU");
        assert_eq!(consistent_reservation(615, 614, 0), None);
        assert_eq!(consistent_reservation(616, 614, 2), Some(616), "rounding");
        assert_eq!(consistent_reservation(617, 614, 2), None);
        assert_eq!(
            consistent_reservation(u64::MAX, u64::MAX, 2),
            Some(u64::MAX)
        );
    }

    #[test]
    fn mig_lines() {
        assert_eq!(mig_mode_line(true, true, Ok(5)), "on, 5 MIG devices");
        assert_eq!(mig_mode_line(true, true, Ok(1)), "on, 1 MIG device");
        assert_eq!(
            mig_mode_line(true, true, Err("x".into())),
            "on (MIG devices unknown: x)"
        );
        assert_eq!(mig_mode_line(false, false, Ok(0)), "off");
        assert_eq!(
            mig_mode_line(false, true, Ok(0)),
            "off; on after the next GPU reset"
        );
        assert_eq!(
            mig_mode_line(true, false, Ok(2)),
            "on, 2 MIG devices; off after the next GPU reset"
        );
    }

    #[test]
    fn wddm_only_changes_the_per_process_answers() {
        assert!(answers(Op::DeviceInfo) && answers(Op::DeviceCount) && answers(Op::Mig));
        assert_eq!(
            answers(Op::GpuProcesses),
            !cfg!(all(windows, feature = "dxgi"))
        );
        assert_eq!(
            answers(Op::ProcessGpuInfo),
            !cfg!(all(windows, feature = "dxgi"))
        );
    }
}
