//! Who each process is, read once per lifetime: a view refreshed every second (`hmn top`) or an
//! exporter measuring again and again (`hmn serve`) reads a process's owner, command line,
//! container and name when it first sees it, and after that only what changes while it runs
//! (its RSS and CPU time, through the files [`ContextReader`] keeps open) or, when those are not
//! asked for, its start time alone. A start time that changed tells a later process that reuses
//! the pid; it is read afresh. The owner and command line are read again every
//! [`Identities::RELOOK`] reads (a process may retitle itself or change its user); the
//! container stays. A process no longer listed is forgotten.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::host::process::context::{
    Container, ContextParts, ContextReader, ProcessContext, process_contexts_with,
};

/// One process as [`Identities::read`] gives it: its lasting parts, shared with what is kept
/// (a read copies no string), and its changing figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Identity {
    /// Its name (the executable's, whole), when asked for, or when it has no command line.
    pub name: Option<Arc<str>>,
    /// Its owner's user id.
    pub uid: Option<u32>,
    /// Its owner's user name (or uid).
    pub user: Option<Arc<str>>,
    /// Its command line.
    pub command: Option<Arc<str>>,
    /// Its container, when asked for.
    pub container: Option<Arc<Container>>,
    /// When it started (clock ticks after boot).
    pub start_time: Option<u64>,
    /// Its RSS, when the changing parts are asked for.
    pub rss_bytes: Option<u64>,
    /// Its CPU time, when the changing parts are asked for.
    pub cpu_time: Option<Duration>,
}

impl Identity {
    /// What to show of it: its command line, else its name.
    #[must_use]
    pub fn shown(&self) -> Option<&Arc<str>> {
        self.command.as_ref().or(self.name.as_ref())
    }

    /// It as a [`ProcessContext`] (the strings copied).
    #[must_use]
    pub fn context(&self) -> ProcessContext {
        ProcessContext {
            uid: self.uid,
            user: self.user.as_deref().map(String::from),
            command: self.command.as_deref().map(String::from),
            rss_bytes: self.rss_bytes,
            container: self.container.as_deref().cloned(),
            cpu_time: self.cpu_time,
            start_time: self.start_time,
        }
    }

    fn of(c: ProcessContext, name: Option<String>) -> Self {
        Self {
            name: name.map(Arc::from),
            uid: c.uid,
            user: c.user.map(Arc::from),
            command: c.command.map(Arc::from),
            container: c.container.map(Arc::new),
            start_time: c.start_time,
            rss_bytes: c.rss_bytes,
            cpu_time: c.cpu_time,
        }
    }
}

/// What [`Identities::read`] reads beyond the owner and the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct IdentityParts {
    /// The container (read once; a process kept without it is read again when it is asked).
    pub container: bool,
    /// The name, for every process (without it, only for one with no command line).
    pub name: bool,
    /// RSS and CPU time, at every read (through files kept open); without them a kept
    /// process's start time alone is read.
    pub changing: bool,
}

impl IdentityParts {
    /// The owner and the command line alone: a starting point to switch parts on.
    pub const NONE: Self = Self {
        container: false,
        name: false,
        changing: false,
    };
}

#[derive(Debug)]
struct Kept {
    read_at: u64,
    with_container: bool,
    identity: Identity,
}

/// Who each listed process is, kept from one read to the next (see the module docs).
#[derive(Debug, Default)]
pub struct Identities {
    by_pid: HashMap<u32, Kept>,
    reads: u64,
    fresh: usize,
    changing: ContextReader,
}

impl Identities {
    /// Reads after which a process's owner and command line are read again.
    pub const RELOOK: u64 = 30;

