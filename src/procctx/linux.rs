//! Linux: a process's context from the procfs root in use.

use super::{ProcessContext, parse_cgroup, parse_cmdline, parse_passwd};
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
    const PAGE: usize = 4096;
    let mut file = std::fs::File::open(path).ok()?;
    let mut out = vec![0_u8; PAGE];
    let n = file.read(&mut out).ok()?;
    out.truncate(n);
    if n == PAGE {
        file.take(CAP.saturating_sub(PAGE as u64))
            .read_to_end(&mut out)
            .ok()?;
    }
    Some(out)
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

pub fn context(procfs: &Path, pid: u32, names: &BTreeMap<u32, String>) -> ProcessContext {
    let dir = procfs.join(pid.to_string());
    let text =
        |name: &str| read_capped(&dir.join(name)).map(|b| String::from_utf8_lossy(&b).into_owned());
    // The owner of /proc/<pid> is the process's effective user (what `ps` shows): one
    // stat, where `status` would make the kernel format forty lines.
    let uid = std::fs::metadata(&dir).ok().map(|m| m.uid());
    ProcessContext {
        uid,
        user: uid.map(|u| names.get(&u).cloned().unwrap_or_else(|| u.to_string())),
        command: read_capped(&dir.join("cmdline")).and_then(|b| parse_cmdline(&b)),
        rss_bytes: crate::ram::linux::rss_at(&dir).ok().filter(|&r| r > 0),
        container: text("cgroup").as_deref().and_then(parse_cgroup),
    }
}
