//! The other processes on the GPUs a command uses, followed while it runs (`hmn run`): each
//! one's memory at the command's first sample, at its last and at its peak, and when it moved.
//! A process that appears later started from nothing on that GPU; one that leaves the driver's
//! list holds nothing from then on. Who a process is (owner, command, pod) is read once, when
//! its memory first moves: those that never move are never named, so a GPU shared by hundreds
//! costs a lookup only for the few that change.
//!
//! Engine-agnostic: it knows nothing of what the command is, only the driver's per-process
//! figures at each sample.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use hypomnesis::sampling::Frame;

use crate::view::run::{Neighbour, NeighbourGpu};

/// The most processes a GPU's report names (the largest changes); the rest are counted.
pub const NAMED: usize = 10;

/// One other process on one GPU.
#[derive(Debug, Clone, Default)]
struct Followed {
    start: u64,
    last: u64,
    peak: u64,
    /// When its memory first left its start figure, and when it last changed.
    moved: Option<(Duration, Duration)>,
    /// Who it is, read when it first moved.
    who: Option<Who>,
}

#[derive(Debug, Clone, Default)]
struct Who {
    user: Option<String>,
    command: Option<String>,
    namespace: Option<String>,
    pod: Option<String>,
}

impl Followed {
    fn new(start: u64) -> Self {
        Self {
            start,
            last: start,
            peak: start,
            ..Self::default()
        }
    }

    /// Its memory at `at`; whether it moved for the first time.
    fn see(&mut self, bytes: u64, at: Duration) -> bool {
        self.peak = self.peak.max(bytes);
        if bytes == self.last {
            return false;
        }
        self.last = bytes;
        let first = self.moved.is_none();
        self.moved = Some(self.moved.map_or((at, at), |(from, _)| (from, at)));
        first
    }

    fn change(&self) -> i64 {
        signed(self.last) - signed(self.start)
    }

    /// How much it matters: its change, or its rise above its start if it went back.
    fn weight(&self) -> u64 {
        self.change()
            .unsigned_abs()
            .max(self.peak.saturating_sub(self.start))
    }
}

fn signed(b: u64) -> i64 {
    i64::try_from(b).unwrap_or(i64::MAX)
}

/// One GPU's others.
#[derive(Debug, Clone, Default)]
struct Device {
    /// Whether the command's processes held memory on it at some sample.
    used: bool,
    /// The others' sum at the first sample that listed its processes, at the last, at the
    /// peak.
    start: Option<u64>,
    last: u64,
    peak: u64,
    procs: BTreeMap<u32, Followed>,
}

/// The others on every GPU, over the command's run.
#[derive(Debug, Default)]
pub struct Neighbours {
    devices: BTreeMap<usize, Device>,
}

impl Neighbours {
    /// One sample: `tree` is the command's processes; every other process the driver lists on
    /// a GPU is a neighbour there. Returns the others' memory on each GPU (`None` where its
    /// processes could not be listed), for the timeline.
    pub fn add(&mut self, frame: &Frame, tree: &HashSet<u32>) -> Vec<Option<u64>> {
        (0..frame.devices.len())
            .map(|i| {
                let by_pid = frame.gpu_by_pid(i)?;
                Some(self.device(i, &by_pid, tree, frame.at))
            })
            .collect()
    }

    fn device(
        &mut self,
        i: usize,
        by_pid: &BTreeMap<u32, u64>,
        tree: &HashSet<u32>,
        at: Duration,
    ) -> u64 {
        let d = self.devices.entry(i).or_default();
        let first = d.start.is_none();
        let mut sum = 0_u64;
        for (&pid, &bytes) in by_pid {
            if tree.contains(&pid) {
                d.used |= bytes > 0;
                continue;
            }
            sum = sum.saturating_add(bytes);
            let f = d
                .procs
                .entry(pid)
                .or_insert_with(|| Followed::new(if first { bytes } else { 0 }));
            if f.see(bytes, at) {
                f.who = Some(who(pid));
            }
        }
        // A process no longer listed holds nothing there now.
        for (pid, f) in &mut d.procs {
            if !by_pid.contains_key(pid) && f.see(0, at) {
                f.who = Some(who(*pid));
            }
        }
        d.start.get_or_insert(sum);
        d.last = sum;
        d.peak = d.peak.max(sum);
        sum
    }

