//! The sampling journal (and the one-span timeline) against the plain answer: for any sequence
//! of spans opened, samples pushed and spans closed, each span's fold is the fold of exactly
//! its samples, its timeline covers them in order with no gap in at most the wanted points,
//! and the journal keeps at most that many runs per level however many spans overlap.
#![cfg(feature = "sampling")]

use hypomnesis::sampling::{Fold, Journal, SpanId};
use proptest::prelude::*;

/// Samples `first..=last`: their largest value (and the first sample that had it), and
/// whether they were folded in order with no gap.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    first: u64,
    last: u64,
    max: (u64, u64),
    in_order: bool,
}

impl Fold for Run {
    fn fold(&mut self, later: &Self) {
        self.in_order &= later.in_order && later.first == self.last + 1;
        self.last = later.last;
        if later.max.0 > self.max.0 {
            self.max = later.max;
        }
    }
}

fn value(i: u64, seed: u64) -> u64 {
    (i.wrapping_mul(2_654_435_761) ^ seed) % 97
}

fn sample(i: u64, seed: u64) -> Run {
    Run {
        first: i,
        last: i,
        max: (value(i, seed), i),
        in_order: true,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Open,
    Close(usize),
    Push(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Open),
        1 => any::<usize>().prop_map(Op::Close),
        3 => (1u16..300).prop_map(Op::Push),
    ]
}

/// What a span must be: samples `start..end`, their largest value first reached where.
fn check(
    points_cap: usize,
    start: u64,
    end: u64,
    seed: u64,
    got: &hypomnesis::sampling::Spanned<Run>,
) {
    assert_eq!(got.samples, end - start);
    assert!(
        got.points.len() <= points_cap,
        "{} points > {points_cap}",
        got.points.len()
    );
    if start == end {
        assert_eq!(got.total, None);
        assert!(got.points.is_empty());
        return;
    }
    let total = got.total.as_ref().unwrap();
    assert!(
        total.in_order,
        "timeline out of order or with a gap: {:?}",
        got.points
    );
    assert_eq!((total.first, total.last), (start, end - 1));
    let mut best = (value(start, seed), start);
    for i in start..end {
        if value(i, seed) > best.0 {
            best = (value(i, seed), i);
        }
    }
    assert_eq!(total.max, best);
    let mut next = start;
    for p in &got.points {
        assert_eq!(p.first, next, "points not consecutive: {:?}", got.points);
        next = p.last + 1;
    }
    assert_eq!(next, end);
    // The timeline uses its room: every sample its own point while they fit (the room less
    // its two partial ends), and past that at least half the room.
    let n = end - start;
    let room = points_cap as u64 - 2;
    if n <= room {
        assert_eq!(got.points.len() as u64, n, "a short span keeps each sample");
    } else {
        assert!(
            got.points.len() as u64 >= room / 2,
            "{} points for {n} samples in a room of {points_cap}",
            got.points.len()
        );
    }
}

proptest! {
    #[test]
    fn every_span_gets_exactly_its_samples(
        points in 4usize..40,
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        let mut j = Journal::new(points);
        let mut open: Vec<(SpanId, u64)> = Vec::new();
        let mut most_levels_kept = 0;
        let mut pushed = 0u64;
        for o in ops {
            match o {
                Op::Open => open.push((j.open(), j.len())),
                Op::Close(k) if !open.is_empty() => {
                    let (id, start) = open.remove(k % open.len());
                    let total = j.total(id).unwrap();
                    let s = j.close(id).unwrap();
                    prop_assert_eq!(&total, &s.total);
                    check(points, start, j.len(), seed, &s);
                }
                Op::Close(_) => {}
                Op::Push(n) => {
                    pushed += u64::from(n);
                    for _ in 0..n {
                        let i = j.len();
                        j.push(sample(i, seed));
                    }
                    for &(id, start) in &open {
                        check(points, start, j.len(), seed, &j.timeline(id).unwrap());
                        prop_assert_eq!(j.total(id).unwrap(), j.timeline(id).unwrap().total);
                    }
                }
            }
            let levels = 66 - j.len().leading_zeros() as usize;
            most_levels_kept = most_levels_kept.max(j.kept());
            prop_assert!(
                j.kept() <= levels * (points + 1),
                "{} runs kept for {} samples, {} spans", j.kept(), j.len(), j.spans()
            );
            // Each level with a whole run keeps at least its last (the tails need it).
            let whole_levels = 64 - j.len().leading_zeros() as usize;
            prop_assert!(j.kept() >= whole_levels, "{} runs kept for {} samples", j.kept(), j.len());
            prop_assert_eq!(j.spans(), open.len());
            prop_assert_eq!(j.is_empty(), pushed == 0);
        }
        for (id, start) in open {
            let s = j.close(id).unwrap();
            check(points, start, j.len(), seed, &s);
        }
        prop_assert_eq!(j.spans(), 0);
    }
}

/// Ten thousand nested spans over a long run: the journal stays at its bound (it does not
/// grow with the spans), and the outermost still gets every sample.
#[test]
fn deep_nesting_keeps_the_journal_bounded() {
    let mut j = Journal::new(64);
    let mut ids = Vec::new();
    for i in 0..10_000u64 {
        ids.push((j.open(), j.len()));
        j.push(sample(i, 1));
    }
    let levels = 66 - j.len().leading_zeros() as usize;
    assert!(j.kept() <= levels * 65, "{} runs kept", j.kept());
    while let Some((id, start)) = ids.pop() {
        j.push(sample(j.len(), 1));
        let s = j.close(id).unwrap();
        check(64, start, j.len(), 1, &s);
    }
    assert!(j.kept() <= (66 - j.len().leading_zeros() as usize) * 65);
}

proptest! {
    /// A timeline of one span against the plain answer: its points cover every sample in order
    /// with no gap, in at most the room, the largest value (and where it first came) exact.
    #[test]
    fn a_timeline_keeps_every_sample_in_its_room(
        points in 2usize..40,
        seed in any::<u64>(),
        n in 0u64..5000,
    ) {
        let mut t = hypomnesis::sampling::Timeline::new(points);
        for i in 0..n {
            t.push(sample(i, seed));
        }
        prop_assert_eq!(t.samples(), n);
        prop_assert!(t.len() <= points + 1, "{} points", t.len());
        let mut next = 0;
        let mut best: Option<(u64, u64)> = None;
        for p in t.points() {
            prop_assert!(p.in_order);
            prop_assert_eq!(p.first, next);
            next = p.last + 1;
            if best.is_none_or(|b| p.max.0 > b.0) {
                best = Some(p.max);
            }
        }
        prop_assert_eq!(next, n);
        let mut want: Option<(u64, u64)> = None;
        for i in 0..n {
            if want.is_none_or(|b| value(i, seed) > b.0) {
                want = Some((value(i, seed), i));
            }
        }
        prop_assert_eq!(best, want);
    }
}
