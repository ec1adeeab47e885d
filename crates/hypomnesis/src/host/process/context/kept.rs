//! Processes' changing figures (CPU time and RSS) read through their files kept open: read
//! again at offset 0, a procfs file is formatted afresh, so a refresh costs one `pread` a file
//! where opening by path costs a path walk, an open, a read and a close. The CPU time (and the
//! start time) comes from `stat`, the RSS from `statm`, as by path: `stat`'s field 24 lags (on
//! Linux 6.18 it read 421 pages of a `sleep` whose `statm`, `status` and `smaps_rollup`, a walk
//! of its page tables, all said 448), and a row of `hmn top` moved whenever the same process
//! was read by path instead. An open procfs file names one process: once it has exited the read
//! fails (and a later process given the same pid is opened afresh), so a kept file never reads
//! another process.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::parse::memory::statm_resident_bytes;
use crate::host::parse::stat::{StatIds, parse_stat, parse_stat_cpu_ticks, parse_stat_ids};

/// The most processes whose files are kept (a descriptor or two each): a view of a few dozen
/// rows is served whole, and a scan of thousands takes no more than 256 descriptors of the
/// process's limit (often 1,024).
pub(crate) const KEPT_PIDS: usize = 128;
/// The cap on a `stat` read (as by path): one that fills it is refused.
const STAT_CAP: usize = 4 << 10;

/// One file kept, with its path (for `in_flight()`).
struct Open {
    path: PathBuf,
    file: File,
}

/// One process's files, each opened when first wanted.
#[derive(Default)]
struct Files {
    stat: Option<Open>,
    statm: Option<Open>,
}

/// What a kept read gives: CPU time, start time, state and relations (from `stat`), resident
/// bytes (`statm`), each where it was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Changing {
    pub cpu_time: Option<Duration>,
    pub start_time: Option<u64>,
    pub ids: Option<StatIds>,
    pub rss_bytes: Option<u64>,
}

/// The files kept, by pid, for one procfs root.
#[derive(Default)]
pub(crate) struct OpenFiles {
    root: PathBuf,
    by_pid: HashMap<u32, Files>,
    /// The buffer each read goes into, as large as the cap on a `stat` read by path (4 KiB):
    /// kept, as zeroing a new one for each process's read cost more than its parse.
    buf: Vec<u8>,
}

impl OpenFiles {
    /// The changing figures of `pid` under `procfs` from its kept files, its CPU and start
    /// times where `cpu`, its RSS where `rss`, opening them when there is room; `None` when
    /// they cannot be kept or read (the caller reads by path, as for any process: it exited,
    /// or its files say something a kept read does not parse).
    pub fn read(&mut self, procfs: &Path, pid: u32, cpu: bool, rss: bool) -> Option<Changing> {
        if self.root != procfs {
            self.by_pid.clear();
            procfs.clone_into(&mut self.root);
        }
        if !self.by_pid.contains_key(&pid) && self.by_pid.len() >= KEPT_PIDS {
            return None;
        }
        if self.buf.len() != STAT_CAP {
            self.buf = vec![0; STAT_CAP];
        }
        let files = self.by_pid.entry(pid).or_default();
        let got = read(procfs, pid, files, &mut self.buf, cpu, rss);
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

/// `slot`'s file, opened at `procfs/pid/name` when it is not yet.
fn opened<'a>(slot: &'a mut Option<Open>, procfs: &Path, pid: u32, name: &str) -> Option<&'a Open> {
    if slot.is_none() {
        let path = procfs.join(pid.to_string()).join(name);
        let file = {
            let _waiting = crate::inflight::reading(&path);
            File::open(&path).ok()?
        };
        *slot = Some(Open { path, file });
    }
    slot.as_ref()
}

