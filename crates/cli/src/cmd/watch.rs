//! `hmn watch [PID…]`: follow processes' GPU memory on one GPU (and their RAM) over time.
//!
//! Without pids it follows the GPU's largest holders at the start (`--top`, narrowed by
//! `--filter` and `--min`), or at every sample with `--follow-new`. The exit status says
//! whether the GPU spilled (Windows WDDM): 0 no spill seen, 1 a spill seen, 2 a hard error.

use std::collections::{BTreeMap, HashSet};
use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime};

use clap::Args;
use hypomnesis::spill::{DEFAULT_SHARED_GROWTH_BYTES, SpillSample};
use hypomnesis::{GpuProcessEntry, HypomnesisError, SpillReport, SpillTracker};

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::neighbours::Neighbours;
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use crate::view::format_size;
use crate::view::run::NeighbourGpu;
use crate::view::spill::{ReportKeys, render_episodes};
use crate::view::watch::{
    self as render, Followed, PerPid, Row, Selection, Start, WatchSummary, delta, utc_millis,
};
use hypomnesis::sampling::{Frame, Sampler, Tick, Ticker, Want, max_opt};

/// Options of `hmn watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Process ids to follow; without any, the largest GPU memory holders.
    #[arg(value_name = "PID")]
    pub pids: Vec<u32>,
    /// Time between samples (a bare number is seconds: 5, 500ms, 2m).
    #[arg(long, default_value = "5s", value_parser = args::duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C, or until every process followed has
    /// exited).
    #[arg(long, value_parser = args::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Without pids, follow this many of the GPU's largest holders (by VRAM), at least 1.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,
    /// Without pids, choose the largest holders again at every sample, so that processes that
    /// start holding memory later are followed too (else the set chosen at the start is kept).
    #[arg(long)]
    pub follow_new: bool,
    /// Without pids, only processes whose name contains PATTERN, ignoring case; repeat it for
    /// several (any matches).
    #[arg(long, value_name = "PATTERN")]
    pub filter: Vec<String>,
    /// Without pids, only processes whose footprint (VRAM + shared) is at least SIZE.
    #[arg(long, value_parser = args::size, value_name = "SIZE")]
    pub min: Option<u64>,
    /// The GPU to watch (index as in `hmn`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub device: u32,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// Who holds memory: a process of this PID namespace, by its pid, or one outside it, by the
/// driver's number (which a local process may have too: the two are never mixed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    Here(u32),
    Outside(u32),
}

impl Who {
    /// The number shown.
    fn pid(self) -> u32 {
        match self {
            Self::Here(p) | Self::Outside(p) => p,
        }
    }

    /// The pid of this namespace, when it has one.
    fn local(self) -> Option<u32> {
        match self {
            Self::Here(p) => Some(p),
            Self::Outside(_) => None,
        }
    }
}

/// One holder's memory on one GPU in one frame: its rows added up.
#[derive(Debug, Clone, Default)]
struct Held {
    used: u64,
    shared: u64,
    name: Option<String>,
}

/// The holders of GPU `index` in `frame`; `None` when its list was not read.
fn held(frame: &Frame, index: u32) -> Option<BTreeMap<Who, Held>> {
    let rows: &[GpuProcessEntry] = usize::try_from(index)
        .ok()
        .and_then(|i| frame.devices.get(i))?
        .processes()?;
    let mut out: BTreeMap<Who, Held> = BTreeMap::new();
    for r in rows {
        let who = r.local_pid().map_or(Who::Outside(r.pid), Who::Here);
        let h = out.entry(who).or_default();
        h.used = h.used.saturating_add(r.used_bytes);
        h.shared = h.shared.saturating_add(r.shared_used_bytes);
        if h.name.is_none() {
            h.name.clone_from(&r.name);
        }
    }
    Some(out)
}

/// Who to pick: `--top`, `--filter`, `--min`.
struct Rule<'a> {
    top: u32,
    filters: &'a [String],
    min: Option<u64>,
}

impl<'a> Rule<'a> {
    fn of(args: &'a WatchArgs) -> Self {
        Self {
            top: args.top,
            filters: &args.filter,
            min: args.min,
        }
    }

