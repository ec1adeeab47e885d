//! The ledger of an engine's start: at each line it printed, its figures (weights, KV cache,
//! CUDA graphs, activations, non-torch memory) beside what the driver charged its processes at
//! that moment, the gap named; the phases its lines mark and what the other processes on its
//! GPU did in each; whether a neighbour's change fell in the window the engine sized its KV
//! cache from; and, when it failed for want of memory, who held the memory then.
//!
//! The driver's figures come from the sample taken just after a line was read (`hmn run`
//! samples at once when a line is heard), so "at that moment" is within one sampling step.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use hypomnesis::sampling::Frame;
use serde::Serialize;

use super::{Engine, Event, Heard, Kind};

/// Changes smaller than this are not named (allocator noise).
pub const NOTICED: u64 = 64 << 20;
/// How many neighbours a phase or a failure names.
pub const NAMED: usize = 3;

/// One GPU at one sample.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuAt {
    pub total: Option<u64>,
    pub free: Option<u64>,
    pub reserved: Option<u64>,
    /// What the driver charges the command's processes.
    pub own: u64,
    /// Every other process the driver lists, by pid.
    pub others: BTreeMap<u32, u64>,
}

impl GpuAt {
    pub fn others_sum(&self) -> u64 {
        self.others.values().fold(0, |a, &b| a.saturating_add(b))
    }
}

/// The driver's figures at one sample: each GPU whose processes could be listed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Moment {
    pub at: Duration,
    pub gpus: BTreeMap<usize, GpuAt>,
}

impl Moment {
    pub fn of(frame: &Frame, tree: &HashSet<u32>) -> Self {
        let mut gpus = BTreeMap::new();
        for (i, d) in frame.devices.iter().enumerate() {
            let Some(by_pid) = frame.gpu_by_pid(i) else {
                continue;
            };
            let info = d.info();
            let mut g = GpuAt {
                total: info.map(|d| d.total_bytes),
                free: info.map(|d| d.free_bytes),
                reserved: info.and_then(|d| d.reserved_bytes),
                ..GpuAt::default()
            };
            for (pid, bytes) in by_pid {
                if tree.contains(&pid) {
                    g.own = g.own.saturating_add(bytes);
                } else {
                    g.others.insert(pid, bytes);
                }
            }
            gpus.insert(i, g);
        }
        Self { at: frame.at, gpus }
    }
}

/// The samples an engine's ledger needs, taken as the run goes: the first, the one after each
/// batch of lines heard, the last.
#[derive(Debug)]
pub struct Follow {
    heard: Arc<Heard>,
    /// How many events have a moment.
    seen: usize,
    start: Option<Moment>,
    /// The moment of each event (by its index), shared by a batch.
    at_events: Vec<(usize, Arc<Moment>)>,
    /// The sample before each event's: what the command held just before it said it failed
    /// (it may let go at once).
    before_events: Vec<(usize, Arc<Moment>)>,
    last: Option<Moment>,
}

impl Follow {
    pub fn new(heard: Arc<Heard>) -> Self {
        Self {
            heard,
            seen: 0,
            start: None,
            at_events: Vec::new(),
            before_events: Vec::new(),
            last: None,
        }
    }

    /// Whether lines were heard since the last sample (the loop samples at once).
    pub fn pending(&self) -> bool {
        self.heard.count() > self.seen
    }

    /// One sample of the run.
    pub fn sample(&mut self, frame: &Frame, tree: &HashSet<u32>) {
        let mut moment = Moment::of(frame, tree);
        // On the clock the lines were timed with.
        moment.at = self.heard.now();
        self.add(moment);
    }

    /// One sample's figures: the moment of the lines heard since the last.
    pub fn add(&mut self, moment: Moment) {
        let count = self.heard.count();
        if count > self.seen {
            let shared = Arc::new(moment.clone());
            self.at_events
                .extend((self.seen..count).map(|i| (i, Arc::clone(&shared))));
            if let Some(before) = &self.last {
                let before = Arc::new(before.clone());
                self.before_events
                    .extend((self.seen..count).map(|i| (i, Arc::clone(&before))));
            }
            self.seen = count;
        }
        if self.start.is_none() {
            self.start = Some(moment.clone());
        }
        self.last = Some(moment);
    }

