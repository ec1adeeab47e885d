//! Processes' changing figures (CPU time and RSS) read through their `stat` kept open: read
//! again at offset 0, a procfs file is formatted afresh, so a refresh costs one `pread` a
//! process where opening by path costs a path walk, an open, a read and a close. `stat` alone
//! gives both: its field 24 (`rss`) is the kernel's `get_mm_rss()`, the sum of file, anonymous
//! and shared-memory pages that `statm`'s resident field (and `VmRSS`) also sums. An open
//! procfs file names one process: once it has exited the read fails (and a later process given
//! the same pid is opened afresh), so a kept file never reads another process.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::parse::stat::{parse_stat, parse_stat_cpu_ticks, parse_stat_rss_pages};

/// The most processes whose `stat` is kept (one descriptor each): a view of a few dozen rows
/// is served whole, and a scan of thousands takes no more than 128 descriptors of the
/// process's limit (often 1,024).
pub(crate) const KEPT_PIDS: usize = 128;
/// The cap on a `stat` read (as by path): one that fills it is refused.
const STAT_CAP: usize = 4 << 10;

/// One process's `stat`, with its path (for `in_flight()`).
struct Files {
    stat_path: PathBuf,
    stat: File,
}

/// What a kept read of `stat` gives: CPU time, start time, resident bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changing {
    pub cpu_time: Option<Duration>,
    pub start_time: Option<u64>,
    pub rss_bytes: Option<u64>,
}

/// The files kept, by pid, for one procfs root.
#[derive(Default)]
pub(crate) struct Kept {
    root: PathBuf,
    by_pid: HashMap<u32, Files>,
    /// The buffer each read goes into, as large as the cap on a `stat` read by path (4 KiB):
    /// kept, as zeroing a new one for each process's read cost more than its parse.
    buf: Vec<u8>,
}

impl Kept {
    /// The changing figures of `pid` under `procfs` from its kept files, opening them when
    /// there is room; `None` when they cannot be kept or read (the caller reads by path, as
    /// for any process: it exited, or its files say something a kept read does not parse).
    pub fn read(&mut self, procfs: &Path, pid: u32) -> Option<Changing> {
        if self.root != procfs {
            self.by_pid.clear();
            procfs.clone_into(&mut self.root);
        }
        if !self.by_pid.contains_key(&pid) {
            if self.by_pid.len() >= KEPT_PIDS {
                return None;
            }
            let stat_path = procfs.join(pid.to_string()).join("stat");
            let stat = open(&stat_path)?;
            self.by_pid.insert(pid, Files { stat_path, stat });
        }
        if self.buf.len() != STAT_CAP {
            self.buf = vec![0; STAT_CAP];
        }
        let got = self.by_pid.get(&pid).and_then(|f| read(f, &mut self.buf));
        if got.is_none() {
            // Exited (or unreadable now): forgotten, so that a later process with this pid
            // is opened afresh.
            self.by_pid.remove(&pid);
        }
        got
    }

    /// Closes the files of every pid not in `pids`.
    pub fn keep_only(&mut self, pids: &HashSet<u32>) {
        self.by_pid.retain(|pid, _| pids.contains(pid));
    }

    /// How many processes have files kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }
}

fn open(path: &Path) -> Option<File> {
    let _waiting = crate::inflight::reading(path);
    File::open(path).ok()
}

/// Reads `stat` at offset 0: `None` when the read fails, comes back empty or fills the buffer
/// (a `stat` longer than any real one), or does not parse.
fn read(f: &Files, buf: &mut [u8]) -> Option<Changing> {
    let stat = pread(&f.stat_path, &f.stat, buf)?;
    let ticks = parse_stat_cpu_ticks(stat)?;
    let start_time = parse_stat(stat).ok().map(|(_, start)| start);
    let cpu_time = super::linux::ticks_to_duration(ticks);
    let page = crate::host::memory::linux::page_size();
    let rss = parse_stat_rss_pages(stat)?.checked_mul(page)?;
    Some(Changing {
        cpu_time,
        start_time,
        rss_bytes: Some(rss).filter(|&r| r > 0),
    })
}