    /// The report: each GPU the command used, with its others' memory and the largest
    /// changes among them.
    pub fn report(&self) -> Vec<NeighbourGpu> {
        self.gpus(true)
    }

    /// Who `pid` is, if it was read (when its memory first moved).
    pub fn who(&self, pid: u32) -> Option<crate::engine::ledger::Who> {
        let w = self
            .devices
            .values()
            .find_map(|d| d.procs.get(&pid)?.who.as_ref())?;
        Some(crate::engine::ledger::Who {
            command: w.command.clone(),
            pod: w.pod.clone(),
        })
    }

    /// The GPUs the command's processes held memory on.
    pub fn used(&self) -> Vec<usize> {
        self.devices
            .iter()
            .filter(|(_, d)| d.used)
            .map(|(&i, _)| i)
            .collect()
    }

    /// The report of every GPU sampled, used by the followed processes or not (`hmn watch`,
    /// whose GPU is chosen).
    pub fn report_all(&self) -> Vec<NeighbourGpu> {
        self.gpus(false)
    }

    fn gpus(&self, used_only: bool) -> Vec<NeighbourGpu> {
        self.devices
            .iter()
            .filter(|(_, d)| d.used || !used_only)
            .filter_map(|(&i, d)| {
                let start = d.start?;
                let mut moved: Vec<(&u32, &Followed)> =
                    d.procs.iter().filter(|(_, f)| f.weight() > 0).collect();
                moved.sort_by_key(|(pid, f)| (std::cmp::Reverse(f.weight()), **pid));
                let left_out = moved.len().saturating_sub(NAMED);
                Some(NeighbourGpu {
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    start_bytes: start,
                    end_bytes: d.last,
                    peak_bytes: d.peak,
                    change_bytes: signed(d.last) - signed(start),
                    processes: moved
                        .into_iter()
                        .take(NAMED)
                        .map(|(&pid, f)| neighbour(pid, f))
                        .collect(),
                    processes_left_out: left_out,
                })
            })
            .collect()
    }
}

fn neighbour(pid: u32, f: &Followed) -> Neighbour {
    let who = f.who.clone().unwrap_or_default();
    Neighbour {
        pid,
        user: who.user,
        command: who.command,
        namespace: who.namespace,
        pod: who.pod,
        start_bytes: f.start,
        end_bytes: f.last,
        peak_bytes: f.peak,
        change_bytes: f.change(),
        moved_from_s: f.moved.map(|(from, _)| from.as_secs_f64()),
        moved_until_s: f.moved.map(|(_, until)| until.as_secs_f64()),
    }
}

