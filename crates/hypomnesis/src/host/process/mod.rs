//! A process on this host: its resident set, start time, name and the tree below it (what `hmn run`
//! and `hmn watch` sample).
//!
//! # Platform-specific behaviour
//!
//! Linux reads `<procfs>/<pid>/statm`, `stat` and `comm` (and `smaps_rollup` for the
//! proportional set size). Windows and macOS read another
//! process's resident set as its context does (the working set; `proc_pidinfo`'s resident size);
//! there the tree is the root process alone and the start time and name are unknown.

pub(crate) mod context;
mod cputime;
pub(crate) mod leader;
#[cfg(target_os = "linux")]
mod pidfd;
pub(crate) mod procfs;
#[cfg(unix)]
mod signal;
pub(crate) mod visibility;

pub use cputime::process_cpu_time;
#[cfg(unix)]
pub use signal::send_signal;

use crate::error::Result;
#[cfg(target_os = "linux")]
use crate::host::parse::stat::is_zombie;
pub use crate::host::parse::stat::parse_stat;

/// Resident set of process `pid`, bytes.
///
/// # Errors
///
/// [`crate::error::HypomnesisError::Io`] when the process is gone or not readable,
/// [`crate::error::HypomnesisError::Ram`] when it has no resident set (exiting, a zombie not yet
/// reaped, a kernel thread), on other platforms, or for malformed files.
pub fn process_rss_of(pid: u32) -> Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let dir = crate::host::roots::procfs()?.join(pid.to_string());
        let rss = crate::host::memory::linux::rss_at(&dir)?;
        // A process that is exiting (its memory already released, a zombie not yet reaped) or
        // a kernel thread reads as 0 bytes: that is not a figure. A live user process always
        // has resident pages.
        if rss == 0 {
            return Err(crate::error::HypomnesisError::ram(
                crate::error::ErrorKind::Other,
                format!(
                    "process {pid} has exited or is exiting (or is a kernel thread): it has no resident set"
                ),
            ));
        }
        Ok(rss)
    }
    // The same reader as the process context's (the working set on Windows, the resident size
    // of `proc_pidinfo` on macOS): one answer per platform.
    #[cfg(any(target_os = "macos", windows))]
    {
        let mut parts = context::ContextParts::NONE;
        parts.rss = true;
        context::process_contexts_with(&[pid], parts)
            .pop()
            .and_then(|c| c.rss_bytes)
            .ok_or_else(|| {
                crate::error::HypomnesisError::ram(
                    crate::error::ErrorKind::Other,
                    format!(
                        "the resident set of process {pid} cannot be read: it has exited, or it \
                     belongs to another user and is protected"
                    ),
                )
            })
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        Err(crate::error::HypomnesisError::ram(
            crate::error::ErrorKind::Other,
            format!(
                "the resident set of another process (pid {pid}) is not available on {}",
                std::env::consts::OS
            ),
        ))
    }
}

/// Proportional set size of process `pid`, bytes: its resident pages, each divided by the
/// number of processes that map it (`Pss` of `<procfs>/<pid>/smaps_rollup`). Summed over
/// processes that share pages (workers forked from one parent that share its memory copy on
/// write, say), it counts each shared page once, where their [`process_rss_of`] counts it in
/// each.
///
/// Reading it walks the process's page tables: about 3 ms for a process of 500 MiB and 20 ms
/// for 2 GiB, where [`process_rss_of`] takes 2 to 3 µs whatever the size; read it sparingly.
///
/// # Platform-specific behaviour
///
/// Linux 4.14 and later; an error elsewhere.
///
/// # Errors
///
/// [`crate::error::HypomnesisError::Io`] when the process is gone or its `smaps_rollup`
/// cannot be read: a kernel before 4.14 has none, another user's process needs the right to
/// trace it, `hidepid` hides it; [`crate::error::HypomnesisError::Ram`] when it has no resident
/// set (exiting, a zombie, a kernel thread), when the file is malformed, and on other
/// platforms.
pub fn process_pss_of(pid: u32) -> Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let dir = crate::host::roots::procfs()?.join(pid.to_string());
        let (rss, pss) = crate::host::memory::linux::rss_pss_at(&dir)?;
        if rss == 0 {
            return Err(crate::error::HypomnesisError::ram(
                crate::error::ErrorKind::Other,
                format!(
                    "process {pid} has exited or is exiting (or is a kernel thread): it has no resident set"
                ),
            ));
        }
        Ok(pss)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(crate::error::HypomnesisError::ram(
            crate::error::ErrorKind::Other,
            format!(
                "the proportional set size of process {pid} is Linux's (smaps_rollup); not available on {}",
                std::env::consts::OS
            ),
        ))
    }
}

