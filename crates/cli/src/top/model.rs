//! What `hmn top` shows, made from the one sampler's frames on the sampling thread: each GPU
//! with the figures of its bar and the history of its used memory, the host's RAM and this
//! view's own footprint, and one row per GPU process with its context and CPU share. Drawing
//! reads a [`Screen`] and nothing else.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypomnesis::sampling::{Fold, Timeline};
use hypomnesis::{
    GpuContextKind, GpuDeviceInfo, GpuProcessEntry, HostMemory, MigGpuInstance, ProcessContext,
    Utilization,
};

use hypomnesis::sampling::Frame;

use hypomnesis::sampling::Identity;

/// Samples of used memory kept per GPU: ten minutes at the default interval.
pub const HISTORY: usize = 600;
/// The span over which the view's own CPU share is taken.
pub const OWN_CPU_SPAN: Duration = Duration::from_secs(10);

/// One refresh of the view.
#[derive(Debug, Clone)]
pub struct Screen {
    /// The GPUs, or why there are none to show (no source, or they could not be counted).
    pub gpus: Result<Vec<Gpu>, String>,
    /// The host's RAM, or why it could not be read.
    pub ram: Result<HostMemory, String>,
    /// This view's own resident set and CPU share (percent of one core).
    pub me: Footprint,
    /// The processes holding GPU memory (and those that just stopped), by pid; shared with
    /// the sampling thread, which compares the next refresh with it.
    pub procs: Arc<Vec<Proc>>,
    /// The history of the GPU memory of the process the view asked about (the selected one).
    pub focus: Option<Focus>,
    /// The latest look for ghosts (`None`: none made, or no GPU rows to look at).
    pub ghosts: Option<Arc<hypomnesis::GhostReport>>,
}

impl Screen {
    /// Before the first refresh.
    pub fn waiting() -> Self {
        Self {
            gpus: Err("reading the GPUs…".into()),
            ram: Err("reading…".into()),
            me: Footprint::default(),
            procs: Arc::default(),
            focus: None,
            ghosts: None,
        }
    }

    /// How many GPUs there are to pick from.
    pub fn gpu_count(&self) -> u32 {
        self.gpus
            .as_ref()
            .map_or(0, |g| u32::try_from(g.len()).unwrap_or(u32::MAX))
    }
}

/// One refresh: what it shows, and when its measurement began (how old its figures are).
pub struct Refresh {
    pub screen: Screen,
    pub taken: Instant,
}

/// What the latest look for ghosts marks a process's row with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A ghost of this class (`[idle]`).
    Ghost(hypomnesis::GhostClass),
    /// A fact that is no proof of one (`(orphan)`: an orphan at work).
    Fact(hypomnesis::GhostClass),
}

impl Screen {
    /// The mark of process `pid`, where the latest look found it a ghost or a fact.
    pub fn ghost_of(&self, pid: u32) -> Option<Mark> {
        let report = self.ghosts.as_ref()?;
        let ghost = report.ghosts.iter().find(|g| g.pid == Some(pid));
        match ghost {
            Some(g) => Some(Mark::Ghost(g.class)),
            None => report
                .facts
                .iter()
                .find(|f| f.pid == pid)
                .map(|f| Mark::Fact(f.class)),
        }
    }
}

/// The GPU memory of one process over the session, for its detail view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Focus {
    pub pid: u32,
    /// Its GPU memory on all GPUs, oldest first: one point per refresh, or in a long session
    /// the largest of `per_point` refreshes (at most [`PROC_HISTORY`] points).
    pub history: Vec<u64>,
    pub per_point: usize,
    /// How many refreshes have seen it.
    pub refreshes: u64,
    /// How long ago it started, at this refresh, where its start time and the system's uptime
    /// could be read.
    pub age: Option<Duration>,
}

/// Points of GPU memory history kept per process: when full, neighbours merge pairwise, each
/// keeping its maximum, so a process's whole session stays in a fixed room.
pub const PROC_HISTORY: usize = 32;

/// GPU memory in KiB (a `u32` holds 4 TiB); folded, the larger.
#[derive(Debug, Clone, Copy)]
struct Kib(u32);

