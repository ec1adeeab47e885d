//! [`Timeline`]: the samples of one span kept in a fixed room however long it runs.
//!
//! At most `points` points: each holds `per_point()` consecutive samples folded together (for
//! figures, their maximum, so every peak survives), the next one being filled aside. When the
//! room is full, neighbouring points fold pairwise and each later point holds twice as many
//! samples. What [`Journal`](super::Journal) does for many overlapping spans, this does for
//! one, in `points` summaries and no more.

use super::journal::Fold;

/// A bounded timeline of one span. See the module's text.
#[derive(Debug, Clone)]
pub struct Timeline<T> {
    cap: usize,
    per_point: u64,
    points: Vec<T>,
    /// The point being filled, and how many samples it holds.
    pending: Option<(T, u64)>,
    samples: u64,
}

impl<T: Fold> Timeline<T> {
    /// An empty timeline of at most `points` points (at least 2). Its room is taken at the
    /// first sample, once.
    #[must_use]
    pub fn new(points: usize) -> Self {
        Self {
            cap: points.max(2),
            per_point: 1,
            points: Vec::new(),
            pending: None,
            samples: 0,
        }
    }

    /// Adds the next sample.
    pub fn push(&mut self, sample: T) {
        self.samples += 1;
        let (point, held) = match self.pending.take() {
            Some((mut p, n)) => {
                p.fold(&sample);
                (p, n + 1)
            }
            None => (sample, 1),
        };
        if held < self.per_point {
            self.pending = Some((point, held));
            return;
        }
        if self.points.capacity() == 0 {
            self.points.reserve_exact(self.cap);
        }
        self.points.push(point);
        if self.points.len() >= self.cap {
            self.halve();
        }
    }

    /// Folds neighbouring points pairwise, in place.
    fn halve(&mut self) {
        let len = self.points.len();
        for i in 0..len / 2 {
            let (left, right) = self.points.split_at_mut(2 * i + 1);
            if let (Some(a), Some(b)) = (left.last_mut(), right.first()) {
                a.fold(b);
            }
            self.points.swap(i, 2 * i);
        }
        if len % 2 == 1 {
            self.points.swap(len / 2, len - 1);
        }
        self.points.truncate(len.div_ceil(2));
        self.per_point *= 2;
    }

    /// The points in time order, the one being filled last.
    pub fn points(&self) -> impl Iterator<Item = &T> {
        self.points
            .iter()
            .chain(self.pending.as_ref().map(|(p, _)| p))
    }

    /// How many points there are (at most the room, and the one being filled).
    #[must_use]
    pub fn len(&self) -> usize {
        self.points.len() + usize::from(self.pending.is_some())
    }

    /// Whether no sample was added.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// How many samples were added in all.
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// How many samples each whole point holds now.
    #[must_use]
    pub fn per_point(&self) -> u64 {
        self.per_point
    }
}
