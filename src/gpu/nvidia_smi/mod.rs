//! NVIDIA through the `nvidia-smi` executable: the fallback when NVML cannot be loaded.
//!
//! Every run has a hard timeout (`HYPOMNESIS_NVIDIA_SMI_TIMEOUT`, default 10 s; nvidia-smi is
//! known to hang on wedged or `NVLink` hosts). After a timeout the source is not run again for
//! [`COOLDOWN`]: callers get the remembered error at once.

pub(crate) mod parse;
mod runner;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use parse::{
    APP_FIELDS, Field, GPU_FIELDS, GPU_FIELDS_WITH_RESERVED, MIG_FIELDS, QGpuMig, QMemoryLines,
    SmiApp, SmiGpu,
};
use runner::{RunError, fmt_duration};

use super::backend::{Backend, Op, Presence};
use super::{mig, nvidia};
use crate::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, HypomnesisError,
    MigInstance, MigState, ProcessGpuInfo, Result, SourceReport, SourceState, procfs,
};

/// Default limit of one run.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a source that timed out is left alone.
pub(crate) const COOLDOWN: Duration = Duration::from_secs(60);
const MIB: u64 = 1 << 20;
/// How far MiB-rounded nvidia-smi figures may disagree with each other.
const ROUNDING: u64 = 2 * MIB;

/// Where the executable is and how long it may run.
struct Setup {
    exe: std::result::Result<PathBuf, String>,
    explicit: bool,
    timeout: std::result::Result<Duration, String>,
}

/// The `nvidia-smi` backend.
pub(crate) struct SmiBackend {
    setup: OnceLock<Setup>,
    timed_out: Mutex<Option<(Instant, String)>>,
    reserved_rejected: AtomicBool,
    mig_rejected: AtomicBool,
    dropped_rows: AtomicU64,
}

impl SmiBackend {
    pub(crate) const fn new() -> Self {
        Self {
            setup: OnceLock::new(),
            timed_out: Mutex::new(None),
            reserved_rejected: AtomicBool::new(false),
            mig_rejected: AtomicBool::new(false),
            dropped_rows: AtomicU64::new(0),
        }
    }

    fn setup(&self) -> &Setup {
        self.setup.get_or_init(|| {
            let timeout = match std::env::var("HYPOMNESIS_NVIDIA_SMI_TIMEOUT") {
                Ok(v) if !v.trim().is_empty() => crate::duration::parse_duration(&v)
                    .map_err(|why| format!("HYPOMNESIS_NVIDIA_SMI_TIMEOUT: {why}")),
                Ok(_) | Err(std::env::VarError::NotPresent) => Ok(DEFAULT_TIMEOUT),
                Err(std::env::VarError::NotUnicode(_)) => {
                    Err("HYPOMNESIS_NVIDIA_SMI_TIMEOUT is not valid UTF-8".to_string())
                }
            };
            match std::env::var_os("HYPOMNESIS_NVIDIA_SMI").filter(|v| !v.is_empty()) {
                Some(p) => Setup {
                    exe: Ok(PathBuf::from(p)),
                    explicit: true,
                    timeout,
                },
                None => Setup {
                    exe: find_on_path(),
                    explicit: false,
                    timeout,
                },
            }
        })
    }