impl Fold for Kib {
    fn fold(&mut self, later: &Self) {
        self.0 = self.0.max(later.0);
    }
}

/// One process's GPU memory over the session: the library's bounded timeline of
/// [`PROC_HISTORY`] points.
#[derive(Debug, Clone)]
struct ProcHistory(Timeline<Kib>);

impl Default for ProcHistory {
    fn default() -> Self {
        Self(Timeline::new(PROC_HISTORY))
    }
}

impl ProcHistory {
    fn push(&mut self, bytes: u64) {
        self.0
            .push(Kib(u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)));
    }

    fn focus(&self, pid: u32) -> Focus {
        Focus {
            pid,
            history: self.0.points().map(|k| u64::from(k.0) * 1024).collect(),
            per_point: usize::try_from(self.0.per_point()).unwrap_or(usize::MAX),
            refreshes: self.0.samples(),
            age: None,
        }
    }
}

/// A process's host memory and CPU share.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Footprint {
    pub rss: Option<u64>,
    pub cpu: Option<f64>,
}

/// One GPU at one refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub index: u32,
    /// Its figures, or why they could not be read.
    pub info: Result<GpuDeviceInfo, String>,
    /// The split of its memory the bar shows, when the figures were read.
    pub bar: Option<Bar>,
    /// Used memory at each refresh so far (bytes, oldest first), at most [`HISTORY`].
    pub history: Vec<u64>,
    /// Its MIG GPU instances (empty when MIG is off).
    pub mig: Vec<MigGpuInstance>,
    /// How many processes the driver lists on it; `None` when they could not be read.
    pub listed: Option<usize>,
    /// How busy it is, where the driver says.
    pub util: Option<Utilization>,
}

/// A GPU's memory in four parts that add up to its total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bar {
    pub total: u64,
    /// The driver's reservation; `None` when the source does not say (then `held` includes it).
    pub reserved: Option<u64>,
    /// Held by the processes listed here (with the driver's small overhead per process).
    pub held: u64,
    /// Allocated, and held by no listed process beyond that overhead: processes this view
    /// cannot see (another PID namespace, another user).
    pub hidden: u64,
    pub free: u64,
}

impl Bar {
    /// The bar of `info`, given the processes the driver listed on it (`None`: not read). A
    /// GPU split into MIG instances lists its processes per instance, so nothing is called
    /// hidden there.
    pub fn of(info: &GpuDeviceInfo, rows: Option<&[GpuProcessEntry]>, mig: bool) -> Self {
        let rows = rows.filter(|_| !mig);
        let free = info.free_bytes.min(info.total_bytes);
        match (info.allocated_bytes(), info.reserved_bytes) {
            (Some(allocated), Some(reserved)) => {
                let hidden = rows.and_then(|r| info.unaccounted_bytes(r)).unwrap_or(0);
                Self {
                    total: info.total_bytes,
                    reserved: Some(reserved.min(info.total_bytes)),
                    held: allocated.saturating_sub(hidden),
                    hidden,
                    free,
                }
            }
            _ => Self {
                total: info.total_bytes,
                reserved: None,
                held: info.total_bytes.saturating_sub(free),
                hidden: 0,
                free,
            },
        }
    }
}

/// Whether a process is new since the last refresh, gone since, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Steady,
    New,
    Gone,
}

/// One process holding GPU memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Proc {
    pub pid: u32,
    /// Its owner, shared with what the view keeps of the process (see [`Identity`]).
    pub user: Option<Arc<str>>,
    pub kind: Option<GpuContextKind>,
    /// GPU memory per device index.
    pub gpu: PerGpu,
    pub rss: Option<u64>,
    /// CPU share since the last refresh, percent of one core; `None` at the first.
    pub cpu: Option<f64>,
    /// The command line, else the short name, else `None`.
    pub command: Option<Arc<str>>,
    /// Whether its files cannot be read from here (another PID namespace, the procfs mount's
    /// `hidepid`, exited since the list): its owner and container are unknown.
    pub outside: bool,
    /// Why its files cannot be read, as `hmn ps` marks it.
    pub unreadable: Option<hypomnesis::UnreadableReason>,
    /// Whether it is the MPS server (its clients' contexts are its).
    pub mps_server: bool,
    /// Its container and pod, when read (grouping or filtering needs them); shared, as most
    /// rows have none and a table may hold thousands.
    pub container: Option<Arc<hypomnesis::Container>>,
    /// When it started (clock ticks after boot), read when it was first seen; `None` where it
    /// cannot be read (another PID namespace, another system).
    pub start: Option<u64>,
    pub change: Change,
}

