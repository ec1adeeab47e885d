//! Who each GPU process is, read once per process lifetime: a loop that measures again and
//! again (`hmn serve`) reads a process's name, owner and container when it first sees it, and
//! after that only its start time (one `stat` read), which tells the same process from a later
//! one that reuses its pid. A process that ends is forgotten at the next measurement.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use hypomnesis::{ContextParts, GpuProcessEntry, ProcessContext};

use super::contexts;

/// What is remembered of one process.
#[derive(Debug, Clone)]
struct Entry {
    start: u64,
    name: Option<String>,
    /// Shared with the answers that hold it (one copy per process, not one per measurement).
    ctx: Arc<ProcessContext>,
}

/// The processes seen at the last measurement, by the pid their files are read under.
#[derive(Debug, Default)]
pub struct KnownProcesses {
    by_pid: HashMap<u32, Entry>,
}

/// One measurement's answer, by listed pid.
#[derive(Debug, Default)]
pub struct Who {
    pub names: BTreeMap<u32, String>,
    pub contexts: BTreeMap<u32, Arc<ProcessContext>>,
    /// How many processes were read afresh (new, a reused pid, or no start time).
    pub read: usize,
}

impl KnownProcesses {
    /// The names and `parts` of the contexts of `rows`' processes (those this PID namespace can
    /// read, see [`contexts::readable`]): remembered ones whose start time is unchanged as they
    /// were, the others read now. Processes not in `rows` are forgotten.
    pub fn who(&mut self, rows: &[GpuProcessEntry], parts: ContextParts) -> Who {
        let wanted = contexts::readable(rows);
        let mut who = Who::default();
        let mut fresh: Vec<(u32, u32, Option<u64>)> = Vec::new();
        let mut seen: HashMap<u32, Entry> = HashMap::with_capacity(wanted.len());
        for (&listed, &read) in &wanted {
            let start = hypomnesis::process_start_time(read);
            match (start, self.by_pid.remove(&read)) {
                (Some(s), Some(e)) if e.start == s => {
                    who.answer(listed, &e);
                    seen.insert(read, e);
                }
                _ => fresh.push((listed, read, start)),
            }
        }
        let pids: Vec<u32> = fresh.iter().map(|&(_, read, _)| read).collect();
        let read_now = hypomnesis::process_contexts_with(&pids, parts);
        who.read = fresh.len();
        for ((listed, read, start), ctx) in fresh.into_iter().zip(read_now) {
            let e = Entry {
                start: start.unwrap_or_default(),
                name: hypomnesis::process_name(read),
                ctx: Arc::new(ctx),
            };
            who.answer(listed, &e);
            // Without a start time (exited meanwhile, or not Linux) nothing can tell a reused
            // pid: such a process is read again next time.
            if start.is_some() {
                seen.insert(read, e);
            }
        }
        self.by_pid = seen;
        who
    }

    /// How many processes are remembered.
    #[cfg(all(test, target_os = "linux"))]
    fn len(&self) -> usize {
        self.by_pid.len()
    }
}

impl Who {
    fn answer(&mut self, listed: u32, e: &Entry) {
        if let Some(n) = &e.name {
            self.names.insert(listed, n.clone());
        }
        self.contexts.insert(listed, Arc::clone(&e.ctx));
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
        p.command = true;
        p
    }

    #[test]
    fn a_process_is_read_once_until_its_pid_is_reused_and_forgotten_when_gone() {
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
        assert_eq!(first.read, 2, "each process once, though listed twice");
        assert_eq!(first.names.get(&other).map(String::as_str), Some("sleep"));
        assert!(
            first.contexts[&other]
                .command
                .as_deref()
                .is_some_and(|c| c == "sleep 30")
        );
        let again = known.who(&rows, parts());
        assert_eq!(again.read, 0, "nothing read again");
        assert_eq!(again.names, first.names);
        assert_eq!(again.contexts, first.contexts);
        // Another process under the same pid: a different start time, read again.
        known.by_pid.get_mut(&other).unwrap().start += 1;
        assert_eq!(known.who(&rows, parts()).read, 1);
        // Gone from the lists: forgotten.
        known.who(&[row(me)], parts());
        assert_eq!(known.len(), 1);
        // Gone from the host: no start time, read each time, not remembered.
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let gone = known.who(&[row(other)], parts());
        assert_eq!(gone.read, 1);
        assert_eq!(known.len(), 0);
    }
}
