//! Spill detection for Windows WDDM: when a GPU's dedicated memory is nearly full, the driver
//! moves allocations into shared system memory, and a job slows down without failing.
//!
//! [`SpillTracker`] is a pure state machine over samples of an adapter's dedicated-resident and
//! shared-resident bytes: an **episode** lasts while dedicated use is at least
//! [`SpillThresholds::dedicated_fraction`] of the capacity **and** shared use is at least the
//! baseline (the first sample's shared use) plus [`SpillThresholds::shared_margin_bytes`].

use std::time::Duration;

/// When a sample counts as spilling.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillThresholds {
    /// Dedicated use / capacity at or above which the adapter is full (default 0.85).
    pub dedicated_fraction: f64,
    /// Shared use above the baseline at or above which memory has spilled (default 256 MiB).
    pub shared_margin_bytes: u64,
}

impl Default for SpillThresholds {
    fn default() -> Self {
        Self {
            dedicated_fraction: 0.85,
            shared_margin_bytes: 256 << 20,
        }
    }
}

impl SpillThresholds {
    /// Thresholds with the given fraction (clamped to 0..=1) and margin.
    #[must_use]
    pub fn new(dedicated_fraction: f64, shared_margin_bytes: u64) -> Self {
        let f = if dedicated_fraction.is_finite() {
            dedicated_fraction.clamp(0.0, 1.0)
        } else {
            0.85
        };
        Self {
            dedicated_fraction: f,
            shared_margin_bytes,
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
    pub fn new(at: Duration, dedicated_bytes: u64, shared_bytes: u64) -> Self {
        Self {
            at,
            dedicated_bytes,
            shared_bytes,
        }
    }
}

/// One spill episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillEpisode {
    /// First spilling sample.
    pub start: Duration,
    /// First sample after it that no longer spilled; `None` while it lasts.
    pub end: Option<Duration>,
    /// Most shared memory seen during the episode, bytes.
    pub peak_shared_bytes: u64,
    /// Most dedicated memory seen during the episode, bytes.
    pub peak_dedicated_bytes: u64,
}

impl SpillEpisode {
    /// How long it lasted (until `now` while it is still going).
    #[must_use]
    pub fn duration(&self, now: Duration) -> Duration {
        self.end.unwrap_or(now).saturating_sub(self.start)
    }
}

/// The state machine (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct SpillTracker {
    capacity_bytes: u64,
    thresholds: SpillThresholds,
    baseline_shared: Option<u64>,
    last: Option<Duration>,
    episodes: Vec<SpillEpisode>,
    peak_shared_bytes: u64,
    peak_dedicated_bytes: u64,
}

impl SpillTracker {
    /// A tracker for an adapter with `capacity_bytes` of dedicated memory.
    #[must_use]
    pub fn new(capacity_bytes: u64, thresholds: SpillThresholds) -> Self {
        Self {
            capacity_bytes,
            thresholds,
            baseline_shared: None,
            last: None,
            episodes: Vec::new(),
            peak_shared_bytes: 0,
            peak_dedicated_bytes: 0,
        }
    }

    /// Whether a sample spills, given the baseline.
    fn spills(&self, s: &SpillSample, baseline: u64) -> bool {
        #[allow(clippy::cast_precision_loss)] // ratios of byte counts
        let full = self.capacity_bytes > 0
            && s.dedicated_bytes as f64
                >= self.thresholds.dedicated_fraction * self.capacity_bytes as f64;
        full && s.shared_bytes >= baseline.saturating_add(self.thresholds.shared_margin_bytes)
    }

    /// Feed one sample; returns whether the adapter is spilling now.
    pub fn observe(&mut self, s: SpillSample) -> bool {
        let baseline = *self.baseline_shared.get_or_insert(s.shared_bytes);
        self.last = Some(s.at);
        self.peak_shared_bytes = self.peak_shared_bytes.max(s.shared_bytes);
        self.peak_dedicated_bytes = self.peak_dedicated_bytes.max(s.dedicated_bytes);
        let spilling = self.spills(&s, baseline);
        match (spilling, self.episodes.last_mut()) {
            (true, Some(e)) if e.end.is_none() => {
                e.peak_shared_bytes = e.peak_shared_bytes.max(s.shared_bytes);
                e.peak_dedicated_bytes = e.peak_dedicated_bytes.max(s.dedicated_bytes);
            }
            (true, _) => self.episodes.push(SpillEpisode {
                start: s.at,
                end: None,
                peak_shared_bytes: s.shared_bytes,
                peak_dedicated_bytes: s.dedicated_bytes,
            }),
            (false, Some(e)) if e.end.is_none() => e.end = Some(s.at),
            (false, _) => {}
        }
        spilling
    }

