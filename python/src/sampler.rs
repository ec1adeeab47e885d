//! `Sampler`: one tracked block, sampled by the shared thread of `hub.rs`. Its entry and exit
//! samples read RSS at once, and GPU figures read after the edge was reached: asked of the GPU
//! reader directly (one round trip to the library's bounded worker) and waited for at most
//! the deadline, in steps short enough that Ctrl-C (any signal handler) runs at once; without
//! a deadline, read on the calling thread (no hang guard, for hot paths). A reading taken
//! before the edge is never reused: on an H200 a block's 3 GiB `torch.empty` showed in NVML's
//! figure 0.2 ms before the call returned, so a reading a few milliseconds old at the exit
//! missed the whole allocation (docs/h200/).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::exit::outside;
use crate::hub::{self, Hub};
use crate::timeline::{self, Finished, FinishedTimeline, RawSample};

/// How long one wait for a reading lasts before signals are looked at.
const SIGNAL_CHECK: Duration = Duration::from_millis(20);
/// How long an edge looks for its GPU reading without sleeping before it waits for it.
const SPIN: Duration = Duration::from_micros(200);
/// The deadline of the samples between the edges of a block tracked without one (its edges
/// read on the calling thread): the sampling thread still never waits longer for the driver.
const BETWEEN_DEADLINE: Duration = Duration::from_secs(5);
/// Longest interval and deadline accepted, seconds.
const MAX_SECONDS: f64 = 86_400.0;

enum Phase {
    Ready,
    Running {
        hub: Arc<Hub>,
        generation: u64,
        ticket: hub::Ticket,
        start: Instant,
        first: RawSample,
    },
    /// Stopped: the timeline, once put together.
    Done(Option<Box<FinishedTimeline>>),
}

/// Samples this process's RSS and GPU memory on the process's one sampling thread, which never
/// takes the GIL: one sample when started, one every `interval` seconds, one when stopped, the
/// GPU figures waited for at most `deadline` seconds. Runs once.
#[pyclass(module = "hypomnesis._native", frozen)]
pub struct Sampler {
    interval: Duration,
    /// `None`: the edges read on the calling thread.
    deadline: Option<Duration>,
    devices: Vec<u32>,
    phase: Mutex<Phase>,
}

/// `seconds` as a duration, if a finite number above 0 and at most a day.
fn seconds(what: &str, seconds: f64) -> PyResult<Duration> {
    if seconds.is_finite() && seconds > 0.0 && seconds <= MAX_SECONDS {
        Ok(Duration::from_secs_f64(seconds))
    } else {
        Err(PyValueError::new_err(format!(
            "{what} must be a number of seconds above 0 and at most {MAX_SECONDS}, not {seconds}"
        )))
    }
}

impl Sampler {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Phase>> {
        self.phase
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the sampler's state is poisoned"))
    }

    /// An entry or exit sample: RSS now, and GPU readings taken after this call began.
    fn edge(&self, py: Python<'_>, hub: &Hub, start: Instant) -> PyResult<RawSample> {
        // Read with the GIL held: a few microseconds, less than releasing it would cost.
        let rss = hypomnesis::process_rss().map_err(|e| crate::to_py(py, &e))?;
        if self.devices.is_empty() {
            return Ok(hub::edge_sample(start, rss, &[]));
        }
        let figures = match self.deadline {
            None => {
                let devices = &self.devices;
                Some(outside(py, || hub::read_here(devices)))
            }
            Some(deadline) => self.guarded(py, hub, deadline)?,
        };
        let readings: Vec<Option<hub::Reading>> = match figures {
            Some(f) => f
                .into_iter()
                .map(|figures| {
                    Some(hub::Reading {
                        figures,
                        missed: false,
                    })
                })
                .collect(),
            None => vec![None; self.devices.len()],
        };
        Ok(hub::edge_sample(start, rss, &readings))
    }

