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
//! root is not of this process's own PID namespace; a name that cannot be read from there is left out rather
//! than taken from the container's own `passwd`). A container in a Kubernetes pod gets its
//! namespace, pod and container names from the kubelet's logs under the rootfs in use
//! (`<rootfs>/var/log/pods`, `<rootfs>/var/log/containers`; see [`Container`]), read once per
//! pod and kept. Windows and macOS give the owner's name and
//! the executable's path as `command` (not the arguments), the resident set (the working
//! set on Windows) and the CPU time; `uid` only on macOS; no container.

use std::time::Duration;

pub use crate::host::parse::context::{Container, parse_cgroup, parse_cmdline, parse_passwd};

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
    /// When the process started, as [`crate::host::process::process_start_time`] gives it (Linux: clock ticks
    /// since boot), read with `cpu_time` from the same file: two readings that differ are two
    /// processes that had the same pid. Not in JSON.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub start_time: Option<u64>,
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
    /// `cpu_time` (and `start_time`, from the same file).
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
        let Ok(procfs) = crate::host::roots::procfs() else {
            return vec![ProcessContext::default(); pids.len()];
        };
        let names = if parts.user {
            linux::user_names(procfs)
        } else {
            std::collections::BTreeMap::new()
        };
        let mut contexts: Vec<ProcessContext> = pids
            .iter()
            .map(|&pid| linux::context(procfs, pid, &names, parts))
            .collect();
        crate::host::kube::name_all(contexts.iter_mut().filter_map(|c| c.container.as_mut()));
        contexts
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

/// Reads processes' contexts again and again (a view refreshed every second): their CPU time
/// and RSS through files kept open between calls on Linux (one `pread` per file instead of
/// opening it by path; see the module's documentation), everything else as
/// [`process_contexts_with`] reads it. The files of up to 128 processes are kept, those of the
/// pids of the last call only; others are read by path. Elsewhere it is
/// [`process_contexts_with`].
#[cfg(feature = "sampling")]
#[derive(Default)]
pub struct ContextReader {
    #[cfg(target_os = "linux")]
    kept: kept::OpenFiles,
}

#[cfg(feature = "sampling")]
impl std::fmt::Debug for ContextReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextReader").finish_non_exhaustive()
    }
}

#[cfg(feature = "sampling")]
impl ContextReader {
    /// A reader with no file kept yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The `parts` of the context of each of `pids`, in their order, as
    /// [`process_contexts_with`] gives them.
    pub fn read(&mut self, pids: &[u32], parts: ContextParts) -> Vec<ProcessContext> {
        #[cfg(target_os = "linux")]
        {
            let Ok(procfs) = crate::host::roots::procfs() else {
                return process_contexts_with(pids, parts);
            };
            if !(parts.rss || parts.cpu_time) {
                return process_contexts_with(pids, parts);
            }
            let mut rest = parts;
            (rest.rss, rest.cpu_time) = (false, false);
            let mut out = if rest == ContextParts::NONE {
                vec![ProcessContext::default(); pids.len()]
            } else {
                process_contexts_with(pids, rest)
            };
            let mut changing = ContextParts::NONE;
            (changing.rss, changing.cpu_time) = (parts.rss, parts.cpu_time);
            for (ctx, &pid) in out.iter_mut().zip(pids) {
                let kept = self.kept.read(procfs, pid, parts.cpu_time, parts.rss);
                let (cpu_time, start_time, rss_bytes) = if let Some(c) = kept {
                    (c.cpu_time, c.start_time, c.rss_bytes)
                } else {
                    let no_names = std::collections::BTreeMap::new();
                    let c = linux::context(procfs, pid, &no_names, changing);
                    (c.cpu_time, c.start_time, c.rss_bytes)
                };
                if parts.cpu_time {
                    (ctx.cpu_time, ctx.start_time) = (cpu_time, start_time);
                }
                if parts.rss {
                    ctx.rss_bytes = rss_bytes;
                }
            }
            self.kept.keep_only(&pids.iter().copied().collect());
            out
        }
        #[cfg(not(target_os = "linux"))]
        process_contexts_with(pids, parts)
    }

    /// The state and relations of each of `pids` under `procfs`, with its start time, read
    /// through the kept `stat` files (in their order; `None` where a kept read fails: the
    /// caller reads by path). The files of the pids of this call are kept, others closed.
    #[cfg(target_os = "linux")]
    pub(crate) fn stats(
        &mut self,
        procfs: &std::path::Path,
        pids: &[u32],
    ) -> Vec<Option<(crate::host::parse::stat::StatIds, u64)>> {
        let out = pids
            .iter()
            .map(|&pid| {
                let c = self.kept.read(procfs, pid, true, false)?;
                Some((c.ids?, c.start_time?))
            })
            .collect();
        self.kept.keep_only(&pids.iter().copied().collect());
        out
    }
}

#[cfg(all(target_os = "linux", feature = "sampling"))]
mod kept;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "macos")]
mod macos;
#[cfg(target_os = "macos")]
pub(crate) use macos::exists as macos_exists;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub(crate) use windows::exists as windows_exists;