    /// The report, once the command ended and its output was drained; `None` when no line
    /// was recognised. `who` names a pid (its command and pod).
    pub fn report(&self, who: &dyn Fn(u32) -> Who) -> Option<EngineReport> {
        let (events, dropped, overlong) = self.heard.all();
        let moments: Vec<Option<&Moment>> = (0..events.len())
            .map(|i| {
                self.at_events
                    .iter()
                    .find(|(e, _)| *e == i)
                    .map(|(_, m)| m.as_ref())
                    .or(self.last.as_ref())
            })
            .collect();
        build(&events, &moments, self.start.as_ref(), who).map(|mut r| {
            r.events_dropped = dropped;
            r.lines_too_long = overlong;
            // Who held what at its failure: the sample before its line (it may let go at once
            // after), what the command held the larger of the two around it.
            if let (Some(f), Some(gpu)) = (r.failure.as_mut(), r.gpu) {
                let i = events.iter().position(|e| e.kind == Kind::OutOfMemory);
                let before = self
                    .before_events
                    .iter()
                    .find(|(e, _)| Some(*e) == i)
                    .and_then(|(_, m)| m.gpus.get(&usize::try_from(gpu).ok()?));
                if let (Some(b), Some(e)) = (before, i.and_then(|i| events.get(i))) {
                    let after = f.own_bytes;
                    *f = failure(e, Some(b), who);
                    f.own_bytes = Some(b.own.max(after.unwrap_or(0)));
                }
            }
            r
        })
    }
}

/// Who a process is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Who {
    pub command: Option<String>,
    pub pod: Option<String>,
}

/// What an engine said, beside what the driver saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineReport {
    pub engine: Engine,
    /// The GPU the ledger compares on (where the command held the most memory).
    pub gpu: Option<u32>,
    pub ledger: Vec<LedgerRow>,
    pub phases: Vec<Phase>,
    /// The others' change while the engine sized its KV cache, when large enough to matter.
    pub sizing: Option<Sizing>,
    pub failure: Option<Failure>,
    pub events: Vec<Event>,
    pub events_dropped: usize,
    pub lines_too_long: usize,
}

/// The ledger at one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerRow {
    #[serde(rename = "at_s")]
    pub at: f64,
    pub kind: Kind,
    pub pattern: &'static str,
    /// The engine's own figures so far.
    pub weights_bytes: Option<u64>,
    pub kv_cache_bytes: Option<u64>,
    pub cuda_graphs_bytes: Option<u64>,
    pub non_torch_bytes: Option<u64>,
    pub activations_bytes: Option<u64>,
    /// What they add up to (weights, KV cache once allocated, CUDA graphs, non-torch).
    pub engine_accounts_bytes: u64,
    /// What the driver charged its processes on the GPU at that moment.
    pub driver_bytes: Option<u64>,
    /// `driver_bytes` less `engine_accounts_bytes`.
    pub gap_bytes: Option<i64>,
}

/// A stretch between two of the engine's lines, and what the others did meanwhile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    /// What the engine was doing ("loading its weights").
    pub doing: &'static str,
    pub from_s: f64,
    pub to_s: f64,
    /// The others' change on the GPU over it.
    pub others_change_bytes: i64,
    /// The largest changes (at least [`NOTICED`]), largest first.
    pub largest: Vec<Change>,
}

/// One other process's change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub pid: u32,
    #[serde(flatten)]
    pub who: Who,
    #[serde(rename = "change_bytes")]
    pub bytes: i64,
}

/// The others' change while the engine measured free memory to size its KV cache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizing {
    pub from_s: f64,
    pub to_s: f64,
    pub others_change_bytes: i64,
    pub largest: Vec<Change>,
    /// How much of the engine's own "non-torch" figure is the others' growth in that window
    /// (the engine measured it from the device's free memory).
    pub in_its_non_torch_bytes: Option<u64>,
}

/// Who held the memory when the engine failed for want of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    #[serde(rename = "at_s")]
    pub at: f64,
    pub pattern: &'static str,
    pub line: String,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub reserved_bytes: Option<u64>,
    /// What the driver charged the command's processes.
    pub own_bytes: Option<u64>,
    pub others_bytes: Option<u64>,
    /// The largest other holders, largest first.
    pub holders: Vec<Holder>,
    /// Ghosts on the GPU (memory held for processes that are gone or stuck), as `hmn ghosts`
    /// found them at the command's start and end.
    pub ghosts: Vec<GhostHeld>,
    #[serde(flatten)]
    pub fits: Fits,
}

