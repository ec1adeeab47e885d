//! The processes of `hmn run`'s tree, each with its peak RSS and PSS (`--json`'s `processes`),
//! and those whose PSS could not be read (their RSS counted in the tree's figure instead).
//!
//! A build can start tens of thousands of processes: all those alive now are kept, and of
//! those that exited, the largest by peak RSS, up to [`KEPT`] in all; the others are counted.
//! An exited process's peaks are final, so the ones kept are exactly the largest.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use hypomnesis::sampling::{Frame, TreeRam, max_opt};

use crate::view::run::Member;

/// The most processes listed.
pub const KEPT: usize = 1024;

#[derive(Debug, Default)]
struct Peak {
    name: Option<String>,
    rss: Option<u64>,
    pss: Option<u64>,
}

/// The processes seen in the tree.
#[derive(Debug, Default)]
pub struct Members {
    by_pid: BTreeMap<u32, Peak>,
    left_out: u64,
    rss_counted: BTreeSet<u32>,
}

impl Members {
    /// The figures `frame` read of `tree`, and the processes `ram` counted by RSS. A process
    /// is named (once) when first seen with a figure.
    pub fn add(&mut self, frame: &Frame, tree: &[u32], ram: Option<&TreeRam>) {
        for &pid in tree {
            let rss = frame.rss.get(&pid).copied().flatten();
            let pss = frame.pss.get(&pid).copied().flatten();
            if rss.is_none() && pss.is_none() && !self.by_pid.contains_key(&pid) {
                continue;
            }
            let p = self.by_pid.entry(pid).or_insert_with(|| Peak {
                name: hypomnesis::process_name(pid),
                ..Peak::default()
            });
            p.rss = max_opt(p.rss, rss);
            p.pss = max_opt(p.pss, pss);
        }
        if let Some(r) = ram {
            self.rss_counted.extend(&r.rss_for);
        }
        if self.by_pid.len() > KEPT {
            self.trim(tree);
        }
    }

    /// Leaves out the exited processes of smallest peak RSS until [`KEPT`] are left (or only
    /// the live ones).
    fn trim(&mut self, alive: &[u32]) {
        let alive: HashSet<u32> = alive.iter().copied().collect();
        let mut gone: Vec<(Option<u64>, u32)> = self
            .by_pid
            .iter()
            .filter(|(pid, _)| !alive.contains(pid))
            .map(|(&pid, p)| (p.rss, pid))
            .collect();
        gone.sort_unstable();
        let excess = self.by_pid.len().saturating_sub(KEPT);
        for (_, pid) in gone.into_iter().take(excess) {
            self.by_pid.remove(&pid);
            self.left_out += 1;
        }
    }

    /// The processes kept, largest peak RSS first.
    pub fn list(&self) -> Vec<Member> {
        let mut v: Vec<Member> = self
            .by_pid
            .iter()
            .map(|(&pid, p)| Member {
                pid,
                name: p.name.clone(),
                peak_rss_bytes: p.rss,
                peak_pss_bytes: p.pss,
            })
            .collect();
        v.sort_by_key(|m| (std::cmp::Reverse(m.peak_rss_bytes), m.pid));
        v
    }

    /// How many exited processes were left out of [`Members::list`].
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    /// The processes whose RSS was counted in place of their PSS at some sample, by pid.
    pub fn rss_counted(&self) -> Vec<u32> {
        self.rss_counted.iter().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;

    fn frame(rss: &[(u32, Option<u64>)], pss: &[(u32, Option<u64>)]) -> Frame {
        Frame::new(
            Duration::ZERO,
            Ok(0),
            Vec::new(),
            rss.iter().copied().collect::<BTreeMap<_, _>>(),
        )
        .with_pss(pss.iter().copied().collect())
    }

    #[test]
    fn each_process_keeps_its_peaks() {
        // Pids far above any pid_max: no process of this host is named.
        let (big, blind, gone) = (4_194_401, 4_194_402, 4_194_403);
        let mut m = Members::default();
        let tree = [big, blind, gone];
        let f = frame(&[(big, Some(50)), (blind, Some(40)), (gone, None)], &[]);
        m.add(&f, &tree, f.tree_ram(&tree).as_ref());
        let f = frame(
            &[(big, Some(30)), (blind, Some(45))],
            &[(big, Some(20)), (blind, None)],
        );
        m.add(&f, &tree[..2], f.tree_ram(&tree[..2]).as_ref());
        let list = m.list();
        assert_eq!(list.len(), 2, "never seen with a figure: {list:?}");
        assert_eq!(
            (list[0].pid, list[0].peak_rss_bytes, list[0].peak_pss_bytes),
            (big, Some(50), Some(20))
        );
        assert_eq!(
            (list[1].pid, list[1].peak_rss_bytes, list[1].peak_pss_bytes),
            (blind, Some(45), None)
        );
        assert_eq!(m.rss_counted(), vec![blind]);
        assert_eq!(m.left_out(), 0);
    }

    #[test]
    fn past_the_room_the_smallest_exited_are_left_out() {
        let mut m = Members::default();
        let base = 4_200_000_u32;
        let n = u32::try_from(KEPT).unwrap() + 10;
        // One live process, and exited ones of growing size, one sample each.
        let live = base;
        for i in 1..=n {
            let pid = base + i;
            let f = frame(&[(live, Some(1)), (pid, Some(u64::from(i)))], &[]);
            m.add(&f, &[live, pid], None);
        }
        let list = m.list();
        assert_eq!(list.len(), KEPT);
        assert_eq!(m.left_out(), 11);
        assert!(list.iter().any(|p| p.pid == live), "the live one is kept");
        let smallest_kept = list
            .iter()
            .filter(|p| p.pid != live)
            .filter_map(|p| p.peak_rss_bytes)
            .min();
        assert_eq!(smallest_kept, Some(12), "the 11 smallest exited left out");
    }
}