    /// Episodes so far, oldest first.
    #[must_use]
    pub fn episodes(&self) -> &[SpillEpisode] {
        &self.episodes
    }

    /// Whether the last sample was spilling.
    #[must_use]
    pub fn spilling(&self) -> bool {
        self.episodes.last().is_some_and(|e| e.end.is_none())
    }

    /// Shared use at the first sample (the baseline), bytes.
    #[must_use]
    pub fn baseline_shared_bytes(&self) -> Option<u64> {
        self.baseline_shared
    }

    /// Total time spent spilling.
    #[must_use]
    pub fn total_spill_time(&self) -> Duration {
        let now = self.last.unwrap_or_default();
        self.episodes.iter().map(|e| e.duration(now)).sum()
    }

    /// Most shared and dedicated memory seen, bytes.
    #[must_use]
    pub fn peaks(&self) -> (u64, u64) {
        (self.peak_dedicated_bytes, self.peak_shared_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::types::{GIB, MIB};

    fn run(series: &[(u64, u64, u64)], t: SpillThresholds) -> SpillTracker {
        let mut tr = SpillTracker::new(8 * GIB, t);
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
            tr.episodes().is_empty(),
            "shared grew but dedicated stayed under 85%"
        );
    }

    #[test]
    fn one_episode_with_peaks_and_duration() {
        let tr = run(
            &[
                (0, 7 * GIB, 300 * MIB),
                (100, 7 * GIB + 900 * MIB, 400 * MIB), // full, but shared only +100 MiB
                (200, 7 * GIB + 900 * MIB, 600 * MIB), // +300 MiB: spilling
                (300, 8 * GIB, 1200 * MIB),
                (400, 7 * GIB, 1100 * MIB), // below 85%? 7/8 = 87.5%: still full
                (500, 6 * GIB, 1100 * MIB), // 75%: ends
                (600, 6 * GIB, 300 * MIB),
            ],
            SpillThresholds::default(),
        );
        assert_eq!(tr.episodes().len(), 1);
        let e = tr.episodes()[0];
        assert_eq!(e.start, Duration::from_millis(200));
        assert_eq!(e.end, Some(Duration::from_millis(500)));
        assert_eq!(e.peak_shared_bytes, 1200 * MIB);
        assert_eq!(e.peak_dedicated_bytes, 8 * GIB);
        assert_eq!(tr.total_spill_time(), Duration::from_millis(300));
        assert!(!tr.spilling());
        assert_eq!(tr.baseline_shared_bytes(), Some(300 * MIB));
        assert_eq!(tr.peaks(), (8 * GIB, 1200 * MIB));
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
        assert_eq!(tr.episodes().len(), 2);
        assert!(tr.spilling());
        assert_eq!(tr.episodes()[1].end, None);
        assert_eq!(tr.total_spill_time(), Duration::from_millis(1 + 1));
    }

    #[test]
    fn thresholds_are_configurable() {
        let series = [(0, GIB, 0), (10, 5 * GIB, 100 * MIB)];
        assert!(
            run(&series, SpillThresholds::default())
                .episodes()
                .is_empty()
        );
        assert_eq!(
            run(&series, SpillThresholds::new(0.5, 64 * MIB))
                .episodes()
                .len(),
            1
        );
        assert!((SpillThresholds::new(f64::NAN, 1).dedicated_fraction - 0.85).abs() < 1e-12);
        assert!((SpillThresholds::new(7.0, 1).dedicated_fraction - 1.0).abs() < 1e-12);
        let mut zero = SpillTracker::new(0, SpillThresholds::default());
        assert!(
            !zero.observe(SpillSample::new(Duration::ZERO, 1, u64::MAX)),
            "unknown capacity never spills"
        );
    }
}
