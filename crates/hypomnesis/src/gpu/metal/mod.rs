//! Apple silicon (macOS) through libSystem and Metal.
//!
//! Apple silicon has one GPU sharing the machine's unified memory, so this backend has exactly
//! one device, index 0, and figures mean:
//!
//! - **total**: the unified memory, `hw.memsize`;
//! - **free**: Metal's recommended working set of the default device
//!   (`recommendedMaxWorkingSetSize`) minus the GPU memory of every process this one can see,
//!   saturating at 0. It is the working-set budget left, **not** a hardware counter: the CPU
//!   shares the same memory and the budget can be exceeded. Without root, only the calling
//!   user's processes are seen, so free is an upper bound;
//! - **used**: total − free; reserved memory is not reported.
//!
//! Per-process GPU memory is the balance of the `graphics_footprint` entry of the XNU task
//! ledger, read with the `ledger` system call: what the kernel charges the process for memory
//! the GPU driver allocated on its behalf. The entry's position in the ledger is looked up by
//! name once per process. Other users' processes refuse the call (`EPERM`) unless run as root;
//! they are left out of process lists and counted in `hmn doctor`.
//!
//! An Intel Mac (the CPU brand string does not start with `Apple`) has no such source: it is
//! reported absent. A process translated by Rosetta is recognised through
//! `sysctl.proc_translated` and measured the same way, without a chip name.

mod ffi;
pub(crate) mod parse;

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use parse::{Chip, GRAPHICS_FOOTPRINT};

use super::backend::{Backend, Presence, Scope};
use crate::{
    error::ErrorKind, error::Failure, error::HypomnesisError, error::Result, types::GpuDeviceInfo,
    types::GpuProcessEntry, types::GpuQuerySource, types::GpuVendor, types::ProcessGpuInfo,
    types::SourceReport, types::SourceState,
};

/// The only device index.
const DEVICE_COUNT: u32 = 1;

/// Where `graphics_footprint` sits in every task's ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    /// Position of the entry.
    index: usize,
    /// Entries in the task ledger template.
    entries: usize,
}

/// What the last walk over the process table could not read.
#[derive(Debug, Default)]
struct WalkStats {
    /// Processes of other users (`EPERM` / `EACCES`).
    other_users: u64,
    /// Processes whose ledger failed otherwise.
    unreadable: u64,
    /// Why the last of those failed.
    last_reason: Option<String>,
    /// The pids of other users' processes, sorted, without duplicates.
    denied: Vec<u32>,
}

/// A process's GPU memory as one walk saw it.
struct Row {
    pid: i32,
    bytes: u64,
}

/// The Metal backend. What does not change while the process runs (chip, ledger layout, memory
/// size, working-set budget) is read once.
pub(crate) struct MetalBackend {
    chip: OnceLock<std::result::Result<Chip, Failure>>,
    slot: OnceLock<std::result::Result<Slot, Failure>>,
    total: OnceLock<std::result::Result<u64, Failure>>,
    budget: OnceLock<Option<u64>>,
    /// What the last walk could not read; `None` before the first walk.
    walk: Mutex<Option<WalkStats>>,
}

