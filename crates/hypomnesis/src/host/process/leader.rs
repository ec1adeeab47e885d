//! Whether a pid names a process: a thread-group leader, whose `Tgid` is its own number.
//!
//! Every thread has a number from the same space as processes, and `/proc/<tid>/` opens for a
//! thread although a listing of `/proc` does not show it; `kill(tid, 0)` succeeds, and
//! `kill(tid, SIGTERM)` ends the whole process the thread belongs to. A GPU driver that still
//! charges a pid whose process has exited, while that number is now a thread of another
//! process, would otherwise have the other process blamed (and killed). So a pid is placed
//! as a process only when this says so: through `pidfd_open(2)` in this system's own procfs
//! (which refuses a thread with `EINVAL`, and costs no file read), else by the `Tgid:` line of
//! its `status`.

use std::path::Path;

/// What a pid is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leader {
    /// A process (a thread-group leader, perhaps a zombie).
    Process,
    /// A thread of another process: not a process of its own.
    Thread,
    /// No process or thread has the number.
    Gone,
    /// It cannot be told (its `status` cannot be read).
    Unknown,
}

/// What `pid` (in `root`'s numbers) is.
pub(crate) fn of(root: &Path, pid: u32) -> Leader {
    #[cfg(target_os = "linux")]
    if root == Path::new("/proc") {
        use super::pidfd::Answer;
        match super::pidfd::leader(pid) {
            Some(Answer::Leader) => return Leader::Process,
            Some(Answer::NoSuch) => return Leader::Gone,
            // The kernel's refusal, confirmed by the status (rare: a thread's number).
            Some(Answer::NotLeader) | None => {}
        }
    }
    by_status(root, pid)
}

/// [`of`] from `<root>/<pid>/status`.
pub(crate) fn by_status(root: &Path, pid: u32) -> Leader {
    let path = root.join(pid.to_string()).join("status");
    match crate::host::file::read_capped(&path, crate::host::file::STATUS) {
        Ok(text) => of_status(&text, pid),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Leader::Gone,
        Err(_) => Leader::Unknown,
    }
}

/// The process `pid` belongs to (its `Tgid:`), from `<root>/<pid>/status`.
pub(crate) fn tgid(root: &Path, pid: u32) -> Option<u32> {
    let path = root.join(pid.to_string()).join("status");
    let text = crate::host::file::read_capped(&path, crate::host::file::STATUS).ok()?;
    crate::host::parse::memory::status_tgid(&text)
}

/// [`of`] from the text of a `status` file read for `pid`.
pub(crate) fn of_status(status: &str, pid: u32) -> Leader {
    match crate::host::parse::memory::status_tgid(status) {
        Some(tgid) if tgid == pid => Leader::Process,
        Some(_) => Leader::Thread,
        None => Leader::Unknown,
    }
}

/// A thread of this (test) process that waits until dropped, and its number: what a driver
/// that still charges an exited process's pid may name once the number is reused.
#[cfg(all(test, target_os = "linux"))]
pub(crate) struct Thread {
    pub(crate) tid: u32,
    stop: Option<std::sync::mpsc::Sender<()>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
impl Thread {
    pub(crate) fn start() -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            // This thread's number, as procfs names it.
            let tid: u32 = std::fs::read_link("/proc/thread-self")
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            tx.send(tid).unwrap();
            let _ = stopped.recv();
        });
        Self {
            tid: rx.recv().unwrap(),
            stop: Some(stop),
            handle: Some(handle),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
impl Drop for Thread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A status that is not there is a number no task has; one that cannot be read is not
    /// known, never "gone" (a process hidden or refused is not one that exited).
    #[test]
    fn a_status_missing_is_gone_and_unreadable_is_unknown() {
        let root = std::env::temp_dir().join(format!("hmn-leader-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("77/status")).unwrap();
        assert_eq!(
            by_status(&root, 77),
            Leader::Unknown,
            "a status not readable"
        );
        assert_eq!(by_status(&root, 78), Leader::Gone);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_status_says_process_or_thread() {
        let status = |tgid: u32, pid: u32| format!("Name:\tpython3\nTgid:\t{tgid}\nPid:\t{pid}\n");
        assert_eq!(of_status(&status(40, 40), 40), Leader::Process);
        assert_eq!(of_status(&status(40, 41), 41), Leader::Thread);
        assert_eq!(of_status("Name:\tx\n", 41), Leader::Unknown);
    }

    /// A real thread of this test process: its `/proc/<tid>` is there, yet it is no process,
    /// by either way of asking; this process is one, and a reaped child's number is gone.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_real_thread_is_not_a_process() {
        let thread = Thread::start();
        let tid = thread.tid;
        let root = Path::new("/proc");
        assert!(root.join(tid.to_string()).is_dir(), "/proc/<tid> opens");
        assert_eq!(of(root, tid), Leader::Thread);
        assert_eq!(by_status(root, tid), Leader::Thread);
        let me = std::process::id();
        assert_eq!(of(root, me), Leader::Process);
        assert_eq!(by_status(root, me), Leader::Process);
        drop(thread);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert_eq!(of(root, gone), Leader::Gone);
        assert_eq!(by_status(root, gone), Leader::Gone);
    }
}