impl Proc {
    /// Process `pid` with nothing known of it yet.
    pub(crate) fn bare(pid: u32) -> Self {
        Self {
            pid,
            user: None,
            kind: None,
            gpu: PerGpu::default(),
            rss: None,
            cpu: None,
            command: None,
            outside: false,
            unreadable: None,
            mps_server: false,
            container: None,
            start: None,
            change: Change::Steady,
        }
    }

    /// Its GPU memory on every device.
    pub fn gpu_total(&self) -> u64 {
        self.gpu.values().fold(0, |a, &b| a.saturating_add(b))
    }
}

/// A process's GPU memory per device index: a process is on one GPU or a few, so a short list
/// sorted by index (a map would cost a node of eleven entries a process), its first entry in
/// the row itself (a row is made anew at every refresh: no allocation for it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerGpu(smallvec::SmallVec<[(u32, u64); 1]>);

impl PerGpu {
    pub fn get(&self, gpu: u32) -> Option<&u64> {
        self.0.iter().find(|(g, _)| *g == gpu).map(|(_, b)| b)
    }

    pub fn contains_key(&self, gpu: u32) -> bool {
        self.get(gpu).is_some()
    }

    /// Sets `gpu`'s figure.
    pub fn insert(&mut self, gpu: u32, bytes: u64) {
        match self.0.binary_search_by_key(&gpu, |(g, _)| *g) {
            Ok(i) => {
                if let Some(e) = self.0.get_mut(i) {
                    e.1 = bytes;
                }
            }
            Err(i) => {
                // Room for one more, not the doubling of a vector's growth: a second GPU is
                // rare, and a table may hold thousands of rows.
                self.0.reserve_exact(1);
                self.0.insert(i, (gpu, bytes));
            }
        }
    }

    /// Adds `bytes` to `gpu`'s figure.
    pub fn add(&mut self, gpu: u32, bytes: u64) {
        let now = self.get(gpu).copied().unwrap_or(0);
        self.insert(gpu, now.saturating_add(bytes));
    }

    /// Whether no GPU has a figure.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn values(&self) -> impl Iterator<Item = &u64> {
        self.0.iter().map(|(_, b)| b)
    }

    /// `(index, bytes)` in index order.
    pub fn iter(&self) -> impl Iterator<Item = (&u32, &u64)> {
        self.0.iter().map(|(g, b)| (g, b))
    }
}

impl FromIterator<(u32, u64)> for PerGpu {
    fn from_iter<I: IntoIterator<Item = (u32, u64)>>(it: I) -> Self {
        let mut out = Self::default();
        for (g, b) in it {
            out.insert(g, b);
        }
        out
    }
}