/// A ghost's hold on the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GhostHeld {
    pub pid: Option<u32>,
    pub class: &'static str,
    pub bytes: u64,
}

/// What would have fitted, where the engine's figures say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Fits {
    /// The largest `--gpu-memory-utilization` (vLLM) that what was free would have met.
    #[serde(rename = "utilization_that_fits")]
    pub utilization: Option<f64>,
    /// How much more than was free it wanted.
    pub short_bytes: Option<u64>,
    /// How much free memory rose while it profiled (another process released memory).
    pub freed_while_profiling_bytes: Option<u64>,
    /// The smallest `--mem-fraction-static` (SGLang) that would have left room for a KV cache
    /// in what was free: SGLang's cache is free memory less (1 − fraction) of the total.
    pub mem_fraction_static_above: Option<f64>,
}

/// One other holder at the failure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Holder {
    pub pid: u32,
    #[serde(flatten)]
    pub who: Who,
    pub bytes: u64,
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn signed(b: u64) -> i64 {
    i64::try_from(b).unwrap_or(i64::MAX)
}

/// The engine the events come from: the one with most lines, PyTorch's error only when no
/// engine spoke.
fn main_engine(events: &[Event]) -> Option<Engine> {
    let mut counts: BTreeMap<Engine, usize> = BTreeMap::new();
    for e in events {
        *counts.entry(e.engine).or_default() += 1;
    }
    let engines = counts.iter().filter(|(e, _)| **e != Engine::Torch);
    engines
        .max_by_key(|(_, n)| **n)
        .map(|(e, _)| *e)
        .or_else(|| counts.keys().next().copied())
}

/// The GPU the command held the most memory on at any of `moments`.
fn engine_gpu<'a>(moments: impl Iterator<Item = &'a Moment>) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for m in moments {
        for (&i, g) in &m.gpus {
            if g.own > 0 && best.is_none_or(|(b, _)| g.own > b) {
                best = Some((g.own, i));
            }
        }
    }
    best.map(|(_, i)| i)
}

/// The engine's figures as they stand after each event.
#[derive(Debug, Default, Clone, Copy)]
struct Books {
    weights: Option<u64>,
    kv_sized: Option<u64>,
    kv_allocated: bool,
    graphs: Option<u64>,
    non_torch: Option<u64>,
    activations: Option<u64>,
}

impl Books {
    fn add(&mut self, e: &Event) {
        let b = |n: &str| e.bytes(n);
        self.weights = b("weights_bytes").or(self.weights);
        let kv = b("kv_cache_bytes")
            .or_else(|| Some(b("k_cache_bytes")?.saturating_add(b("v_cache_bytes")?)));
        self.kv_sized = kv.or(self.kv_sized);
        if e.kind == Kind::KvCacheAllocated {
            self.kv_allocated = true;
        }
        self.graphs = b("cuda_graphs_bytes").or(self.graphs);
        self.non_torch = b("non_torch_bytes").or(self.non_torch);
        self.activations = b("activations_bytes").or(self.activations);
    }

    fn kv(&self) -> Option<u64> {
        self.kv_sized.filter(|_| self.kv_allocated)
    }

    fn accounts(&self) -> u64 {
        [self.weights, self.kv(), self.graphs, self.non_torch]
            .into_iter()
            .flatten()
            .fold(0, u64::saturating_add)
    }
}

