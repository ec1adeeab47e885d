//! Spill detection for Windows WDDM: when a GPU's dedicated memory is nearly full, the driver
//! moves allocations into shared system memory, and a job slows down without failing.
//!
//! [`SpillTracker`] is the tracker of the 0.2.x API: made for a device, it samples that
//! adapter's counters itself at each [`SpillTracker::observe`] (Windows, feature `pdh`), and
//! [`SpillTracker::into_report`] gives the [`SpillReport`]: each episode with the labels of the
//! observations that began and ended it. Elsewhere it is built all the same and measures
//! nothing ([`SpillTracker::is_measurable`] is `false`). [`snapshot_is_spilling`] is one sample.
//!
//! Under it is a pure state machine, [`SpillMachine`], for callers with samples of their own.
//!
//! ```
//! use hypomnesis::SpillTracker;
//!
//! # fn main() -> hypomnesis::Result<()> {
//! let mut tracker = SpillTracker::new(0)?.with_shared_growth_threshold(512 << 20);
//! for step in 0..3 {
//!     // ... one training step ...
//!     tracker.observe(format!("step {step}"));
//! }
//! let report = tracker.into_report();
//! if report.spilled() {
//!     println!("spilled from {:?}", report.first_spill_label());
//! }
//! # Ok(()) }
//! ```

mod machine;
mod report;

use std::time::Instant;

pub use machine::{SpillMachine, SpillSample, SpillSpan, SpillThresholds, Transition};
#[cfg(feature = "test-helpers")]
pub use report::SpillReportBuilder;
pub use report::{SpillEpisode, SpillReport};

use crate::error::Result;

/// Dedicated use, percent of the adapter's dedicated limit, at or above which it counts as
/// full.
pub const DEFAULT_DEDICATED_THRESHOLD_PCT: u64 = 85;

/// Growth of shared use over its baseline, bytes, at or above which memory has spilled (a
/// single sample, [`snapshot_is_spilling`], compares shared use itself with it).
pub const DEFAULT_SHARED_GROWTH_BYTES: u64 = 256 * 1024 * 1024;

/// Whether dedicated use is at or above [`DEFAULT_DEDICATED_THRESHOLD_PCT`] of the limit.
fn at_default_threshold(dedicated: u64, limit: u64) -> bool {
    limit > 0
        && u128::from(dedicated) * 100
            >= u128::from(limit) * u128::from(DEFAULT_DEDICATED_THRESHOLD_PCT)
}

/// One sample of GPU `device_index`'s adapter counters: spilling when dedicated use is at or
/// above [`DEFAULT_DEDICATED_THRESHOLD_PCT`] of the adapter's dedicated limit **and** shared
/// use is at or above [`DEFAULT_SHARED_GROWTH_BYTES`].
///
/// `None` wherever spill is not measurable ([`crate::gpu::is_spill_measurable`] is `false`: every
/// platform but Windows, a build without `pdh`) or the counters of that device cannot be read
/// now; never a `false` that was not measured.
#[must_use]
pub fn snapshot_is_spilling(device_index: u32) -> Option<bool> {
    if !crate::gpu::is_spill_measurable() {
        return None;
    }
    let r = crate::gpu::adapter_residency(device_index).ok()?;
    Some(is_spilling_now(
        r.dedicated_bytes,
        r.shared_bytes,
        r.capacity_bytes,
    ))
}

/// The rule of [`snapshot_is_spilling`] on one sample's figures.
#[must_use]
pub fn is_spilling_now(dedicated_bytes: u64, shared_bytes: u64, limit_bytes: u64) -> bool {
    at_default_threshold(dedicated_bytes, limit_bytes)
        && shared_bytes >= DEFAULT_SHARED_GROWTH_BYTES
}

/// Where a tracker's samples come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// The adapter counters of this device, read at each `observe`.
    Live(u32),
    /// The caller's, through `observe_sample`.
    Caller,
    /// None: spill is not measurable here.
    Nothing,
}

/// Follows one GPU's spill over a run (see the module docs).
#[derive(Debug, Clone)]
pub struct SpillTracker {
    feed: Feed,
    started: Instant,
    machine: SpillMachine,
    /// Start and end labels of each of the machine's spans, in order.
    labels: Vec<(String, Option<String>)>,
    missed: usize,
}

impl SpillTracker {
    /// A tracker for GPU `device_index`. Where spill is measurable (Windows with `pdh`), it
    /// reads the adapter's counters once now: their dedicated limit, and the shared use that
    /// is the baseline of the growth threshold. Elsewhere it is made all the same, and measures
    /// nothing.
    ///
    /// # Errors
    ///
    /// Where spill is measurable, the error of that first reading (an index past the last
    /// device, counters that cannot be read). Never elsewhere.
    pub fn new(device_index: u32) -> Result<Self> {
        if !crate::gpu::is_spill_measurable() {
            return Ok(Self::with(
                Feed::Nothing,
                SpillMachine::new(0, thresholds()),
            ));
        }
        let r = crate::gpu::adapter_residency(device_index)?;
        let machine =
            SpillMachine::new(r.capacity_bytes, thresholds()).with_baseline(r.shared_bytes);
        Ok(Self::with(Feed::Live(device_index), machine))
    }

