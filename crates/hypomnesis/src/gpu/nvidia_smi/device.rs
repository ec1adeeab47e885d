//! Devices and their processes from `nvidia-smi --query-gpu` and `--query-compute-apps`.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use super::SmiBackend;
use super::parse::{self, APP_FIELDS, Field, GPU_FIELDS, GPU_FIELDS_WITH_RESERVED, SmiApp, SmiGpu};
use super::{MIB, ROUNDING};
use crate::gpu::backend::Dropped;
use crate::gpu::nvidia;
use crate::{
    error::ErrorKind, error::HypomnesisError, error::Result, types::GpuDeviceInfo,
    types::GpuQuerySource, types::GpuVendor,
};

pub(super) type AppRow = (u32, u64, Option<String>);

/// The rows of a query run, when its output is usable: exit status 0, or another status
/// explained by rows or by GPUs nvidia-smi could not reach (then the status is noted among the
/// skipped lines). Otherwise the failed run, or the unexpected output, as the error.
fn accepted<T>(
    parsed: std::result::Result<parse::Rows<T>, String>,
    ran: &super::runner::Ran,
    args: &[&str],
    exe: &std::path::Path,
) -> Result<parse::Rows<T>> {
    let ok = ran.status.success();
    match parsed {
        Ok(mut p)
            if ok
                || !p.rows.is_empty()
                || p.skipped.iter().any(parse::Skipped::is_unreachable_gpu) =>
        {
            if !ok {
                p.skipped.push(parse::Skipped {
                    line: 0,
                    text: String::new(),
                    why: format!("nvidia-smi exited with {}", ran.status),
                });
            }
            Ok(p)
        }
        Ok(_) | Err(_) if !ok => Err(SmiBackend::failed_run(args, exe, ran)),
        Ok(p) => Ok(p),
        Err(why) => {
            let query = args.first().and_then(|a| a.split('=').next()).unwrap_or("");
            Err(HypomnesisError::nvidia_smi(
                ErrorKind::BadAnswer,
                format!("unexpected `{query}` output: {why}"),
            ))
        }
    }
}

/// What `--query-gpu` listed: the rows by index, and how many GPUs there are. A GPU that fell
/// off the bus has no row (nvidia-smi prints `Unable to determine the device handle …` in its
/// place) but keeps its index: the rows of GPUs 0, 1 and 3 mean four GPUs, 2 lost.
#[derive(Debug, Clone)]
pub(super) struct GpuList {
    /// By index, each index once.
    pub(super) gpus: Vec<SmiGpu>,
    /// GPUs there are, lost ones included.
    pub(super) count: u32,
    /// What nvidia-smi printed for the GPUs it could not reach.
    pub(super) unreachable: Vec<String>,
}

impl GpuList {
    fn new(mut gpus: Vec<SmiGpu>, skipped: &[parse::Skipped]) -> Self {
        gpus.sort_by_key(|g| g.index);
        gpus.dedup_by_key(|g| g.index);
        let unreachable: Vec<String> = skipped
            .iter()
            .filter(|l| l.is_unreachable_gpu())
            .map(|l| l.text.clone())
            .collect();
        let highest = gpus.last().map_or(0, |g| u64::from(g.index) + 1);
        let listed = (gpus.len() + unreachable.len()) as u64;
        Self {
            gpus,
            count: u32::try_from(highest.max(listed)).unwrap_or(u32::MAX),
            unreachable,
        }
    }

