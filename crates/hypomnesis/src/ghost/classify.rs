//! One look: each listed row read from procfs and the driver's samples, placed in a class
//! where the evidence shows one, its evidence gathered, and its remedy decided by the rule
//! (`rule.rs`). Structure without idleness (an orphan, a zombie leader whose threads run) is a
//! fact on the row, not a ghost.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::holders::{self, Majors, Scanned};
use super::rule::{self, Activity, Evidence, Standing};
use super::scanner::{Latest, Scanner};
use super::suspects::{self, Charged};
use super::{Ghost, GhostClass, GhostFact, GhostOptions, GhostReport, idle, look, pods, stuck};
use crate::error::{ErrorKind, Failure};
use crate::host::parse::stat::StatIds;
use crate::types::{GpuContextKind, GpuDeviceInfo, GpuProcessEntry, UnreadableReason};

/// The kind of failure a row that could not be read is: a process hidden by `hidepid` or
/// unreadable is refused to this user; one in another PID namespace is not visible from here.
fn unreadable_kind(why: UnreadableReason) -> ErrorKind {
    match why {
        UnreadableReason::HiddenByHidepid | UnreadableReason::NotReadable => {
            ErrorKind::NoPermission
        }
        UnreadableReason::OutsidePidNamespace => ErrorKind::NotSupported,
        _ => ErrorKind::Other,
    }
}

/// What a watch keeps from one look to the next (a single look starts from nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct Memory {
    /// Each pid in `D` at the last look: since when without a context switch, and its count
    /// of switches then.
    pub in_d: BTreeMap<u32, (Instant, u64)>,
    /// When each ghost whose process is not here was first seen, by (GPU, pid): a scan that
    /// started earlier says nothing of its holders.
    pub first_seen: BTreeMap<(u32, Option<u32>), Instant>,
    /// Processes seen holding their GPU's device file, by (pid, start time, minor): each is
    /// what the driver charges for its lifetime, and is not read again.
    pub holding: BTreeSet<(u32, u64, u32)>,
}

/// How a look has its scan of descriptors.
pub(crate) enum Scans<'a> {
    /// A single look scans now, once, when a ghost needs it.
    Now,
    /// A watch's scanner, in the background.
    Background(&'a Scanner),
}

/// What one look knows besides the rows.
pub(crate) struct Look<'a> {
    pub(crate) procfs: &'a Path,
    pub(crate) pods: pods::Pods<'a>,
    /// The state, relations and start time of listed processes already read (through kept
    /// files), by pid; the others are read by path.
    pub(crate) stats: &'a BTreeMap<u32, (StatIds, u64)>,
    /// Each GPU's activity samples, by device index.
    pub(crate) activity: &'a BTreeMap<u32, idle::DeviceActivity>,
    pub(crate) now_us: u64,
    pub(crate) options: GhostOptions,
    /// A single look waits `stuck_after` and looks at a process in `D` again; a watch
    /// compares with its earlier looks.
    pub(crate) single: bool,
    pub(crate) scans: Scans<'a>,
}

/// A row's reading, before the holders are known.
enum Found {
    /// The process the driver charges is not here, said in a line.
    NotHere(String),
    /// A zombie whose threads are all gone, not reaped by its parent.
    Unreaped {
        ppid: u32,
    },
    /// A zombie leader whose other threads run.
    ZombieLeader {
        live: Vec<u32>,
    },
    /// In `D` now, with its context switches so far.
    InD {
        switches: u64,
    },
    /// Reparented after its group's or session's leader ended.
    Orphan {
        ppid: u32,
        leader: u32,
        of: &'static str,
    },
    GonePod(pods::GonePod),
    Idle(Vec<String>),
}

/// The GPUs' device files: the majors, and each GPU's minor by its index.
struct Files {
    majors: Result<Majors, String>,
    minors: BTreeMap<u32, u32>,
}

