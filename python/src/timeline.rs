//! What a tracked block keeps of its samples, bounded however long it runs and however many
//! blocks run at once: the exact peaks (and when they were sampled), how many samples were
//! taken, and a timeline of at most [`TIMELINE_POINTS`] points between the entry and exit
//! samples, each point every figure's maximum over neighbouring samples, its time that of the
//! first (so every peak survives in it).
//!
//! The samples between entry and exit are kept once for all the blocks sampled alike, in the
//! library's [`Journal`](hypomnesis::sampling::Journal) (see `hub.rs`); this module is what a
//! sample is made of, and how a block's record is put together from its entry sample, its
//! span of the journal and its exit sample. A finished block keeps its points as the runs
//! they are shared with ([`FinishedTimeline`]); they become Python tuples only when its samples are read.

use std::sync::Arc;
use std::time::Instant;

use hypomnesis::sampling::{Fold, Spanned};

/// Most points kept between the entry sample and the exit sample.
pub const TIMELINE_POINTS: usize = 2046;

/// One sample: seconds since the block started, this process's RSS, and per sampled device
/// its own GPU memory (`None` where not attributable to it) and the device's used memory
/// (`None` where unreadable); the last, whether the GPU figures missed their deadline.
pub type RawSample = (f64, u64, Vec<Option<u64>>, Vec<Option<u64>>, bool);

/// A peak value and the time (seconds since the block started) it was first sampled.
pub type Peak = (u64, f64);

/// A finished block's figures: how many samples were taken in all and how many of them missed
/// their GPU deadline, the exact peaks (RSS; per device, its own GPU memory and the device's
/// used memory), and its entry and exit samples.
pub type Finished = (
    u64,
    u64,
    Peak,
    Vec<Option<Peak>>,
    Vec<Option<Peak>>,
    RawSample,
    RawSample,
);

/// A finished block's timeline, kept as the shared runs it was drawn from and made into
/// samples only when asked for: a block nobody inspects costs a count per point.
#[derive(Debug)]
pub struct FinishedTimeline {
    start: Instant,
    points: Vec<Arc<SampleRun>>,
}

impl FinishedTimeline {
    /// The samples between the entry and the exit one, in time order.
    pub fn between(&self) -> Vec<RawSample> {
        self.points.iter().map(|p| p.sample(self.start)).collect()
    }
}

/// A figure's peak over some samples and when it was first reached.
type At = (u64, Instant);

/// Consecutive samples of the shared thread: when the first was taken, how many there are and
/// how many missed their GPU deadline, and each figure's peak with its time.
#[derive(Debug, Clone)]
pub struct SampleRun {
    at: Instant,
    taken: u64,
    missed: u64,
    rss: At,
    own: Vec<Option<At>>,
    used: Vec<Option<At>>,
}

/// A later, larger value replaces the peak; an equal one keeps the earlier time.
fn raise<T: Copy>(peak: &mut Option<(u64, T)>, later: Option<(u64, T)>) {
    if let Some((v, t)) = later
        && peak.is_none_or(|(p, _)| v > p)
    {
        *peak = Some((v, t));
    }
}

impl Fold for SampleRun {
    fn fold(&mut self, later: &Self) {
        self.taken += later.taken;
        self.missed += later.missed;
        if later.rss.0 > self.rss.0 {
            self.rss = later.rss;
        }
        for (mine, theirs) in [(&mut self.own, &later.own), (&mut self.used, &later.used)] {
            for (m, t) in mine.iter_mut().zip(theirs) {
                raise(m, *t);
            }
        }
    }
}

impl SampleRun {
    /// One sample taken `at`: RSS `rss`, per device its own and used memory, and whether the
    /// GPU figures missed their deadline.
    pub fn one(
        at: Instant,
        rss: u64,
        figures: &[(Option<u64>, Option<u64>)],
        missed: bool,
    ) -> Self {
        Self {
            at,
            taken: 1,
            missed: u64::from(missed),
            rss: (rss, at),
            own: figures.iter().map(|f| f.0.map(|v| (v, at))).collect(),
            used: figures.iter().map(|f| f.1.map(|v| (v, at))).collect(),
        }
    }

    /// As a sample of a block that started at `start`.
    fn sample(&self, start: Instant) -> RawSample {
        (
            secs(start, self.at),
            self.rss.0,
            self.own.iter().map(|p| p.map(|p| p.0)).collect(),
            self.used.iter().map(|p| p.map(|p| p.0)).collect(),
            self.missed > 0,
        )
    }
}

/// Seconds from `start` to `at`.
fn secs(start: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(start).as_secs_f64()
}

/// A peak in seconds since `start`.
fn peak(start: Instant, at: Option<At>) -> Option<Peak> {
    at.map(|(v, t)| (v, secs(start, t)))
}

/// The peaks of a block that started at `start`: its entry sample `first`, then the shared
/// samples `between`, then its exit sample `last` if ended.
fn peaks(
    start: Instant,
    first: &RawSample,
    between: Option<&SampleRun>,
    last: Option<&RawSample>,
) -> (Peak, Vec<Option<Peak>>, Vec<Option<Peak>>) {
    let mut rss: Peak = (first.1, first.0);
    let mut own: Vec<Option<Peak>> = first.2.iter().map(|v| v.map(|v| (v, first.0))).collect();
    let mut used: Vec<Option<Peak>> = first.3.iter().map(|v| v.map(|v| (v, first.0))).collect();
    if let Some(b) = between {
        if b.rss.0 > rss.0 {
            rss = (b.rss.0, secs(start, b.rss.1));
        }
        for (mine, theirs) in [(&mut own, &b.own), (&mut used, &b.used)] {
            for (m, t) in mine.iter_mut().zip(theirs) {
                raise(m, peak(start, *t));
            }
        }
    }
    if let Some(l) = last {
        if l.1 > rss.0 {
            rss = (l.1, l.0);
        }
        for (mine, theirs) in [(&mut own, &l.2), (&mut used, &l.3)] {
            for (m, t) in mine.iter_mut().zip(theirs) {
                raise(m, t.map(|v| (v, l.0)));
            }
        }
    }
    (rss, own, used)
}

/// When the peak so far of a running block's GPU memory was sampled (the device with the
/// largest peak; an equal one, the earlier), else that of its RSS; seconds since `start`.
pub fn peak_time(start: Instant, first: &RawSample, between: Option<&SampleRun>) -> f64 {
    let (rss, own, _) = peaks(start, first, between, None);
    own.iter()
        .flatten()
        .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.total_cmp(&a.1)))
        .map_or(rss.1, |p| p.1)
}

/// The record of a block that started at `start`: its entry sample, the shared samples of its
/// span (none in a child forked while it ran), its exit sample.
pub fn finish(
    start: Instant,
    first: RawSample,
    between: Option<Spanned<SampleRun>>,
    last: RawSample,
) -> (FinishedTimeline, Finished) {
    let total = between.as_ref().and_then(|b| b.total.as_ref());
    let (rss, own, used) = peaks(start, &first, total, Some(&last));
    let taken = 2 + total.map_or(0, |t| t.taken);
    let missed = u64::from(first.4) + total.map_or(0, |t| t.missed) + u64::from(last.4);
    let kept = FinishedTimeline {
        start,
        points: between.map(|b| b.points).unwrap_or_default(),
    };
    (kept, (taken, missed, rss, own, used, first, last))
}