    /// The holders the rule picks, largest VRAM first.
    fn pick(&self, held: &BTreeMap<Who, Held>) -> Vec<Who> {
        let lower: Vec<String> = self.filters.iter().map(|f| f.to_lowercase()).collect();
        let mut v: Vec<(Who, u64)> = held
            .iter()
            .filter(|(_, h)| {
                lower.is_empty()
                    || h.name.as_deref().is_some_and(|n| {
                        let n = n.to_lowercase();
                        lower.iter().any(|f| n.contains(f))
                    })
            })
            .filter(|(_, h)| {
                self.min
                    .is_none_or(|m| h.used.saturating_add(h.shared) >= m)
            })
            .map(|(&w, h)| (w, h.used))
            .collect();
        v.sort_by_key(|&(w, b)| (std::cmp::Reverse(b), w.pid(), w));
        v.into_iter()
            .take(usize::try_from(self.top).unwrap_or(usize::MAX))
            .map(|(p, _)| p)
            .collect()
    }
}

/// One followed process.
#[derive(Debug, Clone)]
struct Target {
    who: Who,
    pid: u32,
    name: Option<String>,
    /// Owner and command line, read once when the process is first followed.
    user: Option<String>,
    command: Option<String>,
    start: Option<u64>,
    /// RSS, VRAM and shared memory at the first sample, the previous one, and the peaks.
    first: Option<[Option<u64>; 3]>,
    last: [Option<u64>; 3],
    peak: [Option<u64>; 3],
    /// Whether it was paged at some sample (`None` while spill is not measured).
    paged: Option<bool>,
    ended: Option<&'static str>,
    /// Picked up after the start (shown once as `new`).
    new: bool,
}

impl Target {
    /// Process `who` (it may not exist: it is followed all the same). One outside this PID
    /// namespace has nothing to read here: its name is the listing's, when it has one.
    fn new(who: Who, listed_name: Option<&str>) -> Self {
        let listed = || listed_name.map(str::to_owned);
        let (name, ctx, start) = match who.local() {
            Some(pid) => (
                hypomnesis::process_name(pid).or_else(listed),
                hypomnesis::process_context(pid),
                hypomnesis::process_start_time(pid),
            ),
            None => (listed(), hypomnesis::ProcessContext::default(), None),
        };
        Self {
            who,
            pid: who.pid(),
            name,
            user: ctx.user,
            command: ctx.command,
            start,
            first: None,
            last: [None; 3],
            peak: [None; 3],
            paged: None,
            ended: None,
            new: false,
        }
    }

    /// This sample's row, and the target's state folded forward.
    fn row(&mut self, s: &IntervalRows<'_>) -> Row {
        let start_now = self.who.local().and_then(hypomnesis::process_start_time);
        let rss = self
            .who
            .local()
            .and_then(|p| s.frame.rss.get(&p).copied().flatten());
        let event = match (self.start, start_now) {
            (Some(a), Some(b)) if a != b => Some("pid reused"),
            (Some(_), None) => Some("exited"),
            _ if rss.is_none() && self.first.is_some() && self.last[0].is_some() => Some("exited"),
            _ => None,
        };
        let shown_event = event.or_else(|| std::mem::take(&mut self.new).then_some("new"));
        let on_gpu = s
            .held
            .map(|m| m.get(&self.who).cloned().unwrap_or_default());
        // Exited, its pid still listed by the driver: the memory is still charged to it, and
        // that figure is the driver's to give (a reused pid's is another process's).
        let charged = s
            .held
            .and_then(|m| m.get(&self.who))
            .filter(|_| event == Some("exited"));
        let now = match (event, charged) {
            (None, _) => [
                rss,
                on_gpu.as_ref().map(|h| h.used),
                on_gpu.as_ref().map(|h| h.shared),
            ],
            (Some(_), Some(h)) => [None, Some(h.used), Some(h.shared)],
            (Some(_), None) => [None; 3],
        };
        let paged = match (s.spilling, now[2]) {
            (Some(sp), Some(shared)) => Some(sp && shared >= DEFAULT_SHARED_GROWTH_BYTES),
            (Some(_), None) => Some(false),
            (None, _) => None,
        };
        let row = Row {
            kind: "sample",
            t_ms: s.frame.at.as_millis(),
            wall_clock: s.wall_clock.to_owned(),
            pid: self.pid,
            name: self.name.clone(),
            used_bytes: now[1],
            used_delta: delta(now[1], self.last[1]),
            shared_bytes: now[2],
            shared_delta: delta(now[2], self.last[2]),
            spilling: s.spilling,
            paged,
            outside_pid_namespace: self.who.local().is_none(),
            user: self.user.clone(),
            command: self.command.clone(),
            rss_bytes: now[0],
            rss_delta_bytes: delta(now[0], self.last[0]),
            gpu_bytes: now[1],
            gpu_delta_bytes: delta(now[1], self.last[1]),
            event: shown_event.map(String::from),
            spill: s.spilling,
        };
        if let Some(e) = event {
            self.ended = Some(e);
            for (p, n) in self.peak.iter_mut().zip(now).skip(1) {
                *p = max_opt(*p, n);
            }
        } else {
            self.first.get_or_insert(now);
            self.last = now;
            for (p, n) in self.peak.iter_mut().zip(now) {
                *p = max_opt(*p, n);
            }
            if let Some(p) = paged {
                self.paged = Some(self.paged.unwrap_or(false) || p);
            }
        }
        row
    }

