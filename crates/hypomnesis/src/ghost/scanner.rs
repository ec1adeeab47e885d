//! The scan of every process's descriptors for a caller that looks again and again (an
//! exporter's scrapes, `hmn top`): it runs on a thread of its own, one at a time, and a look
//! uses the latest one that finished, never waiting for it. A look asks for a new one when the
//! latest started before what it must explain was first seen (a holder that appeared after a
//! scan is not in it, so that scan proves nothing about it) or is older than [`MAX_AGE`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::holders::{Majors, Scanned, scan};

/// A scan older than this is made again when a look needs one.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(60);

/// The latest scan and the one running, shared with the scanning thread.
#[derive(Debug, Default)]
struct Shared {
    latest: Option<Arc<Scanned>>,
    /// When the scan running now started.
    running: Option<Instant>,
}

/// Scans in the background; clones share the scans.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scanner(Arc<Mutex<Shared>>);

/// What a look gets from the scanner.
#[derive(Debug, Clone)]
pub(crate) enum Latest {
    /// A scan that started at or after the time asked for.
    Fresh(Arc<Scanned>),
    /// None such yet: one runs (since when), or could not be started (why).
    Pending(String),
}

impl Scanner {
    /// The latest scan of `procfs` if it started at or after `since`; else a new one is
    /// started (unless one runs) and the look is told to come back.
    pub(crate) fn latest(
        &self,
        procfs: &std::path::Path,
        majors: Majors,
        since: Instant,
        deadline: Duration,
    ) -> Latest {
        let mut shared = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if let Some(s) = &shared.latest
            && s.started >= since
            && now.saturating_duration_since(s.started) < MAX_AGE
        {
            return Latest::Fresh(Arc::clone(s));
        }
        if let Some(started) = shared.running {
            return Latest::Pending(format!(
                "the scan of descriptors is running (started {:.1}s ago)",
                now.saturating_duration_since(started).as_secs_f64()
            ));
        }
        let procfs: PathBuf = procfs.to_path_buf();
        let back = Arc::clone(&self.0);
        let spawned = std::thread::Builder::new()
            .name("hmn-ghost-scan".into())
            .spawn(move || {
                let scanned = scan(&procfs, majors, Instant::now() + deadline);
                let mut shared = back.lock().unwrap_or_else(PoisonError::into_inner);
                shared.latest = Some(Arc::new(scanned));
                shared.running = None;
            });
        match spawned {
            Ok(_) => {
                shared.running = Some(now);
                Latest::Pending("the scan of descriptors has started; the next look uses it".into())
            }
            Err(e) => Latest::Pending(format!("the scan of descriptors could not be started: {e}")),
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A first look starts a scan and does not wait; a later one gets it; asking for one newer
    /// than the latest starts another.
    #[test]
    fn a_look_never_waits_and_a_later_one_gets_the_scan() {
        let s = Scanner::default();
        let procfs = std::path::Path::new("/proc");
        let majors = Majors {
            gpu: Some(1),
            uvm: None,
        };
        let asked = Instant::now();
        let first = s.latest(procfs, majors, asked, Duration::from_secs(60));
        assert!(matches!(first, Latest::Pending(ref w) if w.contains("started")));
        let t = Instant::now();
        let got = loop {
            if let Latest::Fresh(scan) = s.latest(procfs, majors, asked, Duration::from_secs(60)) {
                break scan;
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the scan never ended"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(got.stats.complete && got.started >= asked);
        let later = Instant::now();
        assert!(matches!(
            s.latest(procfs, majors, later, Duration::from_secs(60)),
            Latest::Pending(_)
        ));
    }
}