    /// GPU `index`: its row, an error naming it lost when its index has no row, or out of range.
    pub(super) fn get(&self, index: u32) -> Result<&SmiGpu> {
        if let Some(g) = self.gpus.iter().find(|g| g.index == index) {
            return Ok(g);
        }
        if index >= self.count {
            return Err(HypomnesisError::DeviceIndexOutOfRange {
                index,
                count: self.count,
            });
        }
        let listed: Vec<String> = self.gpus.iter().map(|g| g.index.to_string()).collect();
        let said = if self.unreachable.is_empty() {
            String::new()
        } else {
            format!("; nvidia-smi said: {}", self.unreachable.join(" / "))
        };
        Err(HypomnesisError::nvidia_smi(
            ErrorKind::GpuLost,
            format!(
                "GPU {index} {}: lost (it lists GPU{} {}){said}",
                crate::error::SMI_GPU_MISSING,
                if listed.len() == 1 { "" } else { "s" },
                listed.join(", ")
            ),
        ))
    }

    /// The indices without a row.
    pub(super) fn lost(&self) -> Vec<u32> {
        (0..self.count)
            .filter(|i| !self.gpus.iter().any(|g| g.index == *i))
            .collect()
    }
}

impl SmiBackend {
    /// Every GPU `--query-gpu` lists. `memory.reserved` is asked for until the driver rejects it.
    /// Lines that are not rows are skipped and remembered for the doctor; an exit status other
    /// than 0 with rows printed (a lost GPU's) keeps the rows.
    pub(super) fn gpus(&self) -> Result<GpuList> {
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
            if !ran.status.success()
                && with_reserved
                && parse::is_field_rejection(&ran.stdout, &ran.stderr)
            {
                crate::debug_log!("nvidia-smi rejects memory.reserved; asking without it");
                self.reserved_rejected.store(true, Ordering::Relaxed);
                continue;
            }
            let parsed = accepted(
                parse::parse_gpus(&ran.stdout, with_reserved),
                &ran,
                &args,
                &self.exe_path(),
            )?;
            let skipped = parsed.skipped;
            self.remember_skipped("--query-gpu", &skipped);
            return Ok(GpuList::new(parsed.rows, &skipped));
        }
    }

    pub(super) fn apps(&self) -> Result<Vec<SmiApp>> {
        let query = format!("--query-compute-apps={APP_FIELDS}");
        let args = [query.as_str(), "--format=csv,noheader,nounits"];
        let ran = self.run(&args)?;
        let parsed = accepted(
            parse::parse_apps(&ran.stdout),
            &ran,
            &args,
            &self.exe_path(),
        )?;
        self.remember_skipped("--query-compute-apps", &parsed.skipped);
        Ok(parsed.rows)
    }

    /// The lines of the last run of `query` that were not rows, for the doctor.
    fn remember_skipped(&self, query: &'static str, lines: &[parse::Skipped]) {
        let said: Vec<String> = lines.iter().map(ToString::to_string).collect();
        if !said.is_empty() {
            crate::debug_log!("nvidia-smi {query}: lines skipped: {}", said.join(" / "));
        }
        self.skipped_lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(query, said);
    }

    /// Reads the process list once for the rows it leaves out on each GPU (for the doctor).
    pub(super) fn count_dropped_rows(&self, list: &GpuList) {
        let Ok(apps) = self.apps() else {
            return;
        };
        let count = usize::try_from(list.count).unwrap_or(usize::MAX);
        for g in &list.gpus {
            self.dropped_rows
                .set(g.index, select_rows(g, count, apps.clone()).1);
        }
    }

    pub(super) fn gpu(&self, index: u32) -> Result<SmiGpu> {
        self.gpus()?.get(index).cloned()
    }

    /// Processes on GPU `index` with known memory (rows printed `[N/A]` are dropped and counted).
    pub(super) fn rows(&self, index: u32) -> Result<Listed> {
        let list = self.gpus()?;
        let gpu = list.get(index)?.clone();
        let count = usize::try_from(list.count).unwrap_or(usize::MAX);
        let (rows, dropped) = select_rows(&gpu, count, self.apps()?);
        self.dropped_rows.set(index, dropped);
        Ok(Listed {
            gpu,
            gpu_count: count,
            rows,
        })
    }
}

