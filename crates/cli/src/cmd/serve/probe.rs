//! The fallback's health, off the scrape path. While NVML gives the figures a measurement runs
//! no `nvidia-smi` (a run takes ~20 ms on an idle host, seconds on a cold one, and contends with
//! the driver); whether the fallback would answer is probed on a thread of its own instead: at
//! start, then once every `--fallback-probe-interval`. A measurement in which NVML did not answer
//! probes it itself, and that probe counts as the latest.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hypomnesis::SourceReport;

use super::model::FALLBACK;

/// The latest probe of the fallback: when it was made, and what it said.
static LAST: Mutex<Option<(Instant, SourceReport)>> = Mutex::new(None);

/// Probes the fallback now (blocking: one `nvidia-smi` run at most) and keeps the answer as
/// the latest.
pub fn now() -> (Instant, SourceReport) {
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

/// Starts the thread that probes the fallback at once and then whenever the latest probe is
/// `interval` old. It lives as long as the process.
pub fn start(interval: Duration) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("hmn-probe".into())
        .spawn(move || {
            loop {
                let wait = due(last().map(|(at, _)| at), interval, Instant::now());
                if wait.is_zero() {
                    now();
                } else {
                    std::thread::sleep(wait);
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