    fn per_pid(&self) -> PerPid {
        let first = self.first.unwrap_or([None; 3]);
        PerPid {
            pid: self.pid,
            name: self.name.clone(),
            baseline_used_bytes: first[1],
            peak_used_bytes: self.peak[1],
            baseline_shared_bytes: first[2],
            peak_shared_bytes: self.peak[2],
            paged: self.paged,
            baseline_rss_bytes: first[0],
            peak_rss_bytes: self.peak[0],
            ended: self.ended,
        }
    }
}

/// What one interval's rows share.
struct IntervalRows<'a> {
    frame: &'a Frame,
    held: Option<&'a BTreeMap<Who, Held>>,
    wall_clock: &'a str,
    spilling: Option<bool>,
}

fn write_row(out: &mut impl Write, json: bool, row: &Row) -> io::Result<()> {
    if json {
        crate::view::json_line(&mut *out, row)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", render::row(row))?;
    }
    out.flush()
}

/// A hard error: said on stderr, exit 2.
fn hard(err: &mut impl Write, why: &str) -> io::Result<Outcome> {
    writeln!(err, "hmn watch: {why}")?;
    Ok(Outcome::Code(2))
}

/// What the watch starts from: the GPU, the processes chosen, the spill tracker.
struct Attached {
    device_name: Option<String>,
    targets: Vec<Target>,
    tracker: Option<SpillTracker>,
    spilling_at_attach: Option<bool>,
}

/// The options that do not go together, and the GPU: `Err` is a hard error's outcome.
fn check(args: &WatchArgs, err: &mut impl Write) -> io::Result<Result<(), Outcome>> {
    if !args.pids.is_empty() && (args.follow_new || !args.filter.is_empty() || args.min.is_some()) {
        return hard(
            err,
            "--follow-new, --filter and --min choose the processes to follow; they cannot be \
             given with pids",
        )
        .map(Err);
    }
    let count = match hypomnesis::device_count() {
        Ok(n) => n,
        Err(HypomnesisError::NoGpuSource) => 0,
        Err(e) => return hard(err, &format!("failed to count devices: {e}")).map(Err),
    };
    if count > 0 && args.device >= count {
        let e = HypomnesisError::DeviceIndexOutOfRange {
            index: args.device,
            count,
        };
        return hard(err, &e.to_string()).map(Err);
    }
    if count == 0 && args.pids.is_empty() && !args.follow_new {
        return hard(
            err,
            "no GPU here, so no process to choose (name pids to follow their RAM)",
        )
        .map(Err);
    }
    Ok(Ok(()))
}