    /// Run nvidia-smi with `args`; `Ok` only for exit status 0.
    fn run(&self, args: &[&str]) -> Result<runner::Ran> {
        let setup = self.setup();
        let exe = setup
            .exe
            .as_ref()
            .map_err(|why| HypomnesisError::NvidiaSmi(why.clone()))?;
        let timeout = setup.timeout.clone().map_err(HypomnesisError::NvidiaSmi)?;
        let mut guard = self
            .timed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((at, why)) = guard.as_ref() {
            if at.elapsed() < COOLDOWN {
                return Err(HypomnesisError::NvidiaSmi(format!(
                    "{}: {why} {:.0} s ago (retried after {} s)",
                    crate::error::PAUSED,
                    at.elapsed().as_secs_f64(),
                    COOLDOWN.as_secs()
                )));
            }
            *guard = None;
        }
        drop(guard);
        let shown = format!("`{} {}`", exe.display(), args.join(" "));
        match runner::run(exe, args, timeout) {
            Ok(ran) => Ok(ran),
            Err(e @ RunError::TimedOut(_)) => {
                let why = format!("{shown} {e}");
                *self
                    .timed_out
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), why.clone()));
                Err(HypomnesisError::NvidiaSmi(why))
            }
            Err(e) => Err(HypomnesisError::NvidiaSmi(format!("{shown} {e}"))),
        }
    }

    fn failed_run(args: &[&str], exe: &Path, ran: &runner::Ran) -> HypomnesisError {
        let said = if ran.stderr.trim().is_empty() {
            &ran.stdout
        } else {
            &ran.stderr
        };
        let said: String = said.trim().lines().take(3).collect::<Vec<_>>().join(" / ");
        HypomnesisError::NvidiaSmi(format!(
            "`{} {}` exited with {}: {}",
            exe.display(),
            args.join(" "),
            ran.status,
            if said.is_empty() {
                "(no output)"
            } else {
                said.as_str()
            }
        ))
    }

    fn exe_path(&self) -> PathBuf {
        self.setup()
            .exe
            .clone()
            .unwrap_or_else(|_| PathBuf::from("nvidia-smi"))
    }

    /// Every GPU `--query-gpu` lists. `memory.reserved` is asked for until the driver rejects it.
    fn gpus(&self) -> Result<Vec<SmiGpu>> {
        loop {
            let with_reserved = !self.reserved_rejected.load(Ordering::Relaxed);
            let fields = if with_reserved {
                GPU_FIELDS_WITH_RESERVED
            } else {
                GPU_FIELDS
            };
            let query = format!("--query-gpu={fields}");
            let args = [query.as_str(), "--format=csv,noheader,nounits"];
            let ran = self.run(&args)?;
            if !ran.status.success() {
                if with_reserved && parse::is_field_rejection(&ran.stdout, &ran.stderr) {
                    crate::debug_log!("nvidia-smi rejects memory.reserved; asking without it");
                    self.reserved_rejected.store(true, Ordering::Relaxed);
                    continue;
                }
                return Err(Self::failed_run(&args, &self.exe_path(), &ran));
            }
            return parse::parse_gpus(&ran.stdout, with_reserved).map_err(|why| {
                HypomnesisError::NvidiaSmi(format!("unexpected `--query-gpu` output: {why}"))
            });
        }
    }

    /// Output of a run that must succeed.
    fn run_ok(&self, args: &[&str]) -> Result<String> {
        let ran = self.run(args)?;
        if !ran.status.success() {
            return Err(Self::failed_run(args, &self.exe_path(), &ran));
        }
        Ok(ran.stdout)
    }

    /// The MIG mode of every GPU; `None` when the driver does not know the fields (pre-R450).
    fn mig_modes(&self) -> Result<Option<Vec<parse::SmiMigMode>>> {
        if self.mig_rejected.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let query = format!("--query-gpu={MIG_FIELDS}");
        let args = [query.as_str(), "--format=csv,noheader,nounits"];
        let ran = self.run(&args)?;
        if !ran.status.success() {
            if parse::is_field_rejection(&ran.stdout, &ran.stderr) {
                self.mig_rejected.store(true, Ordering::Relaxed);
                return Ok(None);
            }
            return Err(Self::failed_run(&args, &self.exe_path(), &ran));
        }
        parse::parse_mig_modes(&ran.stdout)
            .map(Some)
            .map_err(|why| {
                HypomnesisError::NvidiaSmi(format!("unexpected MIG mode query output: {why}"))
            })
    }

    /// `nvidia-smi -q`'s MIG parts of every GPU.
    fn q_mig(&self) -> Result<Vec<QGpuMig>> {
        Ok(parse::parse_q_mig(&self.run_ok(&["-q"])?))
    }

    /// The MIG view of every GPU: one `--query-gpu` run and one MIG-mode query, then `-q` and
    /// `-L` only when some GPU has MIG on.
    fn mig_states(&self) -> Result<Vec<MigState>> {
        let gpus = self.gpus()?;
        let modes = self.mig_modes()?.unwrap_or_default();
        let mut out: Vec<MigState> = gpus
            .iter()
            .map(|g| {
                let mut s = MigState::unknown(g.index, GpuQuerySource::NvidiaSmi);
                s.name.clone_from(&g.name);
                s.uuid.clone_from(&g.uuid);
                if let Some(m) = modes.iter().find(|m| m.index == g.index) {
                    s.enabled = m.current;
                    s.pending = m.pending;
                }
                if s.enabled == Some(true) {
                    s.device_memory_error = refused_figure(g);
                }
                s
            })
            .collect();
        if !out.iter().any(|s| s.enabled == Some(true)) {
            return Ok(out);
        }
        let q = self.q_mig()?;
        let list = match self.run_ok(&["-L"]) {
            Ok(text) => parse::parse_list(&text),
            Err(e) => {
                crate::debug_log!("nvidia-smi -L: {e}; MIG UUIDs and profiles unknown");
                Vec::new()
            }
        };
        let only = gpus.len() == 1 && q.len() == 1;
        for (s, g) in out.iter_mut().zip(&gpus) {
            if s.enabled != Some(true) {
                continue;
            }
            let qg = q.iter().find(|qg| {
                only || g
                    .pci_bus_id
                    .as_deref()
                    .is_some_and(|b| b.eq_ignore_ascii_case(&qg.pci_bus_id))
            });
            let lg = list.iter().find(|l| {
                l.index == g.index || (l.uuid.is_some() && l.uuid.as_deref() == g.uuid.as_deref())
            });
            s.instances = instances_of(g.index, qg, lg.map_or(&[][..], |l| l.mig.as_slice()));
        }
        Ok(out)
    }

    fn apps(&self) -> Result<Vec<SmiApp>> {
        let query = format!("--query-compute-apps={APP_FIELDS}");
        let args = [query.as_str(), "--format=csv,noheader,nounits"];
        let ran = self.run(&args)?;
        if !ran.status.success() {
            return Err(Self::failed_run(&args, &self.exe_path(), &ran));
        }
        parse::parse_apps(&ran.stdout).map_err(|why| {
            HypomnesisError::NvidiaSmi(format!("unexpected `--query-compute-apps` output: {why}"))
        })
    }

    fn gpu(&self, index: u32) -> Result<SmiGpu> {
        let gpus = self.gpus()?;
        let count = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
        gpus.into_iter()
            .find(|g| g.index == index)
            .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })
    }

    /// Processes on GPU `index` with known memory (rows printed `[N/A]` are dropped and counted).
    fn rows(&self, index: u32) -> Result<(SmiGpu, Vec<AppRow>)> {
        let gpus = self.gpus()?;
        let count = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
        let only = gpus.len() == 1;
        let gpu = gpus
            .into_iter()
            .find(|g| g.index == index)
            .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })?;
        let mut rows = Vec::new();
        let mut dropped = 0;
        for a in self.apps()? {
            let mine = match (&a.pci_bus_id, &gpu.pci_bus_id) {
                (Some(a), Some(g)) => a.eq_ignore_ascii_case(g),
                _ => only,
            };
            if !mine {
                continue;
            }
            match a.used_mib.ok().and_then(|m| m.checked_mul(MIB)) {
                Some(bytes) => rows.push((a.pid, bytes, a.name)),
                None => dropped += 1,
            }
        }
        if dropped > 0 {
            self.dropped_rows.fetch_add(dropped, Ordering::Relaxed);
        }
        rows.sort_by_key(|r| r.0);
        Ok((gpu, rows))
    }
}

