//! Linux: a process's context from the procfs root in use.

use super::{Container, ContextParts, ProcessContext, parse_cmdline};
use crate::host::parse::context::{cgroup_line, passwd_line};
use crate::host::parse::stat::parse_stat_cpu_ticks;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The most read of a command line or `stat`: longer is cut.
const CAP: u64 = 1 << 20;
/// The longest line of a `passwd` or `cgroup` file taken; a longer one is skipped (no real
/// entry is near it).
const LINE_CAP: u64 = 64 << 10;
/// How long one `passwd` or `cgroup` file may be read: a real one of any size takes
/// milliseconds; a hostile one (a gigabyte of one line) is left at that.
const READ_TIME: std::time::Duration = std::time::Duration::from_millis(500);

/// Calls `f` on each line of `path` (without its newline) until it returns `Break`, the file
/// ends, or [`READ_TIME`] has passed; a line longer than [`LINE_CAP`] is skipped, not cut.
/// `None` when the file cannot be opened.
fn each_line(path: &Path, mut f: impl FnMut(&str) -> std::ops::ControlFlow<()>) -> Option<()> {
    use std::io::BufRead;
    let _waiting = crate::inflight::reading(path);
    let start = std::time::Instant::now();
    let mut reader = std::io::BufReader::with_capacity(64 << 10, std::fs::File::open(path).ok()?);
    let mut line = Vec::new();
    while start.elapsed() < READ_TIME {
        line.clear();
        let n = (&mut reader)
            .take(LINE_CAP + 1)
            .read_until(b'\n', &mut line)
            .ok()?;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && n as u64 > LINE_CAP {
            // Too long: skip to its end, in bounded pieces.
            loop {
                if start.elapsed() >= READ_TIME {
                    return Some(());
                }
                let buf = reader.fill_buf().ok()?;
                if buf.is_empty() {
                    return Some(());
                }
                if let Some(i) = buf.iter().position(|&b| b == b'\n') {
                    reader.consume(i + 1);
                    break;
                }
                let all = buf.len();
                reader.consume(all);
            }
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        if f(text.trim_end_matches('\n')).is_break() {
            break;
        }
    }
    Some(())
}

/// The file's bytes, up to [`CAP`]. procfs fills a read as far as the file goes, so a
/// read shorter than the page asked for is the whole file (no second read to see the end,
/// which matters when every GPU process's files are read); a longer file is read on.
fn read_capped(path: &Path) -> Option<Vec<u8>> {
    read_open(path).map(|(_, bytes)| bytes)
}

/// [`read_capped`], with the file still open (to ask its owner without a path lookup).
fn read_open(path: &Path) -> Option<(std::fs::File, Vec<u8>)> {
    const PAGE: usize = 4096;
    let _waiting = crate::inflight::reading(path);
    let mut file = std::fs::File::open(path).ok()?;
    let mut out = vec![0_u8; PAGE];
    let n = file.read(&mut out).ok()?;
    out.truncate(n);
    if n == PAGE {
        (&mut file)
            .take(CAP.saturating_sub(PAGE as u64))
            .read_to_end(&mut out)
            .ok()?;
    }
    Some((file, out))
}

/// User names of the system whose processes `procfs` shows (see the module's notes).
pub fn user_names(procfs: &Path) -> BTreeMap<u32, String> {
    // A procfs of this process's own PID namespace (`--procfs` on a second mount of it, one
    // with `hidepid`) is this system's: its `passwd` is ours.
    let own = procfs == Path::new("/proc")
        || crate::host::process::visibility::facts(procfs).same_numbers == Some(true);
    let passwd = if own {
        Path::new("/etc/passwd").to_path_buf()
    } else {
        procfs.join("1/root/etc/passwd")
    };
    let mut names = BTreeMap::new();
    each_line(&passwd, |line| {
        if let Some((uid, name)) = passwd_line(line) {
            names.entry(uid).or_insert_with(|| name.to_string());
        }
        std::ops::ControlFlow::Continue(())
    });
    names
}

/// The parts of `pid`'s context asked for; each part reads its own file.
pub fn context(
    procfs: &Path,
    pid: u32,
    names: &BTreeMap<u32, String>,
    parts: ContextParts,
) -> ProcessContext {
    let dir = procfs.join(pid.to_string());
    let mut ctx = ProcessContext::default();
    // Every file under /proc/<pid> has the process's effective user as its owner (what `ps`
    // shows), so the owner comes from the command line's open file when that is read (no
    // second path lookup), else from the directory: one stat, where `status` would make the
    // kernel format forty lines.
    let owner = |file: Option<&std::fs::File>| {
        let meta = match file {
            Some(f) => f.metadata(),
            None => std::fs::metadata(&dir),
        };
        meta.ok().map(|m| m.uid())
    };
    if parts.command {
        let read = read_open(&dir.join("cmdline"));
        if parts.user {
            ctx.uid = owner(read.as_ref().map(|(f, _)| f));
        }
        ctx.command = read.and_then(|(_, b)| parse_cmdline(&b)).or_else(|| {
            // A zombie leader whose threads run has no command line of its own; they do.
            let t = live_thread(&dir, pid)?;
            read_capped(&t.join("cmdline")).and_then(|b| parse_cmdline(&b))
        });
    } else if parts.user {
        ctx.uid = owner(None);
    }
    if parts.user {
        ctx.user = ctx
            .uid
            .map(|u| names.get(&u).cloned().unwrap_or_else(|| u.to_string()));
    }
    if parts.cpu_time
        && let Some(b) = read_capped(&dir.join("stat"))
    {
        let stat = String::from_utf8_lossy(&b);
        ctx.cpu_time = parse_stat_cpu_ticks(&stat).and_then(ticks_to_duration);
        ctx.start_time = crate::host::parse::stat::parse_stat(&stat)
            .ok()
            .map(|(_, start)| start);
    }
    if parts.rss {
        // `statm`, not `stat`'s field: the kernel sums its counters exactly for `statm` only.
        let rss = |d: &Path| {
            crate::host::memory::linux::rss_at(d)
                .ok()
                .filter(|&r| r > 0)
        };
        // A zombie leader whose threads run reads 0 (its own memory map is gone): the
        // process's is its live threads', which share one.
        ctx.rss_bytes = rss(&dir).or_else(|| rss(&live_thread(&dir, pid)?));
    }
    if parts.container {
        ctx.container = container(&dir.join("cgroup"));
    }
    ctx
}

/// The directory of a live thread of `pid` other than its leader (`task/<tid>`, its state
/// neither `Z` nor `X`): where a zombie leader's memory and command line are still read.
/// `None` for a process with no other thread (a kernel thread, a whole zombie).
fn live_thread(dir: &Path, pid: u32) -> Option<std::path::PathBuf> {
    let tasks = dir.join("task");
    std::fs::read_dir(&tasks)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&tid| tid != pid)
        .map(|tid| tasks.join(tid.to_string()))
        .find(|t| {
            read_capped(&t.join("stat"))
                .is_some_and(|b| !crate::host::parse::stat::is_zombie(&String::from_utf8_lossy(&b)))
        })
}

