//! The spill state machine: a pure fold over samples of an adapter's dedicated-resident and
//! shared-resident bytes. An **episode** (a [`SpillSpan`]) lasts while dedicated use is at or
//! above the dedicated threshold **and** shared use is at least the baseline (the first
//! sample's shared use, unless one is given) plus [`SpillThresholds::shared_margin_bytes`].
//!
//! [`super::SpillTracker`] (the 0.2.x tracker) keeps one of these and adds labels; a caller
//! with samples of its own (`hmn spill`, `hmn watch`) can fold them here directly.

use std::time::Duration;

use super::{DEFAULT_DEDICATED_THRESHOLD_PCT, DEFAULT_SHARED_GROWTH_BYTES};

/// When a sample counts as spilling.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillThresholds {
    /// Dedicated use / capacity at or above which the adapter is full (default 0.85). Not
    /// used when [`Self::dedicated_bytes`] is set.
    pub dedicated_fraction: f64,
    /// Shared use above the baseline at or above which memory has spilled (default 256 MiB).
    pub shared_margin_bytes: u64,
    /// Dedicated use, bytes, at or above which the adapter is full, in place of the fraction
    /// of its capacity (`None` by default).
    pub dedicated_bytes: Option<u64>,
}

impl Default for SpillThresholds {
    fn default() -> Self {
        #[allow(clippy::cast_precision_loss)] // 85
        let fraction = DEFAULT_DEDICATED_THRESHOLD_PCT as f64 / 100.0;
        Self {
            dedicated_fraction: fraction,
            shared_margin_bytes: DEFAULT_SHARED_GROWTH_BYTES,
            dedicated_bytes: None,
        }
    }
}

impl SpillThresholds {
    /// Thresholds with the given fraction (clamped to 0..=1; not a number reads as the
    /// default 0.85) and margin.
    #[must_use]
    pub fn new(dedicated_fraction: f64, shared_margin_bytes: u64) -> Self {
        let f = if dedicated_fraction.is_finite() {
            dedicated_fraction.clamp(0.0, 1.0)
        } else {
            Self::default().dedicated_fraction
        };
        Self {
            dedicated_fraction: f,
            shared_margin_bytes,
            dedicated_bytes: None,
        }
    }

    /// The same thresholds with the adapter counted full at `bytes` of dedicated use.
    #[must_use]
    pub const fn with_dedicated_bytes(mut self, bytes: u64) -> Self {
        self.dedicated_bytes = Some(bytes);
        self
    }

    /// Whether `dedicated` bytes of an adapter of `capacity` bytes is full. An adapter of
    /// unknown (0) capacity is never full by the fraction.
    fn full(&self, dedicated: u64, capacity: u64) -> bool {
        match self.dedicated_bytes {
            Some(t) => dedicated >= t,
            #[allow(clippy::cast_precision_loss)] // ratios of byte counts
            None => capacity > 0 && dedicated as f64 >= self.dedicated_fraction * capacity as f64,
        }
    }
}

/// One sample of an adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillSample {
    /// Time since the tracking started.
    pub at: Duration,
    /// Dedicated (device-local) memory resident, bytes.
    pub dedicated_bytes: u64,
    /// Shared (system) memory resident for the GPU, bytes.
    pub shared_bytes: u64,
}

impl SpillSample {
    /// A sample.
    #[must_use]
    pub const fn new(at: Duration, dedicated_bytes: u64, shared_bytes: u64) -> Self {
        Self {
            at,
            dedicated_bytes,
            shared_bytes,
        }
    }
}

/// One spill episode as the state machine sees it: times, not labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillSpan {
    /// First spilling sample.
    pub start: Duration,
    /// First sample after it that no longer spilled; `None` while it lasts.
    pub end: Option<Duration>,
    /// Most shared memory seen during the episode, bytes.
    pub peak_shared_bytes: u64,
    /// Most dedicated memory seen during the episode, bytes.
    pub peak_dedicated_bytes: u64,
    /// Spilling samples in the episode.
    pub observations: usize,
}

impl SpillSpan {
    /// How long it lasted (until `now` while it is still going).
    #[must_use]
    pub fn duration(&self, now: Duration) -> Duration {
        self.end.unwrap_or(now).saturating_sub(self.start)
    }
}

/// What one sample did to the episodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Not spilling, as before.
    Quiet,
    /// A new episode started at this sample.
    Started,
    /// The episode goes on.
    Continued,
    /// The episode ended at this sample.
    Ended,
}

impl Transition {
    /// Whether the adapter spills at this sample.
    #[must_use]
    pub fn spilling(self) -> bool {
        matches!(self, Self::Started | Self::Continued)
    }
}