/// pid, bytes, name.
type AppRow = (u32, u64, Option<String>);

/// The token nvidia-smi printed in place of a GPU's device-wide memory, if it did.
fn refused_figure(g: &SmiGpu) -> Option<String> {
    match (&g.total_mib, &g.free_mib) {
        (Err(t), _) | (_, Err(t)) => {
            Some(t.trim_start_matches('[').trim_end_matches(']').to_string())
        }
        _ => None,
    }
}

/// The MIG devices of GPU `index` from its `-q` blocks and its `-L` lines (matched by MIG
/// device index), sorted by GPU instance, then compute instance.
fn instances_of(index: u32, q: Option<&QGpuMig>, list: &[parse::ListMig]) -> Vec<MigInstance> {
    let mut out: Vec<MigInstance> = Vec::new();
    let devices = q.map_or(&[][..], |q| q.devices.as_slice());
    for (k, d) in devices.iter().enumerate() {
        let slot = d
            .index
            .unwrap_or_else(|| u32::try_from(k).unwrap_or(u32::MAX));
        let mut m = MigInstance::blank(index, slot, GpuQuerySource::NvidiaSmi);
        m.gpu_instance_id = d.gpu_instance_id;
        m.compute_instance_id = d.compute_instance_id;
        match d.memory.as_ref().map(mig_memory) {
            Some(Ok((total, free, reserved))) => {
                m.total_bytes = Some(total);
                m.free_bytes = Some(free);
                m.used_bytes = Some(total - free);
                m.reserved_bytes = reserved;
            }
            Some(Err(why)) => m.memory_error = Some(why),
            None => {
                m.memory_error = Some("no Shared FB Memory Usage block in nvidia-smi -q".into());
            }
        }
        out.push(m);
    }
    for l in list {
        let at = out
            .iter()
            .position(|m| m.slot == l.index)
            .unwrap_or_else(|| {
                // Listed by -L but without a -q block: known to exist, memory unknown.
                let mut m = MigInstance::blank(index, l.index, GpuQuerySource::NvidiaSmi);
                m.memory_error = Some("no MIG Device block in nvidia-smi -q".into());
                out.push(m);
                out.len() - 1
            });
        let Some(m) = out.get_mut(at) else { continue };
        m.profile.clone_from(&l.profile);
        m.uuid.clone_from(&l.uuid);
    }
    mig::sort_instances(&mut out);
    out
}

