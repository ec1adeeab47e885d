//! What NVML says about itself, for `hmn doctor`: the library, devices and MIG modes, versions,
//! which optional functions this driver exports, and what was dropped.

use super::decode::text;
use super::ffi::ProcessFn;
use super::library::{LoadOutcome, outcome};
use super::session::Loaded;
use crate::{types::GpuQuerySource, types::SourceReport, types::SourceState};

/// The report of the NVML source.
pub(super) fn report() -> SourceReport {
    let mut details = Vec::new();
    let state = match outcome() {
        LoadOutcome::Failed { why, explicit } => {
            if *explicit {
                SourceState::Failed(why.clone())
            } else {
                SourceState::absent(crate::error::ErrorKind::NotInstalled, why.message.clone())
            }
        }
        LoadOutcome::Loaded(l) => {
            details.push(("library".into(), l.path.display().to_string()));
            let state = match l.run(Loaded::device_count) {
                Ok(n) => {
                    details.push(("devices".into(), n.to_string()));
                    for i in 0..n {
                        details.push((format!("GPU {i} MIG"), l.mig_summary(i)));
                        details.push((format!("GPU {i} memory"), memory_summary(l, i)));
                        // Read for the rows it leaves out (counted below); the list is not shown.
                        let _ = l.run(|l| l.raw_processes(i));
                    }
                    SourceState::Answered
                }
                Err(e) => SourceState::Failed(crate::error::Failure::of(&e)),
            };
            if let Some(v) = l.driver_version() {
                details.push(("driver version".into(), v));
            }
            if let Some(v) = l
                .nvml
                .lib_version()
                .and_then(std::result::Result::ok)
                .and_then(|b| text(&b))
            {
                details.push(("NVML version".into(), v));
            }
            if let Some(Ok(v)) = l.nvml.cuda_driver_version() {
                details.push((
                    "CUDA driver API".into(),
                    format!("{}.{}", v / 1000, (v % 1000) / 10),
                ));
            }
            details.push((
                "reserved memory (nvmlDeviceGetMemoryInfo_v2)".into(),
                if l.nvml.has_memory_v2() {
                    "available".into()
                } else {
                    "not exported (driver older than R510): reserved memory is unknown".into()
                },
            ));
            let list = |f: Option<ProcessFn>| match f {
                Some(f) => format!("{} ({}-byte entries)", f.name, f.layout.stride()),
                None => "not exported".into(),
            };
            details.push(("compute process list".into(), list(l.nvml.compute)));
            details.push(("graphics process list".into(), list(l.nvml.graphics)));
            details.push(("MPS client list".into(), list(l.nvml.mps)));
            if let Some(p) = l.nvml.pci_symbol() {
                details.push(("PCI info".into(), p.into()));
            }
            details.push(("nvmlInit calls".into(), l.lock().init_calls.to_string()));
            if let Some(d) = crate::gpu::backend::dropped_detail(l.dropped_parts()) {
                details.push(("process rows dropped".into(), d));
            }
            state
        }
    };
    SourceReport {
        source: GpuQuerySource::Nvml,
        state,
        details,
        dropped_process_rows: 0,
    }
}

/// GPU `index`'s memory model and why, or why it is not known.
fn memory_summary(l: &Loaded, index: u32) -> String {
    match l.run(|l| l.device_info(index)) {
        Ok(d) => match (d.memory_model, d.memory_model_evidence) {
            (Some(m), Some(why)) => format!("{m}: {why}"),
            (Some(m), None) => m.to_string(),
            (None, _) => "kind not known: the driver does not say its addressing mode \
                          (nvmlDeviceGetAddressingMode, R580 and later)"
                .into(),
        },
        Err(e) => format!("not read: {e}"),
    }
}