/// Every kind a process has on any device (a compute context on one and a graphics one on
/// another is `C+G`; an MPS client on one, `M+…`).
fn union(a: Option<GpuContextKind>, b: Option<GpuContextKind>) -> Option<GpuContextKind> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.union(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// What the sampling thread remembers between refreshes: the history, the CPU times, and the
/// last rows (to show a process that stopped holding memory for one refresh).
#[derive(Debug, Default)]
pub struct Builder {
    history: BTreeMap<u32, VecDeque<u64>>,
    cpu: BTreeMap<u32, (Duration, Duration)>,
    /// This view's own CPU time at its recent refreshes `(when, CPU time)`, oldest first: its
    /// share is taken over [`OWN_CPU_SPAN`], steadier than one refresh's.
    own_cpu: VecDeque<(Duration, Duration)>,
    /// The last refresh's rows, by pid (the screen's own, not a copy).
    last: Arc<Vec<Proc>>,
    /// Each listed process's start time (read once) and GPU memory history, sorted by pid (a
    /// hash map's table, at most seven eighths full and a power of two, took 400 KB at 2,000
    /// processes; this takes half).
    seen: Vec<Seen>,
}

/// What the view keeps of a listed process between refreshes.
#[derive(Debug)]
struct Seen {
    pid: u32,
    /// When it started, read when it was first seen.
    start: Option<u64>,
    history: ProcHistory,
}

/// A read's result as text for the view.
fn text<T: Clone, E: ToString>(r: Option<&Result<T, E>>) -> Option<Result<T, String>> {
    r.map(|r| match r {
        Ok(v) => Ok(v.clone()),
        Err(e) => Err(e.to_string()),
    })
}

impl Builder {
    /// The screen of `frame`: `read` gives the contexts (by pid) of those of the listed
    /// processes it chooses to read, `ram` is the host's, `me` this process's context (RSS and
    /// CPU time), `focus` the process whose history the view shows.
    pub fn screen(
        &mut self,
        frame: &Frame,
        read: impl FnOnce(&[Proc]) -> BTreeMap<u32, Identity>,
        ram: Result<HostMemory, String>,
        me: &ProcessContext,
        focus: Option<u32>,
    ) -> Screen {
        let gpus = match &frame.count {
            Err(why) => Err(why.message.clone()),
            Ok(0) => Err(crate::view::devices::no_gpu_sentence()),
            Ok(_) => Ok(self.gpus(frame)),
        };
        let own = me.cpu_time.map(|c| (frame.at, c));
        match own {
            Some(o) => {
                self.own_cpu.push_back(o);
                // Keep the newest reading at least the span old as the front.
                while self
                    .own_cpu
                    .get(1)
                    .is_some_and(|(t, _)| frame.at.saturating_sub(*t) >= OWN_CPU_SPAN)
                {
                    self.own_cpu.pop_front();
                }
            }
            None => self.own_cpu.clear(),
        }
        let me = Footprint {
            rss: me.rss_bytes,
            cpu: share(self.own_cpu.front().copied(), own),
        };
        let procs = self.procs(frame, read);
        let focus = focus.and_then(|pid| {
            let i = self.seen.binary_search_by_key(&pid, |s| s.pid).ok()?;
            let seen = self.seen.get(i)?;
            Some(Focus {
                age: seen.start.and_then(age_of),
                ..seen.history.focus(pid)
            })
        });
        Screen {
            gpus,
            ram,
            me,
            procs,
            focus,
            ghosts: None,
        }
    }

    fn gpus(&mut self, frame: &Frame) -> Vec<Gpu> {
        let mut out = Vec::new();
        for (i, d) in frame.devices.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let info = text(d.info.as_ref()).unwrap_or_else(|| Err("not read".into()));
            let rows = d.processes();
            let history = self.history.entry(index).or_default();
            if let Ok(info) = &info {
                if history.len() == HISTORY {
                    history.pop_front();
                }
                history.push_back(info.used_bytes);
            }
            out.push(Gpu {
                index,
                bar: info.as_ref().ok().map(|i| {
                    let mig = i.mig_enabled == Some(true)
                        || d.mig.as_ref().is_some_and(|m| !m.is_empty());
                    Bar::of(i, rows, mig)
                }),
                info,
                history: history.iter().copied().collect(),
                mig: d.mig.clone().unwrap_or_default(),
                listed: rows.map(<[GpuProcessEntry]>::len),
                util: d
                    .utilization
                    .as_ref()
                    .and_then(|u| u.as_ref().ok())
                    .copied(),
            });
        }
        self.history
            .retain(|k, _| out.iter().any(|g| g.index == *k));
        out
    }

    /// `p`'s start time and GPU history: kept from its first refresh, both begun anew when
    /// the start time read now (`read`) differs, as the pid then names a later process.
    fn follow_start(&mut self, p: &mut Proc, read: Option<u64>) {
        let i = match self.seen.binary_search_by_key(&p.pid, |s| s.pid) {
            Ok(i) => i,
            Err(i) => {
                let start = if p.outside {
                    None
                } else {
                    read.or_else(|| hypomnesis::process_start_time(p.pid))
                };
                let history = ProcHistory::default();
                let pid = p.pid;
                self.seen.insert(
                    i,
                    Seen {
                        pid,
                        start,
                        history,
                    },
                );
                i
            }
        };
        let Some(seen) = self.seen.get_mut(i) else {
            return;
        };
        if !p.outside
            && let (Some(was), Some(now)) = (seen.start, read)
            && was != now
        {
            seen.start = Some(now);
            seen.history = ProcHistory::default();
            p.change = Change::New;
        }
        p.start = seen.start;
        seen.history.push(p.gpu_total());
    }

    fn procs(
        &mut self,
        frame: &Frame,
        read: impl FnOnce(&[Proc]) -> BTreeMap<u32, Identity>,
    ) -> Arc<Vec<Proc>> {
        let mut now = rows_of(frame);
        let mut contexts = read(&now);
        let mut cpu = BTreeMap::new();
        let last = Arc::clone(&self.last);
        let listed_before = |pid: u32| {
            last.binary_search_by_key(&pid, |p| p.pid)
                .is_ok_and(|i| last.get(i).is_some_and(|p| p.change != Change::Gone))
        };
        let first = last.is_empty();
        for p in &mut now {
            // Taken out of the map, its shared parts moved into the row.
            let read_start = contexts.get(&p.pid).and_then(|c| c.start_time);
            if let Some(ctx) = contexts.remove(&p.pid) {
                if let Some(shown) = ctx.shown() {
                    p.command = Some(Arc::clone(shown));
                }
                p.user = ctx.user;
                p.container = ctx.container;
                p.rss = ctx.rss_bytes.or(p.rss);
                if let Some(c) = ctx.cpu_time {
                    cpu.insert(p.pid, (frame.at, c));
                    p.cpu = share(self.cpu.get(&p.pid).copied(), Some((frame.at, c)));
                }
            }
            if !first && !listed_before(p.pid) {
                p.change = Change::New;
            }
            self.follow_start(p, read_start);
        }
        let here = |pid: u32| now.binary_search_by_key(&pid, |p| p.pid).is_ok();
        self.seen.retain(|s| here(s.pid));
        let gone: Vec<Proc> = last
            .iter()
            .filter(|p| p.change != Change::Gone && !here(p.pid))
            .map(|p| Proc {
                change: Change::Gone,
                cpu: None,
                ..p.clone()
            })
            .collect();
        self.cpu = cpu;
        now.extend(gone);
        now.sort_unstable_by_key(|p| p.pid);
        self.last = Arc::new(now);
        Arc::clone(&self.last)
    }
}

