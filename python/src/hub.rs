//! The one sampling thread of the process, shared by every running `Sampler` (each `track()`
//! block): it samples each block at its own interval, never takes the GIL, and reads the GPU
//! figures through a second thread, waiting for them at most the block's deadline, so a driver
//! call that hangs marks samples as missed instead of stopping the sampling.
//!
//! After `fork()` the child has neither thread: [`after_fork`] (called by `hypomnesis.tracking`
//! through `os.register_at_fork`) leaves the old hub untouched, its lock possibly held by a
//! thread that no longer exists, and the next block starts a new one.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hypomnesis::bounded::Worker;
use hypomnesis::sampling::{Journal, SpanId, Spanned};

use crate::timeline::{self, RawSample, SampleRun, TIMELINE_POINTS};

/// The GPU figures of one device: this process's own memory and the device's used memory.
pub type GpuFigures = (Option<u64>, Option<u64>);

/// The latest GPU reading of a device, and whether it missed its deadline.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub figures: GpuFigures,
    pub missed: bool,
}

/// Held by the GPU reader during its driver calls, and by a thread about to fork (from
/// `os.register_at_fork`'s `before` to its `after`): a child is never forked in the middle of
/// a driver call of ours, whose locks (the library's, the driver's) it would find held forever.
static DRIVER: Mutex<()> = Mutex::new(());

