//! Who each GPU process is, for a loop that measures again and again (`hmn serve`): the
//! library's [`Identities`] reads a process's name, owner and container when it first sees it,
//! and after that only its start time (one `stat` read), which tells the same process from a
//! later one that reuses its pid; a process that ends is forgotten at the next measurement.
//! This is the exporter's form of what it gives: a name per listed pid, and a context shared
//! from one measurement to the next while the process is the same.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hypomnesis::sampling::{Identities, Identity, IdentityParts};
use hypomnesis::{Container, ContextParts, GpuProcessEntry, ProcessContext};

use super::contexts;

/// The context handed out for a process, with the identity parts it was made of (when they
/// are the same objects at the next measurement, so is the context).
#[derive(Debug)]
struct Made {
    user: Option<Arc<str>>,
    container: Option<Arc<Container>>,
    ctx: Arc<ProcessContext>,
}

/// The processes seen at the last measurement, as the library keeps them.
#[derive(Debug, Default)]
pub struct KnownProcesses {
    identities: Identities,
    made: HashMap<u32, Made>,
}

/// One measurement's answer, by listed pid.
#[derive(Debug, Default)]
pub struct Who {
    pub names: BTreeMap<u32, String>,
    pub contexts: BTreeMap<u32, Arc<ProcessContext>>,
}

impl KnownProcesses {
    /// Who the processes are, as kept (a look for ghosts reads their `stat` through the
    /// files kept for them).
    pub fn identities(&mut self) -> &mut Identities {
        &mut self.identities
    }

    /// The names and the owner and container (as `parts` asks) of `rows`' processes (those this
    /// PID namespace can read, see [`contexts::readable`]): kept ones whose start time is
    /// unchanged as they were, the others read now. Processes not in `rows` are forgotten.
    pub fn who(&mut self, rows: &[GpuProcessEntry], parts: ContextParts) -> Who {
        let wanted = contexts::readable(rows);
        let mut asked = IdentityParts::NONE;
        (asked.container, asked.name) = (parts.container, true);
        let read = self
            .identities
            .read(&wanted, asked, |pid| wanted.contains_key(&pid));
        self.made.retain(|pid, _| read.contains_key(pid));
        let mut who = Who::default();
        for (pid, identity) in read {
            if let Some(n) = &identity.name {
                who.names.insert(pid, n.to_string());
            }
            let ctx = self.context(pid, &identity, parts);
            who.contexts.insert(pid, ctx);
        }
        who
    }

    /// The context of `pid`: the one made before when its parts are the same objects, else
    /// made now (owner and container, as `parts` asks).
    fn context(
        &mut self,
        pid: u32,
        identity: &Identity,
        parts: ContextParts,
    ) -> Arc<ProcessContext> {
        let same = |a: &Option<Arc<str>>, b: &Option<Arc<str>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        let same_container = |a: &Option<Arc<Container>>, b: &Option<Arc<Container>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if let Some(m) = self.made.get(&pid)
            && same(&m.user, &identity.user)
            && same_container(&m.container, &identity.container)
        {
            return Arc::clone(&m.ctx);
        }
        let mut ctx = ProcessContext::default();
        if parts.user {
            ctx.user = identity.user.as_deref().map(str::to_owned);
        }
        if parts.container {
            ctx.container = identity.container.as_deref().cloned();
        }
        ctx.start_time = identity.start_time;
        let ctx = Arc::new(ctx);
        self.made.insert(
            pid,
            Made {
                user: identity.user.clone(),
                container: identity.container.clone(),
                ctx: Arc::clone(&ctx),
            },
        );
        ctx
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn row(pid: u32) -> GpuProcessEntry {
        GpuProcessEntry::builder().pid(pid).build()
    }

    fn parts() -> ContextParts {
        let mut p = ContextParts::NONE;
        p.user = true;
        p.container = true;
        p
    }

    #[test]
    fn a_process_is_read_once_its_context_shared_and_forgotten_when_gone() {
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (me, other) = (std::process::id(), sleeper.id());
        // Until the child has become `sleep` (between fork and exec it is this test).
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read(format!("/proc/{other}/cmdline"))
            .map_or(true, |c| c != b"sleep\x0030\x00")
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let rows = [row(me), row(other), row(me)];
        let mut known = KnownProcesses::default();
        let first = known.who(&rows, parts());
        let read = |k: &KnownProcesses| k.identities.last_read_whole();
        assert_eq!(read(&known), 2, "each process once, though listed twice");
        assert_eq!(first.names.get(&other).map(String::as_str), Some("sleep"));
        assert!(first.contexts[&other].user.is_some());
        let again = known.who(&rows, parts());
        assert_eq!(read(&known), 0, "nothing read again");
        assert_eq!(again.names, first.names);
        assert!(Arc::ptr_eq(
            &again.contexts[&other],
            &first.contexts[&other]
        ));
        // Gone from the lists: forgotten.
        known.who(&[row(me)], parts());
        assert_eq!(known.identities.len(), 1);
        assert_eq!(known.made.len(), 1);
        // Gone from the host: no start time, read each time, not remembered.
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        known.who(&[row(other)], parts());
        assert_eq!(read(&known), 1);
        assert_eq!(known.identities.len(), 0);
    }
}
