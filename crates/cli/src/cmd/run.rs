//! `hmn run -- CMD…`: run a command and report the peaks of its whole process tree.

mod gate;
mod members;
mod timeline;

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::{Ghost, GhostOptions, GhostReport, GhostWatch, GpuDeviceInfo};

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::child::{self, Child};
use crate::collect::neighbours::Neighbours;
use crate::collect::stop::Stop;
use crate::engine::Heard;
use crate::engine::ledger::{EngineReport, Follow, GhostHeld, Who};
use crate::outcome::Outcome;
use crate::view::run::{
    self as render, DevicePeak, GhostSeen, Holder, Measure, Point, RamPeak, RunSummary,
};
use hypomnesis::sampling::{Frame, PssPacer, Sampler, Ticker, TreeRam, Want, max_opt};
use members::Members;
use timeline::Timeline;

/// Options of `hmn run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Time between samples, e.g. 100ms or 1s.
    #[arg(long, default_value = "100ms", value_parser = args::duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Write the timeline as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the timeline (the tree's RAM and GPU memory per device) as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Leave the command's output alone (no pseudo-terminal or pipe between it and hmn's
    /// own): no serving engine's lines are read, so no ledger.
    #[arg(long)]
    pub output_as_is: bool,
    #[command(flatten)]
    pub gate: gate::GateArgs,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// How long, once the command ended, what it left in its output is waited for.
const DRAIN: Duration = Duration::from_secs(2);

/// The peaks of a run, folded one point at a time (what the summary needs, whatever the length
/// of the run).
#[derive(Debug, Default)]
struct Peaks {
    samples: usize,
    /// The tree's RAM at its peak sample.
    ram: Option<RamPeak>,
    /// The tree's RSS summed.
    rss_sum: Option<u64>,
    gpu: Option<u64>,
    device_gpu: Vec<Option<u64>>,
    device_used: Vec<Option<u64>>,
    /// The processes of the tree seen holding GPU memory, by pid.
    holders: BTreeMap<u32, Holder>,
    /// Every process of the tree seen, with its peaks.
    members: Members,
    /// The other processes on the GPUs the tree uses.
    neighbours: Neighbours,
    /// The ghosts at the first sample and after the command ended.
    ghosts: [Option<GhostReport>; 2],
}

/// How `ram` was made.
fn measure(ram: &TreeRam) -> Measure {
    if !ram.summed {
        Measure::Rss
    } else if ram.rss_for.is_empty() {
        Measure::Pss
    } else if ram.rss_for.len() >= ram.processes {
        Measure::RssSum
    } else {
        Measure::PssAndRss
    }
}

impl Peaks {
    /// One sample: its point, the tree's RAM it was made of, and the tree's RSS summed.
    fn add(&mut self, p: &Point, ram: Option<&TreeRam>, rss_sum: Option<u64>) {
        self.samples += 1;
        if let Some(r) = ram
            && self.ram.is_none_or(|peak| r.bytes > peak.bytes)
        {
            self.ram = Some(RamPeak {
                bytes: r.bytes,
                measure: measure(r),
                processes: r.processes,
                by_rss: r.rss_for.len(),
            });
        }
        self.rss_sum = max_opt(self.rss_sum, rss_sum);
        let known: Vec<u64> = p.gpu.iter().flatten().copied().collect();
        let total = (!known.is_empty()).then(|| known.into_iter().fold(0, u64::saturating_add));
        self.gpu = max_opt(self.gpu, total);
        fold_each(&mut self.device_gpu, &p.gpu);
        fold_each(&mut self.device_used, &p.device_used);
    }

    /// Each process of `tree` holding GPU memory in `frame`: its peaks, and who it is (read
    /// once, the first time it is seen holding memory).
    fn add_holders(&mut self, frame: &Frame, tree: &[u32]) {
        let Some(by_pid) = frame.gpu_by_pid_all() else {
            return;
        };
        for &pid in tree {
            let Some(&gpu) = by_pid.get(&pid).filter(|&&b| b > 0) else {
                continue;
            };
            let rss = frame.rss.get(&pid).copied().flatten();
            let h = self.holders.entry(pid).or_insert_with(|| {
                let ctx = hypomnesis::process_context(pid);
                Holder {
                    pid,
                    user: ctx.user,
                    command: ctx.command,
                    peak_gpu_bytes: 0,
                    peak_rss_bytes: None,
                }
            });
            h.peak_gpu_bytes = h.peak_gpu_bytes.max(gpu);
            h.peak_rss_bytes = max_opt(h.peak_rss_bytes, rss);
        }
    }

