//! `hmn run -- CMD…`: run a command and report the peaks of its whole process tree.

mod timeline;

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::GpuDeviceInfo;

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::child::{self, Child};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use crate::view::run::{self as render, DevicePeak, Holder, Point, Summary};
use hypomnesis::sampling::{Frame, Sampler, Ticker, Want, max_opt};
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
    /// Draw the timeline (RSS and GPU memory per device) as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// The peaks of a run, folded one point at a time (what the summary needs, whatever the length
/// of the run).
#[derive(Debug, Default)]
struct Peaks {
    samples: usize,
    rss: Option<u64>,
    gpu: Option<u64>,
    device_gpu: Vec<Option<u64>>,
    device_used: Vec<Option<u64>>,
    /// The processes of the tree seen holding GPU memory, by pid.
    holders: BTreeMap<u32, Holder>,
}

impl Peaks {
    fn add(&mut self, p: &Point) {
        self.samples += 1;
        self.rss = max_opt(self.rss, p.rss);
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

/// The timeline point of one frame: the tree's RSS and GPU memory, and each device's use.
fn point(frame: &Frame, tree: &[u32]) -> Point {
    let set: HashSet<u32> = tree.iter().copied().collect();
    Point {
        t: frame.at,
        rss: frame.rss_sum(tree),
        gpu: (0..frame.devices.len())
            .map(|i| frame.gpu_of(i, &set))
            .collect(),
        device_used: (0..frame.devices.len()).map(|i| frame.used(i)).collect(),
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
    let stop = Stop::on_signals();
    let started = Instant::now();
    let mut child = match Child::spawn(&args.command, "hmn run", err)? {
        Ok(c) => c,
        Err(code) => return Ok(Outcome::Code(code)),
    };
    let (status, peaks, devices) = follow(&mut child, args.interval, &stop, &mut timeline, err)?;
    let (code, signal) = child::status_parts(status);
    let command: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let summary = Summary {
        exit_code: code,
        signal,
        duration_s: started.elapsed().as_secs_f64(),
        samples: peaks.samples,
        interval_ms: args.interval.as_millis(),
        peak_rss_bytes: peaks.rss,
        peak_gpu_bytes: peaks.gpu,
        devices: peaks.devices(&devices),
        gpu_processes: peaks.holders(),
        command,
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
    err: &mut impl Write,
) -> io::Result<(ExitStatus, Peaks, Vec<Option<GpuDeviceInfo>>)> {
    let mut walker = hypomnesis::TreeWalker::new(child.id());
    let mut want = Want::NONE;
    (want.devices, want.processes) = (true, true);
    let sampler = Sampler::new(want);
    // The loop watches `stop` itself: it keeps sampling while the command winds down.
    let mut ticker = Ticker::new(interval, None);
    let mut peaks = Peaks::default();
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
        let frame = sampler.frame(&tree);
        let devices =
            first.get_or_insert_with(|| frame.devices.iter().map(|d| d.info().cloned()).collect());
        let p = point(&frame, &tree);
        peaks.add(&p);
        peaks.add_holders(&frame, &tree);
        timeline.add(&p, devices.len(), err)?;
        let _ =
            ticker.wait(|| matches!(child.try_wait(), Ok(Some(_))) || stop.signal() != passed_on);
    };
    Ok((status, peaks, first.unwrap_or_default()))
}

/// The CSV flushed, the plot drawn, the summary on stderr, the JSON on stdout.
fn finish(
    args: &RunArgs,
    timeline: &mut Timeline,
    devices: &[Option<GpuDeviceInfo>],
    summary: &Summary,
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
        }
    }

    #[test]
    fn peaks_of_a_timeline() {
        let mut peaks = Peaks::default();
        for p in [
            pt(0, 10 * MIB, Some(0), Some(100 * MIB)),
            pt(100, 300 * MIB, Some(64 * MIB), None),
            pt(200, 20 * MIB, None, Some(90 * MIB)),
        ] {
            peaks.add(&p);
        }
        assert_eq!(peaks.samples, 3);
        assert_eq!((peaks.rss, peaks.gpu), (Some(300 * MIB), Some(64 * MIB)));
        let per = peaks.devices(&[None]);
        assert_eq!(per[0].peak_gpu_bytes, Some(64 * MIB));
        assert_eq!(per[0].peak_device_used_bytes, Some(100 * MIB));
        assert_eq!(per[0].name, None);
    }
}