/// The report of `events` (each with the moment sampled after it), from `start`.
pub fn build(
    events: &[Event],
    moments: &[Option<&Moment>],
    start: Option<&Moment>,
    who: &dyn Fn(u32) -> Who,
) -> Option<EngineReport> {
    let engine = main_engine(events)?;
    // Where it held memory; else (it failed before holding any that a sample saw) the GPU
    // its failure names, or the only GPU there is.
    let gpu = engine_gpu(moments.iter().flatten().copied().chain(start)).or_else(|| {
        let listed: HashSet<usize> = moments
            .iter()
            .flatten()
            .chain(start.iter())
            .flat_map(|m| m.gpus.keys().copied())
            .collect();
        let named = events
            .iter()
            .filter_map(|e| e.number_of("device"))
            .find(|d| listed.contains(d));
        named.or_else(|| {
            (listed.len() == 1)
                .then(|| listed.iter().copied().next())
                .flatten()
        })
    });
    let at_gpu = |m: Option<&Moment>| -> Option<GpuAt> { m?.gpus.get(&gpu?).cloned() };
    let mut books = Books::default();
    let mut ledger = Vec::new();
    for (e, m) in events.iter().zip(moments) {
        if e.engine != engine {
            continue;
        }
        books.add(e);
        let driver = at_gpu(*m).map(|g| g.own);
        let accounts = books.accounts();
        ledger.push(LedgerRow {
            at: secs(e.at),
            kind: e.kind,
            pattern: e.pattern,
            weights_bytes: books.weights,
            kv_cache_bytes: books.kv_sized,
            cuda_graphs_bytes: books.graphs,
            non_torch_bytes: books.non_torch,
            activations_bytes: books.activations,
            engine_accounts_bytes: accounts,
            driver_bytes: driver,
            gap_bytes: driver.map(|d| signed(d) - signed(accounts)),
        });
    }
    let phases = phases(events, moments, start, gpu, who);
    let mut sizing = sizing(events, moments, start, gpu, who);
    if let Some(s) = sizing.as_mut()
        && s.others_change_bytes > 0
    {
        s.in_its_non_torch_bytes = books
            .non_torch
            .map(|n| n.min(s.others_change_bytes.unsigned_abs()));
    }
    let failure = events
        .iter()
        .zip(moments)
        .find(|(e, _)| e.kind == Kind::OutOfMemory)
        .map(|(e, m)| failure(e, at_gpu(*m).as_ref(), who));
    Some(EngineReport {
        engine,
        gpu: gpu.and_then(|g| u32::try_from(g).ok()),
        ledger,
        phases,
        sizing,
        failure,
        events: events.to_vec(),
        events_dropped: 0,
        lines_too_long: 0,
    })
}

/// The others' changes on `gpu` from `a` to `b`: their sum's change, and the largest (at
/// least [`NOTICED`]), named.
fn changes(a: &GpuAt, b: &GpuAt, who: &dyn Fn(u32) -> Who) -> (i64, Vec<Change>) {
    let total = signed(b.others_sum()) - signed(a.others_sum());
    let pids: HashSet<u32> = a.others.keys().chain(b.others.keys()).copied().collect();
    let mut moved: Vec<(u32, i64)> = pids
        .into_iter()
        .map(|p| {
            let before = a.others.get(&p).copied().unwrap_or(0);
            let after = b.others.get(&p).copied().unwrap_or(0);
            (p, signed(after) - signed(before))
        })
        .filter(|(_, c)| c.unsigned_abs() >= NOTICED)
        .collect();
    moved.sort_by_key(|&(p, c)| (std::cmp::Reverse(c.unsigned_abs()), p));
    let largest = moved
        .into_iter()
        .take(NAMED)
        .map(|(pid, bytes)| Change {
            pid,
            who: who(pid),
            bytes,
        })
        .collect();
    (total, largest)
}

/// The stretches between the engine's lines (a run of lines of one kind is one boundary).
fn phases(
    events: &[Event],
    moments: &[Option<&Moment>],
    start: Option<&Moment>,
    gpu: Option<usize>,
    who: &dyn Fn(u32) -> Who,
) -> Vec<Phase> {
    let Some(gpu) = gpu else { return Vec::new() };
    let mut out = Vec::new();
    // A phase runs from one of its lines to the next; the others' change over it is read
    // between the samples taken after each.
    let mut from: Option<&Moment> = start;
    let mut from_at = Duration::ZERO;
    let mut last_kind: Option<Kind> = None;
    for (e, m) in events.iter().zip(moments) {
        if last_kind == Some(e.kind) {
            continue;
        }
        last_kind = Some(e.kind);
        let (Some(a), Some(b)) = (from, *m) else {
            continue;
        };
        if let (Some(ga), Some(gb)) = (a.gpus.get(&gpu), b.gpus.get(&gpu))
            && e.at > from_at
        {
            let (total, largest) = changes(ga, gb, who);
            out.push(Phase {
                doing: e.kind.doing(),
                from_s: secs(from_at),
                to_s: secs(e.at),
                others_change_bytes: total,
                largest,
            });
        }
        from = Some(b);
        from_at = e.at;
    }
    out
}

