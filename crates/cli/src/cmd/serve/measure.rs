//! One measurement of the host for the exporter: a frame of the one sampler, as the exposition
//! sees it, and the sources' reports: every source's but the fallback's, whose health is
//! probed apart while NVML answers (`super::probe`). Who each process is (name, owner,
//! container) is read once per process lifetime: a fresh measurement reads each listed
//! process's start time, and the rest only for a process it has not seen.

use std::sync::{Mutex, PoisonError};

use super::model::{FALLBACK, Measurement};
use super::probe;
use crate::collect::known::KnownProcesses;
use hypomnesis::sampling::{Failure, Frame, Sampler, Want};

/// What the exporter reads each measurement.
pub const WANT: Want = {
    let mut w = Want::NONE;
    w.devices = true;
    w.processes = true;
    // Named from [`KnownProcesses`], once per process rather than once per row and measurement.
    w.unnamed = true;
    w.mig = true;
    w
};

/// The processes the exporter has seen, across measurements (one runs at a time).
static KNOWN: Mutex<Option<KnownProcesses>> = Mutex::new(None);

/// The ghosts' watch, across measurements: activity followed from scrape to scrape, and a
/// process in `D` stuck when it is at two of them (no scrape waits for a second look).
static GHOSTS: Mutex<Option<hypomnesis::GhostWatch>> = Mutex::new(None);

/// Why the latest look for ghosts failed, to say each failure once.
static LAST_GHOST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Whether measurements look for ghosts (`hmn serve --no-ghosts` turns it off).
static GHOSTS_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Sets whether measurements look for ghosts, and how (`None`: they do not).
pub fn look_for_ghosts(options: Option<hypomnesis::GhostOptions>) {
    GHOSTS_ON.store(options.is_some(), std::sync::atomic::Ordering::Relaxed);
    *GHOSTS.lock().unwrap_or_else(PoisonError::into_inner) =
        options.map(hypomnesis::GhostWatch::new);
}

/// The ghosts of the GPUs whose processes `sample` listed, looked for at the rows it read,
/// their `stat` read through the files `known` keeps open.
fn ghosts(sample: &Measurement, known: &mut KnownProcesses) -> Option<hypomnesis::GhostReport> {
    let rows: Vec<_> = sample
        .devices
        .iter()
        .filter(|d| sample.listed.contains(&d.index))
        .map(|d| {
            let procs = sample
                .processes
                .iter()
                .filter(|p| p.device_index == d.index)
                .cloned()
                .collect();
            (d.clone(), procs)
        })
        .collect();
    let mut watch = GHOSTS.lock().unwrap_or_else(PoisonError::into_inner);
    let watch = watch
        .get_or_insert_with(|| hypomnesis::GhostWatch::new(hypomnesis::GhostOptions::default()));
    let report = watch
        .look_at_rows_with(&rows, known.identities())
        .map_err(|e| e.to_string());
    // Said on stderr when looking starts failing, and when it works again.
    let mut last = LAST_GHOST_FAILURE
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let now = report.as_ref().err().cloned();
    if *last != now {
        match &now {
            Some(why) => eprintln!("hmn: ghosts: {why}"),
            None if last.is_some() => eprintln!("hmn: ghosts: looking again"),
            None => {}
        }
        *last = now;
    }
    report.ok()
}

/// Measures every device and process list, then asks each source but the fallback for its
/// report; the fallback's is the latest probe's, or one made now when NVML did not answer.
/// Blocking: it loads libraries, and runs `nvidia-smi` only where NVML fails.
pub fn measure() -> Measurement {
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let known = known.get_or_insert_with(KnownProcesses::default);
    // One `nvidia-smi` at a time: unless NVML answered last time, this measurement holds the
    // probe's gate throughout (see `probe`).
    let gate = probe::gate_for_measurement();
    let mut sample = sample_of(Sampler::new(WANT).frame(&[]), known);
    sample.sources = hypomnesis::sources_where(|s| s != FALLBACK);
    probe::measured(sample.sources.iter().any(|r| {
        r.source == super::model::PRIMARY && r.state == hypomnesis::SourceState::Answered
    }));
    if sample.needs_fallback() {
        let (at, report) = probe::now(gate.as_ref());
        sample.add_probed(report, at, false);
    } else if let Some((at, report)) = probe::last() {
        sample.add_probed(report, at, true);
    }
    drop(gate);
    sample.kube = super::allocation::read(&sample.devices);
    if cfg!(target_os = "linux") && GHOSTS_ON.load(std::sync::atomic::Ordering::Relaxed) {
        sample.ghosts = ghosts(&sample, known);
    }
    sample
}

/// What the exporter reads of the devices alone: no process list, nothing per process.
pub const DEVICES: Want = {
    let mut w = Want::NONE;
    w.devices = true;
    w.mig = true;
    w
};

/// The devices' figures alone (count, memory, MIG instances), which need no per-process read:
/// what the exposition shows while a whole measurement is stalled on one.
pub fn measure_devices() -> Measurement {
    // Where NVML is down these come from `nvidia-smi` too: one run at a time.
    let gate = probe::gate_for_devices();
    let frame = Sampler::new(DEVICES).frame(&[]);
    drop(gate);
    let mut s = Measurement {
        counted: frame.count.ok(),
        ..Measurement::default()
    };
    for (i, d) in (0_u32..).zip(frame.devices) {
        s.add_device(i, d.info);
        s.mig.extend(d.mig.unwrap_or_default());
    }
    s
}

/// The exposition's view of a frame, the processes named and placed through `known`. A host
/// without GPUs is not a failed measurement.
pub fn sample_of(frame: Frame, known: &mut KnownProcesses) -> Measurement {
    let mut s = Measurement {
        counted: frame.count.ok(),
        ..Measurement::default()
    };
    for (i, d) in (0_u32..).zip(frame.devices) {
        s.add_device(i, d.info);
        match d.processes {
            Some(Ok(list)) => {
                s.processes.extend(list);
                s.listed.push(i);
            }
            _ => s.process_errors += 1,
        }
        s.mig.extend(d.mig.unwrap_or_default());
    }
    let mut parts = hypomnesis::ContextParts::NONE;
    parts.user = true;
    parts.container = true;
    let who = known.who(&s.processes, parts);
    for p in &mut s.processes {
        if p.name.is_none() {
            p.name = who.names.get(&p.pid).cloned();
        }
    }
    s.contexts = who.contexts;
    s
}

impl Measurement {
    /// Device `i`'s figures, or why it was not read (a frame's device).
    fn add_device(&mut self, i: u32, info: Option<Result<hypomnesis::GpuDeviceInfo, Failure>>) {
        match info {
            Some(Ok(info)) => self.devices.push(info),
            Some(Err(f)) => self.unreadable.push((i, f.kind)),
            None => self.unreadable.push((i, hypomnesis::ErrorKind::Other)),
        }
    }
}