    /// Nothing kept yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many processes are kept.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_pid.len()
    }

    /// Whether none is kept.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// The state and relations of each of `pids` under `procfs`, with its start time, read
    /// through the files the changing parts are read through (a ghost's look, at the rows a
    /// refresh lists): by pid, those a kept read could read (the others are read by path).
    #[cfg(target_os = "linux")]
    pub(crate) fn stats(
        &mut self,
        procfs: &std::path::Path,
        pids: &[u32],
    ) -> BTreeMap<u32, (crate::host::parse::stat::StatIds, u64)> {
        pids.iter()
            .copied()
            .zip(self.changing.stats(procfs, pids))
            .filter_map(|(pid, s)| Some((pid, s?)))
            .collect()
    }

    /// How many processes the last read read whole (new, a reused pid, or not kept).
    #[must_use]
    pub fn last_read_whole(&self) -> usize {
        self.fresh
    }

    /// Who `wanted`'s processes are (listed pid → the pid its files are read under), by listed
    /// pid: the kept ones as kept with their changing parts read now, the others read whole.
    /// Processes `listed` says are no longer listed are forgotten.
    pub fn read(
        &mut self,
        wanted: &BTreeMap<u32, u32>,
        parts: IdentityParts,
        listed: impl Fn(u32) -> bool,
    ) -> BTreeMap<u32, Identity> {
        self.reads += 1;
        let reads = self.reads;
        self.by_pid.retain(|&pid, _| listed(pid));
        let mut known: Vec<(u32, u32)> = Vec::with_capacity(wanted.len());
        let mut relook: Vec<(u32, u32)> = Vec::new();
        let mut new = BTreeMap::new();
        for (&pid, &read) in wanted {
            match self.by_pid.get(&pid) {
                Some(k) if k.with_container || !parts.container => {
                    known.push((pid, read));
                    if reads.saturating_sub(k.read_at) >= Self::RELOOK {
                        relook.push((pid, read));
                    }
                }
                _ => {
                    new.insert(pid, read);
                }
            }
        }
        let mut out = self.whole(&new, parts);
        let now = self.changing_parts(&known, parts);
        let mut reused = BTreeMap::new();
        for (&(pid, read), (start, rss, cpu)) in known.iter().zip(now) {
            let Some(k) = self.by_pid.get(&pid) else {
                continue;
            };
            // Another start time: the pid now names a later process, read afresh.
            if matches!((k.identity.start_time, start), (Some(a), Some(b)) if a != b) {
                reused.insert(pid, read);
                continue;
            }
            let mut identity = k.identity.clone();
            if parts.changing {
                (identity.rss_bytes, identity.cpu_time) = (rss, cpu);
            }
            out.insert(pid, identity);
        }
        relook.retain(|(pid, _)| !reused.contains_key(pid));
        self.relook(&relook, &mut out);
        self.fresh = new.len() + reused.len();
        out.extend(self.whole(&reused, parts));
        out
    }

    /// `pids` read whole (listed pid → pid to read), kept from now on when their start time
    /// is known (without it nothing tells a reused pid: such a process is read again).
    fn whole(
        &mut self,
        pids: &BTreeMap<u32, u32>,
        parts: IdentityParts,
    ) -> BTreeMap<u32, Identity> {
        if pids.is_empty() {
            // No call: it would read the user database for no process.
            return BTreeMap::new();
        }
        let mut whole = ContextParts::ALL;
        whole.container = parts.container;
        (whole.rss, whole.cpu_time) = (parts.changing, true);
        let under: Vec<u32> = pids.values().copied().collect();
        let read = process_contexts_with(&under, whole);
        let mut out = BTreeMap::new();
        for ((&pid, &at), ctx) in pids.iter().zip(read) {
            let name = (parts.name || ctx.command.is_none())
                .then(|| crate::host::process::process_name(at))
                .flatten();
            let mut identity = Identity::of(ctx, name);
            if !parts.changing {
                (identity.rss_bytes, identity.cpu_time) = (None, None);
            }
            if identity.start_time.is_some() {
                self.by_pid.insert(
                    pid,
                    Kept {
                        read_at: self.reads,
                        with_container: parts.container,
                        identity: identity.clone(),
                    },
                );
            }
            out.insert(pid, identity);
        }
        out
    }

    /// The start time, RSS and CPU time of `known` (listed pid, pid to read), in order: through
    /// the kept files when the changing parts are asked, else the start time alone.
    fn changing_parts(
        &mut self,
        known: &[(u32, u32)],
        parts: IdentityParts,
    ) -> Vec<(Option<u64>, Option<u64>, Option<Duration>)> {
        let under: Vec<u32> = known.iter().map(|&(_, read)| read).collect();
        if parts.changing {
            let mut changing = ContextParts::NONE;
            (changing.rss, changing.cpu_time) = (true, true);
            self.changing
                .read(&under, changing)
                .into_iter()
                .map(|c| (c.start_time, c.rss_bytes, c.cpu_time))
                .collect()
        } else {
            under
                .iter()
                .map(|&pid| (crate::host::process::process_start_time(pid), None, None))
                .collect()
        }
    }

    /// Reads the owner and command line of `relook` (listed pid, pid to read) again, into what
    /// is kept and into `out`; a part that cannot be read now (the process just ended) stays.
    fn relook(&mut self, relook: &[(u32, u32)], out: &mut BTreeMap<u32, Identity>) {
        if relook.is_empty() {
            return;
        }
        let mut parts = ContextParts::NONE;
        (parts.user, parts.command) = (true, true);
        let under: Vec<u32> = relook.iter().map(|&(_, read)| read).collect();
        let again = process_contexts_with(&under, parts);
        for (&(pid, _), fresh) in relook.iter().zip(again) {
            let (Some(k), Some(shown)) = (self.by_pid.get_mut(&pid), out.get_mut(&pid)) else {
                continue;
            };
            k.read_at = self.reads;
            if fresh.uid.is_some() {
                (k.identity.uid, shown.uid) = (fresh.uid, fresh.uid);
            }
            renew(&mut k.identity.user, &mut shown.user, fresh.user);
            renew(&mut k.identity.command, &mut shown.command, fresh.command);
        }
    }
}

