//! `hmn ghosts`: only the GPU memory held that should not be, each with its class, evidence
//! and what would free it. Exit 0 when there is none, 1 when there is some (a gate for scripts
//! and cron), 2 when the GPUs cannot be read.

use std::io::{self, Write};
use std::time::Duration;

use clap::Args;
use hypomnesis::{GhostOptions, HypomnesisError};

use crate::args::{self, DeadlineArg, JsonArg, RootArgs};
use crate::outcome::Outcome;
use crate::view::ghosts as render;

/// Options of `hmn ghosts`.
#[derive(Debug, Clone, Args)]
pub struct GhostsArgs {
    /// A listed process in uninterruptible sleep (D) is looked at again after this long, and
    /// called stuck when it is still in D.
    #[arg(long, default_value = "2s", value_parser = args::duration, value_name = "DURATION")]
    pub stuck_after: Duration,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

pub fn run(args: &GhostsArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let options = GhostOptions::default().stuck_after(args.stuck_after);
    let report = match hypomnesis::ghosts_with(options) {
        Ok(r) => r,
        Err(HypomnesisError::NoGpuSource) => {
            writeln!(
                err,
                "hmn ghosts: no GPU found, so there is nothing to explain"
            )?;
            return Ok(Outcome::MeasurementFailed);
        }
        Err(e) => {
            writeln!(err, "hmn ghosts: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    if args.output.json {
        render::json(out, &report)?;
    } else {
        render::text(out, &report)?;
    }
    Ok(if report.ghosts.is_empty() {
        Outcome::Success
    } else {
        Outcome::Code(1)
    })
}