impl Files {
    fn read(procfs: &Path, devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)]) -> Self {
        let gpus = holders::driver_gpus(procfs);
        let minors = devices
            .iter()
            .filter_map(|(d, _)| {
                let minor = holders::minor_of(&gpus, d.uuid.as_deref(), d.pci_bus_id.as_deref())
                    .or_else(|| crate::gpu::device_minor(d.index))?;
                Some((d.index, minor))
            })
            .collect();
        Self {
            majors: Majors::read(procfs),
            minors,
        }
    }

    /// GPU `index`'s device file, or why it is not known.
    fn file(&self, index: u32) -> Result<(String, u32), String> {
        let Some(&minor) = self.minors.get(&index) else {
            return Err(format!(
                "GPU {index}'s device file is not known here (no driver information file, and \
                 no minor number from NVML)"
            ));
        };
        match &self.majors {
            Ok(m) if m.gpu.is_some() => Ok((format!("/dev/nvidia{minor}"), minor)),
            Ok(_) => Err(format!(
                "GPU {index}'s device file is not known here: the procfs's devices list names no \
                 NVIDIA major, so no descriptor can be told to be a GPU's"
            )),
            Err(why) => Err(format!(
                "GPU {index}'s device file is not known here: the drivers' device majors cannot \
                 be read: {why}"
            )),
        }
    }
}

/// The report of one look at `devices`' rows, with what `memory` keeps for the next.
pub(crate) fn classify(
    look: &Look<'_>,
    memory: &mut Memory,
    devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
) -> GhostReport {
    let mut report = GhostReport {
        complete: true,
        ..GhostReport::default()
    };
    let mut notes = BTreeSet::new();
    let files = Files::read(look.procfs, devices);
    let mut found = find(look, memory, &files, devices, &mut report, &mut notes);
    let stuck = stuck_now(look, memory, &found);
    found.retain(|(_, f)| !matches!(f, Found::InD { .. }));
    // Memory no listed process accounts for is one more ghost whose process is not here.
    let beyond = unaccounted(devices);
    let now = Instant::now();
    let keys: Vec<(u32, Option<u32>)> = found
        .iter()
        .filter(|(_, f)| matches!(f, Found::NotHere(_)))
        .map(|(p, _)| (p.device_index, Some(p.pid)))
        .chain(beyond.iter().map(|(info, _)| (info.index, None)))
        .collect();
    memory.first_seen.retain(|k, _| keys.contains(k));
    let since = keys
        .iter()
        .map(|k| *memory.first_seen.entry(*k).or_insert(now))
        .min();
    let scan = since.map(|since| scan_for(look, &files, since));
    if let Some(Ok(s)) = &scan {
        report.holder_scan = Some(s.stats_at(Instant::now()));
    }
    let held = Held {
        files: &files,
        scan: scan.as_ref(),
        devices,
    };
    for (p, f) in found {
        match ghost_of(look, &held, p, f) {
            Some(Either::Ghost(g)) => report.ghosts.push(*g),
            Some(Either::Fact(fact)) => report.facts.push(fact),
            None => {}
        }
    }
    report.ghosts.extend(stuck);
    for (info, bytes) in beyond {
        let first = format!(
            "{} MiB allocated beyond the listed processes' sum, more than the driver's allowance",
            bytes >> 20
        );
        let charged = Charged {
            pid: None,
            compute_only: false,
        };
        let (evidence, holders, remedy) = held.not_here(look.procfs, info.index, first, &charged);
        report.ghosts.push(Ghost {
            class: GhostClass::Unaccounted,
            device_index: info.index,
            pid: None,
            name: None,
            bytes,
            holders,
            evidence,
            remedy,
        });
    }
    report.unseen.extend(notes);
    report
}

/// The scan the look's ghosts need: one that started at or after `since`.
fn scan_for(look: &Look<'_>, files: &Files, since: Instant) -> Result<Arc<Scanned>, String> {
    let majors = match &files.majors {
        Ok(m) if m.gpu.is_some() => *m,
        // Nothing to match descriptors against: no scan (the file's error says why).
        Ok(_) => return Err("no NVIDIA device major".into()),
        Err(why) => return Err(why.clone()),
    };
    match look.scans {
        Scans::Now => Ok(Arc::new(holders::scan(
            look.procfs,
            majors,
            Instant::now() + look.options.scan_deadline,
        ))),
        Scans::Background(scanner) => {
            match scanner.latest(look.procfs, majors, since, look.options.scan_deadline) {
                Latest::Fresh(s) => Ok(s),
                Latest::Pending(why) => Err(why),
            }
        }
    }
}

/// What the look found of the device files, for the ghosts whose process is not here.
struct Held<'a> {
    files: &'a Files,
    scan: Option<&'a Result<Arc<Scanned>, String>>,
    devices: &'a [(GpuDeviceInfo, Vec<GpuProcessEntry>)],
}

