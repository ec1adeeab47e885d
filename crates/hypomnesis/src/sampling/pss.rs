//! What a tree of processes holds in RAM, shared pages counted once ([`TreeRam`]), and when a
//! sampler reads what that needs ([`PssPacer`]).
//!
//! Processes forked from one parent share its pages copy on write: eight workers of a 500 MiB
//! trainer have an RSS of about 500 MiB each, while the host lost 500 MiB in all. Their RSS
//! summed counts each shared page once per process; their proportional set sizes (PSS: each
//! page divided among the processes that map it, [`crate::process_pss_of`]) summed count it
//! once. A lone process's figure stays its RSS (what 0.2.x gave, and what `ps` shows).
//!
//! Reading a process's PSS walks its page tables: 3 ms for 500 MiB and 20 ms for 2 GiB on a
//! shared two-core machine, where its RSS (`statm`) takes 2 to 3 µs. So the walks are paced by their cost:
//! after a walk of the tree that took `w`, the next one begins no sooner than `PSS_DUTY × w`
//! after it began, so they take at most one part in `PSS_DUTY` of the sampler's time, and the
//! ticks in between read RSS alone (and have no tree figure, never an estimate).

use std::time::{Duration, Instant};

/// The walks of PSS take at most one part in this of the time.
pub const PSS_DUTY: u32 = 10;

/// What a tree of processes holds in RAM at one tick ([`super::Frame::tree_ram`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TreeRam {
    /// The bytes: a lone process's RSS; for several, the sum of their PSS, with the RSS of
    /// those in [`TreeRam::rss_for`] in place of theirs.
    pub bytes: u64,
    /// Whether the figure sums several processes (by PSS), not a lone process's RSS.
    pub summed: bool,
    /// How many processes it counts (those that vanished before their figures were read are
    /// not).
    pub processes: usize,
    /// The processes (when summed) whose PSS could not be read but whose RSS could (another
    /// user's process, one not dumpable, a kernel before 4.14), their RSS counted instead, in
    /// the tree's order. A process of which neither can be read (exited, or hidden by
    /// `hidepid`) is not counted, as [`super::Frame::rss_sum`] does not count it.
    pub rss_for: Vec<u32>,
}

impl TreeRam {
    /// A tree figure of its parts (a caller's tests, a replay).
    #[must_use]
    pub fn new(bytes: u64, summed: bool, processes: usize, rss_for: Vec<u32>) -> Self {
        Self {
            bytes,
            summed,
            processes,
            rss_for,
        }
    }
}

/// When to read the PSS of a tree of processes again: at once the first time, then no sooner
/// than [`PSS_DUTY`] times the last walk's cost after that walk began.
#[derive(Debug, Clone, Default)]
pub struct PssPacer {
    last: Option<(Instant, Duration)>,
    walks: u64,
}

impl PssPacer {
    /// A pacer that has not walked yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a walk may begin at `now`.
    #[must_use]
    pub fn due(&self, now: Instant) -> bool {
        self.last.is_none_or(|(began, cost)| {
            now.saturating_duration_since(began) >= cost.saturating_mul(PSS_DUTY)
        })
    }

    /// A walk that began at `began` and took `cost`.
    pub fn walked(&mut self, began: Instant, cost: Duration) {
        self.last = Some((began, cost));
        self.walks += 1;
    }

    /// How many walks were made.
    #[must_use]
    pub fn walks(&self) -> u64 {
        self.walks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_take_one_part_in_duty() {
        let mut p = PssPacer::new();
        let t0 = Instant::now();
        assert!(p.due(t0), "the first walk is at once");
        p.walked(t0, Duration::from_millis(20));
        assert_eq!(p.walks(), 1);
        assert!(!p.due(t0 + Duration::from_millis(199)));
        assert!(p.due(t0 + Duration::from_millis(200)));
        // A cheap walk: due again at the next tick.
        p.walked(t0, Duration::from_micros(50));
        assert!(p.due(t0 + Duration::from_millis(1)));
        // A clock read before the walk began is not a walk's time.
        assert!(
            !PssPacer {
                last: Some((t0 + Duration::from_secs(1), Duration::from_millis(1))),
                walks: 1
            }
            .due(t0)
        );
    }
}
