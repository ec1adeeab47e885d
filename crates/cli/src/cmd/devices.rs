//! `hmn` with no subcommand: one line per GPU (or JSON).

use std::io::{self, Write};

use hypomnesis::{GpuDeviceInfo, GpuQuerySource, GpuVendor, HypomnesisError, SourceState};

use crate::outcome::Outcome;
use crate::view::devices::{self as render, DeviceView};

pub fn run(json: bool, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let count = match hypomnesis::device_count() {
        Ok(n) => n,
        Err(HypomnesisError::NoGpuSource) => {
            let sentence = why_no_gpu()
                .map_or_else(render::no_gpu_sentence, |why| render::no_gpu_because(&why));
            if json {
                writeln!(out, "[]")?;
                writeln!(err, "{sentence}")?;
            } else {
                writeln!(out, "{sentence}")?;
            }
            return Ok(Outcome::Success);
        }
        Err(e) => {
            writeln!(err, "hmn: failed to count devices: {e}")?;
            return Ok(Outcome::MeasurementFailed);
        }
    };
    let mut ok: Vec<DeviceView> = Vec::new();
    let mut failed: Vec<(u32, HypomnesisError)> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    for i in 0..count {
        match hypomnesis::device_info(i) {
            Ok(d) => ok.push(with_mig(d, &mut notes)),
            // With MIG on, unprivileged callers are refused the device-wide figures but may
            // read each instance's: show those, and say what was refused.
            Err(e) => match hypomnesis::mig_state(i) {
                Ok(s) if s.enabled == Some(true) && !s.instances.is_empty() => {
                    ok.push(DeviceView::MigOnly(s));
                }
                _ => failed.push((i, e)),
            },
        }
    }
    // A driver that publishes no memory figures at all is a limit of the platform, not a
    // failure: said on stderr, and the device is listed as such.
    let limits = failed
        .iter()
        .all(|(_, e)| e.kind() == hypomnesis::ErrorKind::NotSupported);
    let none_readable = ok.is_empty() && !failed.is_empty() && !limits;
    if none_readable {
        // Nothing on stdout, JSON included: there is no device to show.
    } else if json {
        let mut all = ok.clone();
        all.extend(failed.iter().map(|(i, e)| DeviceView::Failed {
            index: *i,
            failure: hypomnesis::Failure::of(e),
        }));
        all.sort_by_key(DeviceView::index);
        // Each read device's process rows, for what they do not account for.
        let lists = ok
            .iter()
            .filter_map(|v| match v {
                DeviceView::Read { device, .. } => {
                    let rows = hypomnesis::gpu_processes(device.index).ok()?;
                    Some((device.index, rows))
                }
                _ => None,
            })
            .collect();
        render::devices_json(out, &all, &lists)?;
    } else if count == 0 {
        writeln!(out, "{}", render::zero_gpus_sentence())?;
    } else {
        render::devices(out, &ok)?;
    }
    for n in &notes {
        writeln!(err, "{n}")?;
    }
    for (i, e) in &failed {
        let skipped = if ok.is_empty() { "" } else { " (skipped)" };
        writeln!(err, "hmn: failed to query device {i}: {e}{skipped}")?;
    }
    if none_readable {
        writeln!(err, "{}", render::none_readable_sentence(failed.len()))?;
        return Ok(Outcome::MeasurementFailed);
    }
    // The others are listed: a device that could not be read is skipped, and said.
    Ok(Outcome::Success)
}

/// What the NVIDIA source that exists but finds no GPU said (the driver is not loaded, say);
/// `None` when none exists. Asked as cheaply as each can be.
fn why_no_gpu() -> Option<String> {
    [GpuQuerySource::Nvml, GpuQuerySource::NvidiaSmi]
        .into_iter()
        .map(hypomnesis::probe_source)
        .find_map(|r| match r.state {
            SourceState::Failed(why) => Some(why.message),
            _ => None,
        })
}

/// A readable device with its MIG devices when MIG is on. Sources that cannot say whether MIG
/// is on (the `nvidia-smi` fallback) are asked; GPUs known not to be split, and other vendors'
/// devices, are not. A MIG listing that fails is noted for stderr; the device line still stands.
fn with_mig(mut device: GpuDeviceInfo, notes: &mut Vec<String>) -> DeviceView {
    let may_split =
        device.mig_enabled != Some(false) && device.vendor.is_none_or(|v| v == GpuVendor::Nvidia);
    if !may_split {
        return DeviceView::Read { device, mig: None };
    }
    let mig = match hypomnesis::mig_state(device.index) {
        Ok(s) => {
            device.mig_enabled = device.mig_enabled.or(s.enabled);
            (s.enabled == Some(true)).then_some(s.instances)
        }
        Err(e) => {
            if device.mig_enabled == Some(true) {
                notes.push(format!(
                    "hmn: GPU {}: MIG is on, but its MIG devices could not be listed: {e}",
                    device.index
                ));
            }
            None
        }
    };
    DeviceView::Read { device, mig }
}
