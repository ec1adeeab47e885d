//! What a tracked block keeps of its samples, bounded however long it runs: the exact peaks
//! (and when they were sampled), how many samples were taken, and a timeline of at most
//! [`TIMELINE_POINTS`] points between the entry and exit samples. As `hmn run`'s plot
//! (`crates/cli/src/cmd/run/timeline.rs`) does, a full timeline merges neighbouring points
//! pairwise, each figure keeping its maximum, and later points then each merge twice as many
//! samples: every peak survives in it, its time rounded to the merged point's first.

/// Most points kept between the entry sample and the exit sample.
pub const TIMELINE_POINTS: usize = 2046;

/// One sample: seconds since the block started, this process's RSS, and per sampled device
/// its own GPU memory (`None` where not attributable to it) and the device's used memory
/// (`None` where unreadable); the last, whether the GPU figures missed their deadline.
pub type RawSample = (f64, u64, Vec<Option<u64>>, Vec<Option<u64>>, bool);

/// A peak value and the time (seconds since the block started) it was first sampled.
pub type Peak = (u64, f64);

/// A finished block: its samples in time order (entry, the downsampled timeline, exit), how
/// many samples were taken in all and how many of them missed their GPU deadline, and the
/// exact peaks (RSS; per device, its own GPU memory and the device's used memory).
pub type Finished = (
    Vec<RawSample>,
    u64,
    u64,
    Peak,
    Vec<Option<Peak>>,
    Vec<Option<Peak>>,
);

/// The larger of two known figures; the known one of one.
fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// `b` folded into `a`: every figure its maximum, `a` keeps its time; missed if either did.
fn merge(a: &mut RawSample, b: &RawSample) {
    a.1 = a.1.max(b.1);
    for (mine, theirs) in [(&mut a.2, &b.2), (&mut a.3, &b.3)] {
        for (m, t) in mine.iter_mut().zip(theirs) {
            *m = max_opt(*m, *t);
        }
    }
    a.4 |= b.4;
}

/// A later, larger value replaces the peak; an equal one keeps the earlier time.
fn raise(peak: &mut Option<Peak>, value: Option<u64>, time: f64) {
    if let Some(v) = value
        && peak.is_none_or(|(p, _)| v > p)
    {
        *peak = Some((v, time));
    }
}

/// The samples of one block, kept within bounds.
#[derive(Debug)]
pub struct Record {
    first: Option<RawSample>,
    points: Vec<RawSample>,
    /// The point being filled, and how many samples it holds.
    pending: Option<(RawSample, usize)>,
    per_point: usize,
    cap: usize,
    taken: u64,
    missed: u64,
    rss: Option<Peak>,
    own: Vec<Option<Peak>>,
    used: Vec<Option<Peak>>,
}

impl Record {
    /// When the peak so far of this process's GPU memory was sampled (the device with the
    /// largest peak), else that of its RSS; seconds since the block started.
    pub fn peak_time(&self) -> Option<f64> {
        let gpu = self
            .own
            .iter()
            .flatten()
            .max_by(|a, b| a.0.cmp(&b.0).then_with(|| b.1.total_cmp(&a.1)));
        gpu.or(self.rss.as_ref()).map(|p| p.1)
    }

    /// An empty record of a block on `devices` devices, its timeline at most `cap` points.
    pub fn new(devices: usize, cap: usize) -> Self {
        Self {
            first: None,
            points: Vec::new(),
            pending: None,
            per_point: 1,
            cap: cap.max(2),
            taken: 0,
            missed: 0,
            rss: None,
            own: vec![None; devices],
            used: vec![None; devices],
        }
    }

    /// Counts `s` in the peaks and totals.
    fn count(&mut self, s: &RawSample) {
        self.taken += 1;
        self.missed += u64::from(s.4);
        raise(&mut self.rss, Some(s.1), s.0);
        for (peak, value) in self.own.iter_mut().zip(&s.2) {
            raise(peak, *value, s.0);
        }
        for (peak, value) in self.used.iter_mut().zip(&s.3) {
            raise(peak, *value, s.0);
        }
    }

    /// The entry sample.
    pub fn first(&mut self, s: RawSample) {
        self.count(&s);
        self.first = Some(s);
    }

    /// A sample between entry and exit.
    pub fn add(&mut self, s: RawSample) {
        self.count(&s);
        let filled = if let Some((q, n)) = &mut self.pending {
            merge(q, &s);
            *n += 1;
            *n
        } else {
            self.pending = Some((s, 1));
            1
        };
        if filled < self.per_point {
            return;
        }
        if let Some((q, _)) = self.pending.take() {
            self.points.push(q);
        }
        if self.points.len() >= self.cap {
            let mut halved = Vec::with_capacity(self.cap / 2 + 1);
            let mut pairs = std::mem::take(&mut self.points).into_iter();
            while let Some(mut a) = pairs.next() {
                if let Some(b) = pairs.next() {
                    merge(&mut a, &b);
                }
                halved.push(a);
            }
            self.points = halved;
            self.per_point *= 2;
        }
    }

    /// The record finished with the exit sample `last`.
    pub fn finish(mut self, last: RawSample) -> Finished {
        self.count(&last);
        let mut samples = Vec::with_capacity(self.points.len() + 3);
        samples.extend(self.first);
        samples.extend(self.points);
        samples.extend(self.pending.map(|(q, _)| q));
        samples.push(last);
        (
            samples,
            self.taken,
            self.missed,
            self.rss.unwrap_or((0, 0.0)),
            self.own,
            self.used,
        )
    }
}