/// The state machine (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct SpillMachine {
    pub(super) capacity_bytes: u64,
    pub(super) thresholds: SpillThresholds,
    pub(super) baseline_shared: Option<u64>,
    last: Option<Duration>,
    spans: Vec<SpillSpan>,
    peak_shared_bytes: u64,
    peak_dedicated_bytes: u64,
    observations: usize,
}

impl SpillMachine {
    /// A machine for an adapter with `capacity_bytes` of dedicated memory.
    #[must_use]
    pub const fn new(capacity_bytes: u64, thresholds: SpillThresholds) -> Self {
        Self {
            capacity_bytes,
            thresholds,
            baseline_shared: None,
            last: None,
            spans: Vec::new(),
            peak_shared_bytes: 0,
            peak_dedicated_bytes: 0,
            observations: 0,
        }
    }

    /// The same machine with its shared baseline given, instead of taken from the first sample.
    #[must_use]
    pub const fn with_baseline(mut self, shared_bytes: u64) -> Self {
        self.baseline_shared = Some(shared_bytes);
        self
    }

    /// Whether a sample spills, given the baseline.
    fn spills(&self, s: &SpillSample, baseline: u64) -> bool {
        self.thresholds.full(s.dedicated_bytes, self.capacity_bytes)
            && s.shared_bytes >= baseline.saturating_add(self.thresholds.shared_margin_bytes)
    }

    /// Feed one sample; says what it did (whether the adapter is spilling now, and whether an
    /// episode started or ended).
    pub fn step(&mut self, s: SpillSample) -> Transition {
        let baseline = *self.baseline_shared.get_or_insert(s.shared_bytes);
        self.last = Some(s.at);
        self.observations = self.observations.saturating_add(1);
        self.peak_shared_bytes = self.peak_shared_bytes.max(s.shared_bytes);
        self.peak_dedicated_bytes = self.peak_dedicated_bytes.max(s.dedicated_bytes);
        let spilling = self.spills(&s, baseline);
        match (spilling, self.spans.last_mut()) {
            (true, Some(e)) if e.end.is_none() => {
                e.peak_shared_bytes = e.peak_shared_bytes.max(s.shared_bytes);
                e.peak_dedicated_bytes = e.peak_dedicated_bytes.max(s.dedicated_bytes);
                e.observations = e.observations.saturating_add(1);
                Transition::Continued
            }
            (true, _) => {
                self.spans.push(SpillSpan {
                    start: s.at,
                    end: None,
                    peak_shared_bytes: s.shared_bytes,
                    peak_dedicated_bytes: s.dedicated_bytes,
                    observations: 1,
                });
                Transition::Started
            }
            (false, Some(e)) if e.end.is_none() => {
                e.end = Some(s.at);
                Transition::Ended
            }
            (false, _) => Transition::Quiet,
        }
    }

    /// Feed one sample; returns whether the adapter is spilling now.
    pub fn observe(&mut self, s: SpillSample) -> bool {
        self.step(s).spilling()
    }

    /// Episodes so far, oldest first.
    #[must_use]
    pub fn spans(&self) -> &[SpillSpan] {
        &self.spans
    }

    /// Whether the last sample was spilling.
    #[must_use]
    pub fn spilling(&self) -> bool {
        self.spans.last().is_some_and(|e| e.end.is_none())
    }

    /// Shared use at the first sample (or the baseline given), bytes.
    #[must_use]
    pub fn baseline_shared_bytes(&self) -> Option<u64> {
        self.baseline_shared
    }

    /// Samples fed so far.
    #[must_use]
    pub fn observations(&self) -> usize {
        self.observations
    }

    /// The time of the last sample.
    #[must_use]
    pub fn last_at(&self) -> Option<Duration> {
        self.last
    }

    /// The dedicated capacity the machine was made for, bytes.
    #[must_use]
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Total time spent spilling (an episode still going counts until the last sample).
    #[must_use]
    pub fn total_spill_time(&self) -> Duration {
        let now = self.last.unwrap_or_default();
        self.spans.iter().map(|e| e.duration(now)).sum()
    }