/// An `errno` as text: `Operation not permitted (os error 1)`.
fn errno_text(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// The kind of failure an `errno` of a system call is: refused, not there, or other.
fn errno_kind(e: i32) -> ErrorKind {
    match e {
        libc::EPERM | libc::EACCES => ErrorKind::NoPermission,
        libc::ENOENT | libc::ENOTSUP => ErrorKind::NotSupported,
        _ => ErrorKind::Other,
    }
}

/// A failed system call `call` with `errno` `e`, its kind decided by the `errno`.
fn errno_failure(call: &str, e: i32) -> Failure {
    Failure::new(errno_kind(e), format!("{call} failed: {}", errno_text(e)))
}

/// A Metal error of no kind of its own (`Other`).
fn metal(msg: String) -> HypomnesisError {
    HypomnesisError::metal(ErrorKind::Other, msg)
}

/// A Metal error of the failure's kind.
fn metal_failure(f: Failure) -> HypomnesisError {
    HypomnesisError::metal(f.kind, f.message)
}

/// A failed ledger read of `pid`.
fn ledger_failure(pid: i32, e: ffi::LedgerError, slot: Slot) -> Failure {
    match e {
        ffi::LedgerError::Errno(e) => {
            errno_failure(&format!("ledger(LEDGER_ENTRY_INFO) for pid {pid}"), e)
        }
        ffi::LedgerError::Short(n) => Failure::new(
            ErrorKind::BadAnswer,
            format!(
                "ledger(LEDGER_ENTRY_INFO) for pid {pid} returned {n} entries; \
                 {GRAPHICS_FOOTPRINT} is entry {}",
                slot.index
            ),
        ),
    }
}

impl MetalBackend {
    /// A backend that has read nothing yet.
    pub(crate) const fn new() -> Self {
        Self {
            chip: OnceLock::new(),
            slot: OnceLock::new(),
            total: OnceLock::new(),
            budget: OnceLock::new(),
            walk: Mutex::new(None),
        }
    }

    fn stats(&self) -> MutexGuard<'_, Option<WalkStats>> {
        self.walk.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn chip(&self) -> &std::result::Result<Chip, Failure> {
        self.chip.get_or_init(|| {
            let bytes = ffi::sysctl_bytes(c"machdep.cpu.brand_string")
                .map_err(|e| errno_failure("sysctlbyname(machdep.cpu.brand_string)", e))?;
            // Absent on Intel Macs (ENOENT): not translated.
            let translated = ffi::sysctl_i32(c"sysctl.proc_translated") == Ok(1);
            Ok(parse::classify_chip(
                &parse::c_buffer_text(&bytes),
                translated,
            ))
        })
    }

    /// The chip name when this is Apple silicon (`None` under Rosetta), else why not.
    fn apple(&self) -> Result<Option<&str>> {
        match self.chip() {
            Ok(Chip::AppleSilicon(name)) => Ok(name.as_deref()),
            Ok(Chip::Other(brand)) => Err(metal(format!(
                "not Apple silicon: machdep.cpu.brand_string is {brand:?}"
            ))),
            Err(why) => Err(metal_failure(why.clone())),
        }
    }

    /// Apple silicon and device index 0, or the error.
    fn device(&self, index: u32) -> Result<Option<&str>> {
        let name = self.apple()?;
        if index >= DEVICE_COUNT {
            return Err(HypomnesisError::DeviceIndexOutOfRange {
                index,
                count: DEVICE_COUNT,
            });
        }
        Ok(name)
    }

    fn slot(&self) -> Result<Slot> {
        self.slot
            .get_or_init(|| {
                let names = ffi::ledger_template_names()
                    .map_err(|e| errno_failure("ledger(LEDGER_TEMPLATE_INFO)", e))?;
                let index = parse::ledger_index(
                    names.iter().map(<[u8; 32]>::as_slice),
                    GRAPHICS_FOOTPRINT,
                )
                .ok_or_else(|| {
                    Failure::new(
                        ErrorKind::NotSupported,
                        format!(
                            "the kernel's task ledger has no {GRAPHICS_FOOTPRINT} entry ({} \
                             entries)",
                            names.len()
                        ),
                    )
                })?;
                Ok(Slot {
                    index,
                    entries: names.len(),
                })
            })
            .clone()
            .map_err(metal_failure)
    }

    fn total(&self) -> Result<u64> {
        self.total
            .get_or_init(|| {
                ffi::sysctl_u64(c"hw.memsize")
                    .map_err(|e| errno_failure("sysctlbyname(hw.memsize)", e))
                    .and_then(|t| {
                        if t == 0 {
                            Err(Failure::new(
                                ErrorKind::BadAnswer,
                                "sysctlbyname(hw.memsize) returned 0",
                            ))
                        } else {
                            Ok(t)
                        }
                    })
            })
            .clone()
            .map_err(metal_failure)
    }

    fn budget(&self) -> Result<u64> {
        self.budget
            .get_or_init(ffi::recommended_working_set)
            .ok_or_else(|| {
                metal(
                    "MTLCreateSystemDefaultDevice returned no device (no Metal GPU is visible to \
                     this process)"
                        .to_owned(),
                )
            })
    }

    /// This process's `graphics_footprint`, bytes.
    fn own_footprint(slot: Slot) -> Result<u64> {
        let pid = i32::try_from(std::process::id())
            .map_err(|_| metal(format!("pid {} does not fit a pid_t", std::process::id())))?;
        let balance = ffi::ledger_balance(pid, slot.index)
            .map_err(|e| metal_failure(ledger_failure(pid, e, slot)))?;
        parse::balance_bytes(balance).ok_or_else(|| {
            metal(format!(
                "ledger(LEDGER_ENTRY_INFO) for pid {pid}: {GRAPHICS_FOOTPRINT} has a negative \
                 balance ({balance})"
            ))
        })
    }

    /// Every process this one may read and its `graphics_footprint` (zero included), sorted by
    /// pid. What could not be read is recorded for `report`. The system refusing the walk
    /// (the process table, or every process but none readable) is [`Walk::Refused`].
    fn walk(&self, slot: Slot) -> std::result::Result<(Vec<Row>, Vec<u32>), Walk> {
        let pids = ffi::all_pids().map_err(|e| {
            let why = format!("proc_listpids(PROC_ALL_PIDS) failed: {}", errno_text(e));
            // The table itself was refused: nothing was enumerated, so no process was denied.
            let kind = if e == libc::EPERM || e == libc::EACCES {
                crate::error::ErrorKind::NoPermission
            } else {
                crate::error::ErrorKind::Other
            };
            Walk::Failed(HypomnesisError::metal(kind, why))
        })?;
        let mut rows = Vec::new();
        let mut stats = WalkStats::default();
        for pid in pids {
            match ffi::ledger_balance(pid, slot.index) {
                Ok(balance) => {
                    if let Some(bytes) = parse::balance_bytes(balance) {
                        rows.push(Row { pid, bytes });
                    } else {
                        stats.unreadable += 1;
                        stats.last_reason = Some(format!(
                            "pid {pid}: {GRAPHICS_FOOTPRINT} has a negative balance ({balance})"
                        ));
                    }
                }
                Err(ffi::LedgerError::Errno(libc::EPERM | libc::EACCES)) => {
                    stats.other_users += 1;
                    if let Ok(p) = u32::try_from(pid) {
                        stats.denied.push(p);
                    }
                }
                // The process exited since it was listed: it holds nothing.
                Err(ffi::LedgerError::Errno(libc::ESRCH)) => {}
                Err(e) => {
                    stats.unreadable += 1;
                    stats.last_reason = Some(ledger_failure(pid, e, slot).message);
                }
            }
        }
        if stats.other_users > 0 || stats.unreadable > 0 {
            crate::debug_log!(
                "Metal: {} process(es) of other users skipped, {} unreadable",
                stats.other_users,
                stats.unreadable
            );
        }
        let refusal = parse::walk_refusal(
            rows.len(),
            stats.other_users,
            stats.unreadable,
            stats.last_reason.as_deref(),
        );
        stats.denied.sort_unstable();
        stats.denied.dedup();
        let denied = stats.denied.clone();
        *self.stats() = Some(stats);
        match refusal {
            Some((refused, why)) => Err(Walk::Refused { refused, why }),
            None => Ok((rows, denied)),
        }
    }
}

/// Why a walk over the process table gave no rows.
enum Walk {
    /// The system refused it: the process table, or every process in it.
    Refused {
        /// How many processes could not be read.
        refused: u32,
        /// In words.
        why: String,
    },
    /// Anything else.
    Failed(HypomnesisError),
}

impl Walk {
    /// As a device figure's error: the Metal source's.
    fn for_device(self) -> HypomnesisError {
        match self {
            Self::Refused { why, .. } => metal(why),
            Self::Failed(e) => e,
        }
    }

    /// As the process list's error: [`HypomnesisError::ProcessListDenied`] when refused.
    fn for_list(self) -> HypomnesisError {
        match self {
            Self::Refused { refused, why } => {
                crate::debug_log!("Metal: process list refused: {why}");
                HypomnesisError::ProcessListDenied { denied: refused }
            }
            Self::Failed(e) => e,
        }
    }
}

impl Backend for MetalBackend {
    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Metal
    }

    fn presence(&self) -> Presence {
        match self.chip() {
            // Not Apple silicon (`machdep.cpu.brand_string` names another maker).
            Ok(Chip::Other(_)) => Presence::Absent,
            // A brand string that cannot be read is a failure to report, not an absence.
            Ok(Chip::AppleSilicon(_)) | Err(_) => Presence::Present,
        }
    }

    fn device_count(&self) -> Result<u32> {
        self.apple().map(|_| DEVICE_COUNT)
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        let name = self.device(index)?.map(str::to_owned);
        let total = self.total()?;
        let budget = self.budget()?;
        let slot = self.slot()?;
        let (rows, _) = self.walk(slot).map_err(Walk::for_device)?;
        let f = parse::figures(total, budget, rows.iter().map(|r| r.bytes));
        Ok(GpuDeviceInfo {
            index,
            name,
            total_bytes: total,
            free_bytes: f.free,
            used_bytes: f.used,
            reserved_bytes: None,
            driver_version: None,
            uuid: None,
            pci_bus_id: None,
            vendor: Some(GpuVendor::Apple),
            memory_model: Some(crate::types::MemoryModel::Unified),
            memory_model_evidence: Some(
                "Apple silicon: the GPU and the CPU share one memory (hw.memsize)".into(),
            ),
            ..GpuDeviceInfo::blank(GpuQuerySource::Metal)
        })
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        self.device(index)?;
        let slot = self.slot()?;
        Ok(ProcessGpuInfo {
            used_bytes: Self::own_footprint(slot)?,
            is_per_process: true,
            source: GpuQuerySource::Metal,
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        self.gpu_process_listing(index).map(|(rows, _)| rows)
    }

    fn gpu_process_listing(&self, index: u32) -> Result<(Vec<GpuProcessEntry>, Vec<u32>)> {
        self.device(index)?;
        let slot = self.slot()?;
        let (rows, denied) = self.walk(slot).map_err(Walk::for_list)?;
        let mut out: Vec<GpuProcessEntry> = rows
            .into_iter()
            .filter(|r| r.bytes > 0)
            .filter_map(|r| {
                let pid = u32::try_from(r.pid).ok()?;
                let name = ffi::pid_path(r.pid)
                    .and_then(|p| parse::basename(&String::from_utf8_lossy(&p)));
                Some(GpuProcessEntry {
                    pid,
                    name,
                    used_bytes: r.bytes,
                    device_index: index,
                    shared_used_bytes: 0,
                    context: None,
                    ..GpuProcessEntry::blank(GpuQuerySource::Metal)
                })
            })
            .collect();
        out.sort_by_key(|e| e.pid);
        Ok((out, denied))
    }

    fn report(&self) -> SourceReport {
        let mut details = Vec::new();
        let state = match self.chip() {
            Err(why) => SourceState::Failed(why.clone()),
            Ok(Chip::Other(brand)) => SourceState::absent(
                crate::error::ErrorKind::NotInstalled,
                format!("not Apple silicon: machdep.cpu.brand_string is {brand:?}"),
            ),
            Ok(Chip::AppleSilicon(name)) => {
                details.push((
                    "chip".into(),
                    name.clone().unwrap_or_else(|| {
                        "Apple silicon (this process runs under Rosetta)".into()
                    }),
                ));
                details.push((
                    "unified memory".into(),
                    self.total()
                        .map_or_else(|e| e.to_string(), parse::bytes_text),
                ));
                details.push((
                    "recommended working set".into(),
                    self.budget()
                        .map_or_else(|e| e.to_string(), parse::bytes_text),
                ));
                details.push((
                    format!("{GRAPHICS_FOOTPRINT} ledger entry"),
                    self.slot().map_or_else(
                        |e| e.to_string(),
                        |s| format!("index {} of {} task ledger entries", s.index, s.entries),
                    ),
                ));
                let state = match self.device_info(0) {
                    Ok(_) => SourceState::Answered,
                    Err(e) => SourceState::Failed(crate::error::Failure::of(&e)),
                };
                if let Some(walked) = self.stats().as_ref() {
                    details.push((
                        "processes of other users skipped".into(),
                        if walked.other_users > 0 {
                            format!(
                                "{} (their GPU memory is not counted; run as root to see it)",
                                walked.other_users
                            )
                        } else {
                            "0".into()
                        },
                    ));
                    if walked.unreadable > 0 {
                        details.push((
                            "processes whose ledger could not be read".into(),
                            format!(
                                "{} (last: {})",
                                walked.unreadable,
                                walked.last_reason.as_deref().unwrap_or("no reason given")
                            ),
                        ));
                    }
                }
                state
            }
        };
        SourceReport {
            source: GpuQuerySource::Metal,
            state,
            details,
            dropped_process_rows: 0,
        }
    }

    fn scope(&self) -> Scope {
        Scope::Others
    }
}