/// Bytes of a MIG device's `Shared FB Memory Usage`: (total, free, reserved). Used is total -
/// free, as for whole GPUs; the reservation is kept when it fits in that (MiB rounding allowed).
fn mig_memory(m: &QMemoryLines) -> std::result::Result<(u64, u64, Option<u64>), String> {
    let get = |f: &Option<Field>, k: &str| match f {
        Some(Ok(mib)) => mib
            .checked_mul(MIB)
            .ok_or_else(|| format!("Shared FB Memory Usage {k} {mib} MiB overflows")),
        Some(Err(token)) => Err(format!("Shared FB Memory Usage {k} is {token}")),
        None => Err(format!("Shared FB Memory Usage has no {k} line")),
    };
    let total = get(&m.total_mib, "Total")?;
    let free = get(&m.free_mib, "Free")?;
    let used = total
        .checked_sub(free)
        .ok_or_else(|| "Shared FB Memory Usage Free is larger than Total".to_string())?;
    let reserved = m
        .reserved_mib
        .clone()
        .and_then(std::result::Result::ok)
        .and_then(|r| r.checked_mul(MIB))
        .and_then(|r| nvidia::consistent_reservation(r, used, ROUNDING));
    Ok((total, free, reserved))
}

/// `nvidia-smi` on `PATH`. On Windows only the vendor's install directories are looked in
/// (System32, then `%ProgramFiles%\NVIDIA Corporation\NVSMI`): never the current directory or
/// `PATH`, where a planted executable could answer.
fn find_on_path() -> std::result::Result<PathBuf, String> {
    let (name, dirs): (&str, Vec<PathBuf>) = if cfg!(windows) {
        let mut dirs = Vec::new();
        if let Some(root) = std::env::var_os("SystemRoot").or_else(|| std::env::var_os("windir")) {
            dirs.push(PathBuf::from(root).join("System32"));
        }
        if let Some(pf) = std::env::var_os("ProgramFiles") {
            dirs.push(PathBuf::from(pf).join("NVIDIA Corporation").join("NVSMI"));
        }
        ("nvidia-smi.exe", dirs)
    } else {
        let dirs = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|d| d.is_absolute())
                    .collect()
            })
            .unwrap_or_default();
        ("nvidia-smi", dirs)
    };
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            if cfg!(windows) {
                let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                format!(
                    "{name} was not found in {} (set HYPOMNESIS_NVIDIA_SMI to its path)",
                    shown.join(" or ")
                )
            } else {
                format!("{name} was not found on PATH (set HYPOMNESIS_NVIDIA_SMI to its path)")
            }
        })
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

fn bytes(field: &Field, what: &str, index: u32) -> Result<u64> {
    match field {
        Ok(mib) => mib.checked_mul(MIB).ok_or_else(|| {
            HypomnesisError::NvidiaSmi(format!("GPU {index}: {what} {mib} MiB overflows"))
        }),
        Err(token) => Err(HypomnesisError::NvidiaSmi(format!(
            "GPU {index}: {what} is {token}, not a number"
        ))),
    }
}

