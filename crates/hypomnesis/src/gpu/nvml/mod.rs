//! NVIDIA through NVML, loaded at run time with `libloading`.
//!
//! The library is loaded, its symbols resolved and `nvmlInit` called **once per process**; the
//! session is re-initialised only after an error that means the driver went away
//! (`NVML_ERROR_UNINITIALIZED`, `NVML_ERROR_DRIVER_NOT_LOADED`). A failed initialisation is
//! retried at most once per [`session::INIT_RETRY_AFTER`].
//!
//! - `abi`: the C ABI as data (shared with `crates/fake-nvml`), `decode`: reading what NVML
//!   wrote, `ffi`: the calls (the only `unsafe`), `library`: finding and loading it, `session`:
//!   initialisation and errors, `device`: one device's figures, `mig`: MIG instances,
//!   `processes`: process lists, `doctor`: the source's report. This file is the
//!   [`Backend`] the dispatcher asks.

mod abi;
mod decode;
mod device;
mod doctor;
mod ffi;
mod library;
mod mig;
mod model;
mod processes;
mod session;

pub use abi::NVML_MEMORY_V2_VERSION;
use library::{LoadOutcome, outcome};
use session::Loaded;

use super::backend::{Backend, Op, Presence};
use super::nvidia;
use crate::host::process::procfs;
use crate::{
    error::Result, types::GpuDeviceInfo, types::GpuProcessEntry, types::GpuQuerySource,
    types::MigInstance, types::MigState, types::ProcessActivity, types::ProcessGpuInfo,
    types::SourceReport, types::Utilization,
};

/// The NVML backend. All state is process-wide (see the module docs).
pub(crate) struct NvmlBackend;

impl NvmlBackend {
    fn with<T>(f: impl FnOnce(&Loaded) -> Result<T>) -> Result<T> {
        match outcome() {
            LoadOutcome::Loaded(l) => f(l),
            LoadOutcome::Failed { why, .. } => Err(GpuQuerySource::Nvml.error(why.clone())),
        }
    }

    /// Device `index`'s processes; each one's name (`comm`) read only when `names`.
    fn processes(index: u32, names: bool) -> Result<Vec<GpuProcessEntry>> {
        Self::with(|l| {
            let root = procfs::root()?;
            let version = l.driver_version();
            let driver = procfs::DriverPids::of_driver(root, version.as_deref());
            let rows = l.run(|l| l.raw_processes(index))?;
            // Under MPS the server holds its clients' contexts: it is named as such. Without
            // names that costs one `comm` read per process, only where MPS clients are listed.
            let mps = rows.iter().any(|r| r.context.mps());
            // Without names, where each pid is placed by its number: asked for the list at once.
            let placing = (!names).then(|| {
                let pids: Vec<u32> = rows.iter().map(|r| r.pid).collect();
                driver.placing(&pids)
            });
            let mut out: Vec<GpuProcessEntry> = rows
                .into_iter()
                .map(|r| {
                    let (view, name) = if names {
                        let (view, name) = driver.place_named(root, r.pid);
                        let name = name.or_else(|| match view {
                            procfs::PidView::Here(_) => l.name_of(root, r.pid),
                            procfs::PidView::Mapped { .. } => procfs::comm(root, r.pid),
                            // Outside our namespace: named from a host's procfs alone (our
                            // own has another process, or none, under that number).
                            _ if driver.names_outside() => procfs::comm(root, r.pid),
                            _ => None,
                        });
                        (view, name)
                    } else {
                        let view = placing
                            .as_ref()
                            .map_or_else(|| driver.place(root, r.pid), |p| p.place(root, r.pid));
                        (view, None)
                    };
                    let mps_server = if names {
                        name.as_deref().is_some_and(nvidia::is_mps_server)
                    } else {
                        // `r.pid` is the source's number: the procfs root's too, unless the
                        // process is outside its namespace (another process may have it).
                        mps && !r.context.mps()
                            && !view.is_outside()
                            && procfs::comm(root, r.pid).is_some_and(|n| nvidia::is_mps_server(&n))
                    };
                    GpuProcessEntry {
                        pid: view.pid(),
                        name,
                        mps_server,
                        used_bytes: r.used,
                        device_index: index,
                        context: Some(r.context),
                        host_pid: view.host_pid(),
                        outside_pid_namespace: view.is_outside(),
                        unreadable: view.reason(),
                        gpu_instance_id: r.gpu_instance,
                        compute_instance_id: r.compute_instance,
                        ..GpuProcessEntry::blank(GpuQuerySource::Nvml)
                    }
                })
                .collect();
            out.sort_by_key(|e| e.pid);
            Ok(out)
        })
    }
}

impl Backend for NvmlBackend {
    fn answers(&self, op: Op) -> bool {
        nvidia::answers(op)
    }

    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Nvml
    }

    fn presence(&self) -> Presence {
        match outcome() {
            LoadOutcome::Loaded(_) | LoadOutcome::Failed { explicit: true, .. } => {
                Presence::Present
            }
            LoadOutcome::Failed {
                explicit: false, ..
            } => Presence::Absent,
        }
    }

    fn device_count(&self) -> Result<u32> {
        Self::with(|l| l.run(Loaded::device_count))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        Self::with(|l| l.run(|l| l.device_info(index)))
    }

    fn utilization(&self, index: u32) -> Result<Utilization> {
        Self::with(|l| l.run(|l| l.utilization(index)))
    }

    fn process_activity(&self, index: u32, since_us: u64) -> Result<ProcessActivity> {
        Self::with(|l| l.run(|l| l.process_activity(index, since_us)))
    }

    fn device_minor(&self, index: u32) -> Result<Option<u32>> {
        Self::with(|l| l.run(|l| l.minor_number(index)))
    }

    fn device_used(&self, index: u32) -> Result<u64> {
        Self::with(|l| l.run(|l| l.device_used(index)))
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        Self::with(|l| {
            let root = procfs::root()?;
            let rows: Vec<(u32, u64)> = l
                .run(|l| l.raw_processes(index))?
                .iter()
                .map(|r| (r.pid, r.used))
                .collect();
            let version = l.driver_version();
            nvidia::own_usage(
                GpuQuerySource::Nvml,
                root,
                version.as_deref(),
                &rows,
                || l.run(|l| l.device_info(index)).map(|d| d.used_bytes),
            )
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        Self::processes(index, true)
    }

    fn gpu_processes_unnamed(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        Self::processes(index, false)
    }

    fn mig_state(&self, index: u32) -> Result<MigState> {
        Self::with(|l| l.run(|l| l.mig_state(index)))
    }

    fn mig_instance(&self, uuid: &str) -> Result<MigInstance> {
        Self::with(|l| l.run(|l| l.find_mig(uuid)))
    }

    fn report(&self) -> SourceReport {
        doctor::report()
    }

    fn dropped_process_rows(&self) -> u64 {
        match library::attempted() {
            Some(library::LoadOutcome::Loaded(l)) => l.dropped_rows(),
            _ => 0,
        }
    }
}
