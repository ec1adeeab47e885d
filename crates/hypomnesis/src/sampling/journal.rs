//! [`Journal`]: the samples of one cadence, kept once for every span that watches them.
//!
//! A span is a block of work (a `track()` block, a `hmn run` child): it opens at one sample
//! and closes at a later one, and wants the fold of its samples (exact peaks, counts) and a
//! timeline of at most a given number of points, each the fold of neighbouring samples. Spans
//! may overlap in any way (nested ten thousand deep, or one per step of a loop inside a
//! day-long one): each sample is kept once, not once per span.
//!
//! How: level `j` of the journal holds the folds of the aligned runs of `2^j` samples
//! (`[i·2^j, (i+1)·2^j)`), each level built from the one below as samples come. A span that
//! opened at sample `a` keeps, per level, the fold of its first partial run (`[a, ⌈a⌉ⱼ)`),
//! filled in as each such run completes: `log₂` of its length updates in its whole life. At
//! any moment the span's timeline is its partial head at level `k`, the whole level-`k` runs
//! after it, and the fold of the samples since the last whole one, with `k` the smallest level
//! that needs at most the wanted number of points; its fold is the fold of those. A level
//! keeps a run only while a span that may still need it is open (at most as many runs as a
//! timeline has points, and the last one for the tails), so the journal is bounded by the
//! points times the number of levels, whatever the spans.
//!
//! Costs: a sample `O(levels + log spans)`; opening a span `O(log spans)`; its fold
//! `O(levels)`; its timeline `O(points)`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

/// A summary of consecutive samples that the next ones can be folded into.
pub trait Fold: Clone {
    /// Folds `later`, the summary of the samples just after this one's, into this one.
    fn fold(&mut self, later: &Self);
}

/// The highest level of runs kept (runs of up to `2^39` samples: years at a kilohertz).
const TOP: usize = 39;

/// Identifies an open span of a [`Journal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpanId {
    /// The sample it opened at (spans are ordered by it: the oldest first).
    start: u64,
    seq: u64,
}

/// A span's samples so far: their fold and a timeline of consecutive folds, in time order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned<T> {
    /// The fold of every sample of the span; `None` when it has none.
    pub total: Option<T>,
    /// Consecutive folds that together cover the span, at most the journal's points; shared
    /// with the journal and the other spans that drew the same runs (a clone is a count).
    pub points: Vec<Arc<T>>,
    /// How many samples the span holds.
    pub samples: u64,
}

/// The complete runs of one level, `first` being the index of the oldest kept.
#[derive(Debug)]
struct Level<T> {
    first: u64,
    runs: VecDeque<Arc<T>>,
    /// The first half of the next level's run being filled (this level's last run, when it
    /// is the first of a pair).
    open: Option<T>,
}

#[derive(Debug)]
struct Span<T> {
    start: u64,
    /// `heads[j]`: the fold of the samples from `start` up to the next multiple of `2^j`
    /// (`None` when there are none); known for every level up to `heads.len() - 1`. A span
    /// from sample 0 is aligned at every level: its heads are all empty, none kept.
    heads: Vec<Option<Arc<T>>>,
    /// When the next head becomes known (the sample count at which its run completes).
    due: Option<u64>,
}

impl<T> Span<T> {
    /// The highest level whose head is known.
    fn known(&self) -> usize {
        if self.start == 0 {
            TOP
        } else {
            self.heads.len() - 1
        }
    }

    /// The head at `level` (see [`Span::heads`]); `None` when empty.
    fn head(&self, level: usize) -> Option<&Arc<T>> {
        if self.start == 0 {
            return None;
        }
        self.heads.get(level).and_then(Option::as_ref)
    }
}

/// The samples of one cadence, shared by every span that watches them. See the module's text.
#[derive(Debug)]
pub struct Journal<T> {
    points: u64,
    len: u64,
    levels: Vec<Level<T>>,
    spans: BTreeMap<SpanId, Span<T>>,
    due: BTreeSet<(u64, SpanId)>,
    next_id: u64,
}

/// `a` rounded up to a multiple of `2^level`.
fn ceil_to(a: u64, level: usize) -> u64 {
    let size = 1u64 << level;
    a.div_ceil(size).saturating_mul(size)
}

/// `a` rounded down to a multiple of `2^level`.
fn floor_to(a: u64, level: usize) -> u64 {
    (a >> level) << level
}

/// The longest span whose timeline level `level` draws in `points` points or fewer.
fn reach(points: u64, level: usize) -> u64 {
    (points - 2).saturating_mul(1u64 << level)
}

