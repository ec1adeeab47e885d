//! NVIDIA through the `nvidia-smi` executable: the fallback when NVML cannot be loaded.
//!
//! Every run has a hard timeout (`HYPOMNESIS_NVIDIA_SMI_TIMEOUT`, default 10 s; nvidia-smi is
//! known to hang on wedged or `NVLink` hosts). After a timeout the source is not run again for
//! [`COOLDOWN`]: callers get the remembered error at once.

mod device;
mod exec;
#[cfg(unix)]
mod group;
mod mig;
pub(crate) mod parse;
pub(crate) mod parse_mig;
mod runner;

pub use device::device_info_of;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use crate::duration::format_duration;
use exec::Setup;

use super::backend::{Backend, DroppedRows, Op, Presence};
use super::nvidia;
use crate::host::process::procfs;
use crate::types::MIB;
use crate::{
    error::ErrorKind, error::HypomnesisError, error::Result, types::GpuContextKind,
    types::GpuDeviceInfo, types::GpuProcessEntry, types::GpuQuerySource, types::MigInstance,
    types::MigState, types::ProcessGpuInfo, types::SourceReport, types::SourceState,
};

/// How far MiB-rounded nvidia-smi figures may disagree with each other.
const ROUNDING: u64 = 2 * MIB;

/// The `nvidia-smi` backend.
pub(crate) struct SmiBackend {
    setup: OnceLock<Setup>,
    /// When a run timed out, and what was said: no run for a while after that.
    timed_out: Mutex<Option<(Instant, String)>>,
    /// This driver rejects `memory.reserved` in `--query-gpu`.
    reserved_rejected: AtomicBool,
    /// This driver rejects the `mig.mode.*` fields.
    mig_rejected: AtomicBool,
    /// Process rows left out (memory not available) of each device's latest list.
    dropped_rows: DroppedRows,
    /// The lines of each query's last output that were not rows.
    skipped_lines: Mutex<BTreeMap<&'static str, Vec<String>>>,
}

impl SmiBackend {
    pub(crate) const fn new() -> Self {
        Self {
            setup: OnceLock::new(),
            timed_out: Mutex::new(None),
            reserved_rejected: AtomicBool::new(false),
            mig_rejected: AtomicBool::new(false),
            dropped_rows: DroppedRows::new(),
            skipped_lines: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Backend for SmiBackend {
    fn answers(&self, op: Op) -> bool {
        nvidia::answers(op)
    }

    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::NvidiaSmi
    }

    fn presence(&self) -> Presence {
        let s = self.setup();
        match (&s.exe, s.explicit) {
            (Err(_), false) => Presence::Absent,
            _ => Presence::Present,
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.gpus()?.count)
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        device_info_of(self.gpu(index)?)
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let root = procfs::root()?;
        let device::Listed { gpu, rows, .. } = self.rows(index)?;
        let listed: Vec<(u32, u64)> = rows.iter().map(|r| (r.0, r.1)).collect();
        // nvidia-smi lists compute contexts only: a graphics-only process is "not listed" too.
        let version = gpu.driver_version.clone();
        nvidia::own_usage(
            GpuQuerySource::NvidiaSmi,
            root,
            version.as_deref(),
            &listed,
            || device_info_of(gpu).map(|d| d.used_bytes),
        )
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        let root = procfs::root()?;
        let device::Listed {
            gpu,
            gpu_count,
            rows,
        } = self.rows(index)?;
        // With MIG on, `-q` says which GPU/compute instance each process runs in (asked only
        // when there is a process to place). Without it the ids are unknown (`None`); the list
        // itself still stands.
        let q = if !rows.is_empty()
            && self
                .mig_modes()
                .ok()
                .flatten()
                .is_some_and(|modes| mig::mig_on(&modes, index))
        {
            self.q_mig().unwrap_or_else(|e| {
                crate::debug_log!("nvidia-smi -q: {e}; MIG instance ids of processes unknown");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let procs = mig::q_of(&q, gpu_count, gpu.pci_bus_id.as_deref())
            .map_or(&[][..], |qg| qg.processes.as_slice());
        let ids = |pid: u32| mig::instance_ids(procs, pid);
        let driver = procfs::DriverPids::of_driver(root, gpu.driver_version.as_deref());
        let mut out: Vec<GpuProcessEntry> = rows
            .into_iter()
            .map(|row| {
                let ids = ids(row.0);
                entry(index, driver.place(root, row.0), row, ids)
            })
            .collect();
        out.sort_by_key(|e| e.pid);
        Ok(out)
    }

    fn mig_state(&self, index: u32) -> Result<MigState> {
        let states = self.mig_states()?;
        let count = u32::try_from(states.len()).unwrap_or(u32::MAX);
        states
            .into_iter()
            .find(|s| s.index == index)
            .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })
    }

    fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        self.mig_states()?
            .into_iter()
            .flat_map(|s| s.instances)
            .find(|m| {
                m.uuid
                    .as_deref()
                    .is_some_and(|u| u.eq_ignore_ascii_case(uuid.trim()))
            })
            .ok_or_else(|| {
                HypomnesisError::nvidia_smi(
                    ErrorKind::NoSuchDevice,
                    format!(
                        "no MIG device has UUID {uuid:?} (nvidia-smi -L lists the MIG devices)"
                    ),
                )
            })
    }

    fn dropped_process_rows(&self) -> u64 {
        self.dropped_rows.total()
    }

    /// One `--query-gpu` run (none when there is no executable to run), where the report takes
    /// several (`--version`, the process list, the MIG modes).
    fn state(&self) -> SourceState {
        let s = self.setup();
        match &s.exe {
            Err(why) => not_runnable(why, s.explicit),
            Ok(_) => match self.gpus() {
                Ok(_) => SourceState::Answered,
                Err(e) => SourceState::Failed(crate::error::Failure::of(&e)),
            },
        }
    }

    fn report(&self) -> SourceReport {
        let mut details = Vec::new();
        let s = self.setup();
        let state = match &s.exe {
            Err(why) => not_runnable(why, s.explicit),
            Ok(exe) => {
                details.push(("executable".into(), exe.display().to_string()));
                match &s.timeout {
                    Ok(t) => details.push(("timeout".into(), format_duration(*t))),
                    Err(why) => details.push(("timeout".into(), why.message.clone())),
                }
                if let Ok(ran) = self.run(&["--version"])
                    && let Some(v) = parse::parse_version(&ran.stdout)
                {
                    details.push(("version".into(), v));
                }
                match self.gpus() {
                    Ok(g) => {
                        details.push(("devices".into(), devices_line(&g)));
                        self.count_dropped_rows(&g);
                        details.push((
                            "memory.reserved field".into(),
                            if self.reserved_rejected.load(Ordering::Relaxed) {
                                "rejected by this driver: reserved memory is unknown".into()
                            } else {
                                "accepted".into()
                            },
                        ));
                        match self.mig_states() {
                            Ok(states) => {
                                for st in states {
                                    details.push((
                                        format!("GPU {} MIG", st.index),
                                        mig::mig_summary(
                                            &st,
                                            self.mig_rejected.load(Ordering::Relaxed),
                                        ),
                                    ));
                                }
                            }
                            Err(e) => details.push(("MIG".into(), format!("unknown ({e})"))),
                        }
                        SourceState::Answered
                    }
                    Err(e) => SourceState::Failed(crate::error::Failure::of(&e)),
                }
            }
        };
        for (query, lines) in self
            .skipped_lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, l)| !l.is_empty())
        {
            details.push((
                format!("{query} lines skipped"),
                format!("{}: {}", lines.len(), lines.join(" / ")),
            ));
        }
        if let Some(d) = crate::gpu::backend::dropped_detail(self.dropped_rows.parts()) {
            details.push(("process rows dropped".into(), d));
        }
        SourceReport {
            source: GpuQuerySource::NvidiaSmi,
            state,
            details,
            dropped_process_rows: 0,
        }
    }
}

