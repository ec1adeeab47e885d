//! Leaving the GIL safely when the interpreter may be exiting.
//!
//! A Python thread that released the GIL inside this module (a read, a wait) takes it back
//! when it returns. If the interpreter has started finalizing by then, Python before 3.14
//! ends that thread with `pthread_exit`, whose forced unwinding through this module's Rust
//! frames crashes the process (SIGSEGV or SIGABRT at exit). A daemon thread that reads
//! memory while the main thread ends — `track(ledger=True)`'s reading thread, a user's
//! monitor — does exactly that.
//!
//! So every release of the GIL here goes through [`outside`]: once [`_exiting`] has run
//! (`_bounded.py` registers it with `atexit`, which runs after the non-daemon threads were
//! joined and before finalizing), a thread other than the exiting one that comes back from
//! its work stays parked instead of taking the GIL again: what Python 3.14 does to daemon
//! threads at exit. The process is ending; its result was for no one.
//!
//! A thread of ours (a [`crate::worker`]'s) that calls into Python is the same hazard the other
//! way: it enters through [`enter`], which lets none in once exiting, and [`_exiting`] waits a
//! bounded time for those inside to come out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Set at `atexit`: no thread but the exiting one takes the GIL back from here on.
static EXITING: AtomicBool = AtomicBool::new(false);

/// The thread that ran `atexit` (the one finalizing the interpreter).
static EXITER: OnceLock<ThreadId> = OnceLock::new();

/// How many of our threads are in Python now ([`enter`]), and their way to say they left.
static INSIDE: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// How long [`_exiting`] releases the GIL at least, so a thread that came back just before the
/// flag was set (waiting for the GIL) gets it while the interpreter is still whole.
const DRAIN: Duration = Duration::from_millis(5);

fn inside() -> MutexGuard<'static, usize> {
    INSIDE.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One of our threads in Python: counted from [`enter`] until dropped.
pub struct InPython(());

impl Drop for InPython {
    fn drop(&mut self) {
        let mut n = inside();
        *n = n.saturating_sub(1);
        INSIDE.1.notify_all();
    }
}

/// Lets a thread of ours into Python (to be held while it is there), unless the interpreter
/// is exiting: `None` then.
pub fn enter() -> Option<InPython> {
    let mut n = inside();
    if exiting() {
        return None;
    }
    *n += 1;
    Some(InPython(()))
}

/// Whether the interpreter is exiting (`atexit` has run [`_exiting`]).
pub fn exiting() -> bool {
    EXITING.load(Ordering::Acquire)
}

/// Parks this thread for good if the interpreter is exiting and it is not the exiting thread.
fn stay_if_exiting() {
    if exiting() && EXITER.get() != Some(&thread::current().id()) {
        loop {
            thread::park();
        }
    }
}

/// Runs `f` with the GIL released, and takes the GIL back only if the interpreter is not
/// exiting (see the module's documentation). Every release of the GIL in this module.
pub fn outside<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> T {
    py.detach(|| {
        let out = f();
        stay_if_exiting();
        out
    })
}

/// Says the interpreter is exiting (from `atexit`, by the thread that exits): from now on no
/// thread of ours enters Python, and another thread that comes back from this module's work
/// with the GIL released stays parked; this one goes on. Waits, the GIL released, at most
/// `timeout` seconds for our threads still in Python to come out (and at least a moment, so a
/// thread already waiting for the GIL gets it first): whether none is in Python now.
#[pyfunction]
pub fn _exiting(py: Python<'_>, timeout: f64) -> bool {
    let _ = EXITER.set(thread::current().id());
    let start = Instant::now();
    let secs = if timeout.is_nan() {
        0.0
    } else {
        timeout.clamp(0.0, 60.0)
    };
    let give_up = start + Duration::from_secs_f64(secs);
    {
        // Set holding the count's lock: a thread that enters later sees it.
        let _count = inside();
        EXITING.store(true, Ordering::Release);
    }
    py.detach(move || {
        let mut n = inside();
        while *n > 0 {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            n = match INSIDE.1.wait_timeout(n, left) {
                Ok((n, _)) => n,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        drop(n);
        thread::sleep(DRAIN.saturating_sub(start.elapsed()));
        true
    })
}
