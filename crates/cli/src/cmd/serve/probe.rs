//! The fallback's health, off the scrape path. While NVML gives the figures a measurement runs
//! no `nvidia-smi` (a run takes ~20 ms on an idle host, seconds on a cold one, and contends with
//! the driver); whether the fallback would answer is probed on a thread of its own instead:
//! after the first measurement, then once every `--fallback-probe-interval`. A measurement in which NVML did not answer
//! probes it itself, and that probe counts as the latest.
//!
//! One `nvidia-smi` at a time: a probe and a measurement that reads its figures from it take
//! [`GATE`] first. A measurement takes it for its whole length unless the last one found NVML
//! answering (it then reads `nvidia-smi`); the probe thread waits for the first measurement
//! and skips a round while the gate is held (a hanging `nvidia-smi` then costs one run at a
//! time, not one per asker). Beneath the gate, the library itself never runs two `nvidia-smi`
//! at once (the devices' own measurement, started while the first one still runs, waits there).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hypomnesis::SourceReport;

use super::model::FALLBACK;

/// The latest probe of the fallback: when it was made, and what it said.
static LAST: Mutex<Option<(Instant, SourceReport)>> = Mutex::new(None);

/// Held while `nvidia-smi` may run for the exporter: by a probe, or by a measurement that
/// reads its figures from it.
static GATE: Mutex<()> = Mutex::new(());

/// Whether a measurement has been made: the probe thread waits for the first, which tells
/// whether NVML answers (where it does not, that measurement probes the fallback itself).
static MEASURED: AtomicBool = AtomicBool::new(false);

/// Whether the latest measurement found NVML answering.
static NVML_ANSWERED: AtomicBool = AtomicBool::new(false);

/// The gate, for a whole measurement: held unless the latest measurement found NVML answering
/// (the first, not knowing, holds it too); `None` when NVML answered.
pub fn gate_for_measurement() -> Option<MutexGuard<'static, ()>> {
    (!NVML_ANSWERED.load(Ordering::Relaxed))
        .then(|| GATE.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The gate, for a measurement of the devices alone (made while a whole one is late): held
/// only where NVML is known not to answer. Before the first measurement has ended it is not
/// taken: that one may be stalled on a process's file while holding it.
pub fn gate_for_devices() -> Option<MutexGuard<'static, ()>> {
    (MEASURED.load(Ordering::Relaxed) && !NVML_ANSWERED.load(Ordering::Relaxed))
        .then(|| GATE.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Says a measurement has been made, and whether NVML answered in it.
pub fn measured(nvml_answered: bool) {
    NVML_ANSWERED.store(nvml_answered, Ordering::Relaxed);
    MEASURED.store(true, Ordering::Relaxed);
}

/// Probes the fallback now and keeps the answer as the latest: one `nvidia-smi` run at most,
/// made with the gate held (`held`, the caller's, or taken here). A probe that finished while
/// this one waited for the gate answers for it (no second run).
pub fn now(held: Option<&MutexGuard<'static, ()>>) -> (Instant, SourceReport) {
    let asked = Instant::now();
    let _gate = match held {
        Some(_) => None,
        None => Some(GATE.lock().unwrap_or_else(PoisonError::into_inner)),
    };
    if let Some((at, report)) = last()
        && at >= asked
    {
        return (at, report);
    }
    run()
}

/// The probe itself (the gate held).
fn run() -> (Instant, SourceReport) {
    let report = hypomnesis::probe_source(FALLBACK);
    let at = Instant::now();
    *LAST.lock().unwrap_or_else(PoisonError::into_inner) = Some((at, report.clone()));
    (at, report)
}

/// The latest probe, if one has finished.
pub fn last() -> Option<(Instant, SourceReport)> {
    LAST.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// When the next probe is due after one made at `at` (now, when none was made).
fn due(last: Option<Instant>, interval: Duration, now: Instant) -> Duration {
    last.and_then(|at| at.checked_add(interval))
        .map_or(Duration::ZERO, |due| due.saturating_duration_since(now))
}

/// Starts the thread that probes the fallback once the first measurement is made and then
/// whenever the latest probe is `interval` old. It lives as long as the process.
pub fn start(interval: Duration) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("hmn-probe".into())
        .spawn(move || {
            while !MEASURED.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            loop {
                let wait = due(last().map(|(at, _)| at), interval, Instant::now());
                if !wait.is_zero() {
                    std::thread::sleep(wait);
                    continue;
                }
                // Busy: a measurement runs `nvidia-smi` (and probes it as it ends).
                match GATE.try_lock() {
                    Ok(_gate) => {
                        run();
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(250)),
                }
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_due_an_interval_after_the_last() {
        let t = Instant::now();
        let five = Duration::from_secs(300);
        assert_eq!(due(None, five, t), Duration::ZERO, "none yet: now");
        assert_eq!(due(Some(t), five, t), five);
        let later = t + Duration::from_secs(100);
        assert_eq!(due(Some(t), five, later), Duration::from_secs(200));
        assert_eq!(
            due(Some(t), five, t + Duration::from_secs(301)),
            Duration::ZERO
        );
        // A probe made meanwhile (by a measurement) puts the next one off.
        assert_eq!(due(Some(later), five, later), five);
    }
}
