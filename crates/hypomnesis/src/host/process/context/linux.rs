//! Linux: a process's context from the procfs root in use.

use super::{ContextParts, ProcessContext, parse_cgroup, parse_cmdline, parse_passwd};
use crate::host::parse::stat::parse_stat_cpu_ticks;
use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The most read of any one file: a `passwd` or a command line longer than this is cut.
const CAP: u64 = 1 << 20;

/// The file's bytes, up to [`CAP`]. procfs fills a read as far as the file goes, so a
/// read shorter than the page asked for is the whole file (no second read to see the end,
/// which matters when every GPU process's files are read); a longer file is read on.
fn read_capped(path: &Path) -> Option<Vec<u8>> {
    read_open(path).map(|(_, bytes)| bytes)
}

/// [`read_capped`], with the file still open (to ask its owner without a path lookup).
fn read_open(path: &Path) -> Option<(std::fs::File, Vec<u8>)> {
    const PAGE: usize = 4096;
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
    let passwd = if procfs == Path::new("/proc") {
        Path::new("/etc/passwd").to_path_buf()
    } else {
        procfs.join("1/root/etc/passwd")
    };
    read_capped(&passwd)
        .map(|b| parse_passwd(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
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
        ctx.command = read.and_then(|(_, b)| parse_cmdline(&b));
    } else if parts.user {
        ctx.uid = owner(None);
    }
    if parts.user {
        ctx.user = ctx
            .uid
            .map(|u| names.get(&u).cloned().unwrap_or_else(|| u.to_string()));
    }
    if parts.cpu_time {
        ctx.cpu_time = read_capped(&dir.join("stat"))
            .and_then(|b| parse_stat_cpu_ticks(&String::from_utf8_lossy(&b)))
            .and_then(ticks_to_duration);
    }
    if parts.rss {
        // `statm`, not `stat`'s field: the kernel sums its counters exactly for `statm` only.
        ctx.rss_bytes = crate::host::memory::linux::rss_at(&dir)
            .ok()
            .filter(|&r| r > 0);
    }
    if parts.container {
        ctx.container = read_capped(&dir.join("cgroup"))
            .and_then(|b| parse_cgroup(&String::from_utf8_lossy(&b)));
    }
    ctx
}

/// Clock ticks (`stat`'s unit for CPU time) as a duration.
fn ticks_to_duration(ticks: u64) -> Option<std::time::Duration> {
    let hz = crate::host::memory::linux::clock_ticks_per_second()?;
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
    Some(std::time::Duration::from_nanos(u64::try_from(nanos).ok()?))
}