/// `acc` with `later` folded in (`later` itself when `acc` is empty).
fn join<T: Fold>(acc: &mut Option<T>, later: &T) {
    match acc {
        Some(a) => a.fold(later),
        None => *acc = Some(later.clone()),
    }
}

impl<T: Fold> Journal<T> {
    /// An empty journal whose timelines have at most `points` points (at least 4).
    #[must_use]
    pub fn new(points: usize) -> Self {
        Self {
            points: u64::try_from(points).unwrap_or(u64::MAX).max(4),
            len: 0,
            levels: Vec::new(),
            spans: BTreeMap::new(),
            due: BTreeSet::new(),
            next_id: 0,
        }
    }

    /// How many samples were pushed in all.
    #[must_use]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no sample was pushed yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many spans are open.
    #[must_use]
    pub fn spans(&self) -> usize {
        self.spans.len()
    }

    /// How many runs are kept, all levels together (the journal's size, in summaries).
    #[must_use]
    pub fn kept(&self) -> usize {
        self.levels
            .iter()
            .map(|l| l.runs.len() + usize::from(l.open.is_some()))
            .sum()
    }

    /// Opens a span: the samples pushed from now on are its own.
    pub fn open(&mut self) -> SpanId {
        let id = SpanId {
            start: self.len,
            seq: self.next_id,
        };
        self.next_id += 1;
        let mut heads = Vec::with_capacity(4);
        heads.push(None);
        let mut span = Span {
            start: self.len,
            heads,
            due: None,
        };
        self.advance(&mut span);
        if let Some(due) = span.due {
            self.due.insert((due, id));
        }
        self.spans.insert(id, span);
        id
    }

    /// Closes span `id`: its samples; `None` when no such span is open.
    pub fn close(&mut self, id: SpanId) -> Option<Spanned<T>> {
        let span = self.spans.remove(&id)?;
        if let Some(due) = span.due {
            self.due.remove(&(due, id));
        }
        Some(self.spanned(&span))
    }

    /// The samples of open span `id` so far.
    #[must_use]
    pub fn timeline(&self, id: SpanId) -> Option<Spanned<T>> {
        self.spans.get(&id).map(|s| self.spanned(s))
    }

    /// The fold of open span `id`'s samples so far (`Some(None)` while it has none), without
    /// its timeline.
    #[must_use]
    pub fn total(&self, id: SpanId) -> Option<Option<T>> {
        let span = self.spans.get(&id)?;
        let top = span.known();
        let mut acc = span.head(top).map(|h| T::clone(h));
        if let Some(rest) = self.fold_since(ceil_to(span.start, top).max(span.start)) {
            join(&mut acc, &rest);
        }
        Some(acc)
    }

    /// Adds the next sample.
    pub fn push(&mut self, sample: T) {
        let index = self.len;
        self.len += 1;
        self.complete(index, sample);
        while let Some(&(due, id)) = self.due.first()
            && due <= self.len
        {
            self.due.remove(&(due, id));
            if let Some(mut span) = self.spans.remove(&id) {
                self.advance(&mut span);
                if let Some(next) = span.due {
                    self.due.insert((next, id));
                }
                self.spans.insert(id, span);
            }
        }
        self.trim();
    }

    /// Stores sample `index` at level 0 and carries each run it completes up the levels.
    fn complete(&mut self, mut index: u64, mut run: T) {
        let mut level = 0;
        loop {
            if self.levels.len() <= level {
                self.levels.push(Level {
                    first: index,
                    runs: VecDeque::new(),
                    open: None,
                });
            }
            let Some(here) = self.levels.get_mut(level) else {
                return;
            };
            if here.runs.is_empty() {
                here.first = index;
            }
            let stored = Arc::new(run);
            here.runs.push_back(Arc::clone(&stored));
            if level >= TOP {
                return;
            }
            if index.is_multiple_of(2) {
                here.open = Some(T::clone(&stored));
                return;
            }
            let Some(mut whole) = here.open.take() else {
                return;
            };
            whole.fold(&stored);
            run = whole;
            index >>= 1;
            level += 1;
        }
    }

    /// The complete run `index` of `level`, if kept.
    fn run(&self, level: usize, index: u64) -> Option<&Arc<T>> {
        let l = self.levels.get(level)?;
        let at = usize::try_from(index.checked_sub(l.first)?).ok()?;
        l.runs.get(at)
    }

