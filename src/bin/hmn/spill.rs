//! `hmn spill -- CMD…`: run a command and report spill episodes (Windows WDDM).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::spill::{SpillSample, SpillThresholds, SpillTracker};
use serde::Serialize;

use crate::cli::{JsonArg, Outcome, RootArgs};
use crate::run::parse_interval;

/// Options of `hmn spill`.
#[derive(Debug, Args)]
pub struct SpillArgs {
    /// Time between samples.
    #[arg(long, default_value = "250ms", value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Duration,
    /// Dedicated use / capacity at or above which a GPU counts as full (more than 0, at most 1).
    #[arg(long, default_value_t = 0.85, value_parser = parse_fraction, value_name = "FRACTION")]
    pub dedicated_fraction: f64,
    /// Growth of shared use over its starting value, in MiB, that counts as spilling.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub shared_margin_mib: u64,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
}

/// A fraction in (0, 1]; NaN, infinities and anything outside are refused.
fn parse_fraction(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number such as 0.85"))?;
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{s:?} is not a fraction more than 0 and at most 1"))
    }
}

/// One spill episode in the JSON report.
#[derive(Debug, Serialize)]
struct EpisodeJson {
    start_s: f64,
    duration_s: f64,
    peak_shared_bytes: u64,
}

/// One GPU in the JSON report.
#[derive(Debug, Serialize)]
struct DeviceJson {
    index: u32,
    episodes: Vec<EpisodeJson>,
    spill_s: f64,
    peak_dedicated_bytes: u64,
    peak_shared_bytes: u64,
    baseline_shared_bytes: Option<u64>,
}

/// `hmn spill --json`: what ran, whether spill was measurable, and each GPU's episodes.
#[derive(Debug, Serialize)]
struct ReportJson {
    command: Vec<String>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    duration_s: f64,
    measurable: bool,
    not_measurable_reason: Option<String>,
    devices: Vec<DeviceJson>,
}

fn device_json(index: u32, t: &SpillTracker, now: Duration) -> DeviceJson {
    let (ded, shared) = t.peaks();
    DeviceJson {
        index,
        episodes: t
            .episodes()
            .iter()
            .map(|e| EpisodeJson {
                start_s: e.start.as_secs_f64(),
                duration_s: e.duration(now).as_secs_f64(),
                peak_shared_bytes: e.peak_shared_bytes,
            })
            .collect(),
        spill_s: t.total_spill_time().as_secs_f64(),
        peak_dedicated_bytes: ded,
        peak_shared_bytes: shared,
        baseline_shared_bytes: t.baseline_shared_bytes(),
    }
}

/// The end-of-run report of one GPU.
pub fn render_episodes(index: u32, t: &SpillTracker, now: Duration) -> String {
    let (ded, shared) = t.peaks();
    let mut s = format!(
        "  GPU {index}: {} spill episode(s), {:.1} s spilling; peak dedicated {}, peak shared {} (baseline {})\n",
        t.episodes().len(),
        t.total_spill_time().as_secs_f64(),
        crate::render::format_size(ded),
        crate::render::format_size(shared),
        crate::render::format_size(t.baseline_shared_bytes().unwrap_or(0)),
    );
    for e in t.episodes() {
        let _ = writeln!(
            s,
            "    from {:.1} s for {:.1} s: shared up to {}",
            e.start.as_secs_f64(),
            e.duration(now).as_secs_f64(),
            crate::render::format_size(e.peak_shared_bytes)
        );
    }
    s
}