/// A GPU of `--query-gpu` with its process rows.
pub(super) struct Listed {
    pub(super) gpu: SmiGpu,
    /// How many GPUs `--query-gpu` listed.
    pub(super) gpu_count: usize,
    /// By pid.
    pub(super) rows: Vec<AppRow>,
}

/// The rows of `apps` that run on `gpu`, by pid, and how many of them had no usable memory
/// figure (`[N/A]`, pid 0, more than the GPU's total). A row belongs to `gpu` when their PCI bus ids are equal; on a host of one GPU
/// (`gpu_count`), a row or GPU without a bus id belongs to it too.
pub(super) fn select_rows(
    gpu: &SmiGpu,
    gpu_count: usize,
    apps: Vec<SmiApp>,
) -> (Vec<AppRow>, Dropped) {
    let mut rows = Vec::new();
    let mut dropped = Dropped::default();
    for a in apps {
        let mine = match (&a.pci_bus_id, &gpu.pci_bus_id) {
            (Some(a), Some(g)) => a.eq_ignore_ascii_case(g),
            _ => gpu_count == 1,
        };
        if !mine {
            continue;
        }
        // As NVML's rows: pid 0 is no process, and none holds more than the whole GPU (one
        // that says 0 MiB has no memory of its own: its processes hold the host's).
        let total = gpu
            .total_mib
            .as_ref()
            .ok()
            .filter(|&&t| t > 0)
            .and_then(|t| t.checked_mul(MIB));
        match a.used_mib.ok().and_then(|m| m.checked_mul(MIB)) {
            Some(bytes) if a.pid != 0 && total.is_none_or(|t| bytes <= t) => {
                rows.push((a.pid, bytes, a.name));
            }
            _ => {
                dropped.rows += 1;
                dropped.no_pid += u64::from(a.pid == 0);
            }
        }
    }
    rows.sort_by_key(|r| r.0);
    (rows, dropped)
}

fn bytes(field: &Field, what: &str, index: u32) -> Result<u64> {
    match field {
        Ok(mib) => mib.checked_mul(MIB).ok_or_else(|| {
            HypomnesisError::nvidia_smi(
                ErrorKind::BadAnswer,
                format!("GPU {index}: {what} {mib} MiB overflows"),
            )
        }),
        // nvidia-smi's own token for a figure this user may not read; any other is no figure.
        Err(token) => Err(HypomnesisError::nvidia_smi(
            if token == "[Insufficient Permissions]" {
                ErrorKind::NoPermission
            } else {
                ErrorKind::Other
            },
            format!("GPU {index}: {what} is {token}, not a number"),
        )),
    }
}

/// Whether a memory figure says the GPU has no memory of its own: `[N/A]` or
/// `[Not Supported]` (what nvidia-smi prints where NVML refuses the memory query, as on GB10),
/// or 0 MiB. `[Insufficient Permissions]` and the like are not: the memory is there, unread.
fn no_memory_of_its_own(field: &Field) -> bool {
    match field {
        Ok(mib) => *mib == 0,
        Err(token) => {
            token.eq_ignore_ascii_case("[N/A]") || token.eq_ignore_ascii_case("[Not Supported]")
        }
    }
}

/// A GPU whose total and free memory both say it has none of its own (see
/// [`no_memory_of_its_own`]): one pool with the CPU, whose figures are the host's (`host`:
/// `MemTotal` and `MemAvailable`), `reserved` unknown. As the NVML backend does.
fn unified(
    g: SmiGpu,
    host: impl FnOnce() -> Result<crate::host::memory::host::HostMemory>,
) -> Result<GpuDeviceInfo> {
    let shown = |f: &Field| match f {
        Ok(mib) => format!("{mib} MiB"),
        Err(token) => token.clone(),
    };
    let why = format!(
        "nvidia-smi gave memory.total {} and memory.free {}",
        shown(&g.total_mib),
        shown(&g.free_mib)
    );
    let (total, free) = nvidia::host_pool(host()).map_err(|e| {
        HypomnesisError::nvidia_smi(
            ErrorKind::NotSupported,
            format!("GPU {}: {why}, and {e}", g.index),
        )
    })?;
    Ok(GpuDeviceInfo {
        index: g.index,
        name: g.name,
        total_bytes: total,
        free_bytes: free,
        used_bytes: total - free,
        reserved_bytes: None,
        driver_version: g.driver_version,
        uuid: g.uuid,
        pci_bus_id: g.pci_bus_id,
        vendor: Some(GpuVendor::Nvidia),
        memory_model: Some(crate::types::MemoryModel::Unified),
        memory_model_evidence: Some(format!(
            "{why}: the GPU has no memory of its own, so its figures are the host's MemTotal \
             and MemAvailable"
        )),
        ..GpuDeviceInfo::blank(GpuQuerySource::NvidiaSmi)
    })
}

