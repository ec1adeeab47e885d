//! What a [`super::SpillTracker`] found: its episodes, peaks and baseline.

use std::time::Duration;

/// One spill episode: from the observation that found the adapter spilling to the first one
/// that found it no longer so.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillEpisode {
    /// The label of the observation the episode started at.
    pub start_label: String,
    /// The label of the observation it ended at; `None` while it was still going when the
    /// report was made.
    pub end_label: Option<String>,
    /// Most shared memory seen during the episode, bytes.
    pub peak_shared_bytes: u64,
    /// Spilling observations in the episode.
    pub observations: usize,
    /// From its first observation to the one that ended it (to the last one, while it goes on).
    pub duration: Duration,
    /// When it started, since the tracker was made; `None` in a report made by the builder.
    pub start: Option<Duration>,
    /// Most dedicated memory seen during the episode, bytes; `None` in a report made by the
    /// builder.
    pub peak_dedicated_bytes: Option<u64>,
}

/// A tracker's findings over its run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SpillReport {
    /// The episodes, oldest first.
    pub episodes: Vec<SpillEpisode>,
    /// Most dedicated memory seen, bytes.
    pub peak_dedicated_bytes: u64,
    /// The adapter's dedicated limit, bytes (0 where not measurable).
    pub dedicated_limit_bytes: u64,
    /// Most shared memory seen, bytes.
    pub peak_shared_bytes: u64,
    /// Shared use the growth threshold counts from, bytes (0 where not measurable).
    pub baseline_shared_bytes: u64,
    /// Observations folded in.
    pub observations: usize,
    /// Whether the tracker had counters to sample; when `false` every figure is 0 because
    /// nothing was measured, not because nothing spilled.
    pub measurable: bool,
}

impl SpillReport {
    /// Whether any episode was seen.
    #[must_use]
    pub fn spilled(&self) -> bool {
        !self.episodes.is_empty()
    }

    /// The label of the observation the first episode started at.
    #[must_use]
    pub fn first_spill_label(&self) -> Option<&str> {
        self.episodes.first().map(|e| e.start_label.as_str())
    }

    /// The episodes' durations added up.
    #[must_use]
    pub fn total_spill_duration(&self) -> Duration {
        self.episodes.iter().map(|e| e.duration).sum()
    }

    /// The longest episode (the first of equals).
    #[must_use]
    pub fn longest_episode(&self) -> Option<&SpillEpisode> {
        self.episodes
            .iter()
            .reduce(|best, e| if e.duration > best.duration { e } else { best })
    }

    /// A builder for a report (feature `test-helpers`): every figure 0, no episode, not
    /// measurable.
    #[cfg(feature = "test-helpers")]
    pub fn builder() -> SpillReportBuilder {
        SpillReportBuilder {
            inner: Self {
                episodes: Vec::new(),
                peak_dedicated_bytes: 0,
                dedicated_limit_bytes: 0,
                peak_shared_bytes: 0,
                baseline_shared_bytes: 0,
                observations: 0,
                measurable: false,
            },
        }
    }
}

/// Builds a [`SpillReport`] for tests (feature `test-helpers`).
#[cfg(feature = "test-helpers")]
#[derive(Debug, Clone)]
#[must_use]
pub struct SpillReportBuilder {
    inner: SpillReport,
}

#[cfg(feature = "test-helpers")]
impl SpillReportBuilder {
    /// Sets `peak_dedicated_bytes`.
    pub const fn peak_dedicated_bytes(mut self, bytes: u64) -> Self {
        self.inner.peak_dedicated_bytes = bytes;
        self
    }

    /// Sets `dedicated_limit_bytes`.
    pub const fn dedicated_limit_bytes(mut self, bytes: u64) -> Self {
        self.inner.dedicated_limit_bytes = bytes;
        self
    }

    /// Sets `peak_shared_bytes`.
    pub const fn peak_shared_bytes(mut self, bytes: u64) -> Self {
        self.inner.peak_shared_bytes = bytes;
        self
    }

    /// Sets `baseline_shared_bytes`.
    pub const fn baseline_shared_bytes(mut self, bytes: u64) -> Self {
        self.inner.baseline_shared_bytes = bytes;
        self
    }

    /// Sets `observations`.
    pub const fn observations(mut self, n: usize) -> Self {
        self.inner.observations = n;
        self
    }

    /// Sets `measurable`.
    pub const fn measurable(mut self, measurable: bool) -> Self {
        self.inner.measurable = measurable;
        self
    }

    /// Adds an episode (after the ones added before).
    pub fn episode(
        mut self,
        start: &str,
        end: Option<&str>,
        peak_shared_bytes: u64,
        observations: usize,
        duration: Duration,
    ) -> Self {
        self.inner.episodes.push(SpillEpisode {
            start_label: start.to_owned(),
            end_label: end.map(str::to_owned),
            peak_shared_bytes,
            observations,
            duration,
            start: None,
            peak_dedicated_bytes: None,
        });
        self
    }

    /// The finished report.
    #[must_use]
    pub fn build(self) -> SpillReport {
        self.inner
    }
}