pub fn run(args: &SpillArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let Some((program, rest)) = args.command.split_first() else {
        return Ok(Outcome::Code(2));
    };
    let count = hypomnesis::device_count().unwrap_or(0);
    let probe = (0..count)
        .map(hypomnesis::adapter_residency)
        .find_map(Result::err);
    let measurable = count > 0 && probe.is_none();
    let not_measurable =
        (!measurable).then(|| probe.map_or_else(|| "no GPU found".to_string(), |e| e.to_string()));
    if let Some(why) = &not_measurable {
        writeln!(
            err,
            "hmn spill: spill is not measurable here ({why}); running the command without it"
        )?;
    }
    let thresholds = SpillThresholds::new(
        args.dedicated_fraction,
        args.shared_margin_mib.saturating_mul(1 << 20),
    );
    let started = Instant::now();
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            writeln!(
                err,
                "hmn spill: cannot start {}: {e}",
                program.to_string_lossy()
            )?;
            return Ok(Outcome::Code(127));
        }
    };
    let mut trackers: Vec<Option<SpillTracker>> = (0..count).map(|_| None).collect();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if measurable {
            for (i, slot) in (0_u32..).zip(trackers.iter_mut()) {
                if let Ok(r) = hypomnesis::adapter_residency(i) {
                    let t =
                        slot.get_or_insert_with(|| SpillTracker::new(r.capacity_bytes, thresholds));
                    t.observe(SpillSample::new(
                        started.elapsed(),
                        r.dedicated_bytes,
                        r.shared_bytes,
                    ));
                }
            }
        }
        std::thread::sleep(args.interval);
    };
    let now = started.elapsed();
    if measurable {
        writeln!(
            err,
            "hmn spill: `{}` ran {:.1} s",
            program.to_string_lossy(),
            now.as_secs_f64()
        )?;
        for (i, t) in (0_u32..).zip(&trackers) {
            if let Some(t) = t {
                write!(err, "{}", render_episodes(i, t, now))?;
            }
        }
    }
    let code = crate::run::passed_on(status.code(), exit_signal(status));
    if args.output.json {
        let report = ReportJson {
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code: status.code(),
            signal: exit_signal(status),
            duration_s: now.as_secs_f64(),
            measurable,
            not_measurable_reason: not_measurable,
            devices: (0_u32..)
                .zip(&trackers)
                .filter_map(|(i, t)| t.as_ref().map(|t| device_json(i, t, now)))
                .collect(),
        };
        // The command's status is passed on even when stdout is closed.
        crate::render::unless_closed(crate::render::json(out, &report))?;
    }
    Ok(Outcome::Code(code))
}

fn exit_signal(status: std::process::ExitStatus) -> Option<i32> {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }
    #[cfg(not(unix))]
    {
        let _ = status;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions() {
        assert_eq!(parse_fraction("0.85"), Ok(0.85));
        assert_eq!(parse_fraction("1"), Ok(1.0));
        for bad in ["NaN", "nan", "inf", "1e308", "0", "-0.5", "1.01", "x", ""] {
            assert!(parse_fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_report_of_a_tracker() {
        let mut t = SpillTracker::new(8 << 30, SpillThresholds::default());
        t.observe(SpillSample::new(Duration::ZERO, 1 << 30, 100 << 20));
        t.observe(SpillSample::new(Duration::from_secs(1), 7 << 30, 600 << 20));
        let d = device_json(1, &t, Duration::from_secs(4));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["index"], 1);
        assert_eq!(v["episodes"][0]["start_s"], 1.0);
        assert_eq!(v["episodes"][0]["duration_s"], 3.0);
        assert_eq!(v["peak_dedicated_bytes"], 7_u64 << 30);
        assert_eq!(v["baseline_shared_bytes"], 100_u64 << 20);
    }

    #[test]
    fn episode_report() {
        let mut t = SpillTracker::new(8 << 30, SpillThresholds::default());
        t.observe(SpillSample::new(Duration::ZERO, 1 << 30, 100 << 20));
        t.observe(SpillSample::new(Duration::from_secs(1), 7 << 30, 600 << 20));
        t.observe(SpillSample::new(Duration::from_secs(3), 1 << 30, 600 << 20));
        assert_eq!(
            render_episodes(0, &t, Duration::from_secs(4)),
            "  GPU 0: 1 spill episode(s), 2.0 s spilling; peak dedicated 7.0 GiB, peak shared 600 MiB (baseline 100 MiB)\n    from 1.0 s for 2.0 s: shared up to 600 MiB\n"
        );
    }
}
