//! What `/metrics` answers: the last measurement, made again when older than the minimum
//! interval. Measurements run off the request path, one at a time, in a task of their own (a
//! scraper that hangs up cannot cancel one and let a second start). A scrape waits for a
//! running measurement at most its budget: past it, a driver call is taken to be stalled and
//! the scrape gets the last good figures marked stale (`scrape_success 0`,
//! `measurement_stalled_seconds`), or none yet, instead of hanging with the driver.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::exposition;
use super::measure;
use super::model::Sample;

/// How long a scrape waits for a measurement in progress.
pub const SCRAPE_BUDGET: Duration = Duration::from_secs(5);

/// The measurements and what refreshes them.
#[derive(Debug)]
pub struct Exporter {
    min_interval: Duration,
    budget: Duration,
    state: Mutex<State>,
    /// Counts finished measurements, for scrapes waiting on one.
    finished: watch::Sender<u64>,
    /// How a measurement is made (the real one, or a test's).
    measure: fn() -> Sample,
    /// The most per-process series an exposition carries (`None`: all).
    max_process_series: Option<usize>,
}

#[derive(Debug, Default)]
struct State {
    measurements: u64,
    last: Option<Last>,
    /// Since when a measurement runs, if one does.
    running: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Last {
    at: Instant,
    sample: Sample,
    took: Duration,
}

impl Exporter {
    pub fn new(min_interval: Duration, max_process_series: Option<usize>) -> Arc<Self> {
        let mut e = Self::with(min_interval, SCRAPE_BUDGET, measure::measure);
        if let Some(this) = Arc::get_mut(&mut e) {
            this.max_process_series = max_process_series;
        }
        e
    }

    fn with(min_interval: Duration, budget: Duration, measure: fn() -> Sample) -> Arc<Self> {
        Arc::new(Self {
            min_interval,
            budget,
            state: Mutex::new(State::default()),
            finished: watch::channel(0).0,
            measure,
            max_process_series: None,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The exposition: of a measurement younger than the minimum interval, made now if needed
    /// (and waited for up to the budget), or the last one marked stale.
    pub async fn current(self: &Arc<Self>) -> String {
        let mut finished = self.finished.subscribe();
        {
            let mut state = self.lock();
            if let Some(last) = &state.last
                && last.at.elapsed() < self.min_interval
            {
                return exposition::render(
                    last.sample.clone(),
                    last.took,
                    state.measurements,
                    None,
                );
            }
            if state.running.is_none() {
                state.running = Some(Instant::now());
                tokio::spawn(Arc::clone(self).measure());
            }
            finished.mark_unchanged();
        }
        let _ = tokio::time::timeout(self.budget, finished.changed()).await;
        let state = self.lock();
        let stalled = state.running.map(|since| since.elapsed());
        match (&state.last, stalled) {
            // Finished while this scrape waited, or by another scrape's measurement.
            (Some(last), None) => {
                exposition::render(last.sample.clone(), last.took, state.measurements, None)
            }
            (Some(last), Some(_)) => {
                exposition::render(last.sample.clone(), last.took, state.measurements, stalled)
            }
            (None, _) => exposition::render(
                Sample::failed(),
                Duration::ZERO,
                state.measurements,
                stalled.or(Some(Duration::ZERO)),
            ),
        }
    }

    /// One measurement on the blocking pool; its result becomes the last one.
    async fn measure(self: Arc<Self>) {
        let started = Instant::now();
        let mut sample = tokio::task::spawn_blocking(self.measure)
            .await
            .unwrap_or_else(|_| Sample::failed());
        sample.max_process_series = self.max_process_series;
        let took = started.elapsed();
        let mut state = self.lock();
        state.measurements += 1;
        state.last = Some(Last {
            at: Instant::now(),
            sample,
            took,
        });
        state.running = None;
        let n = state.measurements;
        drop(state);
        self.finished.send_replace(n);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn counted() -> Sample {
        Sample {
            counted: Some(1),
            ..Sample::default()
        }
    }

    fn stuck() -> Sample {
        std::thread::sleep(Duration::from_secs(3));
        counted()
    }

    fn value<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_measurement_answers_within_the_budget_and_says_so() {
        let e = Exporter::with(Duration::from_secs(10), Duration::from_millis(200), stuck);
        let t = Instant::now();
        let text = e.current().await;
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(value(&text, "hypomnesis_scrape_success"), Some("0"));
        let stalled: f64 = value(&text, "hypomnesis_measurement_stalled_seconds")
            .unwrap()
            .parse()
            .unwrap();
        assert!(stalled >= 0.2, "{text}");
        assert_eq!(
            value(&text, "hypomnesis_gpu_devices"),
            None,
            "no figures yet"
        );
        // The one measurement finishes; the next scrape has its figures, not stale.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let text = e.current().await;
        assert_eq!(value(&text, "hypomnesis_scrape_success"), Some("1"));
        assert_eq!(
            value(&text, "hypomnesis_measurement_stalled_seconds"),
            Some("0.0")
        );
        assert_eq!(
            value(&text, "hypomnesis_measurements_total"),
            Some("1"),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quick_measurement_is_shared_within_the_minimum_interval() {
        let e = Exporter::with(Duration::from_secs(60), Duration::from_secs(5), counted);
        let a = e.current().await;
        let b = e.current().await;
        assert_eq!(a, b);
        assert_eq!(value(&a, "hypomnesis_measurements_total"), Some("1"));
        assert_eq!(value(&a, "hypomnesis_gpu_devices"), Some("1"));
    }
}