/// Reads `stat` (where `cpu`) and `statm` (where `rss`) at offset 0: `None` when a read fails,
/// comes back empty or fills the buffer (a file longer than any real one), or does not parse.
fn read(
    procfs: &Path,
    pid: u32,
    files: &mut Files,
    buf: &mut [u8],
    cpu: bool,
    rss: bool,
) -> Option<Changing> {
    let mut out = Changing::default();
    if cpu {
        let stat = pread(opened(&mut files.stat, procfs, pid, "stat")?, buf)?;
        let ticks = parse_stat_cpu_ticks(stat)?;
        out.start_time = parse_stat(stat).ok().map(|(_, start)| start);
        out.ids = parse_stat_ids(stat);
        out.cpu_time = super::linux::ticks_to_duration(ticks);
    }
    if rss {
        let statm = pread(opened(&mut files.statm, procfs, pid, "statm")?, buf)?;
        let page = crate::host::memory::linux::page_size();
        let bytes = statm_resident_bytes(statm, page).ok()?;
        // No resident page: a process exiting, or a kernel thread; unknown, never 0.
        out.rss_bytes = Some(bytes).filter(|&r| r > 0);
    }
    Some(out)
}

fn pread<'a>(open: &Open, buf: &'a mut [u8]) -> Option<&'a str> {
    let _waiting = crate::inflight::reading(&open.path);
    crate::host::file::pread_text(&open.file, buf)
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
        let mut kept = OpenFiles::default();
        let first = kept
            .read(procfs, me, true, true)
            .expect("this process's files");
        assert_eq!(kept.len(), 1);
        let mut parts = crate::ContextParts::NONE;
        (parts.rss, parts.cpu_time) = (true, true);
        let by_path = super::super::linux::context(procfs, me, &BTreeMap::new(), parts);
        assert_eq!(first.start_time, by_path.start_time);
        assert!(first.rss_bytes.is_some() && first.cpu_time.is_some());
        // The RSS is `statm`'s, as read by path, give or take what this process touched
        // between the two reads.
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
        let later = kept.read(procfs, me, true, true).unwrap();
        assert!(later.cpu_time > first.cpu_time, "{first:?} then {later:?}");
        assert_eq!(kept.len(), 1, "still the same files");
    }

    /// A process that touches no memory reads the same RSS kept as by path (where `stat`'s
    /// field 24 said 421 pages against `statm`'s 448 for a `sleep`), and only what was asked.
    #[test]
    fn the_rss_kept_is_the_rss_by_path() {
        let procfs = Path::new("/proc");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(100));
        let mut kept = OpenFiles::default();
        let rss = kept.read(procfs, pid, false, true).unwrap();
        let by_path = crate::host::memory::linux::rss_at(&procfs.join(pid.to_string())).unwrap();
        assert_eq!(rss.rss_bytes, Some(by_path));
        assert_eq!((rss.cpu_time, rss.start_time), (None, None), "not asked");
        let cpu = kept.read(procfs, pid, true, false).unwrap();
        assert!(cpu.start_time.is_some() && cpu.rss_bytes.is_none());
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn an_exited_process_is_forgotten_and_never_read_as_another() {
        let procfs = Path::new("/proc");
        let mut kept = OpenFiles::default();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert!(kept.read(procfs, pid, true, true).is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: its kept files read nothing, and its pid has no files to open.
        assert_eq!(kept.read(procfs, pid, true, true), None);
        assert_eq!(kept.len(), 0);
    }

    #[test]
    fn at_most_kept_pids_are_kept_and_others_are_closed() {
        let me = std::process::id();
        let mut kept = OpenFiles::default();
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
            // `stat`'s field 24 says 5 pages, `statm` 6: the RSS is `statm`'s.
            std::fs::write(d.join("statm"), "10 6 2 1 0 3 0\n").unwrap();
        }
        let got: Vec<_> = (1..=n)
            .map(|pid| kept.read(&root, pid, true, true))
            .collect();
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
            Some(6 * crate::host::memory::linux::page_size())
        );
        kept.keep_only(&[1, 2].into_iter().collect());
        assert_eq!(kept.len(), 2);
        assert_eq!(kept.read(&root, 1, true, true), got[0]);
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
        std::fs::write(root.join("1").join("statm"), "10 0 0 0 0 0 0\n").unwrap();
        odd(2, format!("{}{}\n", line(2, 5), " 0".repeat(3000)));
        assert_eq!(kept.read(&root, 1, true, true).unwrap().rss_bytes, None);
        assert_eq!(kept.read(&root, 2, true, true), None);
        // Another root: nothing of the first is kept.
        assert!(kept.read(Path::new("/proc"), me, true, true).is_some());
        assert_eq!(kept.len(), 1);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