    /// The ghosts on the GPUs the tree used at the end that were not there at the start.
    fn ghosts_appeared(&self) -> Vec<GhostSeen> {
        let [Some(start), Some(end)] = &self.ghosts else {
            return Vec::new();
        };
        let used: HashSet<usize> = self.neighbours.used().into_iter().collect();
        let key = |g: &Ghost| (g.device_index, g.pid, g.class);
        let before: HashSet<_> = start.ghosts.iter().map(key).collect();
        end.ghosts
            .iter()
            .filter(|g| usize::try_from(g.device_index).is_ok_and(|i| used.contains(&i)))
            .filter(|g| !before.contains(&key(g)))
            .map(|g| GhostSeen {
                gpu: g.device_index,
                pid: g.pid,
                name: g.name.clone(),
                class: g.class.as_str(),
                bytes: g.bytes,
                own: g.pid.is_some_and(|p| self.holders.contains_key(&p)),
            })
            .collect()
    }

    /// The engine's report, with the ghosts on its GPU (at the start or the end) beside a
    /// failure, and its processes named as the neighbours' report knows them.
    fn engine_report(&self, follow: &Follow) -> Option<EngineReport> {
        let who = |pid: u32| {
            self.neighbours.who(pid).unwrap_or_else(|| {
                let ctx = hypomnesis::process_context(pid);
                Who {
                    command: ctx.command,
                    pod: ctx.container.and_then(|c| c.pod),
                }
            })
        };
        let mut report = follow.report(&who)?;
        if let (Some(f), Some(gpu)) = (report.failure.as_mut(), report.gpu) {
            let mut seen = HashSet::new();
            for g in self.ghosts.iter().flatten().flat_map(|r| &r.ghosts) {
                if g.device_index == gpu && seen.insert((g.pid, g.class)) {
                    f.ghosts.push(GhostHeld {
                        pid: g.pid,
                        class: g.class.as_str(),
                        bytes: g.bytes,
                    });
                }
            }
        }
        Some(report)
    }

    /// The holders, largest GPU peak first.
    fn holders(&self) -> Vec<Holder> {
        let mut v: Vec<Holder> = self.holders.values().cloned().collect();
        v.sort_by_key(|h| (std::cmp::Reverse(h.peak_gpu_bytes), h.pid));
        v
    }

    fn devices(&self, first: &[Option<GpuDeviceInfo>]) -> Vec<DevicePeak> {
        (0_u32..)
            .zip(first)
            .map(|(i, d)| DevicePeak {
                index: i,
                name: d.as_ref().and_then(|d| d.name.clone()),
                total_bytes: d.as_ref().map(|d| d.total_bytes),
                peak_gpu_bytes: self.device_gpu.get(i as usize).copied().flatten(),
                peak_device_used_bytes: self.device_used.get(i as usize).copied().flatten(),
            })
            .collect()
    }
}

/// Per-position maxima of `now` folded into `peaks`.
fn fold_each(peaks: &mut Vec<Option<u64>>, now: &[Option<u64>]) {
    if peaks.len() < now.len() {
        peaks.resize(now.len(), None);
    }
    for (p, n) in peaks.iter_mut().zip(now) {
        *p = max_opt(*p, *n);
    }
}

/// The timeline point of one frame: the tree's RAM (`ram`) and GPU memory, each device's use,
/// and what the others hold there (`others`).
fn point(
    frame: &Frame,
    set: &HashSet<u32>,
    ram: Option<&TreeRam>,
    others: Vec<Option<u64>>,
) -> Point {
    Point {
        t: frame.at,
        rss: ram.map(|r| r.bytes),
        gpu: (0..frame.devices.len())
            .map(|i| frame.gpu_of(i, set))
            .collect(),
        device_used: (0..frame.devices.len()).map(|i| frame.used(i)).collect(),
        others,
    }
}

