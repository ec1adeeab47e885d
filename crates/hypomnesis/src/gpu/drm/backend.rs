//! The DRM backend: the device list, their memory, and their processes from the sweep
//! (reused for a moment, so one `hmn ps` over every device sweeps once).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::devices::{
    Device, NVIDIA, device, devices, memory, no_device, sweep_worthwhile, vendor, walked,
};
use super::sweep::{Sweep, sweep_tree};
use crate::gpu::backend::{Backend, DroppedRows, Presence, Scope};
use crate::gpu::pci::PciAddress;
use crate::host::process::procfs;
use crate::host::roots;
use crate::{
    error::HypomnesisError, error::Result, types::GpuDeviceInfo, types::GpuProcessEntry,
    types::GpuQuerySource, types::ProcessGpuInfo, types::SourceReport, types::SourceState,
    types::Utilization,
};

/// How long one sweep's result is reused (one `hmn ps` asks for every device in turn).
const SWEEP_REUSE: Duration = Duration::from_millis(250);

/// The DRM backend.
pub(crate) struct DrmBackend {
    last: Mutex<Option<(Instant, Sweep)>>,
    /// Clients left out of each device's latest list: more memory than the device has.
    dropped: DroppedRows,
}

impl DrmBackend {
    pub(crate) const fn new() -> Self {
        Self {
            last: Mutex::new(None),
            dropped: DroppedRows::new(),
        }
    }

    fn sweep(&self) -> Result<Sweep> {
        let root = procfs::root()?;
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, s)) = last.as_ref()
            && at.elapsed() < SWEEP_REUSE
        {
            return Ok(s.clone());
        }
        let s = if sweep_worthwhile(&devices().list) {
            sweep_tree(root)
        } else {
            Sweep::default()
        };
        *last = Some((Instant::now(), s.clone()));
        Ok(s)
    }

    /// The processes of device `index` and their (used, shared) bytes; a process claiming more
    /// than the device's memory (`drm-memory-vram: 18446744073709551615`) is left out and
    /// counted.
    fn rows(&self, index: u32, d: &Device) -> Result<BTreeMap<u32, (u64, u64)>> {
        let mut rows = self.sweep()?.per_slot.remove(&d.slot).unwrap_or_default();
        let before = rows.len();
        if let Ok((total, _, extra)) = memory(d) {
            // A unified device's processes hold the pool: their VRAM and GTT together.
            if extra.memory_model == Some(crate::types::MemoryModel::Unified) {
                for (used, shared) in rows.values_mut() {
                    *used = used.saturating_add(std::mem::take(shared));
                }
            }
            rows.retain(|_, (used, _)| *used <= total);
        }
        let dropped = (before - rows.len()) as u64;
        if dropped > 0 {
            crate::debug_log!(
                "DRM: {} ({}): {dropped} process(es) claiming more memory than the device has left out",
                d.card,
                d.slot
            );
        }
        self.dropped.set(
            index,
            crate::gpu::backend::Dropped {
                rows: dropped,
                no_pid: 0,
            },
        );
        Ok(rows)
    }

    /// Rows left out of the devices' latest lists.
    fn dropped_rows(&self) -> u64 {
        self.dropped.total()
    }
    /// The doctor's lines on the process sweep of `list`.
    fn sweep_details(&self, list: &[Device], details: &mut Vec<(String, String)>) -> Result<()> {
        if !sweep_worthwhile(list) {
            details.push((
                "process sweep".into(),
                "skipped: no device's driver publishes fdinfo memory".into(),
            ));
            return Ok(());
        }
        let s = self.sweep()?;
        // Each device's rows, for those left out (counted below).
        for (i, d) in (0_u32..).zip(list) {
            let _ = self.rows(i, d);
        }
        details.push((
            "processes swept".into(),
            format!("{} ({} DRM fdinfo files read)", s.pids, s.fdinfo_reads),
        ));
        for (what, n) in [
            ("fdinfo files refused", s.fdinfo_refused),
            ("fdinfo lines left out", s.bad_lines),
        ] {
            if n > 0 {
                details.push((what.into(), n.to_string()));
            }
        }
        let dropped = self.dropped_rows();
        if dropped > 0 {
            details.push((
                "process rows dropped".into(),
                format!("{dropped} (more memory than the device has)"),
            ));
        }
        if s.unreadable > 0 {
            details.push((
                "processes not readable".into(),
                format!("{} (other users' processes: their GPU memory is not counted; run as root to see them)", s.unreadable),
            ));
        }
        Ok(())
    }
}