impl Held<'_> {
    /// The evidence, the suspects that may hold it, and the remedy for memory on GPU `index`
    /// charged to a process not here (`first`: why it is not).
    fn not_here(
        &self,
        procfs: &Path,
        index: u32,
        first: String,
        charged: &Charged,
    ) -> (Vec<String>, Vec<u32>, super::Remedy) {
        let mut evidence = vec![first];
        let listed: BTreeSet<u32> = self
            .devices
            .iter()
            .filter(|(d, _)| d.index == index)
            .flat_map(|(_, ps)| ps.iter().map(|p| p.pid))
            .collect();
        let (file, suspects, not_seen) = match (self.files.file(index), self.scan) {
            (Err(why), _) => (Err(why), Vec::new(), Ok(Vec::new())),
            (Ok((file, _)), None | Some(Err(_))) => {
                let why = match self.scan {
                    Some(Err(why)) => why.clone(),
                    _ => "no scan of descriptors was made".into(),
                };
                (Ok(file), Vec::new(), Err(why))
            }
            (Ok((file, minor)), Some(Ok(scan))) => {
                let suspects =
                    suspects::judge(procfs, scan, minor, charged, &|p| listed.contains(&p));
                let gaps = scan.stats_at(Instant::now()).not_seen();
                (Ok(file), suspects, Ok(gaps))
            }
        };
        if let Err(why) = &file {
            evidence.push(why.clone());
        }
        if let Ok(f) = &file {
            evidence.extend(suspects::lines(f, &suspects));
            match &not_seen {
                Ok(gaps) if gaps.is_empty() && suspects.is_empty() => evidence.push(format!(
                    "no process but those the driver lists holds {f} (a scan that saw every \
                     process of the host and its descriptors)"
                )),
                Ok(gaps) => evidence.extend(gaps.iter().cloned()),
                Err(why) => evidence.push(why.clone()),
            }
        }
        let holders = suspects
            .iter()
            .filter(|s| !matches!(s.standing, Standing::Exempt(_)))
            .map(|s| s.pid)
            .collect();
        let remedy = rule::remedy(&Evidence::NotHere(rule::Holders {
            file: file.clone(),
            not_seen,
            suspects,
        }));
        // The other tenants a reset would end: the listed processes that are here.
        let tenants: Vec<u32> = self
            .devices
            .iter()
            .filter(|(d, _)| d.index == index)
            .flat_map(|(_, ps)| ps.iter())
            .filter(|p| p.unreadable.is_none() && Some(p.pid) != charged.pid)
            .map(|p| p.pid)
            .collect();
        if remedy == super::Remedy::GpuReset && !tenants.is_empty() {
            let what = match tenants.len() {
                1 => "the process".to_owned(),
                n => format!("the {n} processes"),
            };
            evidence.push(format!(
                "a GPU reset also ends {what} the driver lists on GPU {index}: {}",
                join(&tenants)
            ));
        }
        (evidence, holders, remedy)
    }
}

/// A ghost, or a fact about a row that is none.
enum Either {
    Ghost(Box<Ghost>),
    Fact(GhostFact),
}

/// What a row found as `f` is.
fn ghost_of(look: &Look<'_>, held: &Held<'_>, p: &GpuProcessEntry, f: Found) -> Option<Either> {
    let procfs = look.procfs;
    let ghost = |class, evidence, holders, remedy| {
        Some(Either::Ghost(Box::new(Ghost {
            class,
            device_index: p.device_index,
            pid: Some(p.pid),
            name: p.name.clone(),
            bytes: p.used_bytes,
            holders,
            evidence,
            remedy,
        })))
    };
    match f {
        Found::NotHere(first) => {
            let charged = Charged {
                pid: Some(p.pid),
                compute_only: p.context == Some(GpuContextKind::Compute),
            };
            let class = if p.unreadable == Some(UnreadableReason::Exited) {
                GhostClass::Exited
            } else {
                GhostClass::Unaccounted
            };
            let (evidence, holders, remedy) =
                held.not_here(procfs, p.device_index, first, &charged);
            ghost(class, evidence, holders, remedy)
        }
        Found::Unreaped { ppid } => {
            let line = format!(
                "state Z (zombie), all its threads ended, not reaped by its parent {ppid}{}",
                named(procfs, ppid)
            );
            let remedy = rule::remedy(&Evidence::Unreaped { parent: ppid });
            ghost(GhostClass::Zombie, vec![line], Vec::new(), remedy)
        }
        Found::ZombieLeader { live } => {
            let line = format!(
                "state Z (zombie) as thread-group leader, while {} of its threads still run: {}",
                live.len(),
                join(&live)
            );
            Some(judged_by_activity(look, p, GhostClass::Zombie, vec![line]))
        }
        Found::Orphan { ppid, leader, of } => {
            let lines = vec![
                format!("the leader {leader} of its {of} is gone"),
                format!("its parent is now {ppid}{}", named(procfs, ppid)),
            ];
            Some(judged_by_activity(look, p, GhostClass::Orphan, lines))
        }
        Found::GonePod(gone) => {
            let remedy = rule::remedy(&Evidence::GonePod {
                pid: p.pid,
                confirmed: gone.confirmed,
            });
            ghost(GhostClass::GonePod, gone.evidence, Vec::new(), remedy)
        }
        Found::Idle(evidence) => {
            let remedy = rule::remedy(&Evidence::Here {
                pid: p.pid,
                activity: Activity::Idle,
            });
            ghost(GhostClass::Idle, evidence, Vec::new(), remedy)
        }
        Found::InD { .. } => None,
    }
}

