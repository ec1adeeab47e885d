//! `hmn watch [PID…]`: follow processes' RAM and GPU memory over time.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::spill::{SpillMachine, SpillSample, SpillThresholds};

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::sampler::{Frame, Sampler, Want, max_opt};
use crate::collect::stop::Stop;
use crate::collect::ticker::{Tick, Ticker};
use crate::outcome::Outcome;
use crate::view::watch::{self as render, Followed, Row, delta};

/// Options of `hmn watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Process ids to follow; without any, the top GPU memory holders.
    #[arg(value_name = "PID")]
    pub pids: Vec<u32>,
    /// Time between samples.
    #[arg(long, default_value = "1s", value_parser = args::duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C or every process has exited).
    #[arg(long, value_parser = args::duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Without pids, follow this many of the largest GPU memory holders (at least 1); processes
    /// that start holding memory later are picked up.
    #[arg(long, default_value_t = 5, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// One followed process.
#[derive(Debug, Clone)]
struct Target {
    pid: u32,
    name: Option<String>,
    /// Owner and command line, read once when the process is first followed.
    user: Option<String>,
    command: Option<String>,
    start: Option<u64>,
    first: Option<(Option<u64>, Option<u64>)>,
    last: (Option<u64>, Option<u64>),
    peak: (Option<u64>, Option<u64>),
    ended: Option<&'static str>,
    /// Picked up after the start (shown once as `new`).
    new: bool,
}

impl Target {
    /// Process `pid`, when it exists (a zombie does not).
    fn new(pid: u32) -> Option<Self> {
        let start = hypomnesis::process_start_time(pid)?;
        let ctx = hypomnesis::process_context(pid);
        Some(Self {
            pid,
            name: hypomnesis::process_name(pid),
            user: ctx.user,
            command: ctx.command,
            start: Some(start),
            first: None,
            last: (None, None),
            peak: (None, None),
            ended: None,
            new: false,
        })
    }

    /// This tick's row, and the target's state folded forward.
    fn row(&mut self, frame: &Frame, spill: Option<bool>) -> Row {
        let start_now = hypomnesis::process_start_time(self.pid);
        let rss = frame.rss.get(&self.pid).copied().flatten();
        let event = match (self.start, start_now) {
            (Some(a), Some(b)) if a != b => Some("pid reused"),
            (Some(_), None) => Some("exited"),
            _ if rss.is_none() && self.first.is_some() && self.last.0.is_some() => Some("exited"),
            _ => None,
        };
        let shown_event = event.or_else(|| std::mem::take(&mut self.new).then_some("new"));
        let gpu = frame
            .gpu_by_pid_all()
            .map(|m| m.get(&self.pid).copied().unwrap_or(0));
        let (rss, gpu) = if event.is_some() {
            (None, None)
        } else {
            (rss, gpu)
        };
        let row = Row {
            t_ms: frame.at.as_millis(),
            pid: self.pid,
            name: self.name.clone(),
            user: self.user.clone(),
            command: self.command.clone(),
            rss_bytes: rss,
            rss_delta_bytes: delta(rss, self.last.0),
            gpu_bytes: gpu,
            gpu_delta_bytes: delta(gpu, self.last.1),
            event: shown_event.map(String::from),
            spill,
        };
        if let Some(e) = event {
            self.ended = Some(e);
        } else {
            self.first.get_or_insert((rss, gpu));
            self.last = (rss, gpu);
            self.peak = (max_opt(self.peak.0, rss), max_opt(self.peak.1, gpu));
        }
        row
    }
}

/// The largest GPU holders in `frame`, by total across devices.
fn top_holders(frame: &Frame, n: u32) -> Vec<u32> {
    let mut v: Vec<(u32, u64)> = frame
        .gpu_by_pid_all()
        .unwrap_or_default()
        .into_iter()
        .collect();
    v.sort_by_key(|(p, b)| (std::cmp::Reverse(*b), *p));
    v.into_iter()
        .take(usize::try_from(n).unwrap_or(usize::MAX))
        .map(|(p, _)| p)
        .collect()
}

/// The SPILL column: one tracker per GPU whose residency is measurable (Windows WDDM).
struct Spill {
    trackers: Vec<Option<SpillMachine>>,
}

