//! What `hmn top` reads of a process once, not at every refresh: its owner, command line and
//! container do not change while it runs (nearly: a process may retitle itself or change its
//! user, so those two are read again every [`RELOOK`] refreshes; the container it runs in
//! stays), while its RSS and CPU time do. A refresh reads the lasting parts of the processes
//! it has not seen, and only RSS and CPU time of the others: two files a process instead of
//! four, and no user database; and those two are kept open from one refresh to the next
//! (`ContextReader`), read again at offset 0.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use hypomnesis::{Container, ContextParts, ProcessContext};

use crate::collect::contexts;

/// What a refresh gives of a process: its lasting parts, shared with what [`Lasting`] keeps
/// and with the rows made of them (a refresh copies no string: a count is raised), and its
/// changing figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub user: Option<Arc<str>>,
    pub command: Option<Arc<str>>,
    pub container: Option<Arc<Container>>,
    /// When it started (clock ticks after boot).
    pub start_time: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub cpu_time: Option<Duration>,
}

impl From<ProcessContext> for Context {
    fn from(c: ProcessContext) -> Self {
        Self {
            user: c.user.map(Arc::from),
            command: c.command.map(Arc::from),
            container: c.container.map(Arc::new),
            start_time: c.start_time,
            rss_bytes: c.rss_bytes,
            cpu_time: c.cpu_time,
        }
    }
}

/// Refreshes after which a process's lasting parts are read again.
pub const RELOOK: u64 = 30;

/// The lasting parts of each process seen, by listed pid, with the refresh they were read at
/// and whether the container was among them.
#[derive(Debug, Default)]
pub struct Lasting {
    by_pid: HashMap<u32, LastingParts>,
    refresh: u64,
    /// RSS and CPU time are read through the processes' files kept open.
    changing: hypomnesis::sampling::ContextReader,
}

#[derive(Debug)]
struct LastingParts {
    read_at: u64,
    with_container: bool,
    ctx: Context,
}

impl Lasting {
    /// The contexts of `wanted` (listed pid → pid to read): fresh RSS and CPU time, the lasting
    /// parts as kept when they are, read now when not (or when `containers` is asked and they
    /// were kept without). Processes not in `listed` are forgotten.
    pub fn read(
        &mut self,
        wanted: BTreeMap<u32, u32>,
        containers: bool,
        listed: impl Fn(u32) -> bool,
    ) -> BTreeMap<u32, Context> {
        self.refresh += 1;
        let refresh = self.refresh;
        self.by_pid.retain(|&pid, _| listed(pid));
        // Those kept (listed pid, pid to read, in order), those of them whose owner and command
        // line are due to be read again, and those to read whole.
        let mut known: Vec<(u32, u32)> = Vec::with_capacity(wanted.len());
        let mut relook: Vec<(u32, u32)> = Vec::new();
        let mut new = BTreeMap::new();
        for (pid, read) in wanted {
            match self.by_pid.get(&pid) {
                Some(k) if k.with_container || !containers => {
                    known.push((pid, read));
                    if refresh.saturating_sub(k.read_at) >= RELOOK {
                        relook.push((pid, read));
                    }
                }
                _ => {
                    new.insert(pid, read);
                }
            }
        }
        let mut whole = ContextParts::ALL;
        whole.container = containers;
        // Nothing new: no call, which would read the user database for no process.
        let mut out: BTreeMap<u32, Context> = if new.is_empty() {
            BTreeMap::new()
        } else {
            let mut read = contexts::read(new.clone(), whole);
            for (listed, ctx) in &mut read {
                if let Some(&pid) = new.get(listed) {
                    name_for_no_command(ctx, pid);
                }
            }
            read.into_iter().map(|(p, c)| (p, c.into())).collect()
        };
        for (&pid, ctx) in &out {
            self.by_pid.insert(
                pid,
                LastingParts {
                    read_at: refresh,
                    with_container: containers,
                    ctx: ctx.clone(),
                },
            );
        }
        let mut changing = ContextParts::NONE;
        (changing.rss, changing.cpu_time) = (true, true);
        let mut reused = BTreeMap::new();
        let under: Vec<u32> = known.iter().map(|&(_, read)| read).collect();
        let read_now = self.changing.read(&under, changing);
        for (&(pid, read), now) in known.iter().zip(read_now) {
            if let Some(k) = self.by_pid.get(&pid) {
                // Another start time: the pid now names a later process, whose owner, command
                // and container are read afresh.
                if matches!((k.ctx.start_time, now.start_time), (Some(a), Some(b)) if a != b) {
                    reused.insert(pid, read);
                    continue;
                }
                let mut ctx = k.ctx.clone();
                (ctx.rss_bytes, ctx.cpu_time) = (now.rss_bytes, now.cpu_time);
                out.insert(pid, ctx);
            }
        }
        relook.retain(|(pid, _)| !reused.contains_key(pid));
        self.relook(&relook, &mut out);
        if !reused.is_empty() {
            for (pid, ctx) in contexts::read(reused, whole) {
                let ctx = Context::from(ctx);
                self.by_pid.insert(
                    pid,
                    LastingParts {
                        read_at: refresh,
                        with_container: containers,
                        ctx: ctx.clone(),
                    },
                );
                out.insert(pid, ctx);
            }
        }
        out
    }