/// A `--query-gpu` row as device figures: `used = total - free`, and the reservation kept only
/// when it fits in that used figure (within nvidia-smi's rounding to whole MiB). A GPU with no
/// memory of its own (both figures `[N/A]`, `[Not Supported]` or 0) is unified: its figures
/// are the host's.
pub fn device_info_of(g: SmiGpu) -> Result<GpuDeviceInfo> {
    device_info_with(g, crate::host::memory::host::host_memory)
}

/// [`device_info_of`] with the host's memory read by `host` (only for a unified GPU).
fn device_info_with(
    g: SmiGpu,
    host: impl FnOnce() -> Result<crate::host::memory::host::HostMemory>,
) -> Result<GpuDeviceInfo> {
    if no_memory_of_its_own(&g.total_mib) && no_memory_of_its_own(&g.free_mib) {
        return unified(g, host);
    }
    let total = bytes(&g.total_mib, "memory.total", g.index)?;
    let free = bytes(&g.free_mib, "memory.free", g.index)?;
    let used = total.checked_sub(free).ok_or_else(|| {
        HypomnesisError::nvidia_smi(
            ErrorKind::BadAnswer,
            format!(
                "GPU {}: memory.free is larger than memory.total ({})",
                g.index,
                crate::error::IMPOSSIBLE
            ),
        )
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
        ..GpuDeviceInfo::blank(GpuQuerySource::NvidiaSmi)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_failed_run_is_accepted_only_for_rows_or_unreachable_gpus() {
        use std::os::unix::process::ExitStatusExt;
        let ran = |code: i32| super::super::runner::Ran {
            status: std::process::ExitStatus::from_raw(code << 8),
            stdout: String::new(),
            stderr: String::new(),
        };
        let rows = |rows: Vec<u32>, unreachable: bool| parse::Rows {
            rows,
            skipped: if unreachable {
                vec![parse::Skipped {
                    line: 3,
                    text: format!("{} 0000:2A:00.0", parse::NO_DEVICE_HANDLE),
                    why: "not a row".into(),
                }]
            } else {
                Vec::new()
            },
        };
        let exe = std::path::Path::new("/usr/bin/nvidia-smi");
        let args = ["--query-gpu=index"];
        // Exit 0: whatever parsed is the answer, with no note.
        let p = accepted(Ok(rows(Vec::new(), false)), &ran(0), &args, exe).unwrap();
        assert!(p.rows.is_empty() && p.skipped.is_empty());
        // A failure with rows: the rows, and the status noted.
        let p = accepted(Ok(rows(vec![1, 2], false)), &ran(15), &args, exe).unwrap();
        assert_eq!(p.rows, vec![1, 2]);
        assert_eq!(p.skipped.len(), 1);
        assert!(
            p.skipped.iter().any(|s| s.why.contains("exited with")),
            "{:?}",
            p.skipped
        );
        // A failure explained by an unreachable GPU, even without rows.
        let p = accepted(Ok(rows(Vec::new(), true)), &ran(15), &args, exe).unwrap();
        assert_eq!(p.skipped.len(), 2);
        // A failure with nothing to show for it is the failed run.
        let e = accepted(Ok(rows(Vec::new(), false)), &ran(9), &args, exe).unwrap_err();
        assert!(e.to_string().contains("nvidia-smi"), "{e}");
        assert!(accepted::<u32>(Err("garbage".into()), &ran(9), &args, exe).is_err());
        let e = accepted::<u32>(Err("garbage".into()), &ran(0), &args, exe).unwrap_err();
        assert!(
            e.to_string()
                .contains("unexpected `--query-gpu` output: garbage"),
            "{e}"
        );
    }

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

    fn app(bus: Option<&str>, pid: u32, used: Field) -> SmiApp {
        SmiApp {
            pci_bus_id: bus.map(str::to_string),
            pid,
            used_mib: used,
            name: Some(format!("p{pid}")),
        }
    }

    fn on_bus(bus: Option<&str>) -> SmiGpu {
        SmiGpu {
            pci_bus_id: bus.map(str::to_string),
            ..gpu(Ok(10), Ok(5), None)
        }
    }

    #[test]
    fn rows_follow_the_bus_id_and_count_what_they_drop() {
        let apps = || {
            vec![
                app(Some("00000000:41:00.0"), 30, Ok(3)),
                app(Some("00000000:01:00.0"), 20, Ok(2)),
                app(Some("00000000:01:00.0"), 10, Err("[N/A]".into())),
                app(Some("00000000:01:00.0"), 11, Ok(u64::MAX)),
                app(Some("00000000:01:00.0"), 5, Ok(1)),
                app(None, 40, Ok(4)),
            ]
        };
        let first = on_bus(Some("00000000:01:00.0"));
        let (rows, dropped) = select_rows(&first, 2, apps());
        assert_eq!(
            rows,
            vec![
                (5, MIB, Some("p5".into())),
                (20, 2 * MIB, Some("p20".into()))
            ],
            "its own rows, by pid; a row without a bus id is no one's on two GPUs"
        );
        assert_eq!(
            (dropped.rows, dropped.no_pid),
            (2, 0),
            "[N/A] and an overflowing figure"
        );
        let second = on_bus(Some("00000000:41:00.0"));
        let (rows, dropped) = select_rows(&second, 2, apps());
        assert_eq!(rows, vec![(30, 3 * MIB, Some("p30".into()))]);
        assert_eq!(dropped.rows, 0);
        // Pid 0 and more memory than the GPU has are not rows (the GPU has 10 MiB).
        let (rows, dropped) = select_rows(
            &first,
            2,
            vec![
                app(Some("00000000:01:00.0"), 0, Ok(1)),
                app(Some("00000000:01:00.0"), 9, Ok(11)),
                app(Some("00000000:01:00.0"), 8, Ok(10)),
            ],
        );
        assert_eq!(
            (rows, dropped.rows, dropped.no_pid),
            (vec![(8, 10 * MIB, Some("p8".into()))], 2, 1),
            "pid 0 is counted as no process, not as its memory"
        );
        // One GPU: rows without a bus id (or a GPU without one) are its own.
        let (rows, _) = select_rows(&first, 1, vec![app(None, 40, Ok(4))]);
        assert_eq!(rows.len(), 1);
        let (rows, _) = select_rows(&on_bus(None), 1, apps());
        assert_eq!(rows.len(), 4);
        let (rows, _) = select_rows(&on_bus(None), 2, apps());
        assert!(rows.is_empty());
        // The bus id is compared without regard to case.
        let upper = on_bus(Some("00000000:4B:00.0"));
        let (rows, _) = select_rows(&upper, 2, vec![app(Some("00000000:4b:00.0"), 1, Ok(1))]);
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn every_figure_of_the_row_is_kept() {
        let g = SmiGpu {
            index: 3,
            uuid: Some("GPU-abc".into()),
            driver_version: Some("595.80".into()),
            pci_bus_id: Some("00000000:41:00.0".into()),
            name: Some("NVIDIA L40S".into()),
            ..gpu(Ok(100), Ok(60), Some(Ok(7)))
        };
        let d = device_info_of(g).unwrap();
        assert_eq!(d.index, 3);
        assert_eq!(d.uuid.as_deref(), Some("GPU-abc"));
        assert_eq!(d.driver_version.as_deref(), Some("595.80"));
        assert_eq!(d.pci_bus_id.as_deref(), Some("00000000:41:00.0"));
        assert_eq!(d.name.as_deref(), Some("NVIDIA L40S"));
        assert_eq!(d.vendor, Some(GpuVendor::Nvidia));
        assert_eq!(d.source, GpuQuerySource::NvidiaSmi);
        assert_eq!(
            (d.total_bytes, d.free_bytes, d.used_bytes),
            (100 * MIB, 60 * MIB, 40 * MIB)
        );
    }

    #[test]
    fn two_mib_of_rounding_and_no_more() {
        // used = 40 MiB: a reservation of up to 42 MiB is rounding, 43 MiB is not believed.
        let with = |r| {
            device_info_of(gpu(Ok(100), Ok(60), Some(Ok(r))))
                .unwrap()
                .reserved_bytes
        };
        assert_eq!(with(42), Some(42 * MIB));
        assert_eq!(with(43), None);
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

    /// A host of 119 GiB with 80 GiB available, as a GB10's (as `host_memory` answers).
    #[allow(clippy::unnecessary_wraps)]
    fn spark() -> Result<crate::host::memory::host::HostMemory> {
        Ok(crate::host::memory::host::HostMemory::new(
            119 * 1024 * MIB,
            Some(80 * 1024 * MIB),
        ))
    }

    #[test]
    fn no_memory_of_its_own_is_the_hosts_pool() {
        for (total, free) in [
            (Err("[N/A]".to_string()), Err("[N/A]".to_string())),
            (Err("[Not Supported]".into()), Err("[Not Supported]".into())),
            (Ok(0), Ok(0)),
        ] {
            let said = format!("{total:?} {free:?}");
            let d = device_info_with(gpu(total, free, Some(Err("[N/A]".into()))), spark).unwrap();
            assert_eq!(
                d.memory_model,
                Some(crate::types::MemoryModel::Unified),
                "{said}"
            );
            assert_eq!(
                (d.total_bytes, d.free_bytes, d.used_bytes, d.reserved_bytes),
                (119 * 1024 * MIB, 80 * 1024 * MIB, 39 * 1024 * MIB, None),
                "{said}"
            );
            let why = d.memory_model_evidence.unwrap();
            assert!(why.starts_with("nvidia-smi gave memory.total "), "{why}");
            assert!(why.contains("MemAvailable"), "{why}");
        }
        // Its processes are kept: a total of 0 MiB is no bound on them.
        let (rows, dropped) =
            select_rows(&gpu(Ok(0), Ok(0), None), 1, vec![app(None, 7, Ok(4096))]);
        assert_eq!((rows.len(), dropped.rows), (1, 0));
        // One figure known is a GPU with memory, whose other figure is missing: an error.
        let e = device_info_with(gpu(Ok(100), Err("[N/A]".into()), None), spark).unwrap_err();
        assert!(e.to_string().contains("memory.free is [N/A]"), "{e}");
        // Unreadable is not absent.
        assert!(
            device_info_with(
                gpu(
                    Err("[Insufficient Permissions]".into()),
                    Err("[Insufficient Permissions]".into()),
                    None
                ),
                spark
            )
            .is_err()
        );
        // A host that does not say what is available: said, not guessed.
        let e = device_info_with(gpu(Ok(0), Ok(0), None), || {
            Ok(crate::host::memory::host::HostMemory::new(1, None))
        })
        .unwrap_err();
        assert!(e.to_string().contains("no MemAvailable"), "{e}");
        assert_eq!(e.kind(), ErrorKind::NotSupported);
    }
}