/// The others' change from the start to the line where the engine sized its KV cache from
/// the GPU's free memory (or allocated it, if it says nothing before), when it matters.
fn sizing(
    events: &[Event],
    moments: &[Option<&Moment>],
    start: Option<&Moment>,
    gpu: Option<usize>,
    who: &dyn Fn(u32) -> Who,
) -> Option<Sizing> {
    let gpu = gpu?;
    let sized = |k: Kind| {
        events
            .iter()
            .zip(moments)
            .find(|(e, _)| e.kind == k && e.engine != Engine::Torch)
    };
    let (e, m) = sized(Kind::KvCacheSized).or_else(|| sized(Kind::KvCacheAllocated))?;
    let (a, b) = (start?.gpus.get(&gpu)?, (*m)?.gpus.get(&gpu)?);
    let (total, largest) = changes(a, b, who);
    (total.unsigned_abs() >= NOTICED).then(|| Sizing {
        from_s: secs(start.map_or(Duration::ZERO, |s| s.at)),
        to_s: secs(e.at),
        others_change_bytes: total,
        largest,
        in_its_non_torch_bytes: None,
    })
}

/// Who held the memory at the failure `e`, and what would have fitted.
fn failure(e: &Event, at: Option<&GpuAt>, who: &dyn Fn(u32) -> Who) -> Failure {
    let mut holders: Vec<(u32, u64)> = at
        .map(|g| {
            g.others
                .iter()
                .map(|(&p, &b)| (p, b))
                .filter(|(_, b)| *b > 0)
                .collect()
        })
        .unwrap_or_default();
    holders.sort_by_key(|&(p, b)| (std::cmp::Reverse(b), p));
    let free = e.bytes("free_bytes").or(at.and_then(|g| g.free));
    let total = e.bytes("total_bytes").or(at.and_then(|g| g.total));
    let others = at.map(GpuAt::others_sum);
    Failure {
        at: secs(e.at),
        pattern: e.pattern,
        line: e.line.clone(),
        total_bytes: total,
        free_bytes: free,
        reserved_bytes: at.and_then(|g| g.reserved),
        own_bytes: at.map(|g| g.own),
        others_bytes: others,
        holders: holders
            .into_iter()
            .take(NAMED + 2)
            .map(|(pid, bytes)| Holder {
                pid,
                who: who(pid),
                bytes,
            })
            .collect(),
        ghosts: Vec::new(),
        fits: would_fit(e, free, total),
    }
}

/// What would have fitted, from the engine's own figures and the driver's.
fn would_fit(e: &Event, free: Option<u64>, total: Option<u64>) -> Fits {
    let mut fits = Fits::default();
    match e.pattern {
        "vllm.free_below_utilization" => {
            if let (Some(free), Some(total), Some(wanted)) = (free, total, e.bytes("wanted_bytes"))
            {
                #[allow(clippy::cast_precision_loss)]
                let at = (free as f64 / total.max(1) as f64 * 100.0).floor() / 100.0;
                fits.utilization = Some(at);
                fits.short_bytes = Some(wanted.saturating_sub(free));
            }
        }
        "pytorch.out_of_memory" | "pytorch.out_of_memory_2_0" => {
            fits.short_bytes = e
                .bytes("tried_bytes")
                .zip(free)
                .map(|(t, f)| t.saturating_sub(f));
        }
        "sglang.not_enough_memory" => {
            if let (Some(free), Some(total)) = (free, total) {
                #[allow(clippy::cast_precision_loss)]
                let above = ((1.0 - free as f64 / total.max(1) as f64) * 100.0).ceil() / 100.0;
                fits.mem_fraction_static_above = Some(above.clamp(0.0, 1.0));
            }
        }
        "vllm.profiling_error" => {
            fits.freed_while_profiling_bytes = e
                .bytes("free_before_bytes")
                .zip(e.bytes("free_after_bytes"))
                .map(|(b, a)| a.saturating_sub(b));
        }
        _ => {}
    }
    fits
}