    /// Reads the owner and command line of `relook` (listed pid, pid to read) again, into what
    /// is kept and into `out` (a retitle, another user); RSS and CPU time were read at this
    /// refresh as for every kept process, and the container stays. A part that cannot be read
    /// now (the process just ended) stays as kept.
    fn relook(&mut self, relook: &[(u32, u32)], out: &mut BTreeMap<u32, Context>) {
        if relook.is_empty() {
            return;
        }
        let under: Vec<u32> = relook.iter().map(|&(_, read)| read).collect();
        let again = hypomnesis::process_contexts_with(&under, RELOOKED);
        for (&(pid, read), mut fresh) in relook.iter().zip(again) {
            name_for_no_command(&mut fresh, read);
            let (Some(k), Some(ctx)) = (self.by_pid.get_mut(&pid), out.get_mut(&pid)) else {
                continue;
            };
            k.read_at = self.refresh;
            renew(&mut k.ctx.user, &mut ctx.user, fresh.user);
            renew(&mut k.ctx.command, &mut ctx.command, fresh.command);
        }
    }
}

/// The parts a relook reads again: those a running process can change.
const RELOOKED: ContextParts = {
    let mut parts = ContextParts::NONE;
    (parts.user, parts.command) = (true, true);
    parts
};

/// A part read again: `fresh`, when read and other than `kept`, replaces it and is shown; a
/// part the same as kept stays shared, one not read (the process just ended) stays as kept.
fn renew(kept: &mut Option<Arc<str>>, shown: &mut Option<Arc<str>>, fresh: Option<String>) {
    if let Some(fresh) = fresh
        && kept.as_deref() != Some(fresh.as_str())
    {
        *kept = Some(Arc::from(fresh));
        shown.clone_from(kept);
    }
}

/// A process with no command line (it cleared its argv) shows and matches its name, whole
/// (the library makes a name cut at 15 bytes whole); `pid` is the pid its files are read under.
fn name_for_no_command(ctx: &mut ProcessContext, pid: u32) {
    if ctx.command.is_none() {
        ctx.command = hypomnesis::process_name(pid);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lasting_parts_are_read_once_then_every_relook_and_rss_every_time() {
        let me = std::process::id();
        let mut l = Lasting::default();
        let wanted = || [(me, me)].into_iter().collect::<BTreeMap<_, _>>();
        let first = l.read(wanted(), false, |_| true);
        let ctx = &first[&me];
        assert!(ctx.command.is_some() && ctx.rss_bytes.is_some() && ctx.cpu_time.is_some());
        // Kept: a changed lasting part is not seen until the relook; RSS and CPU time are read.
        let kept = &mut l.by_pid.get_mut(&me).unwrap().ctx;
        kept.command = Some("kept".into());
        kept.user = Some("kept-user".into());
        for _ in 1..RELOOK {
            let c = l.read(wanted(), false, |_| true);
            assert_eq!(c[&me].command.as_deref(), Some("kept"));
            assert_eq!(c[&me].user.as_deref(), Some("kept-user"));
            assert!(c[&me].rss_bytes.is_some() && c[&me].cpu_time.is_some());
        }
        // The relook reads the owner and the command line again, both kept and shown.
        let again = l.read(wanted(), false, |_| true);
        let truth = hypomnesis::process_contexts_with(&[me], RELOOKED).remove(0);
        assert_eq!(again[&me].command.as_deref(), truth.command.as_deref());
        assert_ne!(again[&me].command.as_deref(), Some("kept"), "read again");
        assert!(again[&me].rss_bytes.is_some() && again[&me].cpu_time.is_some());
        if truth.user.is_some() {
            assert_eq!(again[&me].user.as_deref(), truth.user.as_deref());
        }
        assert_eq!(l.by_pid[&me].ctx.command, again[&me].command);
        assert_eq!(l.by_pid[&me].read_at, RELOOK + 1);
        // Not due again until RELOOK more refreshes.
        l.by_pid.get_mut(&me).unwrap().ctx.command = Some("kept".into());
        let c = l.read(wanted(), false, |_| true);
        assert_eq!(c[&me].command.as_deref(), Some("kept"));
        // Asking for containers reads the lasting parts again, with them.
        l.by_pid.get_mut(&me).unwrap().ctx.command = Some("kept".into());
        let c = l.read(wanted(), true, |_| true);
        assert_ne!(c[&me].command.as_deref(), Some("kept"));
        assert!(l.by_pid[&me].with_container);
        // A process no longer listed is forgotten.
        l.read(BTreeMap::new(), false, |_| false);
        assert!(l.by_pid.is_empty());
    }

    /// A process with no command line (here a zombie, whose memory is gone) shows its name,
    /// when first read and at each relook.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_without_a_command_line_shows_its_name() {
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
        let mut l = Lasting::default();
        let wanted = || [(pid, pid)].into_iter().collect::<BTreeMap<_, _>>();
        assert_eq!(
            l.read(wanted(), false, |_| true)[&pid].command.as_deref(),
            Some("true")
        );
        l.by_pid.get_mut(&pid).unwrap().ctx.command = Some("kept".into());
        for _ in 1..RELOOK {
            l.read(wanted(), false, |_| true);
        }
        let again = l.read(wanted(), false, |_| true);
        child.wait().unwrap();
        assert_eq!(again[&pid].command.as_deref(), Some("true"));
    }
}
