//! `hmn run --wait-for SIZE [--settle N]`: the command starts only once SIZE fits in the GPU's
//! free memory, in a figure that held steady over N samples, so that an engine that sizes
//! itself from free memory does not count a neighbour's loading as its own (two engines
//! started together each took the other's weights for their own "non-torch" memory).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use clap::Args;

use crate::args::{self, DeadlineArg};
use crate::cmd::fits::{self, Wait, Waited};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;

/// The exit status when the wait ends without the command started: `EX_TEMPFAIL` (a temporary
/// failure: the same command may work later), set apart from the command's own.
pub const NOT_STARTED: u8 = 75;

/// Options of `hmn run`'s launch gate.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Start the command only once SIZE (12GiB, 512MiB) fits in the free memory of the GPU
    /// --device names, in a figure that held over --settle samples; exit 75 without starting it
    /// when --wait-timeout is over (128 + the signal on Ctrl-C, as always).
    #[arg(long, value_parser = args::size, value_name = "SIZE")]
    pub wait_for: Option<u64>,
    /// The GPU --wait-for watches (index as in `hmn`).
    #[arg(long, default_value_t = 0, value_name = "N", requires = "wait_for")]
    pub device: u32,
    /// Count a free figure once it has held within --tolerance over its last N samples.
    #[arg(long, value_name = "N", requires = "wait_for",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub settle: Option<u16>,
    /// How much a free figure may move over --settle's samples and still be steady.
    #[arg(long, value_parser = args::size, value_name = "SIZE", default_value = "256MiB",
          requires = "wait_for")]
    pub tolerance: u64,
    /// Time between --wait-for's samples.
    #[arg(long, value_parser = args::duration, value_name = "DURATION", default_value = "1s",
          requires = "wait_for")]
    pub every: Duration,
    /// How long --wait-for waits at most [default: until it fits].
    #[arg(long, value_parser = args::duration, value_name = "DURATION", requires = "wait_for")]
    pub wait_timeout: Option<Duration>,
}

/// Waits as `gate` asks; `None` when the command may start (said on stderr), else how `hmn
/// run` ends: [`NOT_STARTED`], or stopped by the signal that ended the wait.
pub fn open(gate: &GateArgs, err: &mut impl Write) -> io::Result<Option<Outcome>> {
    let Some(size) = gate.wait_for else {
        return Ok(None);
    };
    let stop = Stop::on_signals();
    let samples = usize::from(gate.settle.unwrap_or(1));
    let started = Instant::now();
    let w = Wait {
        size,
        device: gate.device,
        samples,
        tolerance: gate.tolerance,
        every: gate.every,
        // Without a timeout, until it fits (a year stands for that).
        until: Some(
            started
                + gate
                    .wait_timeout
                    .unwrap_or(Duration::from_secs(365 * 86_400)),
        ),
        deadline: DeadlineArg::DEFAULT,
    };
    match fits::wait(&w, &stop) {
        Waited::Fits { device, .. } => {
            let v = fits::verdict_of(size, &device);
            writeln!(
                err,
                "{}; starting the command",
                fits::gate_line(&v, samples, started.elapsed())
            )?;
            Ok(None)
        }
        Waited::NotYet {
            device,
            held,
            free_now,
            ..
        } => {
            let v = fits::verdict_of(size, &device);
            let why = if stop.requested() {
                "stopped"
            } else {
                "the wait is over"
            };
            writeln!(
                err,
                "{} ({why} after {}); the command was not started",
                fits::not_yet_line(&v, held, samples, gate.tolerance, free_now),
                crate::view::human(started.elapsed())
            )?;
            Ok(Some(
                stop.signal()
                    .map_or(Outcome::Code(NOT_STARTED), Outcome::stopped_by),
            ))
        }
        Waited::Failed(e) => {
            writeln!(err, "hmn run: --wait-for: {e}; the command was not started")?;
            Ok(Some(Outcome::Code(NOT_STARTED)))
        }
    }
}