/// A part read again: `fresh`, when read and other than `kept`, replaces it and is shown; a
/// part the same as kept stays shared, one not read stays as kept.
fn renew(kept: &mut Option<Arc<str>>, shown: &mut Option<Arc<str>>, fresh: Option<String>) {
    if let Some(fresh) = fresh
        && kept.as_deref() != Some(fresh.as_str())
    {
        *kept = Some(Arc::from(fresh));
        shown.clone_from(kept);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    fn wanted(pids: &[u32]) -> BTreeMap<u32, u32> {
        pids.iter().map(|&p| (p, p)).collect()
    }

    const CHANGING: IdentityParts = IdentityParts {
        container: false,
        name: false,
        changing: true,
    };

    #[test]
    fn lasting_parts_are_read_once_then_every_relook_and_the_changing_ones_every_time() {
        let me = std::process::id();
        let mut ids = Identities::new();
        let first = ids.read(&wanted(&[me]), CHANGING, |_| true);
        let id = &first[&me];
        assert!(id.command.is_some() && id.rss_bytes.is_some() && id.cpu_time.is_some());
        assert_eq!(ids.last_read_whole(), 1);
        assert_eq!((ids.len(), ids.is_empty()), (1, false));
        let kept = &mut ids.by_pid.get_mut(&me).unwrap().identity;
        kept.command = Some("kept".into());
        for _ in 1..Identities::RELOOK {
            let again = ids.read(&wanted(&[me]), CHANGING, |_| true);
            assert_eq!(again[&me].command.as_deref(), Some("kept"));
            assert!(again[&me].rss_bytes.is_some());
            assert_eq!(ids.last_read_whole(), 0);
        }
        let relooked = ids.read(&wanted(&[me]), CHANGING, |_| true);
        assert_ne!(relooked[&me].command.as_deref(), Some("kept"), "read again");
        // Asking for the container reads the lasting parts again, with it.
        ids.by_pid.get_mut(&me).unwrap().identity.command = Some("kept".into());
        let with = IdentityParts {
            container: true,
            ..CHANGING
        };
        let c = ids.read(&wanted(&[me]), with, |_| true);
        assert_ne!(c[&me].command.as_deref(), Some("kept"));
        assert!(ids.by_pid[&me].with_container);
        // No longer listed: forgotten.
        ids.read(&BTreeMap::new(), CHANGING, |_| false);
        assert_eq!((ids.len(), ids.is_empty()), (0, true));
    }

    /// Without the changing parts a kept process costs its start time alone, and a start time
    /// that changed (a reused pid) reads it whole again; a name is read when asked.
    #[test]
    fn a_reused_pid_is_read_again_and_names_are_read_when_asked() {
        let me = std::process::id();
        let parts = IdentityParts {
            container: false,
            name: true,
            changing: false,
        };
        let mut ids = Identities::new();
        let first = ids.read(&wanted(&[me]), parts, |_| true);
        assert!(first[&me].name.is_some() && first[&me].rss_bytes.is_none());
        ids.read(&wanted(&[me]), parts, |_| true);
        assert_eq!(ids.last_read_whole(), 0, "kept: nothing read whole");
        ids.by_pid.get_mut(&me).unwrap().identity.start_time = Some(1);
        let again = ids.read(&wanted(&[me]), parts, |_| true);
        assert_eq!(ids.last_read_whole(), 1, "another start time: read whole");
        assert_ne!(again[&me].start_time, Some(1));
    }

    /// A process with no command line (a zombie's memory is gone) has its name.
    #[test]
    fn a_process_without_a_command_line_has_its_name() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let zombie = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|s| s.starts_with('Z')))
        };
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while !zombie() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(zombie(), "true ({pid}) never became a zombie");
        let mut ids = Identities::new();
        let got = ids.read(&wanted(&[pid]), CHANGING, |_| true);
        child.wait().unwrap();
        assert_eq!(got[&pid].command, None);
        assert_eq!(got[&pid].shown().map(|s| &**s), Some("true"));
    }
}