/// A `--query-gpu` row as device figures: `used = total - free`, and the reservation kept only
/// when it fits in that used figure (within nvidia-smi's rounding to whole MiB).
pub fn device_info_of(g: SmiGpu) -> Result<GpuDeviceInfo> {
    let total = bytes(&g.total_mib, "memory.total", g.index)?;
    let free = bytes(&g.free_mib, "memory.free", g.index)?;
    let used = total.checked_sub(free).ok_or_else(|| {
        HypomnesisError::NvidiaSmi(format!(
            "GPU {}: memory.free is larger than memory.total",
            g.index
        ))
    })?;
    // nvidia-smi's memory.used excludes the reservation on R510+: used is total - free here.
    // The reservation is kept when it fits inside that used figure, allowing for nvidia-smi
    // rounding each figure to whole MiB (an idle L40S prints Total 46068, Free 45460,
    // Reserved 609: 1 MiB more than total - free).
    let reserved = g
        .reserved_mib
        .and_then(std::result::Result::ok)
        .and_then(|m| m.checked_mul(MIB))
        .and_then(|r| nvidia::consistent_reservation(r, used, ROUNDING));
    Ok(GpuDeviceInfo {
        index: g.index,
        name: g.name,
        total_bytes: total,
        free_bytes: free,
        used_bytes: used,
        reserved_bytes: reserved,
        driver_version: g.driver_version,
        uuid: g.uuid,
        pci_bus_id: g.pci_bus_id,
        vendor: Some(GpuVendor::Nvidia),
        source: GpuQuerySource::NvidiaSmi,
        ..GpuDeviceInfo::blank()
    })
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
            (Err(why), false) => Presence::Absent(why.clone()),
            _ => Presence::Present,
        }
    }

    fn device_count(&self) -> Result<u32> {
        Ok(u32::try_from(self.gpus()?.len()).unwrap_or(u32::MAX))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        device_info_of(self.gpu(index)?)
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let root = procfs::root()?;
        let (gpu, rows) = self.rows(index)?;
        let listed: Vec<(u32, u64)> = rows.iter().map(|r| (r.0, r.1)).collect();
        // nvidia-smi lists compute contexts only: a graphics-only process is "not listed" too.
        nvidia::own_usage(GpuQuerySource::NvidiaSmi, root, &listed, || {
            device_info_of(gpu).map(|d| d.used_bytes)
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        let root = procfs::root()?;
        let (gpu, rows) = self.rows(index)?;
        // With MIG on, `-q` says which GPU/compute instance each process runs in.
        // Without them the ids are unknown (`None`); the list itself still stands.
        let mig_on = !rows.is_empty()
            && self.mig_modes().ok().flatten().is_some_and(|m| {
                m.iter()
                    .any(|m| m.index == index && m.current == Some(true))
            });
        let q = if mig_on {
            self.q_mig().unwrap_or_else(|e| {
                crate::debug_log!("nvidia-smi -q: {e}; MIG instance ids of processes unknown");
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let only = q.len() == 1;
        let procs = q
            .iter()
            .find(|qg| {
                only || gpu
                    .pci_bus_id
                    .as_deref()
                    .is_some_and(|b| b.eq_ignore_ascii_case(&qg.pci_bus_id))
            })
            .map_or(&[][..], |qg| qg.processes.as_slice());
        let ids = |pid: u32| {
            procs
                .iter()
                .find(|p| p.pid == Some(pid))
                .map_or((None, None), |p| (p.gpu_instance_id, p.compute_instance_id))
        };
        let mut out: Vec<GpuProcessEntry> = rows
            .into_iter()
            .map(|(pid, used, name)| {
                let view = procfs::place(root, pid);
                let (gpu_instance_id, compute_instance_id) = ids(pid);
                GpuProcessEntry {
                    pid: view.pid(),
                    name: name.map(|n| procfs::short_name(&n).to_string()),
                    used_bytes: used,
                    source: GpuQuerySource::NvidiaSmi,
                    device_index: index,
                    context: Some(GpuContextKind::Compute),
                    host_pid: view.host_pid(),
                    outside_pid_namespace: view.is_outside(),
                    gpu_instance_id,
                    compute_instance_id,
                    ..GpuProcessEntry::blank()
                }
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
                HypomnesisError::NvidiaSmi(format!(
                    "no MIG device has UUID {uuid:?} (nvidia-smi -L lists the MIG devices)"
                ))
            })
    }

    fn report(&self) -> SourceReport {
        let mut details = Vec::new();
        let s = self.setup();
        let state = match (&s.exe, s.explicit) {
            (Err(why), false) => SourceState::Absent(why.clone()),
            (Err(why), true) => SourceState::Failed(why.clone()),
            (Ok(exe), _) => {
                details.push(("executable".into(), exe.display().to_string()));
                match &s.timeout {
                    Ok(t) => details.push(("timeout".into(), fmt_duration(*t))),
                    Err(why) => details.push(("timeout".into(), why.clone())),
                }
                if let Ok(ran) = self.run(&["--version"])
                    && let Some(v) = parse::parse_version(&ran.stdout)
                {
                    details.push(("version".into(), v));
                }
                match self.gpus() {
                    Ok(g) => {
                        details.push(("devices".into(), g.len().to_string()));
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
                                        mig_summary(&st, self.mig_rejected.load(Ordering::Relaxed)),
                                    ));
                                }
                            }
                            Err(e) => details.push(("MIG".into(), format!("unknown ({e})"))),
                        }
                        SourceState::Answered
                    }
                    Err(e) => SourceState::Failed(e.to_string()),
                }
            }
        };
        let dropped = self.dropped_rows.load(Ordering::Relaxed);
        if dropped > 0 {
            details.push((
                "process rows dropped".into(),
                format!("{dropped} (used_gpu_memory not available)"),
            ));
        }
        SourceReport {
            source: GpuQuerySource::NvidiaSmi,
            state,
            details,
        }
    }
}

