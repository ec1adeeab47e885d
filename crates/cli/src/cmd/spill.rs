//! `hmn spill -- CMD…`: run a command and report spill episodes (Windows WDDM).

use std::ffi::OsString;
use std::io::{self, Write};
use std::time::Duration;

use clap::Args;
use hypomnesis::spill::{SpillSample, SpillThresholds};
use hypomnesis::{SpillReport, SpillTracker};

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::child::{self, Child};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use crate::view::spill::{DeviceJson, ReportJson, ReportKeys, render_episodes};
use hypomnesis::sampling::{Frame, Sampler, Ticker, Want};

/// Options of `hmn spill`.
#[derive(Debug, Args)]
pub struct SpillArgs {
    /// Time between samples: milliseconds as a bare number (`100`, as in 0.2.x), or a duration
    /// with its unit (`250ms`, `1s`).
    #[arg(long, default_value = "100", value_parser = args::interval_ms, value_name = "MS")]
    pub interval: Duration,
    /// The GPU the report is of (index as in `hmn`); `--json`'s `devices` has every GPU's.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub device: u32,
    /// Dedicated use / capacity at or above which a GPU counts as full (more than 0, at most 1).
    #[arg(long, default_value_t = 0.85, value_parser = args::fraction, value_name = "FRACTION")]
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
    pub command: Vec<OsString>,
}

/// Why spill cannot be measured on GPU `device` from this first frame, if it cannot.
fn not_measurable(frame: &Frame, device: u32) -> Option<String> {
    let Some(d) = usize::try_from(device)
        .ok()
        .and_then(|i| frame.devices.get(i))
    else {
        return Some(if frame.devices.is_empty() {
            "no GPU found".into()
        } else {
            format!("no GPU {device}")
        });
    };
    match &d.residency {
        Some(Err(e)) => Some(e.message.clone()),
        Some(Ok(_)) => None,
        None => Some("residency not read".into()),
    }
}

/// Each GPU's tracker fed one frame, labelled with its time (a tracker starts at the GPU's
/// first reading, whose shared use is its baseline).
fn observe(trackers: &mut [Option<SpillTracker>], frame: &Frame, thresholds: SpillThresholds) {
    let label = format!("{} ms", frame.at.as_millis());
    for (slot, d) in trackers.iter_mut().zip(&frame.devices) {
        if let Some(Ok(r)) = &d.residency {
            let t = slot.get_or_insert_with(|| {
                SpillTracker::fed(r.capacity_bytes).with_thresholds(thresholds)
            });
            t.observe_sample(
                label.clone(),
                SpillSample::new(frame.at, r.dedicated_bytes, r.shared_bytes),
            );
        }
    }
}

pub fn run(args: &SpillArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let mut want = Want::NONE;
    want.residency = true;
    let sampler = Sampler::new(want);
    let first = sampler.frame(&[]);
    if let Ok(n) = first.count
        && n > 0
        && args.device >= n
    {
        writeln!(
            err,
            "hmn spill: {}",
            hypomnesis::HypomnesisError::DeviceIndexOutOfRange {
                index: args.device,
                count: n
            }
        )?;
        return Ok(Outcome::Code(2));
    }
    let why_not = not_measurable(&first, args.device);
    if let Some(why) = &why_not {
        writeln!(
            err,
            "hmn spill: spill is not measurable here ({why}); running the command without it"
        )?;
    }
    let thresholds = SpillThresholds::new(
        args.dedicated_fraction,
        args.shared_margin_mib.saturating_mul(1 << 20),
    );
    let mut child = match Child::spawn(&args.command, "hmn spill", err)? {
        Ok(c) => c,
        Err(code) => return Ok(Outcome::Code(code)),
    };
    let mut trackers: Vec<Option<SpillTracker>> = vec![None; first.devices.len()];
    // Caught, not obeyed: Ctrl-C reaches the command too, and the report comes once it ends.
    let _signals = Stop::on_signals();
    let mut ticker = Ticker::new(args.interval, None);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if why_not.is_none() {
            observe(&mut trackers, &sampler.frame(&[]), thresholds);
        }
        ticker.wait(|| matches!(child.try_wait(), Ok(Some(_))));
    };
    let now = sampler.elapsed();
    let reports: Vec<(u32, SpillReport)> = (0_u32..)
        .zip(&trackers)
        .filter_map(|(i, t)| t.as_ref().map(|t| (i, t.report())))
        .collect();
    let program = args
        .command
        .first()
        .map(|p| p.to_string_lossy().into_owned());
    if why_not.is_none() {
        writeln!(
            err,
            "hmn spill: `{}` ran {:.1} s",
            program.unwrap_or_default(),
            now.as_secs_f64()
        )?;
        for (i, r) in &reports {
            write!(err, "{}", render_episodes(*i, r))?;
        }
    }
    let (code, signal) = child::status_parts(status);
    if args.output.json {
        let report = report_json(args, &reports, (code, signal), now, why_not);
        // The command's status is passed on even when stdout is closed.
        crate::view::unless_closed(crate::view::json(out, &report))?;
    }
    Ok(Outcome::Code(child::passed_on(code, signal)))
}

/// `--json`'s object: the `--device` GPU's report, what ran, every GPU's report.
fn report_json(
    args: &SpillArgs,
    reports: &[(u32, SpillReport)],
    (exit_code, signal): (Option<i32>, Option<i32>),
    ran: Duration,
    why_not: Option<String>,
) -> ReportJson {
    let chosen = reports
        .iter()
        .find(|(i, _)| *i == args.device)
        .map(|(_, r)| r);
    ReportJson {
        report: ReportKeys::of(chosen),
        device: args.device,
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_code,
        signal,
        duration_s: ran.as_secs_f64(),
        not_measurable_reason: why_not,
        devices: reports
            .iter()
            .map(|(i, r)| DeviceJson {
                index: *i,
                report: ReportKeys::of(Some(r)),
            })
            .collect(),
    }
}