thread_local! {
    /// [`DRIVER`], held by this thread across a fork.
    static FORKING: std::cell::RefCell<Option<MutexGuard<'static, ()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Before a fork: waits at most `wait` for the GPU reader to finish its driver call, and keeps
/// it from starting another until [`after_fork_in_parent`] (or [`after_fork`] in the child).
/// A call still not done by then is forked through: the child may then find the driver's
/// locks held (its samples then miss their deadline).
pub fn before_fork(wait: Duration) {
    let give_up = Instant::now() + wait;
    let guard = loop {
        match DRIVER.try_lock() {
            Ok(g) => break Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(std::sync::TryLockError::WouldBlock) => break None,
        }
    };
    FORKING.with(|f| *f.borrow_mut() = guard);
}

/// After a fork, in the parent: the GPU reader may go on.
pub fn after_fork_in_parent() {
    FORKING.with(|f| f.borrow_mut().take());
}

/// Reads the GPU figures of `devices` now: this process's own memory on each (where the source
/// attributes memory to it) and the device's used memory, each as cheaply as the library reads
/// it.
fn read_gpu(devices: &[u32]) -> Vec<GpuFigures> {
    let _driver = DRIVER.lock().unwrap_or_else(PoisonError::into_inner);
    devices
        .iter()
        .map(|&d| {
            let own = hypomnesis::process_gpu_info(d)
                .ok()
                .filter(|o| o.is_per_process)
                .map(|o| o.used_bytes);
            (own, hypomnesis::device_used_bytes(d).ok())
        })
        .collect()
}

/// An edge's GPU reading of `devices` made on the calling thread (no hang guard).
pub fn read_here(devices: &[u32]) -> Vec<GpuFigures> {
    read_gpu(devices)
}

/// Where the driver calls are made, so that the sampling thread can stop waiting: the
/// library's bounded worker (one thread, held by a call that does not return, never one per
/// reading).
struct Reader {
    worker: Worker,
}

impl Reader {
    fn new() -> Self {
        Self {
            worker: Worker::new("gpu-reader"),
        }
    }

    /// The figures of `devices`, or `None` when they did not come within `deadline`. An edge's
    /// reading under way is waited for (within the deadline); a call already past the deadline
    /// is taken to be hung and not waited for again: the samples of the other blocks are due.
    fn read(&self, devices: &[u32], deadline: Duration) -> Option<Vec<GpuFigures>> {
        if self.worker.busy_for().is_some_and(|ran| ran >= deadline) {
            return None;
        }
        let devices = devices.to_vec();
        self.worker.ask(deadline, move || read_gpu(&devices)).ok()
    }
}

/// An edge's reading asked of the GPU reader: its answer comes on `answer`.
pub type EdgeAnswer = std::sync::mpsc::Receiver<Vec<GpuFigures>>;

/// Blocks sampled alike (the same interval, deadline and devices): their samples between
/// entry and exit are taken once, into one journal, each block a span of it.
struct Channel {
    /// Names the channel for the life of the hub (a list's position would not).
    id: u64,
    interval: Duration,
    deadline: Duration,
    devices: Vec<u32>,
    next_due: Instant,
    journal: Journal<SampleRun>,
    /// Since when no block is open in it: it is not sampled, and kept [`IDLE_KEPT`] for the
    /// next block (a decorated function called in a loop opens one block at a time).
    idle_since: Option<Instant>,
}

/// How long a channel with no open block is kept before it is let go.
const IDLE_KEPT: Duration = Duration::from_secs(10);

/// A running block's place in the hub, kept by its sampler: its channel and its span there.
#[derive(Debug)]
pub struct Ticket {
    channel: u64,
    span: SpanId,
}

#[derive(Default)]
struct State {
    /// The channels, few (one per interval, deadline and devices in use): a list, looked up
    /// by comparing, costs less than hashing.
    channels: Vec<Channel>,
    next_channel: u64,
    latest: HashMap<u32, Reading>,
    /// What the sampling thread is doing: sampling, or asleep until when (`None`: until woken).
    asleep: Asleep,
}

/// Whether the sampling thread sleeps, and until when.
#[derive(Debug, Clone, Copy, Default)]
enum Asleep {
    /// It runs, and looks at the channels before it sleeps again.
    #[default]
    Awake,
    /// Until then (`None`: until woken).
    Until(Option<Instant>),
}

/// The shared sampler.
pub struct Hub {
    state: Mutex<State>,
    /// Wakes the sampling thread: a block started.
    wake: Condvar,
    /// Where the driver calls are made, the sampling thread's and the edges'.
    reader: Reader,
}

/// This process's hub; `None` until a block starts (and again in a forked child).
static HUB: Mutex<Option<Arc<Hub>>> = Mutex::new(None);
/// Bumped by every fork, in the child: a hub of an older generation is never touched.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The generation of the hubs started from now on.
pub fn generation() -> u64 {
    GENERATION.load(Ordering::SeqCst)
}

/// Forgets the parent's hub in a forked child (its threads are not there).
pub fn after_fork() {
    FORKING.with(|f| f.borrow_mut().take());
    GENERATION.fetch_add(1, Ordering::SeqCst);
    // Only ever locked while holding the GIL, which the forking thread held: never held here.
    let mut hub = HUB.lock().unwrap_or_else(PoisonError::into_inner);
    // Leaked, not dropped: its lock may be held by the sampling thread the child lacks.
    std::mem::forget(hub.take());
}

/// The hub of this process, started (its two threads) on first use. Call with the GIL held.
pub fn hub() -> std::io::Result<(Arc<Hub>, u64)> {
    let mut slot = HUB.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = slot.as_ref() {
        return Ok((Arc::clone(h), generation()));
    }
    let hub = Arc::new(Hub {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
        reader: Reader::new(),
    });
    let shared = Arc::clone(&hub);
    std::thread::Builder::new()
        .name("hypomnesis-sampler".into())
        .spawn(move || shared.run())?;
    *slot = Some(Arc::clone(&hub));
    Ok((hub, generation()))
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts sampling a block every `interval` (on the shared cadence of the blocks sampled
    /// alike), its entry sample `first`.
    pub fn subscribe(&self, interval: Duration, deadline: Duration, devices: &[u32]) -> Ticket {
        let mut st = self.lock();
        let mut woken = false;
        let alike = st
            .channels
            .iter_mut()
            .find(|c| c.interval == interval && c.deadline == deadline && c.devices == devices);
        let (channel, span) = if let Some(channel) = alike {
            if channel.idle_since.take().is_some() {
                channel.next_due = Instant::now() + interval;
                woken = true;
            }
            (channel.id, channel.journal.open())
        } else {
            let id = st.next_channel;
            st.next_channel += 1;
            let mut channel = Channel {
                id,
                interval,
                deadline,
                devices: devices.to_vec(),
                next_due: Instant::now() + interval,
                journal: Journal::new(TIMELINE_POINTS),
                idle_since: None,
            };
            let span = channel.journal.open();
            st.channels.push(channel);
            woken = true;
            (id, span)
        };
        // The sampling thread's next wake-up changes only with a channel that starts, and only
        // when it is due before the thread wakes anyway (a decorated function called in a loop
        // wakes it once per interval, not once per call); awake, it looks at the channels next.
        let due = Instant::now() + interval;
        let early = match st.asleep {
            Asleep::Awake => false,
            Asleep::Until(None) => true,
            Asleep::Until(Some(t)) => due < t,
        };
        if woken && early {
            self.wake.notify_all();
        }
        Ticket { channel, span }
    }

    /// Stops sampling the block of `ticket` and hands back its samples between entry and now.
    pub fn unsubscribe(&self, ticket: &Ticket) -> Option<Spanned<SampleRun>> {
        let mut st = self.lock();
        let channel = channel_mut(&mut st.channels, ticket.channel)?;
        let spanned = channel.journal.close(ticket.span);
        if channel.journal.spans() == 0 {
            channel.idle_since = Some(Instant::now());
        }
        spanned
    }

    /// When the peak so far of the block of `ticket`, which started at `start` with the entry
    /// sample `first`, was sampled ([`timeline::peak_time`]).
    pub fn peak_time(&self, ticket: &Ticket, start: Instant, first: &RawSample) -> Option<f64> {
        let st = self.lock();
        let between = st
            .channels
            .iter()
            .find(|c| c.id == ticket.channel)?
            .journal
            .total(ticket.span)?;
        Some(timeline::peak_time(start, first, between.as_ref()))
    }

    /// An edge's GPU reading of `devices`, made on the GPU reader after this call (so never an
    /// older one): handed to it once it is free, waiting at most `wait` for an earlier call;
    /// `Err` when it is not free by then (or has no thread).
    pub fn start_edge(
        &self,
        devices: &[u32],
        wait: Duration,
    ) -> Result<EdgeAnswer, hypomnesis::bounded::Unanswered> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let devices = devices.to_vec();
        self.reader.worker.start_within(
            wait,
            move || read_gpu(&devices),
            move |answer| {
                if let Ok(figures) = answer {
                    let _ = tx.send(figures);
                }
            },
        )?;
        Ok(rx)
    }

    /// The sampling thread: one round per due cadence or wanted reading, forever. A round
    /// reads RSS once and the GPU figures of every device wanted once, and adds one sample to
    /// each due channel, whatever the number of blocks in it.
    fn run(&self) {
        let reader = &self.reader;
        let mut st = self.lock();
        loop {
            let now = Instant::now();
            st.channels.retain(|c| {
                c.idle_since
                    .is_none_or(|t| now.duration_since(t) < IDLE_KEPT)
            });
            let due: Vec<u64> = st
                .channels
                .iter()
                .filter(|c| c.idle_since.is_none() && c.next_due <= now)
                .map(|c| c.id)
                .collect();
            if due.is_empty() {
                let wake = next_wake(&st.channels);
                st.asleep = Asleep::Until(wake);
                st = match wake {
                    Some(t) => {
                        self.wake
                            .wait_timeout(st, t.saturating_duration_since(now))
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => self.wake.wait(st).unwrap_or_else(PoisonError::into_inner),
                };
                st.asleep = Asleep::Awake;
                continue;
            }
            let mut devices = BTreeSet::new();
            let mut deadline: Option<Duration> = None;
            for &id in &due {
                if let Some(c) = channel_mut(&mut st.channels, id) {
                    devices.extend(&c.devices);
                    deadline = Some(deadline.map_or(c.deadline, |d| d.min(c.deadline)));
                    c.next_due = now + c.interval;
                }
            }
            drop(st);
            let rss = hypomnesis::process_rss().ok();
            let at = Instant::now();
            let devices: Vec<u32> = devices.into_iter().collect();
            let gpu = if devices.is_empty() {
                Some(Vec::new())
            } else {
                reader.read(&devices, deadline.unwrap_or(Duration::from_secs(5)))
            };
            st = self.lock();
            for (i, &d) in devices.iter().enumerate() {
                let figures = gpu.as_ref().and_then(|g| g.get(i)).copied();
                let reading = Reading {
                    figures: figures.unwrap_or((None, None)),
                    missed: figures.is_none(),
                };
                st.latest.insert(d, reading);
            }
            let State {
                channels, latest, ..
            } = &mut *st;
            if let Some(rss) = rss {
                for &id in &due {
                    if let Some(c) = channel_mut(channels, id) {
                        let sample = sample_of(at, rss, &c.devices, latest);
                        c.journal.push(sample);
                    }
                }
            }
        }
    }
}

/// When the sampling thread has something to do next: a channel's next sample, or letting go
/// of an idle one ([`IDLE_KEPT`] after its last block); `None` when there is no channel.
fn next_wake(channels: &[Channel]) -> Option<Instant> {
    channels
        .iter()
        .map(|c| match c.idle_since {
            None => c.next_due,
            Some(t) => t + IDLE_KEPT,
        })
        .min()
}

/// The channel `id`, if it is still there.
fn channel_mut(channels: &mut [Channel], id: u64) -> Option<&mut Channel> {
    channels.iter_mut().find(|c| c.id == id)
}

/// The shared sample at `at` of RSS `rss` and the latest readings of `devices`; missed if
/// any reading missed its deadline or did not come.
fn sample_of(at: Instant, rss: u64, devices: &[u32], latest: &HashMap<u32, Reading>) -> SampleRun {
    let readings: Vec<Option<&Reading>> = devices.iter().map(|d| latest.get(d)).collect();
    let missed = readings.iter().any(|r| r.is_none_or(|r| r.missed));
    let figures: Vec<GpuFigures> = readings
        .iter()
        .map(|r| r.map_or((None, None), |r| r.figures))
        .collect();
    SampleRun::one(at, rss, &figures, missed)
}

/// A sample of `rss` and `readings`, `None` for a device none came for.
pub fn edge_sample(start: Instant, rss: u64, readings: &[Option<Reading>]) -> RawSample {
    let readings: Vec<Option<&Reading>> = readings.iter().map(Option::as_ref).collect();
    raw(start.elapsed().as_secs_f64(), rss, &readings)
}

/// The sample at `time` (seconds since the start): RSS, each device's figures (`None` where no
/// reading came), and whether any reading missed its deadline or did not come.
fn raw(time: f64, rss: u64, readings: &[Option<&Reading>]) -> RawSample {
    let missed = readings.iter().any(|r| r.is_none_or(|r| r.missed));
    (
        time,
        rss,
        readings
            .iter()
            .map(|r| r.and_then(|r| r.figures.0))
            .collect(),
        readings
            .iter()
            .map(|r| r.and_then(|r| r.figures.1))
            .collect(),
        missed,
    )
}