/// A frame's rows, one a process, by pid: each GPU's processes (a pid on several GPUs merged:
/// figures per GPU, kinds united) and, without a GPU, the host's processes it followed.
fn rows_of(frame: &Frame) -> Vec<Proc> {
    // A row for each process a GPU lists, merged by pid below; in a vector of the rows' length,
    // not a map (whose nodes held 470 KB at 2,000 processes beside the vector made of it).
    let rows = frame
        .devices
        .iter()
        .map(|d| d.processes().map_or(0, <[_]>::len));
    let mut now: Vec<Proc> = Vec::with_capacity(rows.sum::<usize>() + frame.rss.len());
    for d in &frame.devices {
        for r in d.processes().unwrap_or_default() {
            let mut p = Proc {
                command: r.name.as_deref().map(Arc::from),
                outside: crate::view::unseen::reason_of(r).is_some(),
                unreadable: crate::view::unseen::reason_of(r),
                kind: r.context,
                mps_server: r.mps_server,
                ..Proc::bare(r.pid)
            };
            p.gpu.add(r.device_index, r.used_bytes);
            now.push(p);
        }
    }
    // Without a GPU: the host's processes the frame followed, with their RSS (none of
    // them GPU memory: a pid the GPUs list keeps its GPU row).
    for (&pid, &rss) in &frame.rss {
        if let Some(rss) = rss {
            now.push(Proc {
                rss: Some(rss),
                ..Proc::bare(pid)
            });
        }
    }
    // By pid (a pid's GPU rows first): the last refresh's rows are searched by pid.
    now.sort_unstable_by_key(|p| (p.pid, p.gpu.is_empty()));
    now.dedup_by(|later, kept| {
        if later.pid != kept.pid {
            return false;
        }
        if !later.gpu.is_empty() {
            kept.kind = union(kept.kind, later.kind);
            kept.mps_server |= later.mps_server;
            for (&gpu, &bytes) in later.gpu.iter() {
                kept.gpu.add(gpu, bytes);
            }
        }
        true
    });
    now
}

