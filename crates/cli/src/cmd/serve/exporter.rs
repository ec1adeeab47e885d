//! What `/metrics` answers: the last measurement, made again when older than the minimum
//! interval. Measurements run off the request path, one at a time, in a task of their own (a
//! scraper that hangs up cannot cancel one and let a second start). A scrape waits for a
//! running measurement at most its budget: past it, a driver call or a file read is taken to be
//! stalled and the scrape gets the last good figures marked stale (`scrape_success 0`,
//! `measurement_stalled_seconds`, and what it waits for in `measurement_waiting_info` and on
//! stderr), or none yet, instead of hanging with the driver.
//!
//! Beside each measurement runs a measurement of the devices alone (their figures need no
//! per-process read): while the whole one is stalled on a process's file or a process-list
//! call, the devices' figures are this one's, fresh.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hypomnesis::bounded::{Unanswered, Worker};
use tokio::sync::watch;

use super::exposition::{self, Stall};
use super::measure;
use super::model::Measurement;
use crate::view::printable::printable;

/// How long a scrape waits for a measurement in progress.
pub const SCRAPE_BUDGET: Duration = Duration::from_secs(5);

/// The measurements and what refreshes them.
#[derive(Debug)]
pub struct Exporter {
    min_interval: Duration,
    budget: Duration,
    /// The whole measurement.
    full: Arc<Slot>,
    /// The devices alone.
    devices: Arc<Slot>,
    /// The most per-process series an exposition carries (`None`: all).
    max_process_series: Option<usize>,
    /// The most allocation series an exposition carries (`None`: all).
    max_allocation_series: Option<usize>,
}

/// One kind of measurement: its last result, whether one runs, and how it is made.
#[derive(Debug)]
struct Slot {
    state: Mutex<State>,
    /// Counts finished measurements, for scrapes waiting on one.
    finished: watch::Sender<u64>,
    measure: fn() -> Measurement,
    /// The one thread measurements run on: a measurement stuck in the driver holds it, and no
    /// other starts while it does.
    worker: Worker,
}

#[derive(Debug, Default)]
struct State {
    measurements: u64,
    last: Option<Last>,
    /// Since when a measurement runs, if one does.
    running: Option<Instant>,
    /// Whether the running one's stall was said on stderr.
    said: bool,
}

#[derive(Debug, Clone)]
struct Last {
    at: Instant,
    sample: Measurement,
    took: Duration,
}

/// What a slot holds after a scrape's wait.
struct View {
    last: Option<Last>,
    measurements: u64,
    /// How long the running measurement has run, when it has run past the wait.
    stalled: Option<Duration>,
}