/// The container the first line of `cgroup` that names one says, read line by line.
fn container(path: &Path) -> Option<Container> {
    let mut found = None;
    each_line(path, |line| {
        found = cgroup_line(line);
        if found.is_some() {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })?;
    found
}

/// Clock ticks (`stat`'s unit for CPU time) as a duration.
pub(super) fn ticks_to_duration(ticks: u64) -> Option<std::time::Duration> {
    let hz = crate::host::memory::linux::clock_ticks_per_second()?;
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
    Some(std::time::Duration::from_nanos(u64::try_from(nanos).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("hmn-ctx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A 3.7 MB `passwd` and a 3.5 MB `cgroup` whose entries that matter come last: read
    /// whole, line by line (the first MiB alone gave a bare uid and no container).
    #[test]
    fn large_passwd_and_cgroup_files_are_read_to_their_end() {
        let procfs = scratch("large");
        let etc = procfs.join("1/root/etc");
        std::fs::create_dir_all(&etc).unwrap();
        let mut passwd = String::new();
        for i in 0..100_000 {
            let _ = writeln!(
                passwd,
                "user{i:06}:x:{}:100::/home/user{i:06}:/bin/sh",
                10_000 + i
            );
        }
        passwd.push_str("alice:x:4242424:100:Alice:/home/alice:/bin/bash\n");
        assert!(passwd.len() > 3_700_000, "{}", passwd.len());
        std::fs::write(etc.join("passwd"), &passwd).unwrap();
        let names = user_names(&procfs);
        assert_eq!(names.get(&4_242_424).map(String::as_str), Some("alice"));
        assert_eq!(names.get(&10_000).map(String::as_str), Some("user000000"));

        let pid = procfs.join("77");
        std::fs::create_dir_all(&pid).unwrap();
        let mut cgroup = String::new();
        while cgroup.len() < 3_500_000 {
            cgroup.push_str("0::/user.slice/user-1000.slice/session-3.scope/a/b/c/d/e/f/g\n");
        }
        let id = "ab".repeat(32);
        let _ = writeln!(cgroup, "0::/system.slice/docker-{id}.scope");
        std::fs::write(pid.join("cgroup"), &cgroup).unwrap();
        let mut parts = ContextParts::NONE;
        parts.container = true;
        let ctx = context(&procfs, 77, &BTreeMap::new(), parts);
        let c = ctx.container.expect("the container on the last line");
        assert_eq!(
            (c.id.as_str(), c.runtime.as_deref()),
            (id.as_str(), Some("docker"))
        );
        let _ = std::fs::remove_dir_all(&procfs);
    }

    /// A hostile `passwd`: a gigabyte of one line (sparse), or a line over the cap before real
    /// ones. The reader skips what is too long and stops at its time limit.
    #[test]
    fn a_hostile_passwd_cannot_hold_the_reader() {
        let procfs = scratch("hostile");
        let etc = procfs.join("1/root/etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::File::create(etc.join("passwd"))
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let t = std::time::Instant::now();
        assert!(user_names(&procfs).is_empty());
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        let long = "x".repeat(200_000);
        std::fs::write(
            etc.join("passwd"),
            format!("{long}\nbob:x:1001:1001::/:/bin/sh\n"),
        )
        .unwrap();
        assert_eq!(
            user_names(&procfs).get(&1001).map(String::as_str),
            Some("bob")
        );
        let _ = std::fs::remove_dir_all(&procfs);
    }

    /// A zombie leader whose thread runs (the main thread ended by `pthread_exit`): its RSS and
    /// command line are its live thread's, not unknown.
    #[test]
    fn a_zombie_leaders_rss_and_command_are_its_live_threads() {
        #![allow(clippy::unwrap_used, clippy::expect_used)]
        let script = "import ctypes, threading, time\n\
                      threading.Thread(target=time.sleep, args=(30,)).start()\n\
                      ctypes.CDLL(None).pthread_exit(None)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script, "the-trainer"])
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("python3 (the CI installs it)");
        let pid = child.id();
        let stat = format!("/proc/{pid}/stat");
        let t = std::time::Instant::now();
        while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
            assert!(t.elapsed().as_secs() < 10, "never a zombie leader");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut parts = ContextParts::NONE;
        parts.rss = true;
        parts.command = true;
        let ctx = context(Path::new("/proc"), pid, &BTreeMap::new(), parts);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(ctx.rss_bytes.is_some_and(|r| r > 1 << 20), "{ctx:?}");
        assert!(
            ctx.command
                .as_deref()
                .is_some_and(|c| c.contains("the-trainer")),
            "{ctx:?}"
        );
    }
}
