//! Other processes: resident set, start time, and the process tree below a pid (what `hmn run`
//! and `hmn watch` sample).
//!
//! # Platform-specific behaviour
//!
//! Linux reads `<procfs>/<pid>/statm` and `stat`. On other platforms the tree is the root
//! process alone and the per-process RSS is not available yet (an error says so).

use crate::Result;

/// `(parent pid, start time in clock ticks since boot)` from the text of `/proc/<pid>/stat`.
/// The command name (field 2) may contain spaces and parentheses: fields are counted after its
/// last `)`.
pub fn parse_stat(text: &str) -> std::result::Result<(u32, u64), String> {
    let close = text
        .rfind(')')
        .ok_or("stat has no ')' after the command name")?;
    let rest = text.get(close + 1..).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) … starttime(22): indices 0, 1, … 19.
    let ppid = fields
        .get(1)
        .and_then(|f| f.parse().ok())
        .ok_or("stat has no parent pid field")?;
    let start = fields
        .get(19)
        .and_then(|f| f.parse().ok())
        .ok_or("stat has no start time field")?;
    Ok((ppid, start))
}

/// Whether a `stat` line describes a process that has exited (state `Z` or `X`).
#[must_use]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // only Linux has stat lines
pub fn is_zombie(stat: &str) -> bool {
    let state = stat
        .rfind(')')
        .and_then(|i| stat.get(i + 1..))
        .and_then(|r| r.split_whitespace().next());
    matches!(state, Some("Z" | "X"))
}

/// Resident set of process `pid`, bytes.
///
/// # Errors
///
/// [`crate::HypomnesisError::Io`] when the process is gone or not readable,
/// [`crate::HypomnesisError::Ram`] when it has exited but is not yet reaped (a zombie), on other
/// platforms, or for malformed files.
pub fn process_rss_of(pid: u32) -> Result<u64> {
    #[cfg(target_os = "linux")]
    {
        let dir = crate::roots::procfs()?.join(pid.to_string());
        let rss = crate::ram::linux::rss_at(&dir)?;
        // An exited process waiting to be reaped reads as 0 bytes: that is not a figure.
        if rss == 0 && std::fs::read_to_string(dir.join("stat")).is_ok_and(|stat| is_zombie(&stat))
        {
            return Err(crate::HypomnesisError::Ram(format!(
                "process {pid} has exited (a zombie not yet reaped): it has no resident set"
            )));
        }
        Ok(rss)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(crate::HypomnesisError::Ram(format!(
            "the resident set of another process (pid {pid}) is not available on {}",
            std::env::consts::OS
        )))
    }
}

/// When process `pid` started (an opaque, monotonic value: clock ticks since boot on Linux),
/// to tell a process from a later one that reuses its pid. `None` when unknown, or when the
/// process has exited (a zombie waiting for its parent counts as exited).
#[must_use]
pub fn process_start_time(pid: u32) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string(
            crate::roots::procfs()
                .ok()?
                .join(pid.to_string())
                .join("stat"),
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

/// The short name of process `pid` (`/proc/<pid>/comm` on Linux); `None` when unknown.
#[must_use]
pub fn process_name(pid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let text = std::fs::read_to_string(
            crate::roots::procfs()
                .ok()?
                .join(pid.to_string())
                .join("comm"),
        )
        .ok()?;
        Some(text.trim_end_matches('\n').to_string()).filter(|s| !s.is_empty())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// `root` and every live process below it (children, grandchildren, …), `root` first.
///
/// # Errors
///
/// [`crate::HypomnesisError::Io`] when the process table cannot be read.
pub fn process_tree(root: u32) -> Result<Vec<u32>> {
    #[cfg(target_os = "linux")]
    {
        let procfs = crate::roots::procfs()?;
        let entries = std::fs::read_dir(procfs).map_err(|e| crate::error::io_at(procfs, &e))?;
        let mut parent_of: Vec<(u32, u32)> = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(text) = std::fs::read_to_string(e.path().join("stat"))
                && let Ok((ppid, _)) = parse_stat(&text)
            {
                parent_of.push((pid, ppid));
            }
        }
        Ok(descendants(root, &parent_of))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(vec![root])
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
    fn stat_with_odd_names() {
        let text = "4242 (my (odd) name) S 4200 4242 4200 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 98765 12345678 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(text), Ok((4200, 98765)));
        assert!(parse_stat("no paren").is_err());
        assert!(parse_stat("1 (x) S").is_err());
        assert!(is_zombie("9 (sleep) Z 1 9 9 0"));
        assert!(!is_zombie(text));
    }

    #[test]
    fn tree() {
        let table = [(10, 1), (11, 10), (12, 11), (13, 1), (14, 10), (15, 14)];
        assert_eq!(descendants(10, &table), vec![10, 11, 14, 12, 15]);
        assert_eq!(descendants(99, &table), vec![99]);
        // A cycle (pid reuse races) does not loop.
        assert_eq!(descendants(1, &[(2, 1), (1, 2)]), vec![1, 2]);
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
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