/// A row whose structure (`lines`) would make it a ghost of `class`: one only when it is also
/// idle by the driver's samples; at work, or not known, a fact on its row.
fn judged_by_activity(
    look: &Look<'_>,
    p: &GpuProcessEntry,
    class: GhostClass,
    mut lines: Vec<String>,
) -> Either {
    let mut notes = BTreeSet::new();
    let (activity, more) = activity_of(look, p, &mut notes);
    if activity == Activity::Idle {
        lines.extend(more);
        let remedy = rule::remedy(&Evidence::Here {
            pid: p.pid,
            activity,
        });
        return Either::Ghost(Box::new(Ghost {
            class,
            device_index: p.device_index,
            pid: Some(p.pid),
            name: p.name.clone(),
            bytes: p.used_bytes,
            holders: Vec::new(),
            evidence: lines,
            remedy,
        }));
    }
    lines.push(match activity {
        Activity::Busy => format!(
            "at work by the driver's activity samples within {}: not a ghost",
            idle::shown(idle::micros(look.options.idle_after))
        ),
        Activity::Unknown(why) => {
            format!("whether it is idle is not known ({why}): not called a ghost")
        }
        Activity::Idle => String::new(),
    });
    Either::Fact(GhostFact {
        class,
        device_index: p.device_index,
        pid: p.pid,
        evidence: lines,
    })
}

/// The driver's verdict on `p`'s activity, with the evidence of an idle one; what is not known
/// is noted once a GPU.
fn activity_of(
    look: &Look<'_>,
    p: &GpuProcessEntry,
    notes: &mut BTreeSet<Failure>,
) -> (Activity, Vec<String>) {
    let Some(activity) = look.activity.get(&p.device_index) else {
        let why = "its activity was not read".to_owned();
        notes.insert(Failure::new(
            ErrorKind::Other,
            format!(
                "GPU {}: whether its holders are idle is not known: {why}",
                p.device_index
            ),
        ));
        return (Activity::Unknown(why), Vec::new());
    };
    let age = || look::age(look.procfs, p.pid);
    match activity.verdict(p.pid, age, look.options.idle_after, look.now_us) {
        idle::Verdict::Idle(evidence) => (Activity::Idle, evidence),
        idle::Verdict::Busy => (Activity::Busy, Vec::new()),
        idle::Verdict::Unknown(why) => {
            // The driver's reason comes as words (`ProcessActivity::Unknown`): no kind is
            // read from them.
            notes.insert(Failure::new(
                ErrorKind::Other,
                format!(
                    "GPU {}: whether its holders are idle is not known: {why}",
                    p.device_index
                ),
            ));
            (Activity::Unknown(why), Vec::new())
        }
    }
}