/// How long ago a process that started `start` clock ticks after boot started
/// ([`hypomnesis::started_ago`]). Linux only.
fn age_of(start: u64) -> Option<Duration> {
    #[cfg(target_os = "linux")]
    {
        hypomnesis::started_ago(start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = start;
        None
    }
}

/// CPU share between two `(when, CPU time)` readings, percent of one core.
fn share(before: Option<(Duration, Duration)>, after: Option<(Duration, Duration)>) -> Option<f64> {
    let ((t0, c0), (t1, c1)) = (before?, after?);
    let wall = t1.checked_sub(t0)?.as_secs_f64();
    let used = c1.checked_sub(c0)?.as_secs_f64();
    (wall > 0.0).then(|| used / wall * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::view::MIB;

    fn info(total: u64, reserved: Option<u64>, free: u64) -> GpuDeviceInfo {
        GpuDeviceInfo::builder()
            .index(0)
            .total_bytes(total)
            .free_bytes(free)
            .used_bytes(total - free)
            .reserved_bytes(reserved)
            .build()
    }

    fn row(pid: u32, used: u64) -> GpuProcessEntry {
        GpuProcessEntry::builder()
            .pid(pid)
            .used_bytes(used)
            .device_index(0)
            .build()
    }

    #[test]
    fn bars_add_up_and_hidden_memory_shows_above_the_overhead() {
        let d = info(1000 * MIB, Some(10 * MIB), 490 * MIB);
        // 500 MiB allocated; listed rows hold 480: 20 MiB is driver overhead, not hidden.
        let b = Bar::of(&d, Some(&[row(1, 300 * MIB), row(2, 180 * MIB)]), false);
        assert_eq!((b.held, b.hidden), (500 * MIB, 0));
        // Listed rows hold 100: 400 MiB is held by processes not visible here.
        let b = Bar::of(&d, Some(&[row(1, 100 * MIB)]), false);
        assert_eq!((b.held, b.hidden), (100 * MIB, 400 * MIB));
        let mig = Bar::of(&d, Some(&[row(1, 100 * MIB)]), true);
        assert_eq!(
            (mig.held, mig.hidden),
            (500 * MIB, 0),
            "MIG lists per instance"
        );
        assert_eq!(
            b.reserved.unwrap_or(0) + b.held + b.hidden + b.free,
            b.total
        );
        // Processes not read: nothing is called hidden.
        assert_eq!(Bar::of(&d, None, false).hidden, 0);
        // No reservation figure: used (with the reservation) is held.
        let b = Bar::of(&info(1000 * MIB, None, 400 * MIB), Some(&[]), false);
        assert_eq!((b.reserved, b.held, b.hidden), (None, 600 * MIB, 0));
    }

    #[test]
    fn cpu_share_and_kinds() {
        use GpuContextKind::{Compute as C, ComputeAndGraphics as B, Graphics as G};
        let s = |a: u64, b: u64| (Duration::from_secs(a), Duration::from_millis(b));
        assert_eq!(share(Some(s(1, 100)), Some(s(2, 600))), Some(50.0));
        assert_eq!(share(None, Some(s(2, 600))), None);
        assert_eq!(
            share(Some(s(2, 100)), Some(s(2, 600))),
            None,
            "no time passed"
        );
        assert_eq!(
            share(Some(s(1, 700)), Some(s(2, 600))),
            None,
            "CPU time went back"
        );
        assert_eq!(union(Some(C), Some(G)), Some(B));
        assert_eq!(union(Some(C), Some(C)), Some(C));
        assert_eq!(union(None, Some(G)), Some(G));
        assert_eq!(union(Some(C), None), Some(C));
        assert_eq!(
            union(Some(GpuContextKind::Mps), Some(C)),
            Some(GpuContextKind::MpsAndCompute)
        );
    }

    /// A process's figures per GPU take the room they need: one GPU, one figure's room.
    #[test]
    fn per_gpu_figures_take_the_room_they_need() {
        let mut one = PerGpu::default();
        one.add(0, 5);
        assert_eq!(one.0.capacity(), 1);
        let mut two = PerGpu::default();
        two.insert(3, 1);
        two.add(1, 2);
        two.add(3, 2);
        assert_eq!(two.iter().collect::<Vec<_>>(), [(&1, &2), (&3, &3)]);
        assert_eq!(two.0.capacity(), 2);
    }

    /// A pid on two GPUs is one row with both figures and both kinds; a followed host
    /// process is a row of its RSS, and a GPU process's RSS row does not replace its GPU row.
    #[test]
    fn a_pid_on_two_gpus_is_one_row_and_host_rows_join_by_pid() {
        use hypomnesis::sampling::DeviceFrame;
        let entry = |pid: u32, gpu: u32, used: u64, kind: GpuContextKind, mps: bool| {
            GpuProcessEntry::builder()
                .pid(pid)
                .used_bytes(used)
                .device_index(gpu)
                .context(Some(kind))
                .mps_server(mps)
                .build()
        };
        let device = |rows: Vec<GpuProcessEntry>| {
            let mut d = DeviceFrame::default();
            (d.info, d.processes) = (Some(Ok(info(1000 * MIB, None, 500 * MIB))), Some(Ok(rows)));
            d
        };
        let devices = vec![
            device(vec![
                entry(30, 0, 5 * MIB, GpuContextKind::Compute, false),
                entry(7, 0, MIB, GpuContextKind::Compute, false),
            ]),
            device(vec![entry(7, 1, 2 * MIB, GpuContextKind::Graphics, true)]),
        ];
        let rss = BTreeMap::from([(7, Some(64 * MIB)), (12, Some(32 * MIB)), (13, None)]);
        let frame = Frame::new(Duration::from_secs(1), Ok(2), devices, rss);
        let mut b = Builder::default();
        let procs = b.procs(&frame, |_| BTreeMap::new());
        let pids: Vec<u32> = procs.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [7, 12, 30]);
        let seven = &procs[0];
        assert_eq!(
            seven.gpu.iter().collect::<Vec<_>>(),
            [(&0, &MIB), (&1, &(2 * MIB))]
        );
        assert_eq!(seven.kind, Some(GpuContextKind::ComputeAndGraphics));
        assert!(seven.mps_server);
        assert_eq!(
            seven.rss, None,
            "the GPU row stays; its RSS comes from its context"
        );
        assert_eq!(
            (procs[1].rss, procs[1].gpu.is_empty()),
            (Some(32 * MIB), true)
        );
        assert_eq!(procs[2].gpu.get(0), Some(&(5 * MIB)));
    }

    /// The view's own share is taken over the last 10 s: a burst moves it by a tenth of what
    /// one refresh's share would, and it returns once the burst leaves the span.
    #[test]
    fn the_views_own_share_is_taken_over_ten_seconds() {
        let frame = |at: u64| {
            Frame::new(
                Duration::from_secs(at),
                Ok(0),
                Vec::new(),
                BTreeMap::default(),
            )
        };
        let me = |ms: u64| {
            let mut c = ProcessContext::default();
            c.cpu_time = Some(Duration::from_millis(ms));
            c
        };
        let mut b = Builder::default();
        let mut cpu = 0;
        let mut shares = Vec::new();
        for t in 0..30 {
            // 2 ms a second, and 100 ms more in the second before t = 15.
            cpu += if t == 15 { 102 } else { 2 };
            let s = b.screen(
                &frame(t),
                |_| BTreeMap::new(),
                Err("-".into()),
                &me(cpu),
                None,
            );
            shares.push(s.me.cpu);
        }
        let at = |t: usize| shares[t].map(|c| (c * 100.0).round() / 100.0);
        assert_eq!(shares[0], None, "one reading: no share yet");
        assert_eq!(at(12), Some(0.2));
        assert_eq!(at(15), Some(1.2), "the burst over 10 s, not 10.2% over one");
        assert_eq!(at(24), Some(1.2));
        assert_eq!(at(25), Some(0.2), "the burst has left the span");
    }
}
