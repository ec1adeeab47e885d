//! `hmn spill -- CMD…`: run a command and report spill episodes (Windows WDDM).

use std::ffi::OsString;
use std::io::{self, Write};
use std::time::Duration;

use clap::Args;
use hypomnesis::spill::{SpillMachine, SpillSample, SpillThresholds};

use crate::args::{self, JsonArg, RootArgs};
use crate::collect::child::{self, Child};
use crate::collect::sampler::{Frame, Sampler, Want};
use crate::collect::stop::Stop;
use crate::collect::ticker::Ticker;
use crate::outcome::Outcome;
use crate::view::spill::{ReportJson, device_json, render_episodes};

/// Options of `hmn spill`.
#[derive(Debug, Args)]
pub struct SpillArgs {
    /// Time between samples.
    #[arg(long, default_value = "250ms", value_parser = args::duration, value_name = "DURATION")]
    pub interval: Duration,
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

/// Why spill cannot be measured from this first frame, if it cannot.
fn not_measurable(frame: &Frame) -> Option<String> {
    if frame.devices.is_empty() {
        return Some("no GPU found".into());
    }
    frame.devices.iter().find_map(|d| match &d.residency {
        Some(Err(e)) => Some(e.message.clone()),
        Some(Ok(_)) => None,
        None => Some("residency not read".into()),
    })
}

/// Each GPU's tracker fed one frame (a tracker starts at the GPU's first reading).
fn observe(trackers: &mut [Option<SpillMachine>], frame: &Frame, thresholds: SpillThresholds) {
    for (slot, d) in trackers.iter_mut().zip(&frame.devices) {
        if let Some(Ok(r)) = &d.residency {
            let t = slot.get_or_insert_with(|| SpillMachine::new(r.capacity_bytes, thresholds));
            t.observe(SpillSample::new(
                frame.at,
                r.dedicated_bytes,
                r.shared_bytes,
            ));
        }
    }
}

pub fn run(args: &SpillArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let sampler = Sampler::new(Want {
        residency: true,
        ..Want::default()
    });
    let first = sampler.frame(&[]);
    let why_not = not_measurable(&first);
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
    let mut trackers: Vec<Option<SpillMachine>> = vec![None; first.devices.len()];
    let mut ticker = Ticker::new(args.interval, None, Stop::on_signals());
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
        for (i, t) in (0_u32..).zip(&trackers) {
            if let Some(t) = t {
                write!(err, "{}", render_episodes(i, t, now))?;
            }
        }
    }
    let (code, signal) = child::status_parts(status);
    if args.output.json {
        let report = ReportJson {
            command: args
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code: code,
            signal,
            duration_s: now.as_secs_f64(),
            measurable: why_not.is_none(),
            not_measurable_reason: why_not,
            devices: (0_u32..)
                .zip(&trackers)
                .filter_map(|(i, t)| t.as_ref().map(|t| device_json(i, t, now)))
                .collect(),
        };
        // The command's status is passed on even when stdout is closed.
        crate::view::unless_closed(crate::view::json(out, &report))?;
    }
    Ok(Outcome::Code(child::passed_on(code, signal)))
}
