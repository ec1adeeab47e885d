//! The fdinfo sweep: every process's DRM file descriptors, clients counted once per
//! (`drm-pdev`, `drm-client-id`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::Path;

use super::parse;

/// One sweep of every process's DRM file descriptors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Per PCI slot (lower-case), per pid: (used, shared) bytes.
    pub per_slot: HashMap<String, BTreeMap<u32, (u64, u64)>>,
    /// Pids whose fd table could not be read (other users' processes, hidepid).
    pub unreadable: usize,
    /// Pids looked at.
    pub pids: usize,
    /// fdinfo files read.
    pub fdinfo_reads: usize,
    /// fdinfo files that were not a DRM client's text: larger than the 64 KiB read cap (a link to
    /// `/dev/zero` in a crafted procfs), or not text.
    pub fdinfo_refused: usize,
    /// Lines of DRM clients' fdinfo that made no sense and were left out.
    pub bad_lines: usize,
}

/// The most of one fdinfo file read (a real one is a few hundred bytes).
pub const FDINFO_CAP: u64 = crate::host::file::FDINFO;

/// A small text file, whole: `None` when it cannot be read, is larger than `cap` or is not
/// UTF-8.
fn read_capped(path: &Path, cap: u64) -> Option<String> {
    crate::host::file::read_capped(path, cap).ok()
}

/// Sweep the processes under `procfs`. Public (hidden) for the benchmark suite.
#[must_use]
pub fn sweep_tree(procfs: &Path) -> Sweep {
    let mut out = Sweep::default();
    let Ok(entries) = fs::read_dir(procfs) else {
        return out;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    pids.sort_unstable();
    // (pdev, client id) already counted: dup'ed fds and children that inherited one count once,
    // for the lowest pid holding it.
    let mut clients: HashSet<(String, u64)> = HashSet::new();
    for pid in pids {
        out.pids += 1;
        let dir = procfs.join(pid.to_string());
        let fds = match fs::read_dir(dir.join("fd")) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // exited meanwhile
            Err(_) => {
                out.unreadable += 1;
                continue;
            }
        };
        for fd in fds.flatten() {
            // Decide by the link text, so a host's procfs mounted elsewhere works too.
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            if !target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"/dev/dri/")
            {
                continue;
            }
            out.fdinfo_reads += 1;
            let path = dir.join("fdinfo").join(fd.file_name());
            let Some(text) = read_capped(&path, FDINFO_CAP) else {
                // Gone meanwhile, or not a real fdinfo.
                out.fdinfo_refused += usize::from(path.exists());
                continue;
            };
            let Ok(info) = parse::parse_fdinfo(&text) else {
                continue;
            };
            out.bad_lines += info.bad_lines.len();
            let Some(pdev) = info.pdev.clone() else {
                continue;
            };
            if let Some(id) = info.client_id
                && !clients.insert((pdev.clone(), id))
            {
                continue;
            }
            let (used, shared) = parse::client_usage(&info);
            let slot = out
                .per_slot
                .entry(pdev)
                .or_default()
                .entry(pid)
                .or_insert((0, 0));
            slot.0 = slot.0.saturating_add(used);
            slot.1 = slot.1.saturating_add(shared);
        }
    }
    out
}
