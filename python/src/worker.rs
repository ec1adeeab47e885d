//! `Worker`: a Python read that may block (a framework's memory call, the driver's figures for
//! a ledger) made on the library's bounded worker ([`hypomnesis::bounded::Worker`]) and waited
//! for at most the caller's deadline. A read still running when the next is asked answers that
//! one too: a blocked read holds one thread, never one per call, and a caller that stopped
//! waiting for it marks it overdue, so the next caller does not wait for it again.
//!
//! The worker's thread is not one of Python's: once the interpreter starts finalizing, a thread
//! of ours that takes the GIL is ended by the interpreter (before Python 3.14, through
//! `pthread_exit`, whose unwinding through Rust frames can crash the process at exit). So a
//! read enters Python through [`crate::exit::enter`]: none enters once `atexit` has said the
//! interpreter is exiting, and the one already inside is given a bounded time to come out.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::exit::{self, outside};

/// How long one wait for an answer lasts before signals are looked at.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// The reads asked of one worker, by number.
#[derive(Default)]
struct Reads {
    /// The number of the latest read asked for.
    asked: u64,
    /// The number of the latest read finished; its answer is `answer`.
    done: u64,
    answer: Option<PyResult<Py<PyAny>>>,
    /// The number of the latest read a caller stopped waiting for.
    missed: u64,
}

type Shared = Arc<(Mutex<Reads>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, Reads> {
    shared.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes `read` unless the interpreter is exiting: no read starts in Python then.
fn make(read: &Py<PyAny>) -> PyResult<Py<PyAny>> {
    let Some(_inside) = exit::enter() else {
        return Err(PyRuntimeError::new_err(
            "not read: the interpreter is exiting",
        ));
    };
    Python::attach(|py| read.call0(py))
}

/// Makes one kind of read, one at a time, when asked, on a thread kept for the process's life
/// (a new one after `fork()`).
#[pyclass(module = "hypomnesis._native", name = "Worker", frozen)]
pub struct PyWorker {
    worker: hypomnesis::bounded::Worker,
    reads: Shared,
}

#[pymethods]
impl PyWorker {
    #[new]
    fn new(name: &str) -> Self {
        Self {
            worker: hypomnesis::bounded::Worker::new(&format!("read-{name}")),
            reads: Arc::default(),
        }
    }

    /// Asks for a read made by `fn` (called with no argument, holding the GIL) and returns
    /// the number of the read that will answer: the one running or waiting to, if any (with
    /// its own `fn`), else a new one.
    fn ask(&self, read: Py<PyAny>) -> PyResult<u64> {
        let mut reads = lock(&self.reads);
        if reads.asked > reads.done {
            return Ok(reads.asked);
        }
        let number = reads.done + 1;
        let shared = Arc::clone(&self.reads);
        self.worker
            .start(
                move || make(&read),
                move |out| {
                    let answer = match out {
                        Ok(answer) => answer,
                        Err(why) => Err(PyRuntimeError::new_err(format!(
                            "the read was not made: {why}"
                        ))),
                    };
                    let mut reads = lock(&shared);
                    reads.answer = Some(answer);
                    reads.done = number;
                    shared.1.notify_all();
                },
            )
            .map_err(|why| PyRuntimeError::new_err(format!("cannot ask the read: {why}")))?;
        reads.asked = number;
        Ok(number)
    }

    /// Whether read `number` (or a later one) answered within `timeout` seconds, and its
    /// answer (`None` when it did not; the read's exception is raised here). The wait lets
    /// Ctrl-C through; a read not answered in time is marked overdue.
    fn wait(&self, py: Python<'_>, number: u64, timeout: f64) -> PyResult<(bool, Py<PyAny>)> {
        if timeout.is_nan() {
            return Err(PyValueError::new_err("timeout must be a number of seconds"));
        }
        let give_up = Instant::now() + Duration::from_secs_f64(timeout.clamp(0.0, 86_400.0));
        loop {
            {
                let mut reads = lock(&self.reads);
                if reads.done >= number {
                    return match &reads.answer {
                        Some(Ok(answer)) => Ok((true, answer.clone_ref(py))),
                        Some(Err(e)) => Err(e.clone_ref(py)),
                        None => Ok((true, py.None())),
                    };
                }
                let left = give_up.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    reads.missed = reads.missed.max(number);
                    return Ok((false, py.None()));
                }
            }
            let shared = &self.reads;
            outside(py, || {
                let reads = lock(shared);
                if reads.done < number {
                    let wait = SIGNAL_CHECK.min(give_up.saturating_duration_since(Instant::now()));
                    drop(shared.1.wait_timeout(reads, wait));
                }
            });
            py.check_signals()?;
        }
    }

    /// Whether a caller already stopped waiting for read `number`: it is not waited for again
    /// (a blocked read costs one deadline, not one per caller).
    fn overdue(&self, number: u64) -> bool {
        lock(&self.reads).missed >= number
    }

    /// Seconds the read now running has taken so far; `None` when none runs.
    fn running_for(&self) -> Option<f64> {
        self.worker.busy_for().map(|d| d.as_secs_f64())
    }
}
