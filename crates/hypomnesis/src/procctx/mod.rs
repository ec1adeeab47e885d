//! Who a process is: its owner, its command line, its host memory and the container it runs
//! in, as `hmn ps` shows them beside the GPU memory a process holds.
//!
//! # Platform-specific behaviour
//!
//! Linux reads `<procfs>/<pid>/cmdline`, `statm`, `stat` (the CPU time) and `cgroup`, each
//! only when its part is asked for, and the owner of `<procfs>/<pid>`
//! (the effective user, as `ps` shows it; a process that is not dumpable, like a setuid one,
//! shows as root's), from the procfs root in use (so `HYPOMNESIS_PROCFS=/host/proc` gives a host's processes their owners and containers)
//! and user names from `/etc/passwd` (the host's, `<procfs>/1/root/etc/passwd`, when the procfs
//! root is not this process's own; a name that cannot be read from there is left out rather
//! than taken from the container's own `passwd`). Windows and macOS give the owner's name and
//! the executable's path as `command` (not the arguments), the resident set (the working
//! set on Windows) and the CPU time; `uid` only on macOS; no container.

use std::collections::BTreeMap;
use std::time::Duration;

/// What is known about a process besides its GPU memory. Every field is `None` where it cannot
/// be read (the process exited, belongs to another user and is protected, or the platform does
/// not say), never a guess.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ProcessContext {
    /// The effective user id of the process (Linux: the owner of `/proc/<pid>`, as `ps` shows).
    pub uid: Option<u32>,
    /// The owner's user name; the uid as text when the user database has no name for it.
    pub user: Option<String>,
    /// The full command line, arguments separated by spaces, exactly as the process has it
    /// (it may hold control characters: a view shows them as it must).
    pub command: Option<String>,
    /// The process's resident set (host memory), bytes.
    pub rss_bytes: Option<u64>,
    /// The container the process runs in, from its cgroup; `None` when it runs in none (or the
    /// cgroup cannot be read).
    pub container: Option<Container>,
    /// CPU time the process has used so far, user and system together (JSON: seconds, as
    /// `cpu_seconds`). Two readings a known interval apart give its CPU share.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "cpu_seconds", serialize_with = "seconds")
    )]
    pub cpu_time: Option<Duration>,
}

/// A duration as seconds (a JSON number), `null` when unknown.
#[cfg(feature = "serde")]
#[allow(clippy::ref_option)] // the signature serde's `serialize_with` calls
fn seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Which parts of a [`ProcessContext`] to read. Each part costs a file (or a system call) per
/// process, so a view that shows no container need not read one:
///
/// ```
/// let mut parts = hypomnesis::ContextParts::ALL;
/// parts.container = false;
/// let me = hypomnesis::process_contexts_with(&[std::process::id()], parts);
/// assert_eq!(me.len(), 1);
/// assert!(me[0].container.is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
#[allow(clippy::struct_excessive_bools)] // independent switches, one per part
pub struct ContextParts {
    /// `uid` and `user`.
    pub user: bool,
    /// `command`.
    pub command: bool,
    /// `rss_bytes`.
    pub rss: bool,
    /// `container`.
    pub container: bool,
    /// `cpu_time`.
    pub cpu_time: bool,
}

impl ContextParts {
    /// Every part (what [`process_contexts`] reads).
    pub const ALL: Self = Self {
        user: true,
        command: true,
        rss: true,
        container: true,
        cpu_time: true,
    };
    /// No part: a starting point to switch on the parts a caller shows.
    pub const NONE: Self = Self {
        user: false,
        command: false,
        rss: false,
        container: false,
        cpu_time: false,
    };
}

impl Default for ContextParts {
    fn default() -> Self {
        Self::ALL
    }
}

/// A container, as its cgroup path names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Container {
    /// The container id (64 hex digits for docker, containerd, CRI-O and podman).
    pub id: String,
    /// The runtime that named it (`docker`, `containerd`, `crio`, `podman`), when the path says.
    pub runtime: Option<String>,
    /// The Kubernetes pod UID, when the container belongs to a pod.
    pub pod_uid: Option<String>,
}