/// Checks the options and the GPU, takes the first frame and chooses what to follow; `Err`
/// is the hard error's outcome (said on `err`).
fn attach(args: &WatchArgs, err: &mut impl Write) -> io::Result<Result<Attached, Outcome>> {
    if let Err(outcome) = check(args, err)? {
        return Ok(Err(outcome));
    }
    let mut want = Want::NONE;
    (want.processes, want.residency) = (true, hypomnesis::is_spill_measurable());
    let first = Sampler::new(want).frame(&[]);
    let first_held = held(&first, args.device);
    let residency = usize::try_from(args.device)
        .ok()
        .and_then(|i| first.devices.get(i))
        .and_then(|d| d.residency.as_ref())
        .and_then(|r| r.as_ref().ok())
        .copied();
    let mut targets: Vec<Target> = Vec::new();
    if args.pids.is_empty() {
        let rule = Rule::of(args);
        let picked = first_held
            .as_ref()
            .map(|h| rule.pick(h))
            .unwrap_or_default();
        if picked.is_empty() && !args.follow_new {
            return hard(err, &nothing_to_pick(&first, args.device, &rule)).map(Err);
        }
        if picked.is_empty() {
            writeln!(
                err,
                "hmn watch: no process on GPU {} is chosen yet; waiting for one (Ctrl-C stops)",
                args.device
            )?;
        }
        let names = first_held.unwrap_or_default();
        targets.extend(
            picked
                .into_iter()
                .map(|w| Target::new(w, names.get(&w).and_then(|h| h.name.as_deref()))),
        );
    } else {
        for &pid in &args.pids {
            if let Some(line) = missing_line(pid, &first, args.device, first_held.as_ref()) {
                writeln!(err, "hmn watch: {line}")?;
            }
            targets.push(Target::new(Who::Here(pid), None));
        }
    }
    Ok(Ok(Attached {
        device_name: hypomnesis::device_info(args.device)
            .ok()
            .and_then(|d| d.name),
        targets,
        tracker: residency.map(|r| SpillTracker::fed(r.capacity_bytes)),
        spilling_at_attach: residency.map(|r| {
            hypomnesis::spill::is_spilling_now(r.dedicated_bytes, r.shared_bytes, r.capacity_bytes)
        }),
    }))
}

/// The `start` record.
fn start_record(args: &WatchArgs, device_name: Option<String>) -> Start {
    Start {
        kind: "start",
        hmn_version: env!("CARGO_PKG_VERSION"),
        argv: argv(),
        device: args.device,
        device_name,
        interval_ms: args.interval.as_millis(),
        duration_ms: args.duration.map(|d| d.as_millis()),
        selection: Selection {
            mode: match (args.pids.is_empty(), args.follow_new) {
                (false, _) => "pids",
                (true, false) => "top",
                (true, true) => "follow_new",
            },
            pids: args.pids.clone(),
            top: args.top,
            filters: args.filter.clone(),
            min_bytes: args.min,
        },
    }
}

/// One JSON Lines record, flushed.
fn record(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    crate::view::json_line(&mut *out, value)?;
    writeln!(out)?;
    out.flush()
}

/// This frame's spill verdict of the watched GPU, folded into the tracker.
fn spilling(tracker: Option<&mut SpillTracker>, frame: &Frame, device: u32) -> Option<bool> {
    let t = tracker?;
    let d = usize::try_from(device).ok()?;
    let r = frame.devices.get(d)?.residency.as_ref()?.as_ref().ok()?;
    let label = format!("{} ms", frame.at.as_millis());
    Some(t.observe_sample(
        label,
        SpillSample::new(frame.at, r.dedicated_bytes, r.shared_bytes),
    ))
}

/// The exit status: 1 when a spill was seen, else 0 (also after a stop signal).
fn answer(report: Option<&SpillReport>) -> Outcome {
    if report.is_some_and(SpillReport::spilled) {
        Outcome::Code(1)
    } else {
        Outcome::Success
    }
}