/// When process `pid` started (an opaque, monotonic value: clock ticks since boot on Linux),
/// to tell a process from a later one that reuses its pid. `None` when unknown, or when the
/// process has exited (a zombie waiting for its parent counts as exited).
#[must_use]
pub fn process_start_time(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let text = crate::host::file::read_capped(
            &crate::host::roots::procfs()
                .ok()?
                .join(pid.to_string())
                .join("stat"),
            crate::host::file::STAT,
        )
        .ok()?;
        if is_zombie(&text) {
            return None;
        }
        parse_stat(&text).ok().map(|(_, start)| start)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// How long ago a process whose [`process_start_time`] is `start_time` started: the uptime
/// of the system whose procfs is in use (its `uptime` file, or for this system's own `/proc`
/// its boot clock, which that file shows) less the start. Linux only;
/// `None` elsewhere, and when either figure cannot be read or the start lies ahead.
#[must_use]
pub fn started_ago(start_time: u64) -> Option<std::time::Duration> {
    #[cfg(target_os = "linux")]
    {
        let up = crate::host::memory::linux::uptime(crate::host::roots::procfs().ok()?)?;
        let hz = crate::host::memory::linux::clock_ticks_per_second()?;
        let started = std::time::Duration::from_millis(start_time.checked_mul(1000)? / hz.max(1));
        up.checked_sub(started)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = start_time;
        None
    }
}

/// The name of process `pid` as the process lists spell it; `None` when unknown.
///
/// Linux: `/proc/<pid>/comm`, and where the kernel cut that at 15 bytes
/// (`Trainer-Worker-` for `Trainer-Worker-Number-Seven`), the whole name: the file name of the
/// `exe` link, else of `argv[0]`, when it begins with the cut name. A thread id is not a
/// process: `None` (its `status`'s `Tgid` is another pid). Elsewhere `None`.
#[must_use]
pub fn process_name(pid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        if process_exists(pid) == Some(false) {
            return None;
        }
        procfs::comm(procfs::root().ok()?, pid)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Whether process `pid` exists: `Some(true)`, `Some(false)`, or `None` when that cannot be
/// told. Never an error.
///
/// # Platform-specific behaviour
///
/// Linux: `<procfs>/<pid>/status` whose `Tgid` is `pid` (a thread id is not a process); a pid
/// missing from a procfs mounted with `hidepid` that hides other users' processes cannot be
/// told (`None`). Windows: the process can be opened and has not exited, or opening it is
/// refused (it exists); no such process is `Some(false)`. macOS: `kill(pid, 0)`, which a
/// process of another user answers with `EPERM` (it exists).
#[must_use]
pub fn process_exists(pid: u32) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        let root = crate::host::roots::procfs().ok()?;
        let path = root.join(pid.to_string()).join("status");
        match crate::host::file::read_capped(&path, crate::host::file::STATUS) {
            Ok(text) => crate::host::parse::memory::status_tgid(&text).map(|tgid| tgid == pid),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Under hidepid another user's process is as missing as an exited one.
                let hidden = visibility::procfs_mount()
                    .and_then(|m| m.hides_other_users)
                    .unwrap_or(false);
                (!hidden).then_some(false)
            }
            Err(_) => None,
        }
    }
    #[cfg(windows)]
    {
        context::windows_exists(pid)
    }
    #[cfg(target_os = "macos")]
    {
        context::macos_exists(pid)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        let _ = pid;
        None
    }
}