impl Slot {
    fn new(name: &str, measure: fn() -> Measurement) -> Self {
        Self {
            state: Mutex::new(State::default()),
            finished: watch::channel(0).0,
            measure,
            worker: Worker::new(name),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the last result is younger than `min_interval`.
    fn fresh(&self, min_interval: Duration) -> bool {
        self.lock()
            .last
            .as_ref()
            .is_some_and(|l| l.at.elapsed() < min_interval)
    }

    /// Starts a measurement unless one runs; a receiver of its end, not yet marked changed.
    fn start(self: &Arc<Self>) -> watch::Receiver<u64> {
        let mut finished = self.finished.subscribe();
        {
            let mut state = self.lock();
            if state.running.is_none() {
                let started = Instant::now();
                state.running = Some(started);
                state.said = false;
                let measure = self.measure;
                let slot = Arc::clone(self);
                let job = move || {
                    let sample = measure();
                    crate::heap::give_back();
                    sample
                };
                let then = move |sample: Result<Measurement, Unanswered>| {
                    slot.finish(sample.unwrap_or_else(|_| Measurement::failed()), started);
                };
                if let Err(why) = self.worker.start(job, then) {
                    // Never busy (a slot starts one measurement at a time); a thread that
                    // cannot start is a failed measurement.
                    drop(state);
                    eprintln!("hmn serve: a measurement could not start: {why}");
                    self.finish(Measurement::failed(), started);
                    return finished;
                }
            }
            finished.mark_unchanged();
        }
        finished
    }

    /// A measurement's end (on the worker's thread): its result becomes the last one.
    fn finish(&self, sample: Measurement, started: Instant) {
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

    fn view(&self) -> View {
        let state = self.lock();
        View {
            last: state.last.clone(),
            measurements: state.measurements,
            stalled: state.running.map(|since| since.elapsed()),
        }
    }

    /// Whether the running measurement's stall is to be said now (once per stall).
    fn say_stall(&self) -> bool {
        let mut state = self.lock();
        let say = state.running.is_some() && !state.said;
        state.said |= say;
        say
    }
}

impl Exporter {
    pub fn new(
        min_interval: Duration,
        max_process_series: Option<usize>,
        max_allocation_series: Option<usize>,
    ) -> Arc<Self> {
        let mut e = Self::with(
            min_interval,
            SCRAPE_BUDGET,
            measure::measure,
            measure::measure_devices,
        );
        if let Some(this) = Arc::get_mut(&mut e) {
            this.max_process_series = max_process_series;
            this.max_allocation_series = max_allocation_series;
        }
        e
    }

    fn with(
        min_interval: Duration,
        budget: Duration,
        full: fn() -> Measurement,
        devices: fn() -> Measurement,
    ) -> Arc<Self> {
        Arc::new(Self {
            min_interval,
            budget,
            full: Arc::new(Slot::new("measure", full)),
            devices: Arc::new(Slot::new("measure-devices", devices)),
            max_process_series: None,
            max_allocation_series: None,
        })
    }

    /// The exposition: of a measurement younger than the minimum interval, made now if needed
    /// (and waited for up to the budget), or the last one marked stale, then with the devices'
    /// figures of the measurement of the devices alone.
    pub async fn current(self: &Arc<Self>) -> String {
        if self.full.fresh(self.min_interval) {
            return self.render(self.full.view(), None, None);
        }
        let budget = self.budget;
        // A measurement already stalled past a budget is not waited for again: each scrape
        // behind it answers as soon as the devices' own measurement does.
        let stalled_before = self.full.view().stalled.is_some_and(|ran| ran >= budget);
        // The devices alone are measured only when the whole measurement is late (half the
        // budget without an answer, or stalled before): a scrape otherwise makes one.
        let started = tokio::time::Instant::now();
        let mut a = self.full.start();
        let first_wait = if stalled_before {
            Duration::ZERO
        } else {
            budget / 2
        };
        if tokio::time::timeout(first_wait, a.changed()).await.is_err() {
            let mut b = self.devices.start();
            let whole = if stalled_before {
                Duration::ZERO
            } else {
                budget.saturating_sub(started.elapsed())
            };
            let rest = budget.saturating_sub(started.elapsed());
            let _ = tokio::join!(
                tokio::time::timeout(whole, a.changed()),
                tokio::time::timeout(rest, b.changed())
            );
        }
        let v = self.full.view();
        let stall = v.stalled.map(|ran| {
            let waiting: Vec<String> = hypomnesis::in_flight()
                .into_iter()
                // Begun a moment after the measurement, and still waiting: what holds it up.
                .filter(|op| op.age() >= budget.min(ran) / 2)
                .map(|op| op.to_string())
                .collect();
            if self.full.say_stall() {
                let on = waiting.first().map_or_else(
                    || "the measurement has not returned".to_string(),
                    |w| format!("still waiting for {w}"),
                );
                eprintln!(
                    "hmn serve: a measurement has run {} without finishing: {}; the devices' \
                     figures come from a measurement of their own meanwhile",
                    crate::view::human(ran),
                    printable(&on)
                );
            }
            Stall { ran, waiting }
        });
        let devices = self.devices.view();
        let fresh_devices = devices.last.filter(|_| devices.stalled.is_none());
        self.render(v, stall, fresh_devices)
    }

    /// `v`'s exposition; while it is stalled (`stall`), with the devices' figures of
    /// `devices` (a measurement of them alone that finished).
    fn render(&self, v: View, stall: Option<Stall>, devices: Option<Last>) -> String {
        let (mut sample, took) = match v.last {
            Some(l) => (l.sample, l.took),
            None => (Measurement::failed(), Duration::ZERO),
        };
        sample.max_process_series = self.max_process_series;
        sample.max_allocation_series = self.max_allocation_series;
        if stall.is_some()
            && let Some(d) = devices
        {
            sample.devices_from(d.sample);
        }
        let body = exposition::render(sample, took, v.measurements, stall);
        // The copy of the sample the body was made from is freed: its pages go back now, not
        // at the next measurement (with 2,000 GPU processes, about a megabyte between scrapes).
        crate::heap::give_back();
        body
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn counted() -> Measurement {
        Measurement {
            counted: Some(1),
            ..Measurement::default()
        }
    }

    fn stuck() -> Measurement {
        std::thread::sleep(Duration::from_secs(3));
        counted()
    }

    fn value<'a>(text: &'a str, series: &str) -> Option<&'a str> {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
    }

    /// Two devices counted by a measurement of the devices alone.
    fn two_devices() -> Measurement {
        Measurement {
            counted: Some(2),
            ..Measurement::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stalled_measurement_answers_within_the_budget_and_says_so() {
        let e = Exporter::with(
            Duration::from_secs(10),
            Duration::from_millis(200),
            stuck,
            two_devices,
        );
        let t = Instant::now();
        let text = e.current().await;
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(value(&text, "hypomnesis_scrape_success"), Some("0"));
        let stalled: f64 = value(&text, "hypomnesis_measurement_stalled_seconds")
            .unwrap()
            .parse()
            .unwrap();
        assert!(stalled >= 0.2, "{text}");
        // The devices' figures do not wait on the stalled measurement: they are their own.
        assert_eq!(value(&text, "hypomnesis_gpu_devices"), Some("2"), "{text}");
        // The one measurement finishes; the next scrape has its figures, not stale.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let text = e.current().await;
        assert_eq!(value(&text, "hypomnesis_scrape_success"), Some("1"));
        assert_eq!(
            value(&text, "hypomnesis_measurement_stalled_seconds"),
            Some("0.0")
        );
        assert_eq!(value(&text, "hypomnesis_gpu_devices"), Some("1"), "{text}");
        assert!(!text.contains("measurement_waiting_info{"), "{text}");
        assert_eq!(
            value(&text, "hypomnesis_measurements_total"),
            Some("1"),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quick_measurement_is_shared_within_the_minimum_interval() {
        let e = Exporter::with(
            Duration::from_secs(60),
            Duration::from_secs(5),
            counted,
            two_devices,
        );
        let a = e.current().await;
        let b = e.current().await;
        assert_eq!(a, b);
        assert_eq!(value(&a, "hypomnesis_measurements_total"), Some("1"));
        assert_eq!(
            value(&a, "hypomnesis_gpu_devices"),
            Some("1"),
            "the whole one's"
        );
    }
}