pub fn run(args: &RunArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    // Where the timeline goes is checked before the command starts, not after it ran.
    let mut timeline = match Timeline::open(args.csv.as_deref(), args.plot.as_deref()) {
        Ok(t) => t,
        Err((path, e)) => {
            writeln!(err, "hmn run: cannot write {}: {e}", path.display())?;
            return Ok(Outcome::Code(2));
        }
    };
    if let Some(ended) = gate::open(&args.gate, err)? {
        return Ok(ended);
    }
    let stop = Stop::on_signals();
    let started = Instant::now();
    let heard = (!args.output_as_is).then(|| Arc::new(Heard::new(started)));
    let mut child = match Child::spawn_reading(&args.command, "hmn run", heard.as_ref(), err)? {
        Ok(c) => c,
        Err(code) => return Ok(Outcome::Code(code)),
    };
    let mut engine = heard.map(Follow::new);
    let (status, peaks, devices) = follow(
        &mut child,
        args.interval,
        &stop,
        &mut timeline,
        engine.as_mut(),
        err,
    )?;
    let (code, signal) = child::status_parts(status);
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let summary = RunSummary {
        exit_code: code,
        signal,
        duration_s: started.elapsed().as_secs_f64(),
        samples: peaks.samples,
        interval_ms: args.interval.as_millis(),
        peak_rss_bytes: peaks.ram.map(|r| r.bytes),
        peak_gpu_bytes: peaks.gpu,
        devices: peaks.devices(&devices),
        gpu_processes: peaks.holders(),
        command,
        peak_rss_measure: peaks.ram.map(|r| r.measure),
        peak_rss_processes: peaks.ram.map(|r| r.processes),
        peak_rss_sum_bytes: peaks.rss_sum,
        rss_counted_pids: peaks.members.rss_counted(),
        processes: peaks.members.list(),
        processes_left_out: peaks.members.left_out(),
        ram_peak: peaks.ram,
        neighbours: peaks.neighbours.report(),
        ghosts_appeared: peaks.ghosts_appeared(),
        engine: engine.and_then(|e| peaks.engine_report(&e)),
    };
    finish(args, &mut timeline, &devices, &summary, out, err)?;
    // Stopped by a signal of its own, hmn ends as that signal says; otherwise as the command.
    Ok(Outcome::Code(match stop.signal() {
        Some(sig) => child::passed_on(None, Some(sig)),
        None => child::passed_on(code, signal),
    }))
}