/// `root` and every live process below it (children, grandchildren, …), `root` first.
///
/// On Linux the tree is walked from `root` through `/proc/<pid>/task/<tid>/children`, so the
/// cost follows the size of the tree, not of the host's process table; kernels without those
/// files (`CONFIG_PROC_CHILDREN` off) get a scan of every process's `stat`. To sample a tree
/// repeatedly, [`TreeWalker`] rations that scan.
///
/// # Errors
///
/// [`crate::error::HypomnesisError::Io`] when the process table cannot be read.
pub fn process_tree(root: u32) -> Result<Vec<u32>> {
    #[cfg(target_os = "linux")]
    {
        let procfs = crate::host::roots::procfs()?;
        match linux::by_children(procfs, root) {
            Some(tree) => Ok(tree),
            None => linux::by_scan(procfs, root),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(vec![root])
    }
}

/// The process tree below one pid, sampled again and again (`hmn run`): each call walks the
/// tree through its `children` files (see [`process_tree`]); where the kernel has none, the full
/// scan of the process table runs at most once a second and the calls in between reuse its
/// result, so sampling does not cost a core on a host with thousands of processes.
#[derive(Debug, Clone)]
pub struct TreeWalker {
    root: u32,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux scans
    rescan_every: std::time::Duration,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    last_scan: Option<(std::time::Instant, Vec<u32>)>,
    scans: u64,
}

impl TreeWalker {
    /// A walker for the tree below `root`.
    #[must_use]
    pub fn new(root: u32) -> Self {
        Self::with_rescan(root, std::time::Duration::from_secs(1))
    }

    fn with_rescan(root: u32, rescan_every: std::time::Duration) -> Self {
        Self {
            root,
            rescan_every,
            last_scan: None,
            scans: 0,
        }
    }

    /// `root` and its live descendants now, `root` first; `[root]` when the process table
    /// cannot be read.
    pub fn pids(&mut self) -> Vec<u32> {
        #[cfg(target_os = "linux")]
        {
            match crate::host::roots::procfs() {
                Ok(procfs) => self.pids_at(procfs),
                Err(_) => vec![self.root],
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            vec![self.root]
        }
    }

    /// How many full scans of the process table this walker has made (0 where the kernel has
    /// `children` files).
    #[must_use]
    pub fn full_scans(&self) -> u64 {
        self.scans
    }

    #[cfg(target_os = "linux")]
    fn pids_at(&mut self, procfs: &std::path::Path) -> Vec<u32> {
        if let Some(tree) = linux::by_children(procfs, self.root) {
            return tree;
        }
        if let Some((at, tree)) = &self.last_scan
            && at.elapsed() < self.rescan_every
        {
            return tree.clone();
        }
        let tree = linux::by_scan(procfs, self.root).unwrap_or_else(|_| vec![self.root]);
        self.scans += 1;
        self.last_scan = Some((std::time::Instant::now(), tree.clone()));
        tree
    }
}

#[cfg(target_os = "linux")]
pub(crate) mod linux {
    use super::{descendants, parse_stat};
    use std::path::Path;

    /// The tree below `root` through the `children` files of each of its threads; `None` when
    /// the kernel has no such files (the caller scans instead). A `root` that is gone is `[root]`.
    #[must_use]
    pub fn by_children(procfs: &Path, root: u32) -> Option<Vec<u32>> {
        let root_dir = procfs.join(root.to_string());
        let probe = root_dir
            .join("task")
            .join(root.to_string())
            .join("children");
        if !probe.exists() {
            // The process is gone (nothing below it is ours any more), or the kernel has no
            // children files: only the second needs a scan.
            return if root_dir.exists() {
                None
            } else {
                Some(vec![root])
            };
        }
        let mut out = vec![root];
        let mut seen = std::collections::BTreeSet::from([root]);
        let mut i = 0;
        while let Some(&pid) = out.get(i) {
            i += 1;
            let Ok(tasks) = std::fs::read_dir(procfs.join(pid.to_string()).join("task")) else {
                continue; // exited since its parent listed it
            };
            for task in tasks.flatten() {
                let Ok(text) = crate::host::file::read_capped(
                    &task.path().join("children"),
                    crate::host::file::CHILDREN,
                ) else {
                    continue;
                };
                for child in text.split_ascii_whitespace().filter_map(|w| w.parse().ok()) {
                    if seen.insert(child) {
                        out.push(child);
                    }
                }
            }
        }
        Some(out)
    }

    /// The tree below `root` from the `stat` of every process in the table.
    pub fn by_scan(procfs: &Path, root: u32) -> crate::error::Result<Vec<u32>> {
        let entries = std::fs::read_dir(procfs).map_err(|e| crate::error::io_at(procfs, &e))?;
        let mut parent_of: Vec<(u32, u32)> = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(text) =
                crate::host::file::read_capped(&e.path().join("stat"), crate::host::file::STAT)
                && let Ok((ppid, _)) = parse_stat(&text)
            {
                parent_of.push((pid, ppid));
            }
        }
        Ok(descendants(root, &parent_of))
    }
}

/// `root` and its descendants in a (pid, parent) table, `root` first, then breadth-first.
#[must_use]
pub fn descendants(root: u32, parent_of: &[(u32, u32)]) -> Vec<u32> {
    let mut out = vec![root];
    let mut i = 0;
    while let Some(&p) = out.get(i) {
        for &(child, parent) in parent_of {
            if parent == p && child != root && !out.contains(&child) {
                out.push(child);
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree() {
        let table = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 10), (15, 14)];
        assert_eq!(descendants(10, &table), vec![10, 11, 14, 12, 15]);
        assert_eq!(descendants(99, &table), vec![99]);
        // A cycle (pid reuse races) does not loop.
        assert_eq!(descendants(1, &[(2, 1), (1, 2)]), vec![1, 2]);
    }

    /// A procfs-like directory under the temporary directory, emptied first.
    #[cfg(target_os = "linux")]
    fn fake_procfs(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("hmn-tree-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[cfg(target_os = "linux")]
    fn children_file(procfs: &std::path::Path, pid: u32, tid: u32, children: &str) {
        let d = procfs.join(format!("{pid}/task/{tid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("children"), children).unwrap();
    }

    #[cfg(target_os = "linux")]
    fn stat_file(procfs: &std::path::Path, pid: u32, parent: u32) {
        let d = procfs.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let stat = format!("{pid} (w) S {parent} 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {pid}00 1 1");
        std::fs::write(d.join("stat"), stat).unwrap();
    }

    #[cfg(target_os = "linux")]
    fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_tree_is_walked_through_every_threads_children() {
        let p = fake_procfs("walk");
        children_file(&p, 10, 10, "11 14");
        children_file(&p, 10, 13, "15\n"); // a thread of 10 started 15
        children_file(&p, 11, 11, "12 ");
        children_file(&p, 12, 12, "");
        children_file(&p, 15, 15, "10"); // a reused pid pointing back: no loop
        // 14 has exited since 10 listed it; 99 is unrelated and never read.
        children_file(&p, 99, 99, "98");
        let tree = linux::by_children(&p, 10).unwrap();
        assert_eq!(tree.first(), Some(&10), "root first");
        assert_eq!(sorted(tree), vec![10, 11, 12, 14, 15]);
        assert_eq!(linux::by_children(&p, 12), Some(vec![12]));
        assert_eq!(linux::by_children(&p, 7), Some(vec![7]), "a gone root");
        // A kernel without children files: the caller must scan.
        stat_file(&p, 20, 1);
        assert_eq!(linux::by_children(&p, 20), None);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn without_children_files_the_scan_is_rationed() {
        let p = fake_procfs("scan");
        stat_file(&p, 10, 1);
        stat_file(&p, 11, 10);
        stat_file(&p, 30, 1);
        let mut slow = TreeWalker::with_rescan(10, std::time::Duration::from_secs(3600));
        assert_eq!(sorted(slow.pids_at(&p)), vec![10, 11]);
        stat_file(&p, 12, 11);
        assert_eq!(
            sorted(slow.pids_at(&p)),
            vec![10, 11],
            "no rescan within the hour"
        );
        assert_eq!(slow.full_scans(), 1);
        let mut eager = TreeWalker::with_rescan(10, std::time::Duration::ZERO);
        assert_eq!(sorted(eager.pids_at(&p)), vec![10, 11, 12]);
        stat_file(&p, 13, 12);
        assert_eq!(sorted(eager.pids_at(&p)), vec![10, 11, 12, 13]);
        assert_eq!(eager.full_scans(), 2);
        // With children files the walk is used and nothing is scanned.
        children_file(&p, 10, 10, "11");
        assert_eq!(sorted(eager.pids_at(&p)), vec![10, 11]);
        assert_eq!(eager.full_scans(), 2);
        std::fs::remove_dir_all(&p).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn own_process() {
        let me = std::process::id();
        assert!(process_rss_of(me).unwrap() > 0);
        assert!(process_start_time(me).is_some());
        assert_eq!(process_tree(me).unwrap().first(), Some(&me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(process_tree(me).unwrap().contains(&child.id()));
        let mut walker = TreeWalker::new(me);
        assert!(walker.pids().contains(&child.id()));
        if std::path::Path::new("/proc/thread-self/children").exists() {
            assert_eq!(walker.full_scans(), 0, "this kernel has children files");
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