pub fn run(args: &WatchArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let started = Instant::now();
    let Attached {
        device_name,
        mut targets,
        mut tracker,
        spilling_at_attach,
    } = match attach(args, err)? {
        Ok(a) => a,
        Err(outcome) => return Ok(outcome),
    };
    if args.output.json {
        record(out, &start_record(args, device_name))?;
    }
    let rule = Rule::of(args);
    let mut want = Want::NONE;
    (want.processes, want.residency) = (true, tracker.is_some());
    let sampler = Sampler::new(want);
    let mut ticker = Ticker::new(args.interval, args.duration);
    let stop = Stop::on_signals();
    let mut neighbours = Neighbours::default();
    loop {
        let live: Vec<u32> = targets
            .iter()
            .filter(|t| t.ended.is_none())
            .filter_map(|t| t.who.local())
            .collect();
        let mut frame = sampler.frame(&live);
        let now_held = held(&frame, args.device);
        if args.follow_new
            && let Some(h) = &now_held
        {
            pick_up(&mut targets, &mut frame, &rule.pick(h), h);
        }
        let wall_clock = utc_millis(SystemTime::now());
        let sample = IntervalRows {
            frame: &frame,
            held: now_held.as_ref(),
            wall_clock: &wall_clock,
            spilling: spilling(tracker.as_mut(), &frame, args.device),
        };
        for t in targets.iter_mut().filter(|t| t.ended.is_none()) {
            write_row(out, args.output.json, &t.row(&sample))?;
        }
        // The other processes on the watched GPU: every one not followed.
        let followed: HashSet<u32> = targets.iter().map(|t| t.pid).collect();
        neighbours.add(&frame, &followed);
        let all_ended = !args.follow_new && targets.iter().all(|t| t.ended.is_some());
        if all_ended || ticker.wait(|| stop.requested()) != Tick::Due {
            break;
        }
    }
    let report = tracker.map(SpillTracker::into_report);
    let others: Vec<NeighbourGpu> = neighbours
        .report_all()
        .into_iter()
        .filter(|g| g.index == args.device)
        .collect();
    closing(&targets, started, report.as_ref(), args.device, err)?;
    if !others.is_empty() {
        let mut text = String::new();
        crate::view::run::neighbour_lines(&mut text, &others, "over the watch");
        write!(err, "{text}")?;
    }
    if args.output.json {
        let summary = WatchSummary {
            kind: "summary",
            report: ReportKeys::of(report.as_ref()),
            spilling_at_attach,
            per_pid: targets.iter().map(Target::per_pid).collect(),
            duration_ms: started.elapsed().as_millis(),
            neighbours: others,
        };
        crate::view::unless_closed(record(out, &summary))?;
    }
    // Ctrl-C ends the watch as its duration does: the codes say whether it spilled.
    Ok(answer(report.as_ref()))
}

/// The command line, its program reduced to its file name.
fn argv() -> Vec<String> {
    let mut v: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if let Some(p) = v.first_mut() {
        let name = std::path::Path::new(p.as_str())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        if let Some(n) = name {
            *p = n;
        }
    }
    v
}

/// Why nothing was chosen on GPU `device`, and the GPUs where the same rule would choose
/// something.
fn nothing_to_pick(first: &Frame, device: u32, rule: &Rule<'_>) -> String {
    let narrowed = !rule.filters.is_empty() || rule.min.is_some();
    let what = if narrowed {
        "no process on GPU {d} holds GPU memory and matches --filter/--min"
    } else {
        "no process holds memory on GPU {d}"
    }
    .replace("{d}", &device.to_string());
    let elsewhere: Vec<String> = (0_u32..)
        .zip(&first.devices)
        .filter(|(i, _)| *i != device)
        .filter_map(|(i, _)| {
            let n = rule.pick(&held(first, i)?).len();
            (n > 0).then(|| format!("GPU {i} has {n} (re-run with --device {i})"))
        })
        .collect();
    let hint = if elsewhere.is_empty() {
        String::new()
    } else {
        format!("; {}", elsewhere.join(", "))
    };
    format!("{what}, so there is nothing to watch (--follow-new waits for one){hint}")
}

/// The warning for an explicit pid that does not hold memory on the watched GPU: the GPU it
/// holds memory on, or that it names no running process. `None` when it is on the GPU, or
/// merely holds none anywhere while it runs.
fn missing_line(
    pid: u32,
    first: &Frame,
    device: u32,
    watched: Option<&BTreeMap<Who, Held>>,
) -> Option<String> {
    if watched.is_some_and(|h| h.contains_key(&Who::Here(pid))) {
        return None;
    }
    let other = (0_u32..)
        .zip(&first.devices)
        .filter(|(i, _)| *i != device)
        .find_map(|(i, _)| held(first, i)?.get(&Who::Here(pid)).map(|h| (i, h.used)));
    if let Some((i, used)) = other {
        return Some(format!(
            "pid {pid} holds no memory on GPU {device} but {} on GPU {i}: re-run with --device {i}",
            format_size(used)
        ));
    }
    (hypomnesis::process_exists(pid) == Some(false))
        .then(|| format!("pid {pid} names no running process; following it all the same"))
}

/// Adds the holders of `picked` not followed yet (their RSS read into the frame), marked new.
fn pick_up(
    targets: &mut Vec<Target>,
    frame: &mut Frame,
    picked: &[Who],
    held: &BTreeMap<Who, Held>,
) {
    for &who in picked {
        if targets.iter().any(|t| t.who == who && t.ended.is_none()) {
            continue;
        }
        let mut t = Target::new(who, held.get(&who).and_then(|h| h.name.as_deref()));
        t.new = true;
        if let Some(pid) = who.local() {
            frame.rss.insert(pid, hypomnesis::process_rss_of(pid).ok());
        }
        targets.push(t);
    }
}