    /// The fold of the samples from `from` to the last, from the largest aligned whole runs
    /// kept (a run that would reach past the last sample is not whole yet, so not there).
    fn fold_since(&self, mut from: u64) -> Option<T> {
        let mut acc = None;
        let top = self.levels.len().saturating_sub(1);
        loop {
            let level = usize::try_from(from.trailing_zeros())
                .unwrap_or(top)
                .min(top);
            let found = (0..=level)
                .rev()
                .find_map(|l| self.run(l, from >> l).map(|r| (l, r)));
            // None at the last sample (no whole run starts there), or for a run let go too
            // early, which the retention rule never does.
            let Some((l, r)) = found else { break };
            join(&mut acc, &**r);
            from += 1 << l;
        }
        acc
    }

    /// Fills in the heads of `span` whose runs have completed, and when the next one will.
    fn advance(&self, span: &mut Span<T>) {
        loop {
            let known = span.heads.len() - 1;
            if known >= TOP || span.start == 0 {
                span.due = None;
                return;
            }
            let here = ceil_to(span.start, known);
            let next = ceil_to(span.start, known + 1);
            if next > self.len {
                span.due = Some(next);
                return;
            }
            let mut head = span.heads.last().cloned().flatten();
            if here < next
                && let Some(run) = self.run(known, here >> known)
            {
                head = Some(match head {
                    Some(h) => {
                        let mut h = T::clone(&h);
                        h.fold(run);
                        Arc::new(h)
                    }
                    None => Arc::clone(run),
                });
            }
            span.heads.push(head);
        }
    }

    /// The samples of `span` so far.
    fn spanned(&self, span: &Span<T>) -> Spanned<T> {
        let n = self.len - span.start;
        let mut level = 0;
        while level < span.known() && n > reach(self.points, level) {
            level += 1;
        }
        let from = ceil_to(span.start, level).max(span.start);
        let to = floor_to(self.len, level).max(from);
        let mut points = Vec::new();
        if let Some(head) = span.head(level) {
            points.push(Arc::clone(head));
        }
        for index in (from >> level)..(to >> level) {
            // Always kept, by the retention rule (the proptest would see a gap).
            points.extend(self.run(level, index).map(Arc::clone));
        }
        points.extend(self.fold_since(to).map(Arc::new));
        let mut total = None;
        for p in &points {
            join(&mut total, &**p);
        }
        Spanned {
            total,
            points,
            samples: n,
        }
    }

    /// Drops the runs no open span can need: at level `j`, those before the first whole run
    /// of the oldest span whose timeline may still be drawn at level `j` (length at most
    /// `(points - 2)·2^j`), keeping the last (the tail of a timeline takes at most the last
    /// whole run of each level below its own, and a head the run just completed).
    fn trim(&mut self) {
        let len = self.len;
        let points = self.points;
        for (j, level) in self.levels.iter_mut().enumerate() {
            let from = len.saturating_sub(reach(points, j));
            let oldest = self
                .spans
                .range(
                    SpanId {
                        start: from,
                        seq: 0,
                    }..,
                )
                .next()
                .map_or(u64::MAX, |(id, _)| ceil_to(id.start, j) >> j);
            let keep = oldest.min((len >> j).saturating_sub(1));
            while level.first < keep && level.runs.pop_front().is_some() {
                level.first += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples `first..=last`: their count, largest value, and whether they were folded in
    /// order with no gap.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Run {
        first: u64,
        last: u64,
        max: u64,
        in_order: bool,
    }

    impl Fold for Run {
        fn fold(&mut self, later: &Self) {
            self.in_order &= later.in_order && later.first == self.last + 1;
            self.last = later.last;
            self.max = self.max.max(later.max);
        }
    }

    fn sample(i: u64) -> Run {
        Run {
            first: i,
            last: i,
            max: (i * 7919) % 1000,
            in_order: true,
        }
    }

    #[test]
    fn a_span_from_the_first_sample_gets_every_sample_in_bounded_points() {
        let mut j = Journal::new(8);
        let id = j.open();
        for i in 0..1000 {
            j.push(sample(i));
        }
        let s = j.close(id).unwrap_or_else(|| unreachable!());
        assert_eq!(s.samples, 1000);
        assert!(s.points.len() <= 8, "{} points", s.points.len());
        let total = s.total.unwrap_or_else(|| unreachable!());
        assert!(total.in_order);
        assert_eq!((total.first, total.last), (0, 999));
        assert_eq!(
            total.max,
            (0..1000).map(|i| sample(i).max).max().unwrap_or(0)
        );
    }

    #[test]
    fn an_empty_span_has_no_fold() {
        let mut j: Journal<Run> = Journal::new(8);
        j.push(sample(0));
        let id = j.open();
        assert_eq!(j.total(id), Some(None));
        let s = j.close(id).unwrap_or_else(|| unreachable!());
        assert_eq!((s.total, s.points.len(), s.samples), (None, 0, 0));
        assert_eq!(j.close(id), None);
    }
}