/// Samples the command's process tree every `interval` until it exits, passing on every stop
/// signal hmn gets to the whole tree; its exit status, the peaks, and the devices as first
/// seen.
fn follow(
    child: &mut Child,
    interval: Duration,
    stop: &Stop,
    timeline: &mut Timeline,
    mut engine: Option<&mut Follow>,
    err: &mut impl Write,
) -> io::Result<(ExitStatus, Peaks, Vec<Option<GpuDeviceInfo>>)> {
    let mut walker = hypomnesis::TreeWalker::new(child.id());
    let mut want = Want::NONE;
    (want.devices, want.processes) = (true, true);
    let sampler = Sampler::new(want);
    let mut pacer = PssPacer::new();
    // The loop watches `stop` itself: it keeps sampling while the command winds down.
    let mut ticker = Ticker::new(interval, None);
    let mut peaks = Peaks::default();
    let mut look = GhostWatch::new(GhostOptions::default());
    let mut first: Option<Vec<Option<GpuDeviceInfo>>> = None;
    let mut passed_on = None;
    let status = loop {
        if let Some(sig) = stop.signal()
            && passed_on != Some(sig)
        {
            child.signal_tree(sig);
            passed_on = Some(sig);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let tree = walker.pids();
        let frame = sampler.frame_tree(&tree, &mut pacer);
        if first.is_none() {
            peaks.ghosts[0] = look.look_at_rows(&rows_of(&frame)).ok();
        }
        let devices =
            first.get_or_insert_with(|| frame.devices.iter().map(|d| d.info().cloned()).collect());
        let ram = frame.tree_ram(&tree);
        let set: HashSet<u32> = tree.iter().copied().collect();
        let others = peaks.neighbours.add(&frame, &set);
        let p = point(&frame, &set, ram.as_ref(), others);
        peaks.add(&p, ram.as_ref(), frame.rss_sum(&tree));
        peaks.add_holders(&frame, &tree);
        peaks.members.add(&frame, &tree, ram.as_ref());
        timeline.add(&p, devices.len(), err)?;
        child.follow_size();
        if let Some(e) = engine.as_deref_mut() {
            e.sample(&frame, &set);
        }
        // An engine's line heard is sampled at once: the driver's figures of that moment.
        let heard = |e: &Option<&mut Follow>| e.as_deref().is_some_and(Follow::pending);
        let _ = ticker.wait(|| {
            matches!(child.try_wait(), Ok(Some(_))) || stop.signal() != passed_on || heard(&engine)
        });
    };
    // What it left in its output, passed on; lines heard since the last sample get one more
    // (its processes are gone by then; the others' figures still say who held what).
    child.drain(DRAIN);
    if let Some(e) = engine
        && e.pending()
    {
        let tree = walker.pids();
        let set: HashSet<u32> = tree.iter().copied().collect();
        e.sample(&sampler.frame_tree(&tree, &mut pacer), &set);
    }
    // The ghosts once it ended, asked of the driver afresh (the last frame is a sample old).
    if peaks.ghosts[0].is_some() {
        peaks.ghosts[1] = look.look().ok();
    }
    Ok((status, peaks, first.unwrap_or_default()))
}

/// Each GPU's figures and process list in `frame`, as the ghost look takes them (a GPU whose
/// either could not be read is left out).
fn rows_of(frame: &Frame) -> Vec<(GpuDeviceInfo, Vec<hypomnesis::GpuProcessEntry>)> {
    frame
        .devices
        .iter()
        .filter_map(|d| Some((d.info()?.clone(), d.processes()?.to_vec())))
        .collect()
}

/// A serving engine's phases, for the plot.
fn bands(summary: &RunSummary) -> Vec<crate::view::plot::Band> {
    summary.engine.as_ref().map_or_else(Vec::new, |e| {
        e.phases
            .iter()
            .map(|p| (p.from_s, p.to_s, p.doing.to_string()))
            .collect()
    })
}

/// The CSV flushed, the plot drawn, the summary on stderr, the JSON on stdout.
fn finish(
    args: &RunArgs,
    timeline: &mut Timeline,
    devices: &[Option<GpuDeviceInfo>],
    summary: &RunSummary,
    out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<()> {
    timeline.finish_csv(devices.len(), err)?;
    if let (Some(path), Some(points)) = (&args.plot, timeline.plot_points())
        && let Err(e) = crate::view::plot::draw(
            path,
            &points,
            devices,
            &render::shell_words(&summary.command),
            &bands(summary),
        )
    {
        writeln!(err, "hmn run: cannot draw {}: {e}", path.display())?;
    }
    if args.output.json {
        // The summary is the JSON object alone, as the help says. The command's status is
        // passed on even when stdout is closed.
        crate::view::unless_closed(crate::view::json(out, summary))?;
    } else {
        write!(err, "{}", render::summary(summary))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::view::MIB;

    fn pt(ms: u64, rss: u64, gpu: Option<u64>, used: Option<u64>) -> Point {
        Point {
            t: Duration::from_millis(ms),
            rss: Some(rss),
            gpu: vec![gpu],
            device_used: vec![used],
            others: vec![],
        }
    }

    #[test]
    fn peaks_of_a_timeline() {
        let mut peaks = Peaks::default();
        let lone = |b: u64| TreeRam::new(b, false, 1, Vec::new());
        for p in [
            pt(0, 10 * MIB, Some(0), Some(100 * MIB)),
            pt(100, 300 * MIB, Some(64 * MIB), None),
            pt(200, 20 * MIB, None, Some(90 * MIB)),
        ] {
            peaks.add(&p, p.rss.map(lone).as_ref(), p.rss);
        }
        assert_eq!(peaks.samples, 3);
        assert_eq!(
            (peaks.ram.map(|r| r.bytes), peaks.gpu),
            (Some(300 * MIB), Some(64 * MIB))
        );
        assert_eq!(peaks.ram.map(|r| r.measure), Some(Measure::Rss));
        let per = peaks.devices(&[None]);
        assert_eq!(per[0].peak_gpu_bytes, Some(64 * MIB));
        assert_eq!(per[0].peak_device_used_bytes, Some(100 * MIB));
        assert_eq!(per[0].name, None);
    }

    /// The tree's peak is its figure's, and says how it was made; the RSS summed keeps its
    /// own peak.
    #[test]
    fn the_peak_says_how_it_was_made() {
        let mut peaks = Peaks::default();
        let at = |ms| pt(ms, 0, None, None);
        peaks.add(
            &at(0),
            Some(&TreeRam::new(200 * MIB, false, 1, Vec::new())),
            Some(200 * MIB),
        );
        peaks.add(&at(50), None, Some(1000 * MIB));
        peaks.add(
            &at(100),
            Some(&TreeRam::new(210 * MIB, true, 5, Vec::new())),
            Some(1050 * MIB),
        );
        peaks.add(
            &at(150),
            Some(&TreeRam::new(205 * MIB, true, 5, vec![7])),
            Some(900 * MIB),
        );
        let r = peaks.ram.unwrap();
        assert_eq!(
            (r.bytes, r.measure, r.processes, r.by_rss),
            (210 * MIB, Measure::Pss, 5, 0)
        );
        assert_eq!(peaks.rss_sum, Some(1050 * MIB));
        assert_eq!(
            measure(&TreeRam::new(1, true, 3, vec![1, 2])),
            Measure::PssAndRss
        );
        assert_eq!(
            measure(&TreeRam::new(1, true, 2, vec![1, 2])),
            Measure::RssSum
        );
    }
}