/// The summary on stderr: how many processes over how long, each one's baseline and peak, and
/// the GPU's spill episodes where spill is measured.
fn closing(
    targets: &[Target],
    started: Instant,
    report: Option<&SpillReport>,
    device: u32,
    err: &mut impl Write,
) -> io::Result<()> {
    writeln!(
        err,
        "hmn watch: {} process(es) over {:.1} s",
        targets.len(),
        started.elapsed().as_secs_f64()
    )?;
    for t in targets {
        let first = t.first.unwrap_or([None; 3]);
        let line = render::closing(&Followed {
            pid: t.pid,
            name: t.name.as_deref(),
            command: t.command.as_deref(),
            baseline: (first[0], first[1]),
            peak: (t.peak[0], t.peak[1]),
            ended: t.ended,
        });
        writeln!(err, "{line}")?;
    }
    if let Some(r) = report {
        write!(err, "{}", render_episodes(device, r))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_of(rows: &[(u32, &str, u64, u64)]) -> BTreeMap<Who, Held> {
        rows.iter()
            .map(|&(p, n, used, shared)| {
                (
                    Who::Here(p),
                    Held {
                        used,
                        shared,
                        name: (!n.is_empty()).then(|| n.to_string()),
                    },
                )
            })
            .collect()
    }

    fn here(pids: &[u32]) -> Vec<Who> {
        pids.iter().copied().map(Who::Here).collect()
    }

    #[test]
    fn a_spill_seen_is_exit_1() {
        let spilled = SpillReport::builder()
            .measurable(true)
            .episode("1000 ms", None, 1 << 30, 2, Duration::from_secs(1))
            .build();
        let quiet = SpillReport::builder().measurable(true).build();
        assert_eq!(answer(Some(&spilled)), Outcome::Code(1));
        assert_eq!(answer(Some(&quiet)), Outcome::Success);
        assert_eq!(
            answer(None),
            Outcome::Success,
            "not measurable: no spill seen"
        );
        // A tracker fed a full adapter whose shared memory grew says the same.
        let mut t = SpillTracker::fed(8 << 30);
        let mut frame_at = |ms: u64, ded: u64, shared: u64| {
            t.observe_sample(
                format!("{ms} ms"),
                SpillSample::new(Duration::from_millis(ms), ded, shared),
            )
        };
        assert!(!frame_at(0, 1 << 30, 0));
        assert!(frame_at(100, 15 << 29, 1 << 30));
        assert_eq!(answer(Some(&t.into_report())), Outcome::Code(1));
    }

    #[test]
    fn the_rule_picks_the_largest_that_match() {
        let h = held_of(&[
            (10, "python3", 5 << 30, 0),
            (11, "Trainer-Worker-Number-Seven", 8 << 30, 0),
            (12, "", 9 << 30, 0),
            (13, "python3", 100 << 20, 1 << 30),
            (14, "ffmpeg", 1 << 30, 0),
        ]);
        let no = Rule {
            top: 2,
            filters: &[],
            min: None,
        };
        assert_eq!(no.pick(&h), here(&[12, 11]));
        let f = ["PYTHON".to_string(), "worker-number".to_string()];
        let named = Rule {
            top: 5,
            filters: &f,
            min: None,
        };
        assert_eq!(
            named.pick(&h),
            here(&[11, 10, 13]),
            "an unnamed process cannot match"
        );
        let min = Rule {
            top: 5,
            filters: &f,
            min: Some(1 << 30),
        };
        assert_eq!(
            min.pick(&h),
            here(&[11, 10, 13]),
            "shared memory counts toward --min"
        );
        let more = Rule {
            top: 5,
            filters: &[],
            min: Some(6 << 30),
        };
        assert_eq!(more.pick(&h), here(&[12, 11]));
        // A holder outside this PID namespace with the number of a local one is another.
        let mut both = held_of(&[(7, "sleep", 1 << 30, 0)]);
        both.insert(
            Who::Outside(7),
            Held {
                used: 29 << 30,
                shared: 0,
                name: None,
            },
        );
        assert_eq!(no.pick(&both), [Who::Outside(7), Who::Here(7)]);
        assert_eq!(Who::Outside(7).local(), None);
        assert_eq!(Who::Here(7).local(), Some(7));
    }
}