    /// Most dedicated and shared memory seen, bytes.
    #[must_use]
    pub fn peaks(&self) -> (u64, u64) {
        (self.peak_dedicated_bytes, self.peak_shared_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::types::{GIB, MIB};

    fn run(series: &[(u64, u64, u64)], t: SpillThresholds) -> SpillMachine {
        let mut tr = SpillMachine::new(8 * GIB, t);
        for &(ms, ded, shared) in series {
            tr.observe(SpillSample::new(Duration::from_millis(ms), ded, shared));
        }
        tr
    }

    #[test]
    fn no_spill_when_dedicated_has_room() {
        let tr = run(
            &[
                (0, GIB, 100 * MIB),
                (100, 2 * GIB, 2 * GIB),
                (200, 6 * GIB, 3 * GIB),
            ],
            SpillThresholds::default(),
        );
        assert!(
            tr.spans().is_empty(),
            "shared grew but dedicated stayed under 85%"
        );
        assert_eq!(tr.observations(), 3);
    }

    #[test]
    fn one_episode_with_peaks_and_duration() {
        let tr = run(
            &[
                (0, 7 * GIB, 300 * MIB),
                (100, 7 * GIB + 900 * MIB, 400 * MIB), // full, but shared only +100 MiB
                (200, 7 * GIB + 900 * MIB, 600 * MIB), // +300 MiB: spilling
                (300, 8 * GIB, 1200 * MIB),
                (400, 7 * GIB, 1100 * MIB), // 7/8 = 87.5%: still full
                (500, 6 * GIB, 1100 * MIB), // 75%: ends
                (600, 6 * GIB, 300 * MIB),
            ],
            SpillThresholds::default(),
        );
        assert_eq!(tr.spans().len(), 1);
        let e = tr.spans()[0];
        assert_eq!(e.start, Duration::from_millis(200));
        assert_eq!(e.end, Some(Duration::from_millis(500)));
        assert_eq!(e.peak_shared_bytes, 1200 * MIB);
        assert_eq!(e.peak_dedicated_bytes, 8 * GIB);
        assert_eq!(e.observations, 3);
        assert_eq!(tr.total_spill_time(), Duration::from_millis(300));
        assert!(!tr.spilling());
        assert_eq!(tr.baseline_shared_bytes(), Some(300 * MIB));
        assert_eq!(tr.peaks(), (8 * GIB, 1200 * MIB));
        assert_eq!(tr.last_at(), Some(Duration::from_millis(600)));
    }

    #[test]
    fn two_episodes_and_one_still_open() {
        let full = 7 * GIB + 512 * MIB;
        let tr = run(
            &[
                (0, GIB, 0),
                (1, full, 512 * MIB),
                (2, GIB, 512 * MIB),
                (3, full, 600 * MIB),
                (4, full, 700 * MIB),
            ],
            SpillThresholds::default(),
        );
        assert_eq!(tr.spans().len(), 2);
        assert!(tr.spilling());
        assert_eq!(tr.spans()[1].end, None);
        assert_eq!(tr.total_spill_time(), Duration::from_millis(1 + 1));
    }

    #[test]
    fn transitions_name_each_change() {
        let mut m = SpillMachine::new(8 * GIB, SpillThresholds::default());
        let full = 7 * GIB + 512 * MIB;
        let steps: Vec<Transition> = [(GIB, 0), (full, GIB), (full, GIB), (GIB, GIB), (GIB, 0)]
            .into_iter()
            .enumerate()
            .map(|(i, (d, s))| m.step(SpillSample::new(Duration::from_millis(i as u64), d, s)))
            .collect();
        assert_eq!(
            steps,
            [
                Transition::Quiet,
                Transition::Started,
                Transition::Continued,
                Transition::Ended,
                Transition::Quiet
            ]
        );
    }

    #[test]
    fn thresholds_are_configurable() {
        let series = [(0, GIB, 0), (10, 5 * GIB, 100 * MIB)];
        assert!(run(&series, SpillThresholds::default()).spans().is_empty());
        assert_eq!(
            run(&series, SpillThresholds::new(0.5, 64 * MIB))
                .spans()
                .len(),
            1
        );
        // A threshold in bytes takes the fraction's place: 5 GiB is full at 5 GiB, not at 4.
        let bytes = SpillThresholds::new(0.99, 64 * MIB).with_dedicated_bytes(5 * GIB);
        assert_eq!(run(&series, bytes).spans().len(), 1);
        let higher = SpillThresholds::new(0.1, 64 * MIB).with_dedicated_bytes(5 * GIB + 1);
        assert!(run(&series, higher).spans().is_empty());
        assert!((SpillThresholds::new(f64::NAN, 1).dedicated_fraction - 0.85).abs() < 1e-12);
        assert!((SpillThresholds::new(7.0, 1).dedicated_fraction - 1.0).abs() < 1e-12);
        let mut zero = SpillMachine::new(0, SpillThresholds::default());
        assert!(
            !zero.observe(SpillSample::new(Duration::ZERO, 1, u64::MAX)),
            "unknown capacity never spills"
        );
        // A given baseline is kept: the first sample does not replace it.
        let mut given = SpillMachine::new(8 * GIB, SpillThresholds::default()).with_baseline(0);
        assert!(given.observe(SpillSample::new(Duration::ZERO, 7 * GIB, 300 * MIB)));
        assert_eq!(given.baseline_shared_bytes(), Some(0));
    }
}