/// The state of a source without an executable to run: absent when none was found on `PATH`,
/// failed when `HYPOMNESIS_NVIDIA_SMI` (`explicit`) names one that cannot be used.
fn not_runnable(why: &crate::error::Failure, explicit: bool) -> SourceState {
    if explicit {
        SourceState::Failed(why.clone())
    } else {
        SourceState::Absent(why.clone())
    }
}

/// The doctor's line on the GPUs: how many, and which are lost.
fn devices_line(gpus: &device::GpuList) -> String {
    let lost = gpus.lost();
    if lost.is_empty() {
        return gpus.count.to_string();
    }
    let named: Vec<String> = lost.iter().map(u32::to_string).collect();
    format!("{} (GPU {} not listed: lost)", gpus.count, named.join(", "))
}

/// One process row of GPU `index` as the library shows it: `view` places its pid, `ids` are its
/// MIG GPU and compute instance ids.
fn entry(
    index: u32,
    view: procfs::PidView,
    (_, used, name): device::AppRow,
    (gpu_instance_id, compute_instance_id): (Option<u32>, Option<u32>),
) -> GpuProcessEntry {
    GpuProcessEntry {
        pid: view.pid(),
        name: name.map(|n| procfs::short_name(&n).to_string()),
        used_bytes: used,
        device_index: index,
        context: Some(GpuContextKind::Compute),
        host_pid: view.host_pid(),
        outside_pid_namespace: view.is_outside(),
        unreadable: view.reason(),
        gpu_instance_id,
        compute_instance_id,
        ..GpuProcessEntry::blank(GpuQuerySource::NvidiaSmi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::process::procfs::PidView;

    #[test]
    fn a_row_keeps_its_device_place_and_instance() {
        let row = (4007, 3 * MIB, Some("/opt/train/python3".to_string()));
        let e = entry(
            2,
            PidView::Mapped {
                local: 7,
                host: 4007,
            },
            row.clone(),
            (Some(2), Some(1)),
        );
        assert_eq!(
            (e.pid, e.host_pid, e.outside_pid_namespace),
            (7, Some(4007), false)
        );
        assert_eq!((e.device_index, e.used_bytes), (2, 3 * MIB));
        assert_eq!(e.name.as_deref(), Some("python3"));
        assert_eq!(
            (e.gpu_instance_id, e.compute_instance_id),
            (Some(2), Some(1))
        );
        assert_eq!(
            (e.source, e.context),
            (GpuQuerySource::NvidiaSmi, Some(GpuContextKind::Compute))
        );
        let e = entry(0, PidView::Outside(4007), row.clone(), (None, None));
        assert_eq!(
            (e.pid, e.host_pid, e.outside_pid_namespace, e.unreadable),
            (
                4007,
                None,
                true,
                Some(crate::types::UnreadableReason::OutsidePidNamespace)
            )
        );
        // Hidden by hidepid: in this namespace, not outside it.
        let e = entry(
            0,
            PidView::Unseen(4007, crate::types::UnreadableReason::HiddenByHidepid),
            row,
            (None, None),
        );
        assert_eq!(
            (e.pid, e.outside_pid_namespace, e.unreadable),
            (
                4007,
                false,
                Some(crate::types::UnreadableReason::HiddenByHidepid)
            )
        );
    }
}
