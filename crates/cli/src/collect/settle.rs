//! `--settle N`: a free figure counts once it has held steady over its last N samples (their
//! spread within a tolerance), and then as the least of them: the launch gate for a serving
//! engine that sizes itself from free memory, so that two engines started together do not
//! each count the other's loading as their own.

use std::collections::{BTreeMap, VecDeque};

/// What the last samples of one figure say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steady {
    /// It held within the tolerance over the last N samples; the least of them.
    Held(u64),
    /// Not yet: `samples` of the N so far, spread over `spread` bytes.
    Moving { samples: usize, spread: u64 },
}

/// The last samples of each figure, by key.
#[derive(Debug, Clone)]
pub struct Settle {
    samples: usize,
    tolerance: u64,
    seen: BTreeMap<String, VecDeque<u64>>,
}

impl Settle {
    /// Figures count once `samples` (at least 1) of them held within `tolerance` bytes.
    #[must_use]
    pub fn new(samples: usize, tolerance: u64) -> Self {
        Self {
            samples: samples.max(1),
            tolerance,
            seen: BTreeMap::new(),
        }
    }

    /// How many samples a figure needs.
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    #[must_use]
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Records `value` as the latest sample of `key` and says whether it is steady.
    pub fn record(&mut self, key: &str, value: u64) -> Steady {
        let kept = self.seen.entry(key.to_string()).or_default();
        kept.push_back(value);
        while kept.len() > self.samples {
            kept.pop_front();
        }
        let low = kept.iter().copied().min().unwrap_or(value);
        let high = kept.iter().copied().max().unwrap_or(value);
        let spread = high - low;
        if kept.len() == self.samples && spread <= self.tolerance {
            Steady::Held(low)
        } else {
            Steady::Moving {
                samples: kept.len(),
                spread,
            }
        }
    }

    /// Forgets the figures whose key `keep` refuses (a GPU no longer seen starts again).
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.seen.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_counts_once_it_held_over_n_samples() {
        let mut s = Settle::new(3, 100);
        assert_eq!(
            s.record("a", 1000),
            Steady::Moving {
                samples: 1,
                spread: 0
            }
        );
        assert_eq!(
            s.record("a", 1050),
            Steady::Moving {
                samples: 2,
                spread: 50
            }
        );
        assert_eq!(s.record("a", 990), Steady::Held(990));
        // A neighbour loads: the spread is over the tolerance until it holds again.
        assert_eq!(
            s.record("a", 500),
            Steady::Moving {
                samples: 3,
                spread: 550
            }
        );
        assert_eq!(
            s.record("a", 505),
            Steady::Moving {
                samples: 3,
                spread: 490
            }
        );
        assert_eq!(s.record("a", 510), Steady::Held(500));
        assert_eq!(
            s.record("b", 7),
            Steady::Moving {
                samples: 1,
                spread: 0
            }
        );
        s.retain(|k| k == "b");
        assert_eq!(
            s.record("a", 510),
            Steady::Moving {
                samples: 1,
                spread: 0
            }
        );
        let mut one = Settle::new(0, 0);
        assert_eq!(one.samples(), 1);
        assert_eq!(one.record("x", 5), Steady::Held(5));
    }
}
