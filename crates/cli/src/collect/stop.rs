//! The stop requests of hmn's loops: SIGINT, SIGTERM and SIGHUP on Unix (and which one came),
//! Ctrl-C on Windows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Whether a stop was requested, and by which signal.
#[derive(Debug, Clone)]
pub struct Stop(Arc<AtomicUsize>);

impl Stop {
    /// Catches the stop signals from now on (the handlers are installed once per process; every
    /// call shares them).
    pub fn on_signals() -> Self {
        static STOP: OnceLock<Stop> = OnceLock::new();
        STOP.get_or_init(|| {
            let stop = Self::never();
            install(&stop.0);
            stop
        })
        .clone()
    }

    /// A stop that only [`Stop::request`] sets.
    pub fn never() -> Self {
        Self(Arc::new(AtomicUsize::new(0)))
    }

    /// Whether a stop was requested.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst) != 0
    }

    /// The signal that asked for the stop (the last one, when several came).
    pub fn signal(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }

    /// Requests a stop as signal `signal` would.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn request(&self, signal: i32) {
        self.0.store(
            usize::try_from(signal).unwrap_or(1).max(1),
            Ordering::SeqCst,
        );
    }
}

#[cfg(unix)]
fn install(flag: &Arc<AtomicUsize>) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        if let Ok(value) = usize::try_from(signal) {
            // Fails only for signals that cannot be caught, which these are not.
            let _ = signal_hook::flag::register_usize(signal, Arc::clone(flag), value);
        }
    }
}

#[cfg(windows)]
fn install(flag: &Arc<AtomicUsize>) {
    let flag = Arc::clone(flag);
    // A second handler cannot be installed; this is the only one.
    // Ctrl-C stands for SIGINT (2).
    let _ = ctrlc::set_handler(move || flag.store(2, Ordering::SeqCst));
}

#[cfg(not(any(unix, windows)))]
fn install(_flag: &Arc<AtomicUsize>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_says_which_signal() {
        let stop = Stop::never();
        assert!(!stop.requested());
        assert_eq!(stop.signal(), None);
        stop.request(15);
        assert!(stop.requested());
        assert_eq!(stop.signal(), Some(15));
        let shared = stop.clone();
        shared.request(1);
        assert_eq!(stop.signal(), Some(1), "clones share the request");
    }

    #[cfg(unix)]
    #[test]
    #[allow(unsafe_code)]
    fn sighup_to_this_process_is_caught_and_named() {
        let stop = Stop::on_signals();
        // SAFETY: raise sends a signal to this process; the handler above only stores a number.
        assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while stop.signal().is_none() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(stop.signal(), Some(libc::SIGHUP));
        assert_eq!(
            Stop::on_signals().signal(),
            Some(libc::SIGHUP),
            "one set of handlers"
        );
    }
}
