//! `hmn spill -- CMD…`: run a command and report spill episodes (Windows WDDM).

use std::fmt::Write as _;
use std::io::{self, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::spill::{SpillSample, SpillThresholds, SpillTracker};

use crate::cli::Outcome;
use crate::run::parse_interval;

/// Options of `hmn spill`.
#[derive(Debug, Args)]
pub struct SpillArgs {
    /// Time between samples.
    #[arg(long, default_value = "250ms", value_parser = parse_interval)]
    pub interval: Duration,
    /// Dedicated use / capacity at or above which a GPU counts as full.
    #[arg(long, default_value_t = 0.85)]
    pub dedicated_fraction: f64,
    /// Growth of shared use over its starting value, in MiB, that counts as spilling.
    #[arg(long, default_value_t = 256)]
    pub shared_margin_mib: u64,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<std::ffi::OsString>,
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

pub fn run(
    args: &SpillArgs,
    _json: bool,
    _out: &mut impl Write,
    err: &mut impl Write,
) -> io::Result<Outcome> {
    let Some((program, rest)) = args.command.split_first() else {
        return Ok(Outcome::Code(2));
    };
    let count = hypomnesis::device_count().unwrap_or(0);
    let probe = (0..count)
        .map(hypomnesis::adapter_residency)
        .find_map(Result::err);
    let measurable = count > 0 && probe.is_none();
    if !measurable {
        let why = probe.map_or_else(|| "no GPU found".to_string(), |e| e.to_string());
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
                if let Ok((ded, shared, cap)) = hypomnesis::adapter_residency(i) {
                    let t = slot.get_or_insert_with(|| SpillTracker::new(cap, thresholds));
                    t.observe(SpillSample::new(started.elapsed(), ded, shared));
                }
            }
        }
        std::thread::sleep(args.interval);
    };
    if measurable {
        writeln!(
            err,
            "hmn spill: `{}` ran {:.1} s",
            program.to_string_lossy(),
            started.elapsed().as_secs_f64()
        )?;
        for (i, t) in (0_u32..).zip(&trackers) {
            if let Some(t) = t {
                write!(err, "{}", render_episodes(i, t, started.elapsed()))?;
            }
        }
    }
    Ok(Outcome::Code(crate::run::passed_on(
        status.code(),
        exit_signal(status),
    )))
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