impl Spill {
    fn new(frame: &Frame) -> Self {
        let trackers = frame
            .devices
            .iter()
            .map(|d| match &d.residency {
                Some(Ok(r)) => Some(SpillMachine::new(
                    r.capacity_bytes,
                    SpillThresholds::default(),
                )),
                _ => None,
            })
            .collect();
        Self { trackers }
    }

    fn measurable(&self) -> bool {
        self.trackers.iter().any(Option::is_some)
    }

    /// Whether any GPU is spilling at this frame; `None` when none is measurable.
    fn observe(&mut self, frame: &Frame) -> Option<bool> {
        let mut spilling = None;
        for (t, d) in self.trackers.iter_mut().zip(&frame.devices) {
            if let (Some(t), Some(Ok(r))) = (t.as_mut(), &d.residency) {
                let now = t.observe(SpillSample::new(
                    frame.at,
                    r.dedicated_bytes,
                    r.shared_bytes,
                ));
                spilling = Some(spilling.unwrap_or(false) || now);
            }
        }
        spilling
    }
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

pub fn run(args: &WatchArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let started = Instant::now();
    let first = Sampler::new(Want {
        processes: true,
        residency: true,
        ..Want::default()
    })
    .frame(&[]);
    let mut targets = Vec::new();
    for &pid in &args.pids {
        match Target::new(pid) {
            Some(t) => targets.push(t),
            None => writeln!(err, "hmn watch: no process {pid}")?,
        }
    }
    if !args.pids.is_empty() && targets.is_empty() {
        return Ok(Outcome::MeasurementFailed);
    }
    // Without pids, the largest holders now and any that start holding memory later.
    let discover = args.pids.is_empty();
    if discover {
        targets.extend(
            top_holders(&first, args.top)
                .into_iter()
                .filter_map(Target::new),
        );
        if targets.is_empty() {
            writeln!(
                err,
                "hmn watch: no process holds GPU memory yet; waiting for one (Ctrl-C stops; or name pids: hmn watch PID…)"
            )?;
        }
    }
    let mut spill = Spill::new(&first);
    let sampler = Sampler::new(Want {
        processes: true,
        residency: spill.measurable(),
        ..Want::default()
    });
    let mut ticker = Ticker::new(args.interval, args.duration, Stop::on_signals());
    loop {
        let live: Vec<u32> = targets
            .iter()
            .filter(|t| t.ended.is_none())
            .map(|t| t.pid)
            .collect();
        let mut frame = sampler.frame(&live);
        if discover {
            pick_up(&mut targets, &mut frame, args.top);
        }
        let spilling = spill.observe(&frame);
        for t in targets.iter_mut().filter(|t| t.ended.is_none()) {
            write_row(out, args.output.json, &t.row(&frame, spilling))?;
        }
        let all_ended = !discover && targets.iter().all(|t| t.ended.is_some());
        if all_ended || ticker.wait(|| false) != Tick::Due {
            break;
        }
    }
    closing(&targets, started, err)?;
    Ok(ticker
        .stopped_by()
        .map_or(Outcome::Success, Outcome::stopped_by))
}

/// Adds the processes among the `top` largest holders of `frame` not followed yet (their RSS
/// read into the frame), marked new.
fn pick_up(targets: &mut Vec<Target>, frame: &mut Frame, top: u32) {
    for pid in top_holders(frame, top) {
        if targets.iter().any(|t| t.pid == pid && t.ended.is_none()) {
            continue;
        }
        if let Some(mut t) = Target::new(pid) {
            t.new = true;
            frame.rss.insert(pid, hypomnesis::process_rss_of(pid).ok());
            targets.push(t);
        }
    }
}

/// The summary on stderr: how many processes over how long, then each one's baseline and peak.
fn closing(targets: &[Target], started: Instant, err: &mut impl Write) -> io::Result<()> {
    writeln!(
        err,
        "hmn watch: {} process(es) over {:.1} s",
        targets.len(),
        started.elapsed().as_secs_f64()
    )?;
    for t in targets {
        let line = render::closing(&Followed {
            pid: t.pid,
            name: t.name.as_deref(),
            command: t.command.as_deref(),
            baseline: t.first.unwrap_or((None, None)),
            peak: t.peak,
            ended: t.ended,
        });
        writeln!(err, "{line}")?;
    }
    Ok(())
}
