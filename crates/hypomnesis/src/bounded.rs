//! Asking within a deadline: a call that may hang (a driver call into a hung GPU, a read of a
//! process in D state) made on a worker thread, and waited for at most the caller's deadline.
//!
//! A [`Worker`] is one thread, started at the first job and kept for the process's life (a new
//! one in a forked child, whose parent's thread is not there). It runs one job at a time: a job
//! that does not return holds that one thread, never one per call, and every caller behind it
//! is told within its own deadline what it waits on ([`Unanswered`], with the library's
//! operations [`crate::in_flight`]). A job past its caller's deadline runs on; its
//! answer is dropped.
//!
//! ```
//! use std::time::Duration;
//! use hypomnesis::bounded::{Unanswered, Worker};
//!
//! let worker = Worker::new("example");
//! match worker.ask(Duration::from_secs(5), hypomnesis::device_count) {
//!     Ok(Ok(n)) => println!("{n} GPU(s)"),
//!     Ok(Err(e)) => println!("no count: {e}"),
//!     Err(late) => println!("the driver did not answer: {late}"),
//! }
//! ```

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::inflight::{InFlight, in_flight};

/// Why a job asked of a [`Worker`] gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unanswered {
    /// An earlier job, running since `since`, did not return within this caller's deadline:
    /// this job was not started (and will not be).
    Busy {
        /// When the earlier job started.
        since: Instant,
        /// What the library was waiting on when the deadline passed, longest first.
        waiting: Vec<InFlight>,
    },
    /// This job started at `since` and did not return within the deadline; it runs on, and
    /// its answer is dropped.
    Late {
        /// When it started.
        since: Instant,
        /// What the library was waiting on when the deadline passed, longest first.
        waiting: Vec<InFlight>,
    },
    /// The job panicked (the worker goes on with the next).
    Panicked,
    /// The worker's thread could not be started; what the system said.
    NoThread(String),
}

impl Unanswered {
    /// What the library was waiting on when the deadline passed (empty for a panic or a thread
    /// that could not start).
    #[must_use]
    pub fn waiting(&self) -> &[InFlight] {
        match self {
            Self::Busy { waiting, .. } | Self::Late { waiting, .. } => waiting,
            Self::Panicked | Self::NoThread(_) => &[],
        }
    }
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |f: &mut fmt::Formatter<'_>, waiting: &[InFlight]| match waiting.first() {
            Some(op) => write!(f, " (waiting {:.1?} for {op})", op.age()),
            None => Ok(()),
        };
        match self {
            Self::Busy { since, waiting } => {
                write!(
                    f,
                    "an earlier call has not returned after {:.1?}",
                    since.elapsed()
                )?;
                on(f, waiting)
            }
            Self::Late { since, waiting } => {
                write!(f, "no answer after {:.1?}", since.elapsed())?;
                on(f, waiting)
            }
            Self::Panicked => f.write_str("the call panicked"),
            Self::NoThread(why) => write!(f, "no thread to make the call on: {why}"),
        }
    }
}

impl std::error::Error for Unanswered {}

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct State {
    /// When the job now running started; `None` when the worker is idle.
    busy_since: Option<Instant>,
    /// The worker thread's queue, and the process it was started in.
    thread: Option<(u32, Sender<Job>)>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a job returns.
    free: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn done(&self) {
        self.lock().busy_since = None;
        self.free.notify_all();
    }
}

