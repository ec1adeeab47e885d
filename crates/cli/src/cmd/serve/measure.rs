//! One measurement of the host for the exporter: a frame of the one sampler, as the exposition
//! sees it.

use super::model::Sample;
use crate::collect::sampler::{Frame, Sampler, Want};

/// What the exporter reads each measurement.
pub const WANT: Want = Want {
    devices: true,
    processes: true,
    unnamed: false,
    residency: false,
    mig: true,
    utilization: false,
    sources: true,
};

/// Measures every device and process list, then asks each source for its report. Blocking: it
/// loads libraries and may run `nvidia-smi`.
pub fn measure() -> Sample {
    sample_of(Sampler::new(WANT).frame(&[]))
}

/// The exposition's view of a frame. A host without GPUs is not a failed measurement.
pub fn sample_of(frame: Frame) -> Sample {
    let mut s = Sample {
        counted: frame.count.ok(),
        sources: frame.sources.unwrap_or_default(),
        ..Sample::default()
    };
    for (i, d) in (0_u32..).zip(frame.devices) {
        match d.info {
            Some(Ok(info)) => s.devices.push(info),
            Some(Err(f)) => s.unreadable.push((i, f.kind)),
            None => s.unreadable.push((i, hypomnesis::ErrorKind::Other)),
        }
        match d.processes {
            Some(Ok(list)) => {
                s.processes.extend(list);
                s.listed.push(i);
            }
            _ => s.process_errors += 1,
        }
        s.mig.extend(d.mig.unwrap_or_default());
    }
    s.contexts = contexts(&s.processes);
    s
}

/// The owner and container of each listed process.
fn contexts(
    processes: &[hypomnesis::GpuProcessEntry],
) -> std::collections::BTreeMap<u32, hypomnesis::ProcessContext> {
    let mut parts = hypomnesis::ContextParts::NONE;
    parts.user = true;
    parts.container = true;
    crate::collect::contexts::read(crate::collect::contexts::readable(processes), parts)
}