/// Each row's reading; what could not be looked at goes to `report.unseen` (a row) or
/// `notes` (a whole GPU or node, once).
fn find<'a>(
    look: &Look<'_>,
    memory: &mut Memory,
    files: &Files,
    devices: &'a [(GpuDeviceInfo, Vec<GpuProcessEntry>)],
    report: &mut GhostReport,
    notes: &mut BTreeSet<Failure>,
) -> Vec<(&'a GpuProcessEntry, Found)> {
    let procfs = look.procfs;
    let mut found = Vec::new();
    let mut leaders = Leaders::default();
    for p in devices.iter().flat_map(|(_, procs)| procs) {
        match p.unreadable {
            Some(UnreadableReason::Exited) if !look::exists(procfs, p.pid) => {
                found.push((p, Found::NotHere(exited_line(procfs, p.pid))));
            }
            Some(UnreadableReason::NoSuchPid) => found.push((
                p,
                Found::NotHere(format!(
                    "the driver charges pid {}, which no process here can have (above pid_max, \
                     in the initial PID namespace)",
                    p.pid
                )),
            )),
            Some(why) => {
                report.complete = false;
                report.unseen.push(Failure::new(
                    unreadable_kind(why),
                    format!(
                        "pid {} on GPU {} ({} MiB): {why}",
                        p.pid,
                        p.device_index,
                        p.used_bytes >> 20
                    ),
                ));
            }
            None => {
                if let Some(f) = live(look, memory, files, p, &mut leaders, notes) {
                    found.push((p, f));
                }
            }
        }
    }
    found
}

/// The line saying the charged process is gone, naming the thread its number now is, if one.
fn exited_line(procfs: &Path, pid: u32) -> String {
    use crate::host::process::leader::{Leader, of};
    if of(procfs, pid) == Leader::Thread {
        let owner = crate::host::process::leader::tgid(procfs, pid).map_or_else(String::new, |t| {
            format!(" of process {t}{}", named(procfs, t))
        });
        return format!(
            "pid {pid} no longer names a process: the number is now a thread{owner}, and this \
             PID namespace is seen whole"
        );
    }
    format!("pid {pid} no longer exists, and this PID namespace is seen whole")
}

/// A live listed row's reading; `None` when it is no ghost nor fact, or cannot be read.
fn live(
    look: &Look<'_>,
    memory: &mut Memory,
    files: &Files,
    p: &GpuProcessEntry,
    leaders: &mut Leaders,
    notes: &mut BTreeSet<Failure>,
) -> Option<Found> {
    let procfs = look.procfs;
    // Its state and relations, where its `stat` can be read (its pod and activity are asked
    // either way).
    let stat = look
        .stats
        .get(&p.pid)
        .copied()
        .or_else(|| look::stat(procfs, p.pid));
    if let Some((ids, start)) = stat {
        if matches!(ids.state, 'Z' | 'X') {
            let live = look::live_threads(procfs, p.pid).unwrap_or_default();
            return Some(if live.is_empty() {
                Found::Unreaped { ppid: ids.ppid }
            } else {
                Found::ZombieLeader { live }
            });
        }
        if let Some(line) = not_charged(look, memory, files, p, start) {
            return Some(Found::NotHere(line));
        }
        if ids.state == 'D'
            && let Some(switches) = stuck::in_d(procfs, p.pid)
        {
            return Some(Found::InD { switches });
        }
        if let Some(f) = orphan(procfs, p.pid, &ids, leaders) {
            return Some(f);
        }
    }
    if let Some(gone) = look.pods.gone(procfs, p.pid, notes) {
        return Some(Found::GonePod(gone));
    }
    if p.used_bytes == 0 {
        return None;
    }
    match activity_of(look, p, notes) {
        (Activity::Idle, evidence) => Some(Found::Idle(evidence)),
        _ => None,
    }
}

/// The line saying a live listed pid is not the process the driver charges: it holds no
/// descriptor of the GPU's device file (its number reused by another process, or the driver
/// numbering another PID namespace's). `None` when it holds one, or that cannot be read (an
/// MPS client, whose server holds the context; another user's descriptors; no device file
/// known).
fn not_charged(
    look: &Look<'_>,
    memory: &mut Memory,
    files: &Files,
    p: &GpuProcessEntry,
    start: u64,
) -> Option<String> {
    if p.context.is_some_and(GpuContextKind::mps) {
        return None;
    }
    let (file, minor) = files.file(p.device_index).ok()?;
    if memory.holding.contains(&(p.pid, start, minor)) {
        return None;
    }
    let majors = *files.majors.as_ref().ok()?;
    let held = holders::descriptors(look.procfs, p.pid, majors).ok()?;
    if held.gpus.contains(&minor) {
        memory.holding.insert((p.pid, start, minor));
        return None;
    }
    Some(format!(
        "pid {} here is {}, which holds no descriptor of {file}: not the process the driver \
         charges (its number was reused, or the driver numbers another PID namespace's \
         processes)",
        p.pid,
        crate::host::process::procfs::comm(look.procfs, p.pid).unwrap_or_else(|| "?".into())
    ))
}