/// One thread that makes calls which may hang, one at a time, each waited for at most its
/// caller's deadline (see the module docs). Cheap to make: its thread starts at the first job.
pub struct Worker {
    name: String,
    shared: Arc<Shared>,
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.name)
            .field("busy_for", &self.busy_for())
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker whose thread (once started) is named `hypomnesis-<name>`.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self {
            name: format!("hypomnesis-{name}"),
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                free: Condvar::new(),
            }),
        }
    }

    /// How long the job now running has run; `None` when the worker is idle.
    #[must_use]
    pub fn busy_for(&self) -> Option<Duration> {
        self.shared.lock().busy_since.map(|s| s.elapsed())
    }

    /// `job`'s answer, made on the worker's thread, if it comes within `deadline` (counted
    /// from now, including any wait for an earlier job to return).
    ///
    /// # Errors
    ///
    /// [`Unanswered`]: an earlier job kept the worker the whole deadline (`Busy`), this job did
    /// not return in time (`Late`; it runs on), it panicked, or no thread could be started.
    pub fn ask<T, F>(&self, deadline: Duration, job: F) -> Result<T, Unanswered>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let asked = Instant::now();
        let (answer, answered) = mpsc::sync_channel(1);
        let shared = Arc::clone(&self.shared);
        let wrapped: Job = Box::new(move || {
            let out = catch_unwind(AssertUnwindSafe(job));
            shared.done();
            if let Ok(out) = out {
                // The caller may have stopped waiting: then the answer is dropped.
                let _ = answer.send(out);
            }
        });
        let since = self.hand_over(asked, deadline, wrapped)?;
        let left = deadline.saturating_sub(asked.elapsed());
        match answered.recv_timeout(left) {
            Ok(out) => Ok(out),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(Unanswered::Panicked),
            Err(mpsc::RecvTimeoutError::Timeout) => Err(Unanswered::Late {
                since,
                waiting: in_flight(),
            }),
        }
    }

    /// Gives `job` to the worker if it is idle, and returns at once: `then` gets the job's
    /// answer (or `Panicked`) on the worker's thread when it returns. For a caller that waits
    /// in its own way (an async task, a timer): [`Self::busy_for`] says how long it has run.
    ///
    /// # Errors
    ///
    /// `Busy` when an earlier job has not returned (this one is not started), `NoThread` when
    /// no thread could be started.
    pub fn start<T, F, G>(&self, job: F, then: G) -> Result<(), Unanswered>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
        G: FnOnce(Result<T, Unanswered>) + Send + 'static,
    {
        self.start_within(Duration::ZERO, job, then)
    }

    /// [`Self::start`], waiting at most `wait` for an earlier job to return first.
    ///
    /// # Errors
    ///
    /// `Busy` when an earlier job has not returned within `wait` (this one is not started),
    /// `NoThread` when no thread could be started.
    pub fn start_within<T, F, G>(&self, wait: Duration, job: F, then: G) -> Result<(), Unanswered>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
        G: FnOnce(Result<T, Unanswered>) + Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        let wrapped: Job = Box::new(move || {
            let out = catch_unwind(AssertUnwindSafe(job));
            shared.done();
            let _ = catch_unwind(AssertUnwindSafe(move || {
                then(out.map_err(|_| Unanswered::Panicked));
            }));
        });
        self.hand_over(Instant::now(), wait, wrapped).map(|_| ())
    }

    /// Waits (until `asked + deadline`) for the worker to be idle, then gives it `job`; when
    /// the job started.
    fn hand_over(
        &self,
        asked: Instant,
        deadline: Duration,
        job: Job,
    ) -> Result<Instant, Unanswered> {
        let mut state = self.shared.lock();
        let pid = std::process::id();
        if state.thread.as_ref().is_some_and(|(p, _)| *p != pid) {
            // Forked: the parent's thread is not in this process, nor is its job.
            *state = State::default();
        }
        while let Some(since) = state.busy_since {
            let left = deadline.saturating_sub(asked.elapsed());
            if left.is_zero() {
                return Err(Unanswered::Busy {
                    since,
                    waiting: in_flight(),
                });
            }
            state = self
                .shared
                .free
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let queue = if let Some((_, queue)) = &state.thread {
            queue.clone()
        } else {
            let (queue, jobs) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name(self.name.clone())
                .spawn(move || {
                    for job in jobs {
                        job();
                    }
                })
                .map_err(|e| Unanswered::NoThread(e.to_string()))?;
            state.thread = Some((pid, queue.clone()));
            queue
        };
        let since = Instant::now();
        state.busy_since = Some(since);
        if queue.send(job).is_err() {
            // The thread is gone (it cannot end while its queue is held, but a platform may
            // have killed it): the next ask starts another.
            *state = State::default();
            return Err(Unanswered::NoThread("the worker thread ended".into()));
        }
        Ok(since)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn answers_in_order_on_one_thread() {
        let w = Worker::new("test-order");
        let first = w.ask(LONG, || std::thread::current().id()).unwrap();
        for i in 0..50 {
            assert_eq!(w.ask(LONG, move || i * 2).unwrap(), i * 2);
            assert_eq!(w.ask(LONG, || std::thread::current().id()).unwrap(), first);
        }
        assert_ne!(first, std::thread::current().id());
        assert_eq!(w.busy_for(), None);
    }

    /// A job that hangs holds the one thread: callers behind it are told within their own
    /// deadline, and no second thread is started for them.
    #[test]
    fn a_hung_job_holds_one_thread_and_callers_are_told() {
        let w = Worker::new("test-hang");
        let (release, hold) = mpsc::channel::<()>();
        let started = Arc::new(AtomicUsize::new(0));
        let s = Arc::clone(&started);
        let t = Instant::now();
        let late = w
            .ask(Duration::from_millis(50), move || {
                s.fetch_add(1, Ordering::SeqCst);
                let _ = hold.recv();
            })
            .unwrap_err();
        assert!(matches!(late, Unanswered::Late { .. }), "{late:?}");
        assert!(t.elapsed() < Duration::from_secs(2));
        for _ in 0..5 {
            let s = Arc::clone(&started);
            let t = Instant::now();
            let busy = w
                .ask(Duration::from_millis(20), move || {
                    s.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap_err();
            assert!(matches!(busy, Unanswered::Busy { .. }), "{busy:?}");
            assert!(
                busy.to_string()
                    .starts_with("an earlier call has not returned")
            );
            assert!(t.elapsed() >= Duration::from_millis(20));
            assert!(t.elapsed() < Duration::from_secs(2));
        }
        assert!(w.busy_for().is_some());
        assert_eq!(
            started.load(Ordering::SeqCst),
            1,
            "the jobs behind were never started"
        );
        release.send(()).unwrap();
        // Once it returns, the worker answers again.
        assert_eq!(w.ask(LONG, || 7).unwrap(), 7);
    }

    /// A caller behind a slow (not hung) job waits for it within its deadline, then is answered.
    #[test]
    fn a_caller_behind_a_slow_job_waits_for_it() {
        let w = Arc::new(Worker::new("test-slow"));
        let w2 = Arc::clone(&w);
        let slow = std::thread::spawn(move || {
            w2.ask(LONG, || std::thread::sleep(Duration::from_millis(100)))
        });
        while w.busy_for().is_none() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(w.ask(LONG, || "after").unwrap(), "after");
        slow.join().unwrap().unwrap();
    }

    #[test]
    fn start_returns_at_once_and_hands_the_answer_over() {
        let w = Worker::new("test-start");
        let (tx, rx) = mpsc::channel();
        let (release, hold) = mpsc::channel::<()>();
        w.start(
            move || {
                let _ = hold.recv();
                41 + 1
            },
            move |answer| tx.send(answer).unwrap(),
        )
        .unwrap();
        // Busy: a second start is refused, not queued.
        let refused = w.start(|| 0, |_| panic!("never started"));
        assert!(
            matches!(refused, Err(Unanswered::Busy { .. })),
            "{refused:?}"
        );
        release.send(()).unwrap();
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(42));
        let (tx, rx) = mpsc::channel();
        while w
            .start(|| -> u8 { panic!("boom") }, {
                let tx = tx.clone();
                move |a| tx.send(a).unwrap()
            })
            .is_err()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Err(Unanswered::Panicked));
    }

    #[test]
    fn a_panic_is_said_and_the_worker_goes_on() {
        let w = Worker::new("test-panic");
        let e = w.ask(LONG, || -> u8 { panic!("boom") }).unwrap_err();
        assert_eq!(e, Unanswered::Panicked);
        assert_eq!(w.ask(LONG, || 3).unwrap(), 3);
    }
}