    /// A tracker of an adapter with `dedicated_limit_bytes` of dedicated memory whose samples
    /// the caller gives ([`Self::observe_sample`]); the first sample's shared use is the
    /// baseline. Measurable by construction.
    #[must_use]
    pub fn fed(dedicated_limit_bytes: u64) -> Self {
        Self::with(
            Feed::Caller,
            SpillMachine::new(dedicated_limit_bytes, thresholds()),
        )
    }

    fn with(feed: Feed, machine: SpillMachine) -> Self {
        Self {
            feed,
            started: Instant::now(),
            machine,
            labels: Vec::new(),
            missed: 0,
        }
    }

    /// The same tracker counting the adapter full at `bytes` of dedicated use (instead of
    /// [`DEFAULT_DEDICATED_THRESHOLD_PCT`] of its limit).
    #[must_use]
    pub const fn with_dedicated_threshold(mut self, bytes: u64) -> Self {
        self.machine.thresholds.dedicated_bytes = Some(bytes);
        self
    }

    /// The same tracker counting a spill from `bytes` of shared growth over the baseline
    /// (instead of [`DEFAULT_SHARED_GROWTH_BYTES`]).
    #[must_use]
    pub const fn with_shared_growth_threshold(mut self, bytes: u64) -> Self {
        self.machine.thresholds.shared_margin_bytes = bytes;
        self
    }

    /// The same tracker with these thresholds (a fraction of the limit, say).
    #[must_use]
    pub const fn with_thresholds(mut self, thresholds: SpillThresholds) -> Self {
        self.machine.thresholds = thresholds;
        self
    }

    /// Takes one sample of the adapter now, labelled `label` (the label names the episode it
    /// starts or ends). Nothing where spill is not measurable or the tracker is fed by its
    /// caller; a sample that cannot be read is skipped and counted
    /// ([`Self::missed_observations`]).
    pub fn observe(&mut self, label: impl Into<String>) {
        let Feed::Live(index) = self.feed else {
            return;
        };
        match crate::gpu::adapter_residency(index) {
            Ok(r) => {
                let at = self.started.elapsed();
                self.step(
                    label.into(),
                    SpillSample::new(at, r.dedicated_bytes, r.shared_bytes),
                );
            }
            Err(e) => {
                crate::debug_log!("spill: GPU {index}: {e}");
                self.missed = self.missed.saturating_add(1);
            }
        }
    }

    /// Folds in a sample the caller read, labelled `label`; returns whether the adapter spills
    /// now. Nothing (and `false`) where spill is not measurable.
    pub fn observe_sample(&mut self, label: impl Into<String>, sample: SpillSample) -> bool {
        if self.feed == Feed::Nothing {
            return false;
        }
        self.step(label.into(), sample)
    }

    fn step(&mut self, label: String, sample: SpillSample) -> bool {
        let t = self.machine.step(sample);
        match t {
            Transition::Started => self.labels.push((label, None)),
            Transition::Ended => {
                if let Some(last) = self.labels.last_mut() {
                    last.1 = Some(label);
                }
            }
            Transition::Quiet | Transition::Continued => {}
        }
        t.spilling()
    }

    /// Whether the last sample was spilling.
    #[must_use]
    pub fn is_spilling(&self) -> bool {
        self.machine.spilling()
    }

    /// Whether any sample so far was spilling.
    #[must_use]
    pub fn has_spilled(&self) -> bool {
        !self.machine.spans().is_empty()
    }

    /// Whether this tracker has counters to sample (or a caller's samples).
    #[must_use]
    pub fn is_measurable(&self) -> bool {
        self.feed != Feed::Nothing
    }

    /// Samples that could not be read, and were left out.
    #[must_use]
    pub fn missed_observations(&self) -> usize {
        self.missed
    }

    /// The state machine under the tracker (times, peaks).
    #[must_use]
    pub fn machine(&self) -> &SpillMachine {
        &self.machine
    }

    /// The report so far, the tracker kept.
    #[must_use]
    pub fn report(&self) -> SpillReport {
        let now = self.machine.last_at().unwrap_or_default();
        let episodes = self
            .machine
            .spans()
            .iter()
            .zip(&self.labels)
            .map(|(s, (start, end))| SpillEpisode {
                start_label: start.clone(),
                end_label: end.clone(),
                peak_shared_bytes: s.peak_shared_bytes,
                observations: s.observations,
                duration: s.duration(now),
                start: Some(s.start),
                peak_dedicated_bytes: Some(s.peak_dedicated_bytes),
            })
            .collect();
        let (peak_dedicated_bytes, peak_shared_bytes) = self.machine.peaks();
        SpillReport {
            episodes,
            peak_dedicated_bytes,
            dedicated_limit_bytes: self.machine.capacity_bytes(),
            peak_shared_bytes,
            baseline_shared_bytes: self.machine.baseline_shared_bytes().unwrap_or(0),
            observations: self.machine.observations(),
            measurable: self.is_measurable(),
        }
    }

    /// The final report.
    #[must_use]
    pub fn into_report(self) -> SpillReport {
        self.report()
    }
}

/// The default thresholds: [`DEFAULT_DEDICATED_THRESHOLD_PCT`] of the limit, and
/// [`DEFAULT_SHARED_GROWTH_BYTES`] of growth.
fn thresholds() -> SpillThresholds {
    SpillThresholds::default()
}

#[cfg(test)]
mod tests;
