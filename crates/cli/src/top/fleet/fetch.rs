//! The thread that asks Prometheus, once per refresh: the fleet's nodes (a few queries whatever
//! its size) and, while a node is open, that node's GPUs, pods and processes (asked of its
//! target alone). Each answer is handed to the terminal thread as the latest; one not yet
//! drawn is replaced, never queued.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hypomnesis_fleet::{Client, Fleet, Node, Nodes, Process, Read, Selector};

use super::super::wake::Waker;

/// One node's own figures.
#[derive(Debug, Clone)]
pub struct Detail {
    /// The node they are of (its name and target).
    pub node: Node,
    /// Its GPUs and MIG instances (with their pods), or why they could not be read.
    pub read: Result<(Fleet, Vec<Process>), String>,
}

/// One refresh's answers.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The nodes, or why they could not be read.
    pub nodes: Result<Nodes, String>,
    /// The open node's own, when one is open.
    pub detail: Option<Detail>,
    /// When it was asked.
    pub at: Instant,
    /// How long it took.
    pub took: Duration,
}

/// What the two threads share.
#[derive(Default)]
pub struct Shared {
    /// The node open in the view, if any.
    open: Mutex<Option<Node>>,
    /// The latest refresh not yet taken by the terminal thread.
    latest: Mutex<Option<Snapshot>>,
    /// Woken to refresh at once (a node opened or closed) or to stop.
    again: Condvar,
    asked: AtomicBool,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// Opens `node` (or goes back to the fleet with `None`), and asks for a refresh at once.
    pub fn open(&self, node: Option<Node>) {
        *lock(&self.open) = node;
        self.asked.store(true, Ordering::SeqCst);
        self.again.notify_all();
    }

    /// The latest refresh, if one came since the last call.
    pub fn take(&self) -> Option<Snapshot> {
        lock(&self.latest).take()
    }

    /// Stops the thread (at its next wait; a query under way finishes within its timeout).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.again.notify_all();
    }
}

/// Unix seconds now.
fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One refresh: the nodes, and the open node's own.
pub fn once(client: &Client, stale_after: Duration, open: Option<Node>) -> Snapshot {
    let started = Instant::now();
    let at = now();
    let nodes = hypomnesis_fleet::read_nodes(client, stale_after, at).map_err(|e| e.to_string());
    let detail = open.map(|node| {
        // A stale node's GPUs are shown as Prometheus last had them (the view says they are
        // old), not left out.
        let how = Read {
            stale_after: if node.stale {
                Duration::from_secs(86_400 * 365)
            } else {
                stale_after
            },
            selector: Selector::default(),
            at,
        };
        let read = hypomnesis_fleet::read_node(client, &how, &node).map_err(|e| e.to_string());
        Detail { node, read }
    });
    Snapshot {
        nodes,
        detail,
        at: started,
        took: started.elapsed(),
    }
}

/// Refreshes every `interval` (at once when asked) until stopped, waking the terminal thread
/// with each answer.
pub fn fetch_loop(
    client: &Client,
    stale_after: Duration,
    interval: Duration,
    shared: &Shared,
    waker: &Waker,
) {
    while !shared.stop.load(Ordering::SeqCst) {
        shared.asked.store(false, Ordering::SeqCst);
        let open = lock(&shared.open).clone();
        let snapshot = once(client, stale_after, open);
        let next = snapshot.at + interval;
        *lock(&shared.latest) = Some(snapshot);
        waker.wake();
        // The answers' text is parsed and dropped: its pages go back to the system.
        crate::heap::give_back();
        let mut open = lock(&shared.open);
        loop {
            if shared.stop.load(Ordering::SeqCst) || shared.asked.load(Ordering::SeqCst) {
                break;
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            open = match shared.again.wait_timeout(open, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}