impl Backend for DrmBackend {
    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Drm
    }

    fn scope(&self) -> Scope {
        Scope::Others
    }

    fn needs_nvidia_devices(&self) -> bool {
        walked()
            .as_ref()
            .is_ok_and(|(all, _)| all.iter().any(|d| d.vendor_id == 0x10DE))
    }

    fn nvidia_devices(&self, addresses: &[PciAddress]) {
        let _ = NVIDIA.set(addresses.to_vec());
    }

    fn presence(&self) -> Presence {
        let devs = devices();
        if devs.list.is_empty() && devs.error.is_none() {
            Presence::Absent
        } else {
            Presence::Present
        }
    }

    fn device_count(&self) -> Result<u32> {
        let devs = devices();
        if let Some(e) = &devs.error {
            return Err(HypomnesisError::drm(e.kind, e.message.clone()));
        }
        Ok(u32::try_from(devs.list.len()).unwrap_or(u32::MAX))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        let d = device(index)?;
        let (total, used, extra) = memory(d)?;
        if used > total {
            return Err(HypomnesisError::drm(
                crate::error::ErrorKind::BadAnswer,
                format!(
                    "{} ({}): {} (used {used} bytes of a total of {total})",
                    d.card,
                    d.slot,
                    crate::error::IMPOSSIBLE
                ),
            ));
        }
        let name =
            crate::host::file::read_capped(&d.dev().join("product_name"), crate::host::file::SYSFS)
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty());
        Ok(GpuDeviceInfo {
            index,
            name,
            total_bytes: total,
            free_bytes: total - used,
            used_bytes: used,
            pci_bus_id: Some(d.slot.clone()),
            vendor: vendor(d),
            ..extra
        })
    }

    fn utilization(&self, index: u32) -> Result<Utilization> {
        let dev = device(index)?.dev();
        let percent = |f: &str| {
            crate::host::file::read_capped(&dev.join(f), crate::host::file::SYSFS)
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
        };
        Ok(Utilization::new(
            percent("gpu_busy_percent"),
            percent("mem_busy_percent"),
            GpuQuerySource::Drm,
        ))
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let d = device(index)?;
        let me = std::process::id();
        let root = procfs::root()?;
        let used = self
            .rows(index, d)?
            .into_iter()
            .find(|(pid, _)| procfs::place(root, *pid).pid() == me)
            .map_or(0, |(_, (u, _))| u);
        // The sweep reads this process's own fd table, so absence means no memory here.
        Ok(ProcessGpuInfo {
            used_bytes: used,
            is_per_process: true,
            source: GpuQuerySource::Drm,
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        let d = device(index)?;
        let root = procfs::root()?;
        Ok(self
            .rows(index, d)?
            .into_iter()
            .filter(|(_, (u, s))| *u > 0 || *s > 0)
            .map(|(pid, (used, shared))| {
                let view = procfs::place(root, pid);
                GpuProcessEntry {
                    pid: view.pid(),
                    name: procfs::comm(root, pid),
                    used_bytes: used,
                    device_index: index,
                    shared_used_bytes: shared,
                    host_pid: view.host_pid(),
                    outside_pid_namespace: view.is_outside(),
                    unreadable: view.reason(),
                    ..GpuProcessEntry::blank(GpuQuerySource::Drm)
                }
            })
            .collect())
    }

    fn dropped_process_rows(&self) -> u64 {
        self.dropped_rows()
    }

    fn report(&self) -> SourceReport {
        let devs = devices();
        if let Some(e) = &devs.error {
            return SourceReport {
                source: GpuQuerySource::Drm,
                state: SourceState::Failed(e.clone()),
                details: Vec::new(),
                dropped_process_rows: 0,
            };
        }
        let mut details = match roots::sysfs() {
            Ok(p) => vec![("sysfs".to_string(), p.display().to_string())],
            Err(_) => Vec::new(),
        };
        for (i, d) in devs.list.iter().enumerate() {
            let mem = match memory(d) {
                Ok((t, u, _)) => format!("{} MiB of {} MiB used", u >> 20, t >> 20),
                Err(e) => e.to_string(),
            };
            details.push((
                format!("device {i}"),
                format!(
                    "{} {} (PCI {:04X}:{}, driver {}): {mem}",
                    d.card,
                    d.slot,
                    d.vendor_id,
                    d.product_id.map_or("?".into(), |p| format!("{p:04X}")),
                    d.driver.as_deref().unwrap_or("unknown")
                ),
            ));
        }
        for n in &devs.notes {
            details.push(("skipped".into(), n.clone()));
        }
        if !devs.list.is_empty()
            && let Err(e) = self.sweep_details(&devs.list, &mut details)
        {
            return SourceReport {
                source: GpuQuerySource::Drm,
                state: SourceState::Failed(crate::error::Failure::of(&e)),
                details,
                dropped_process_rows: 0,
            };
        }
        let state = if devs.list.is_empty() {
            SourceState::absent(crate::error::ErrorKind::NotInstalled, no_device())
        } else {
            SourceState::Answered
        };
        SourceReport {
            source: GpuQuerySource::Drm,
            state,
            details,
            dropped_process_rows: 0,
        }
    }
}
