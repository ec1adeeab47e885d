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
            let Ok(text) = fs::read_to_string(dir.join("fdinfo").join(fd.file_name())) else {
                continue;
            };
            let Ok(info) = parse::parse_fdinfo(&text) else {
                continue;
            };
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