    /// The GPU figures of the devices, read on the GPU reader after this call, or `None` when
    /// they did not come within `deadline`; signals are looked at every [`SIGNAL_CHECK`].
    fn guarded(
        &self,
        py: Python<'_>,
        hub: &Hub,
        deadline: Duration,
    ) -> PyResult<Option<Vec<hub::GpuFigures>>> {
        let give_up = Instant::now() + deadline;
        let left = || give_up.saturating_duration_since(Instant::now());
        // Handed over once the reader is free (a sample between edges may be reading): at
        // once, with the GIL held, when it is.
        let mut first = Some(hub.start_edge(&self.devices, Duration::ZERO));
        let answer = loop {
            if let Some(Ok(answer)) = first.take() {
                break answer;
            }
            let wait = SIGNAL_CHECK.min(left());
            let devices = &self.devices;
            match outside(py, || hub.start_edge(devices, wait)) {
                Ok(answer) => break answer,
                Err(hypomnesis::bounded::Unanswered::Busy { .. }) if !left().is_zero() => {
                    py.check_signals()?;
                }
                Err(_) => return Ok(None),
            }
        };
        // The answer usually comes within tens of microseconds: looked for without sleeping
        // for a while (the GIL released), which saves the waker's and the scheduler's cost of
        // a parked thread; only then waited for in steps.
        let (mut answer, early) = outside(py, move || {
            let spin_until = Instant::now() + SPIN;
            loop {
                match answer.try_recv() {
                    Ok(figures) => return (answer, Some(figures)),
                    Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() < spin_until => {
                        std::hint::spin_loop();
                    }
                    Err(_) => return (answer, None),
                }
            }
        });
        if let Some(figures) = early {
            return Ok(Some(figures));
        }
        loop {
            let wait = SIGNAL_CHECK.min(left());
            let (got, back) = outside(py, move || (answer.recv_timeout(wait), answer));
            answer = back;
            match got {
                Ok(figures) => return Ok(Some(figures)),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !left().is_zero() => {
                    py.check_signals()?;
                }
                Err(_) => return Ok(None),
            }
        }
    }
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (interval, devices, deadline = Some(5.0)))]
    fn new(interval: f64, devices: Vec<u32>, deadline: Option<f64>) -> PyResult<Self> {
        Ok(Self {
            interval: seconds("interval", interval)?,
            deadline: deadline.map(|d| seconds("deadline", d)).transpose()?,
            devices,
            phase: Mutex::new(Phase::Ready),
        })
    }

    /// Takes the first sample (before returning) and starts sampling on the shared thread.
    fn start(&self, py: Python<'_>) -> PyResult<()> {
        if !matches!(*self.lock()?, Phase::Ready) {
            return Err(PyRuntimeError::new_err(
                "this Sampler was started already (a Sampler runs once)",
            ));
        }
        let (hub, generation) = hub::hub().map_err(|e| {
            PyRuntimeError::new_err(format!("cannot start the sampling thread: {e}"))
        })?;
        let start = Instant::now();
        let first = self.edge(py, &hub, start)?;
        let between = self.deadline.unwrap_or(BETWEEN_DEADLINE);
        let ticket = hub.subscribe(self.interval, between, &self.devices);
        *self.lock()? = Phase::Running {
            hub,
            generation,
            ticket,
            start,
            first,
        };
        Ok(())
    }

    /// Stops sampling, takes the last sample, and returns the figures: `(taken, missed,
    /// rss_peak, own_gpu_peaks, device_used_peaks, entry_sample, exit_sample)`, each peak
    /// `(bytes, seconds)` or `None`, each sample as in [`Sampler::between`], which gives the
    /// samples between them.
    ///
    /// In a child forked while it ran, the samples taken before the fork are out of reach:
    /// the record has the entry sample and the child's exit sample.
    fn stop(&self, py: Python<'_>) -> PyResult<Finished> {
        let running = {
            let mut phase = self.lock()?;
            if !matches!(*phase, Phase::Running { .. }) {
                return Err(PyRuntimeError::new_err(
                    "this Sampler is not running (never started, or stopped already)",
                ));
            }
            std::mem::replace(&mut *phase, Phase::Done(None))
        };
        let Phase::Running {
            hub,
            generation,
            ticket,
            start,
            first,
        } = running
        else {
            return Err(PyRuntimeError::new_err("this Sampler is not running"));
        };
        let between = if generation == hub::generation() {
            hub.unsubscribe(&ticket)
        } else {
            // Forked: the old hub's lock may be held by a thread the child does not have.
            std::mem::forget(hub);
            None
        };
        let (current, _) = hub::hub().map_err(|e| {
            PyRuntimeError::new_err(format!("cannot start the sampling thread: {e}"))
        })?;
        let last = self.edge(py, &current, start)?;
        let (kept, figures) = timeline::finish(start, first, between, last);
        *self.lock()? = Phase::Done(Some(Box::new(kept)));
        Ok(figures)
    }

    /// Once stopped: the samples between the entry and the exit one (which [`Sampler::stop`]
    /// gives), at most 2,046, in time order, each `(seconds, rss_bytes, [own GPU bytes per
    /// device], [device used bytes per device], missed_deadline)`. Made anew at each call.
    fn between(&self) -> PyResult<Vec<RawSample>> {
        match &*self.lock()? {
            Phase::Done(Some(kept)) => Ok(kept.between()),
            _ => Err(PyRuntimeError::new_err(
                "this Sampler has not stopped: its samples come when it stops",
            )),
        }
    }

    /// While running: when the peak so far of this process's GPU memory was sampled (of the
    /// device with the largest peak), else that of its RSS, in seconds since the block
    /// started; `None` before the first GPU or RSS figure, and once stopped.
    fn peak_time(&self) -> PyResult<Option<f64>> {
        let phase = self.lock()?;
        Ok(match &*phase {
            Phase::Running {
                hub,
                generation,
                ticket,
                start,
                first,
            } if *generation == hub::generation() => hub.peak_time(ticket, *start, first),
            _ => None,
        })
    }

    /// Whether the block is being sampled.
    #[getter]
    fn running(&self) -> bool {
        self.phase
            .lock()
            .is_ok_and(|p| matches!(*p, Phase::Running { .. }))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        // Dropped while running (never stopped): the shared thread stops sampling it.
        if let Ok(phase) = self.phase.get_mut()
            && let Phase::Running {
                hub,
                generation,
                ticket,
                ..
            } = phase
            && *generation == hub::generation()
        {
            hub.unsubscribe(ticket);
        }
    }
}

/// Before a fork (`os.register_at_fork`): lets the GPU reader finish its driver call (waiting
/// at most a second, the GIL released) and holds it until after the fork.
#[pyfunction]
pub fn _before_fork(py: Python<'_>) {
    outside(py, || hub::before_fork(Duration::from_secs(1)));
}

/// After a fork, in the parent (`os.register_at_fork`): the GPU reader goes on.
#[pyfunction]
pub fn _after_fork_in_parent() {
    hub::after_fork_in_parent();
}

/// Forgets the sampling threads in a forked child: called by `os.register_at_fork`.
#[pyfunction]
pub fn _after_fork() {
    hub::after_fork();
}