/// Who `pid` is, as far as this host can say.
fn who(pid: u32) -> Who {
    let ctx = hypomnesis::process_context(pid);
    let container = ctx.container;
    Who {
        user: ctx.user,
        command: ctx.command,
        namespace: container.as_ref().and_then(|c| c.namespace.clone()),
        pod: container.and_then(|c| c.pod),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn at(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    fn sample(n: &mut Neighbours, ms: u64, list: &[(u32, u64)], tree: &[u32]) -> u64 {
        let by: BTreeMap<u32, u64> = list.iter().copied().collect();
        let tree: HashSet<u32> = tree.iter().copied().collect();
        n.device(0, &by, &tree, at(ms))
    }

    #[test]
    fn the_others_moves_are_followed_and_the_largest_named_first() {
        let mut n = Neighbours::default();
        // The command (pid 1) and two neighbours: 99 steady at 3 GiB, 42 not there yet.
        assert_eq!(sample(&mut n, 0, &[(1, GIB), (99, 3 * GIB)], &[1]), 3 * GIB);
        sample(
            &mut n,
            100,
            &[(1, 2 * GIB), (99, 3 * GIB), (42, 5 * GIB)],
            &[1],
        );
        sample(
            &mut n,
            200,
            &[(1, 2 * GIB), (99, 2 * GIB), (42, 21 * GIB)],
            &[1],
        );
        // 7 comes and goes: it held 4 GiB for a while.
        sample(
            &mut n,
            300,
            &[(1, 2 * GIB), (99, 2 * GIB), (42, 21 * GIB), (7, 4 * GIB)],
            &[1],
        );
        sample(
            &mut n,
            400,
            &[(1, 2 * GIB), (99, 2 * GIB), (42, 21 * GIB)],
            &[1],
        );
        let r = n.report();
        assert_eq!(r.len(), 1);
        let g = &r[0];
        assert_eq!((g.start_bytes, g.end_bytes), (3 * GIB, 23 * GIB));
        assert_eq!(g.peak_bytes, 27 * GIB);
        assert_eq!(g.change_bytes, 20 * i64::try_from(GIB).unwrap());
        let pids: Vec<u32> = g.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [42, 7, 99]);
        let p42 = &g.processes[0];
        assert_eq!((p42.start_bytes, p42.end_bytes), (0, 21 * GIB));
        assert_eq!(
            (p42.moved_from_s, p42.moved_until_s),
            (Some(0.1), Some(0.2))
        );
        let p7 = &g.processes[1];
        assert_eq!((p7.change_bytes, p7.peak_bytes), (0, 4 * GIB));
        assert_eq!(g.processes[2].change_bytes, -i64::try_from(GIB).unwrap());
    }

    #[test]
    fn a_gpu_the_command_never_used_is_not_reported() {
        let mut n = Neighbours::default();
        sample(&mut n, 0, &[(99, GIB)], &[1]);
        sample(&mut n, 100, &[(99, 2 * GIB)], &[1]);
        assert!(n.report().is_empty());
        // Once it holds memory there, the GPU is reported, from the first sample.
        sample(&mut n, 200, &[(1, GIB), (99, 2 * GIB)], &[1]);
        assert_eq!(n.report()[0].start_bytes, GIB);
    }

    #[test]
    fn what_counts_as_used_and_who_is_named() {
        let mut n = Neighbours::default();
        let me = std::process::id();
        // The command listed with nothing yet: the GPU is not its; a neighbour that never
        // moves is never named.
        sample(&mut n, 0, &[(1, 0), (5, GIB), (me, GIB)], &[1]);
        assert!(n.used().is_empty() && n.report().is_empty());
        assert_eq!(n.report_all().len(), 1, "every GPU sampled, for hmn watch");
        sample(&mut n, 100, &[(1, GIB), (5, GIB), (me, 2 * GIB)], &[1]);
        assert_eq!(n.used(), [0]);
        let g = &n.report()[0];
        let pids: Vec<u32> = g.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [me], "the one that moved, alone");
        // Who it is was read when it moved: this test process.
        assert!(g.processes[0].command.is_some(), "{:?}", g.processes[0]);
    }

    #[test]
    fn only_the_largest_are_named_and_the_rest_counted() {
        let mut n = Neighbours::default();
        let mut list: Vec<(u32, u64)> = vec![(1, GIB)];
        sample(&mut n, 0, &list, &[1]);
        list.extend((100..115).map(|p| (p, u64::from(p) << 20)));
        sample(&mut n, 100, &list, &[1]);
        let g = &n.report()[0];
        assert_eq!(g.processes.len(), NAMED);
        assert_eq!(g.processes_left_out, 5);
        assert_eq!(g.processes[0].pid, 114);
    }
}