fn pread<'a>(path: &Path, file: &File, buf: &'a mut [u8]) -> Option<&'a str> {
    let _waiting = crate::inflight::reading(path);
    crate::host::file::pread_text(file, buf)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_kept_read_matches_a_read_by_path_and_follows_the_process() {
        let me = std::process::id();
        let procfs = Path::new("/proc");
        let mut kept = Kept::default();
        let first = kept.read(procfs, me).expect("this process's files");
        assert_eq!(kept.len(), 1);
        let mut parts = crate::ContextParts::NONE;
        (parts.rss, parts.cpu_time) = (true, true);
        let by_path = super::super::linux::context(procfs, me, &BTreeMap::new(), parts);
        assert_eq!(first.start_time, by_path.start_time);
        assert!(first.rss_bytes.is_some() && first.cpu_time.is_some());
        // `stat`'s rss is the figure `statm` gives (read by path), give or take what this
        // process touched between the two reads.
        let (kept_rss, statm_rss) = (first.rss_bytes.unwrap(), by_path.rss_bytes.unwrap());
        assert!(
            kept_rss.abs_diff(statm_rss) < 1 << 20,
            "{kept_rss} vs {statm_rss}"
        );
        // Work done between two reads shows in the second: the file is formatted afresh.
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(60) {
            std::hint::black_box(t.elapsed());
        }
        let later = kept.read(procfs, me).unwrap();
        assert!(later.cpu_time > first.cpu_time, "{first:?} then {later:?}");
        assert_eq!(kept.len(), 1, "still the same files");
    }

    #[test]
    fn an_exited_process_is_forgotten_and_never_read_as_another() {
        let procfs = Path::new("/proc");
        let mut kept = Kept::default();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(kept.read(procfs, pid).is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: its kept files read nothing, and its pid has no files to open.
        assert_eq!(kept.read(procfs, pid), None);
        assert_eq!(kept.len(), 0);
    }

    #[test]
    fn at_most_kept_pids_are_kept_and_others_are_closed() {
        let me = std::process::id();
        let mut kept = Kept::default();
        // A fixture root with more processes than are kept, each with real-looking files.
        let root = std::env::temp_dir().join(format!("hmn-kept-{me}"));
        let _ = std::fs::remove_dir_all(&root);
        let n = u32::try_from(KEPT_PIDS).unwrap() + 3;
        for pid in 1..=n {
            let d = root.join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("stat"),
                format!("{pid} (x) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 42 0 5 0\n"),
            )
            .unwrap();
        }
        let got: Vec<_> = (1..=n).map(|pid| kept.read(&root, pid)).collect();
        assert_eq!(kept.len(), KEPT_PIDS);
        assert!(got[..KEPT_PIDS].iter().all(Option::is_some));
        assert!(
            got[KEPT_PIDS..].iter().all(Option::is_none),
            "read by path instead"
        );
        let one = got[0].unwrap();
        assert_eq!(one.start_time, Some(42));
        assert_eq!(
            one.rss_bytes,
            Some(5 * crate::host::memory::linux::page_size())
        );
        kept.keep_only(&[1, 2].into_iter().collect());
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.read(&root, 1), got[0]);
        // What a kept read does not take: no resident page (unknown, as by path, never 0),
        // and a `stat` that fills the buffer (longer than any real one; cut, it would still
        // parse, with the wrong figures).
        kept.keep_only(&HashSet::new());
        let odd = |pid: u32, stat: String| {
            std::fs::write(root.join(pid.to_string()).join("stat"), stat).unwrap();
        };
        let line = |pid: u32, rss: u32| {
            format!("{pid} (x) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 42 0 {rss} 0")
        };
        odd(1, line(1, 0));
        odd(2, format!("{}{}\n", line(2, 5), " 0".repeat(3000)));
        assert_eq!(kept.read(&root, 1).unwrap().rss_bytes, None);
        assert_eq!(kept.read(&root, 2), None);
        // Another root: nothing of the first is kept.
        assert!(kept.read(Path::new("/proc"), me).is_some());
        assert_eq!(kept.len(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