/// The rows in `D` that are stuck: continuously, by their context switches, for the options'
/// `stuck_after` (a single look looks again after it; a watch compares with its earlier
/// looks); what `memory` keeps of those in `D` now.
fn stuck_now(
    look: &Look<'_>,
    memory: &mut Memory,
    found: &[(&GpuProcessEntry, Found)],
) -> Vec<Ghost> {
    let in_d: Vec<(&GpuProcessEntry, u64)> = found
        .iter()
        .filter_map(|(p, f)| match f {
            Found::InD { switches } => Some((*p, *switches)),
            _ => None,
        })
        .collect();
    let after = look.options.stuck_after;
    let mut stuck = Vec::new();
    if look.single {
        if in_d.is_empty() {
            return stuck;
        }
        std::thread::sleep(after);
        for (p, first) in in_d {
            if stuck::in_d(look.procfs, p.pid) == Some(first) {
                stuck.push(stuck_ghost(look, p, after));
            }
        }
        return stuck;
    }
    let now = Instant::now();
    let mut next = BTreeMap::new();
    for (p, switches) in in_d {
        let since = match memory.in_d.get(&p.pid) {
            Some(&(since, before)) if before == switches => since,
            _ => now,
        };
        next.insert(p.pid, (since, switches));
        let held = now.saturating_duration_since(since);
        if held >= after && held > Duration::ZERO {
            stuck.push(stuck_ghost(look, p, held));
        }
    }
    memory.in_d = next;
    stuck
}

fn stuck_ghost(look: &Look<'_>, p: &GpuProcessEntry, held: Duration) -> Ghost {
    let wait = stuck::wait(look.procfs, p.pid);
    let mut evidence = vec![format!(
        "state D (uninterruptible sleep) without a context switch for {}",
        apart_text(held)
    )];
    match &wait {
        rule::Wait::InDriver(w) => evidence.push(format!("waiting in {w}, in the NVIDIA driver")),
        rule::Wait::Elsewhere(w) => evidence.push(format!("waiting in {w}")),
        rule::Wait::Unknown => evidence.push("where it waits cannot be read".into()),
    }
    Ghost {
        class: GhostClass::Stuck,
        device_index: p.device_index,
        pid: Some(p.pid),
        name: p.name.clone(),
        bytes: p.used_bytes,
        holders: Vec::new(),
        evidence,
        remedy: rule::remedy(&Evidence::Stuck { wait }),
    }
}

/// Each device's allocated memory beyond its listed processes and the driver's allowance.
fn unaccounted(devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)]) -> Vec<(&GpuDeviceInfo, u64)> {
    devices
        .iter()
        .filter_map(|(info, procs)| {
            let beyond = info.unaccounted_bytes(procs)?;
            (beyond > 0).then_some((info, beyond))
        })
        .collect()
}

/// Whether each process group or session leader asked about in one look is there: the rows of
/// one job share their leaders, so each is looked up once a look, not once a row.
#[derive(Default)]
pub(crate) struct Leaders(BTreeMap<u32, bool>);

impl Leaders {
    pub(crate) fn exists(&mut self, procfs: &Path, pid: u32) -> bool {
        *self
            .0
            .entry(pid)
            .or_insert_with(|| look::exists(procfs, pid))
    }
}

/// An orphan's reading from `ids`: not the leader of its process group or session, whose
/// leader is gone (two lookups, what most processes stop at), and reparented: to init, or to a
/// subreaper in another session than its own.
fn orphan(
    procfs: &Path,
    pid: u32,
    ids: &crate::host::parse::stat::StatIds,
    leaders: &mut Leaders,
) -> Option<Found> {
    let mut gone = |leader: u32| leader != 0 && leader != pid && !leaders.exists(procfs, leader);
    let (leader, of) = if gone(ids.pgrp) {
        (ids.pgrp, "process group")
    } else if gone(ids.session) {
        (ids.session, "session")
    } else {
        return None;
    };
    let reparented = ids.ppid <= 1
        || look::ids(procfs, ids.ppid).is_some_and(|parent| parent.session != ids.session);
    reparented.then_some(Found::Orphan {
        ppid: ids.ppid,
        leader,
        of,
    })
}

/// A span: whole seconds and up as [`idle::shown`], less in milliseconds.
fn apart_text(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        idle::shown(idle::micros(d))
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// ` (name)` of `pid` where its name can be read.
fn named(procfs: &Path, pid: u32) -> String {
    crate::host::process::procfs::comm(procfs, pid).map_or_else(String::new, |n| format!(" ({n})"))
}

fn join(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}
