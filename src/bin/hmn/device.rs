//! `hmn` with no subcommand: one line per GPU (or JSON).

use std::io::{self, Write};

use hypomnesis::{GpuDeviceInfo, HypomnesisError};

use crate::cli::Outcome;
use crate::render;

pub fn run(json: bool, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let count = match hypomnesis::device_count() {
        Ok(n) => n,
        Err(HypomnesisError::NoGpuSource) => {
            let sentence = render::no_gpu_sentence(&hypomnesis::sources());
            if json {
                writeln!(out, "[]")?;
                writeln!(err, "{sentence}")?;
            } else {
                writeln!(out, "{sentence}")?;
            }
            return Ok(Outcome::Success);
        }
        Err(e) => {
            writeln!(err, "hmn: could not count GPUs: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    let mut ok: Vec<GpuDeviceInfo> = Vec::new();
    let mut failed: Vec<(u32, HypomnesisError)> = Vec::new();
    for i in 0..count {
        match hypomnesis::device_info(i) {
            Ok(d) => ok.push(d),
            Err(e) => failed.push((i, e)),
        }
    }
    if json {
        render::json(out, &ok)?;
    } else if count == 0 {
        writeln!(
            out,
            "{}",
            render::zero_gpus_sentence(&hypomnesis::sources())
        )?;
    } else {
        render::summary(out, &ok)?;
    }
    for (i, e) in &failed {
        writeln!(err, "hmn: GPU {i}: {e}")?;
    }
    if ok.is_empty() && !failed.is_empty() {
        writeln!(err, "{}", render::none_readable_sentence(failed.len()))?;
        return Ok(Outcome::MeasurementFailed);
    }
    Ok(Outcome::Success)
}