/// One line for `hmn doctor` on a GPU's MIG mode.
fn mig_summary(s: &MigState, fields_rejected: bool) -> String {
    match s.enabled {
        Some(current) => {
            nvidia::mig_mode_line(current, s.pending.unwrap_or(current), Ok(s.instances.len()))
        }
        None if fields_rejected => {
            "unknown (this nvidia-smi does not know mig.mode.current)".to_string()
        }
        None => "not supported by this GPU".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(total: Field, free: Field, reserved: Option<Field>) -> SmiGpu {
        SmiGpu {
            index: 0,
            uuid: None,
            driver_version: None,
            pci_bus_id: None,
            total_mib: total,
            free_mib: free,
            reserved_mib: reserved,
            name: None,
        }
    }

    #[test]
    fn device_info_semantics() {
        // L40S, load phase: Total 46068, Reserved 609, Used 1235, Free 44225 (MiB).
        let d = device_info_of(gpu(Ok(46068), Ok(44225), Some(Ok(609)))).unwrap();
        assert_eq!(d.total_bytes, 46068 * MIB);
        assert_eq!(d.free_bytes, 44225 * MIB);
        assert_eq!(
            d.used_bytes,
            (46068 - 44225) * MIB,
            "used = total - free, not nvidia-smi's used"
        );
        assert_eq!(d.reserved_bytes, Some(609 * MIB));
        let d = device_info_of(gpu(Ok(100), Ok(90), Some(Err("[N/A]".into())))).unwrap();
        assert_eq!(d.reserved_bytes, None);
        let d = device_info_of(gpu(Ok(46068), Ok(45460), Some(Ok(609)))).unwrap();
        assert_eq!(
            d.reserved_bytes,
            Some(609 * MIB),
            "1 MiB of rounding is tolerated"
        );
        let d = device_info_of(gpu(Ok(100), Ok(90), Some(Ok(13)))).unwrap();
        assert_eq!(
            d.reserved_bytes, None,
            "a reservation well above used is not believed"
        );
        let e =
            device_info_of(gpu(Err("[Insufficient Permissions]".into()), Ok(1), None)).unwrap_err();
        assert!(
            e.to_string()
                .contains("memory.total is [Insufficient Permissions]"),
            "{e}"
        );
        assert!(device_info_of(gpu(Ok(1), Ok(2), None)).is_err());
    }
}
