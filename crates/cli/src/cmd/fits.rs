//! `hmn fits SIZE`: whether an allocation of SIZE fits in a GPU's free memory now, as the exit
//! status (0 it fits, 1 it does not, 2 the question cannot be answered), with one line on stderr.

use std::io::{self, Write};

use clap::Args;
use hypomnesis::{GpuDeviceInfo, HypomnesisError};

use crate::args::{self, DeadlineArg, RootArgs};
use crate::outcome::Outcome;
use crate::view::fits::{Verdict, verdict_line};

/// Options of `hmn fits`.
#[derive(Debug, Clone, Args)]
pub struct FitsArgs {
    /// The size: bytes, or a number with KiB, MiB, GiB or TiB (12GiB, 1.5GiB, 512MiB).
    #[arg(value_parser = args::size, value_name = "SIZE")]
    pub size: u64,
    /// The GPU (index as in `hmn`).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub device: u32,
    #[command(flatten)]
    pub roots: RootArgs,
    #[command(flatten)]
    pub deadline: DeadlineArg,
}

pub fn run(args: &FitsArgs, err: &mut impl Write) -> io::Result<Outcome> {
    let device = match device(args.device) {
        Ok(d) => d,
        Err(e) => {
            writeln!(err, "hmn fits: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    let v = Verdict {
        size: args.size,
        index: device.index,
        name: device.name.as_deref(),
        free: device.free_bytes,
    };
    writeln!(err, "{}", verdict_line(&v))?;
    Ok(if v.fits() {
        Outcome::Success
    } else {
        Outcome::Code(1)
    })
}

/// GPU `index`'s figures, or why they cannot be had.
fn device(index: u32) -> Result<GpuDeviceInfo, String> {
    match hypomnesis::device_count() {
        Err(HypomnesisError::NoGpuSource) => {
            return Err("no GPU here to fit anything into (`hmn doctor` says why)".into());
        }
        Err(e) => return Err(format!("failed to count devices: {e}")),
        Ok(n) if index >= n => {
            return Err(HypomnesisError::DeviceIndexOutOfRange { index, count: n }.to_string());
        }
        Ok(_) => {}
    }
    hypomnesis::device_info(index).map_err(|e| format!("failed to query device {index}: {e}"))
}
