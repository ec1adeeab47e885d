//! What procfs says of one process a GPU's driver lists: its state and relations (`stat`),
//! its threads' states (`task/<tid>/stat`), where it sleeps (`wchan`), and whether a pid is
//! there at all.

use std::path::Path;

use std::time::Duration;

use crate::host::parse::stat::{StatIds, parse_stat, parse_stat_ids};

/// `stat`'s state and relations of `pid` under `procfs`; `None` when it cannot be read.
pub(crate) fn ids(procfs: &Path, pid: u32) -> Option<StatIds> {
    let mut buf = [0_u8; STAT_BUF];
    let text = read_stat(procfs, pid, &mut buf)?;
    parse_stat_ids(text)
}

/// `stat`'s state and relations of `pid` under `procfs`, with its start time (clock ticks
/// since boot); `None` when it cannot be read.
pub(crate) fn stat(procfs: &Path, pid: u32) -> Option<(StatIds, u64)> {
    let mut buf = [0_u8; STAT_BUF];
    let text = read_stat(procfs, pid, &mut buf)?;
    let (_, start) = parse_stat(text).ok()?;
    Some((parse_stat_ids(text)?, start))
}

/// Room for a `stat` read into (the cap of one read by path).
const STAT_BUF: usize = 4 << 10;

/// The text of `pid`'s `stat` under `procfs`, read into `buf` (one read of a real one, no heap
/// buffer: a look reads one a listed process); `None` when it cannot be read.
fn read_stat<'a>(procfs: &Path, pid: u32, buf: &'a mut [u8]) -> Option<&'a str> {
    let path = procfs.join(pid.to_string()).join("stat");
    crate::host::file::read_into(&path, buf).ok()
}

/// How long ago `pid` started: `procfs`'s uptime less its start (`stat` field 22, in clock
/// ticks); `None` when either cannot be read.
pub(crate) fn age(procfs: &Path, pid: u32) -> Option<Duration> {
    let mut buf = [0_u8; STAT_BUF];
    let (_, start) = parse_stat(read_stat(procfs, pid, &mut buf)?).ok()?;
    let up = uptime(procfs)?;
    let hz = ticks_per_second()?.max(1);
    let started = Duration::from_millis(start.checked_mul(1000)? / hz);
    up.checked_sub(started)
}

#[cfg(target_os = "linux")]
fn ticks_per_second() -> Option<u64> {
    crate::host::memory::linux::clock_ticks_per_second()
}

#[cfg(target_os = "linux")]
fn uptime(procfs: &Path) -> Option<Duration> {
    crate::host::memory::linux::uptime(procfs)
}

/// Only Linux has a procfs with an uptime.
#[cfg(not(target_os = "linux"))]
fn uptime(_procfs: &Path) -> Option<Duration> {
    None
}

/// Only Linux has a procfs whose ticks these are.
#[cfg(not(target_os = "linux"))]
fn ticks_per_second() -> Option<u64> {
    None
}

/// Whether `pid` is a process under `procfs`: a thread-group leader (a thread of another
/// process has a directory too, and is not one); one whose status cannot be read is taken to
/// exist, so that nothing is called gone unseen.
pub(crate) fn exists(procfs: &Path, pid: u32) -> bool {
    use crate::host::process::leader::{Leader, of};
    !matches!(of(procfs, pid), Leader::Thread | Leader::Gone)
}

/// The threads of `pid` that are not zombies themselves (their `task/<tid>/stat` state is not
/// `Z` or `X`), the leader excluded; `None` when the task list cannot be read.
pub(crate) fn live_threads(procfs: &Path, pid: u32) -> Option<Vec<u32>> {
    let tasks = procfs.join(pid.to_string()).join("task");
    let dir = std::fs::read_dir(&tasks).ok()?;
    let mut live: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| tid != pid)
        .filter(|tid| {
            let path = tasks.join(tid.to_string()).join("stat");
            crate::host::file::read_capped(&path, crate::host::file::STAT)
                .ok()
                .and_then(|t| parse_stat_ids(&t))
                .is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
        })
        .collect();
    live.sort_unstable();
    Some(live)
}

/// The kernel function `pid` sleeps in (`wchan`); `None` when it runs, or it cannot be read.
pub(crate) fn wchan(procfs: &Path, pid: u32) -> Option<String> {
    let path = procfs.join(pid.to_string()).join("wchan");
    let text = crate::host::file::read_capped(&path, crate::host::file::STAT).ok()?;
    let name = text.trim();
    (!name.is_empty() && name != "0").then(|| name.to_owned())
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_crafted_process_reads_as_written() {
        let root = std::env::temp_dir().join(format!("hmn-look-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let stat = |dir: &Path, pid: u32, state: char| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(
                dir.join("stat"),
                format!("{pid} (w) {state} 1 40 40 0 -1 0"),
            )
            .unwrap();
        };
        let p = root.join("41");
        stat(&p, 41, 'Z');
        stat(&p.join("task").join("41"), 41, 'Z');
        stat(&p.join("task").join("42"), 42, 'D');
        stat(&p.join("task").join("43"), 43, 'Z');
        std::fs::write(p.join("wchan"), "uvm_wait\n").unwrap();
        let got = ids(&root, 41).unwrap();
        assert_eq!((got.state, got.ppid, got.pgrp), ('Z', 1, 40));
        assert_eq!(live_threads(&root, 41), Some(vec![42]));
        assert_eq!(wchan(&root, 41).as_deref(), Some("uvm_wait"));
        std::fs::write(p.join("wchan"), "0").unwrap();
        assert_eq!(wchan(&root, 41), None, "running");
        assert!(
            !exists(&root, 41),
            "no status: its directory alone is no process"
        );
        std::fs::write(p.join("status"), "Name:\tw\nTgid:\t41\nPid:\t41\n").unwrap();
        assert!(exists(&root, 41) && !exists(&root, 40));
        // A thread of 41 with a directory of its own, as the kernel gives one: no process.
        let t = root.join("42");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::write(t.join("status"), "Name:\tw\nTgid:\t41\nPid:\t42\n").unwrap();
        assert!(!exists(&root, 42));
        assert_eq!(ids(&root, 40), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