/// The context of each of `pids` (same order), every part of it, reading only their files and
/// the user database once. [`process_contexts_with`] reads fewer parts.
#[must_use]
pub fn process_contexts(pids: &[u32]) -> Vec<ProcessContext> {
    process_contexts_with(pids, ContextParts::ALL)
}

/// The context of each of `pids` (same order), only the `parts` asked for (the others `None`),
/// reading only those processes' files, and the user database once when users are asked for.
#[must_use]
pub fn process_contexts_with(pids: &[u32], parts: ContextParts) -> Vec<ProcessContext> {
    #[cfg(target_os = "linux")]
    {
        let Ok(procfs) = crate::roots::procfs() else {
            return vec![ProcessContext::default(); pids.len()];
        };
        let names = if parts.user {
            linux::user_names(procfs)
        } else {
            BTreeMap::new()
        };
        pids.iter()
            .map(|&pid| linux::context(procfs, pid, &names, parts))
            .collect()
    }
    #[cfg(target_os = "macos")]
    {
        pids.iter().map(|&pid| macos::context(pid, parts)).collect()
    }
    #[cfg(windows)]
    {
        pids.iter()
            .map(|&pid| windows::context(pid, parts))
            .collect()
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        let _ = parts;
        vec![ProcessContext::default(); pids.len()]
    }
}

/// The context of process `pid` (see [`process_contexts`] for many).
#[must_use]
pub fn process_context(pid: u32) -> ProcessContext {
    process_contexts(&[pid]).pop().unwrap_or_default()
}

/// User names by uid from the text of a `passwd` file (`name:password:uid:…`); malformed lines
/// are skipped, the first name of a uid is kept.
#[must_use]
pub fn parse_passwd(text: &str) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(uid) = uid.parse::<u32>()
            && !name.is_empty()
            && !name.starts_with('#')
        {
            out.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// The command line from the bytes of `/proc/<pid>/cmdline` (arguments separated by NUL, maybe
/// ending with one); `None` when empty (a kernel thread, an exited process).
#[must_use]
pub fn parse_cmdline(bytes: &[u8]) -> Option<String> {
    let trimmed = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if trimmed.is_empty() {
        return None;
    }
    let args: Vec<String> = trimmed
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(args.join(" "))
}

/// CPU time in clock ticks, user and system together, from the text of `/proc/<pid>/stat`.
/// Fields are counted after the last `)`, as the name may hold any.
#[must_use]
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    // After the name: state(3) … utime(14) stime(15): indices 0, 11, 12.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}

/// The container a process runs in, from the text of `/proc/<pid>/cgroup` (cgroup v1 or v2).
/// Understands the cgroupfs and systemd path forms of docker (`/docker/<id>`,
/// `docker-<id>.scope`), containerd (`cri-containerd-<id>.scope`, `/kubepods/…/pod<uid>/<id>`),
/// CRI-O (`crio-<id>.scope`) and podman (`libpod-<id>.scope`); a runtime's own helper scopes
/// (`crio-conmon-…`) and plain systemd scopes (a login session, a service) are no container.
#[must_use]
pub fn parse_cgroup(text: &str) -> Option<Container> {
    text.lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .find_map(container_of_path)
}

/// The container named by one cgroup path.
fn container_of_path(path: &str) -> Option<Container> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // The container's own component is usually the last; podman may nest one below it.
    let (runtime, id, parents) = (1..=parts.len()).rev().find_map(|n| {
        let (last, parents) = parts.get(..n)?.split_last()?;
        container_id(last, parents).map(|(runtime, id)| (runtime, id, parents))
    })?;
    let pod_uid = parents.iter().rev().find_map(|p| pod_uid(p));
    Some(Container {
        id: id.to_string(),
        runtime: runtime.map(String::from),
        pod_uid,
    })
}

/// `(runtime, id)` from the last component of a cgroup path, its parents telling the runtime
/// of the cgroupfs forms.
fn container_id<'a>(last: &'a str, parents: &[&str]) -> Option<(Option<&'static str>, &'a str)> {
    const SCOPES: [(&str, &str); 5] = [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "crio"),
        ("libpod-", "podman"),
        ("containerd-", "containerd"),
    ];
    if let Some(stem) = last.strip_suffix(".scope") {
        return SCOPES.iter().find_map(|(prefix, runtime)| {
            stem.strip_prefix(prefix)
                .filter(|id| is_container_id(id))
                .map(|id| (Some(*runtime), id))
        });
    }
    if !is_container_id(last) {
        return None;
    }
    let runtime = if parents.contains(&"docker") {
        Some("docker")
    } else if parents.first().is_some_and(|p| p.starts_with("kubepods")) {
        None // cgroupfs Kubernetes paths do not say which runtime
    } else if parents.contains(&"libpod_parent") || parents.contains(&"machine.slice") {
        Some("podman")
    } else {
        return None;
    };
    Some((runtime, last))
}

/// 64 lowercase hex digits: the ids docker, containerd, CRI-O and podman give containers.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The pod UID of a Kubernetes cgroup path component: `pod<uid>` (cgroupfs) or
/// `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd).
fn pod_uid(component: &str) -> Option<String> {
    let stem = component.strip_suffix(".slice").unwrap_or(component);
    let (before, uid) = stem.rsplit_once("pod")?;
    if !(before.is_empty() || before.ends_with('-')) {
        return None;
    }
    let uid = uid.replace('_', "-");
    let shape = uid.len() == 36 && uid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit());
    shape.then_some(uid)
}

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(windows)]
mod windows;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_status_and_cmdline() {
        let names = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\n# comment:x:5\nbad line\nalice:x:1000:1000::/home/alice:/bin/sh\nalias:x:1000:1000::/:/bin/sh\n:x:7:7::/:\n",
        );
        assert_eq!(names.get(&0).map(String::as_str), Some("root"));
        assert_eq!(
            names.get(&1000).map(String::as_str),
            Some("alice"),
            "first name wins"
        );
        assert_eq!(names.len(), 2);
        assert_eq!(
            parse_cmdline(b"python3\0train.py\0--lr\x001e-4\0").as_deref(),
            Some("python3 train.py --lr 1e-4")
        );
        assert_eq!(parse_cmdline(b"sleep\x0060").as_deref(), Some("sleep 60"));
        assert_eq!(parse_cmdline(b""), None);
        assert_eq!(parse_cmdline(b"\0"), None);
    }

    #[test]
    fn stat_cpu_ticks_count_after_the_last_parenthesis() {
        let line = "42 (my (evil) name) S 1 42 42 0 -1 4194304 100 0 0 0 250 50 7 9 20 0 1 0 12345 8192000 415 18446744073709551615 1 1 0 0 0 0 0\n";
        assert_eq!(parse_stat_cpu_ticks(line), Some(300));
        let short = "42 (x) S 1 2 3 4 5 6 7 8 9 10 11";
        assert_eq!(parse_stat_cpu_ticks(short), None, "cut short");
        let no_name = "no parenthesis 1 2 3 4 5 6 7 8 9 10 11 12 13";
        assert_eq!(parse_stat_cpu_ticks(no_name), None);
        let bad = line.replace(" 250 ", " 2x0 ");
        assert_eq!(parse_stat_cpu_ticks(&bad), None);
        let bad = line.replace(" 50 7 ", " -5 7 ");
        assert_eq!(parse_stat_cpu_ticks(&bad), None);
        let huge = line.replace(" 250 50 ", &format!(" {} 1 ", u64::MAX));
        assert_eq!(
            parse_stat_cpu_ticks(&huge),
            None,
            "an overflow is no figure"
        );
    }

    #[test]
    fn pod_uids_and_ids() {
        assert!(is_container_id(&"a".repeat(64)));
        assert!(!is_container_id(&"A".repeat(64)));
        assert!(!is_container_id(&"a".repeat(63)));
        assert_eq!(
            pod_uid("pod6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d").as_deref(),
            Some("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        );
        assert_eq!(
            pod_uid("kubepods-besteffort-pod6a2b5c3d_1e2f_4a5b_8c9d_0e1f2a3b4c5d.slice").as_deref(),
            Some("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        );
        assert_eq!(pod_uid("kubepods-besteffort.slice"), None);
        assert_eq!(pod_uid("ipod6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"), None);
        assert_eq!(pod_uid("pod123"), None);
    }
}
