//! `hmn top`'s sampling thread: a refresh every interval, measured by the one sampler on the
//! library's bounded worker, made into what the view shows and painted here when the view is
//! free (else handed to the terminal thread); and what the terminal thread tells it
//! ([`Control`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use hypomnesis::ProcessContext;
use hypomnesis::bounded::Worker;
use hypomnesis::sampling::{Frame, Sampler, Want};

use super::ghosts;
use super::lasting;
use super::model::{Builder, Refresh};
use super::state::ViewState;
use super::term;
use super::ui::Ui;
use super::wake::{LateTimer, STOP_SIGNALS, Wake, Waker};
use crate::collect::contexts;
use crate::collect::stop::Stop;

/// What the terminal thread tells the sampling thread: stop, pause, and the view (its order,
/// filter and height decide whose contexts a refresh reads).
#[derive(Debug, Default)]
pub struct Control {
    pub stop: AtomicBool,
    pub paused: AtomicBool,
    pub view: Mutex<(ViewState, usize)>,
    /// Set by the terminal thread when it has given the terminal back.
    pub restored: AtomicBool,
    /// When the view turns late: set by the thread that drew last, slept on by the terminal
    /// thread.
    pub late: LateTimer,
}

impl Control {
    /// The view a refresh reads for (`room`: the terminal's height).
    pub fn set_view(&self, state: &ViewState, room: u16) {
        if let Ok(mut v) = self.view.lock() {
            *v = (state.clone(), usize::from(room));
        }
    }
}

/// Rows from which a refresh hands the allocator's free pages back after it: one of 2,000
/// processes frees about 200 KB that the heap would otherwise keep between refreshes (the
/// rows' list before, the driver's lists), where one of a few dozen frees a few pages, not
/// worth the trim's walk of the heap at every refresh.
const GIVE_BACK_ROWS: usize = 256;

/// What a refresh reads with and keeps between refreshes: the sampler, the screen's builder,
/// the processes' lasting parts and the ghosts' look. Used by one refresh at a time, on the
/// library's bounded worker.
struct Refresher {
    sampler: Sampler,
    builder: Builder,
    lasting: lasting::Lasting,
    ghosts: ghosts::GhostLook,
    /// Without a GPU the table lists the host's processes by RSS (Linux): the sampler follows
    /// every pid, from the refresh after the one that found no GPU.
    host_mode: bool,
}

impl Refresher {
    fn new() -> Self {
        let mut want = Want::NONE;
        (want.devices, want.processes, want.unnamed) = (true, true, true);
        (want.mig, want.utilization) = (true, true);
        Self {
            sampler: Sampler::new(want),
            builder: Builder::default(),
            lasting: lasting::Lasting::default(),
            ghosts: ghosts::GhostLook::default(),
            host_mode: false,
        }
    }

    /// One refresh for `view` (its state and the terminal's height), begun at `taken`.
    fn refresh(&mut self, view: &(ViewState, usize), taken: Instant) -> Refresh {
        let pids = if self.host_mode {
            host_pids()
        } else {
            Vec::new()
        };
        let frame = self.sampler.frame(&pids);
        self.host_mode = !matches!(frame.count, Ok(n) if n > 0);
        let lasting = &mut self.lasting;
        let mut screen = self.builder.screen(
            &frame,
            |procs| {
                contexts(
                    lasting,
                    &frame,
                    &view.0.wanted(procs, view.1),
                    view.0.wants_containers(),
                )
            },
            hypomnesis::host_memory().map_err(|e| e.to_string()),
            &own_context(),
            view.0.selected.map(|s| s.pid),
        );
        screen.ghosts = self.ghosts.refresh(&frame, self.lasting.identities());
        Refresh { screen, taken }
    }
}

/// The sampling thread: a refresh every `interval` (none while paused), until stopped or the
/// terminal thread is gone. Each refresh is made on the library's bounded worker, so that a
/// driver call or a file read that does not return holds that thread only: this one keeps
/// the cadence (no second refresh is asked while one runs; the view marks itself late), draws
/// each refresh as it comes, and watches for a stop signal the terminal thread cannot see:
/// when the terminal hangs up (its window closed, tmux killed), reading keys may never return,
/// so after a signal the terminal thread gets half a second to end before this thread gives
/// the terminal back (as far as it still can) and ends the process.
pub fn sample_loop(
    interval: Duration,
    control: &Control,
    ui: &Mutex<Ui>,
    tx: &SyncSender<Refresh>,
    refreshed: &Waker,
) {
    let signals = Stop::on_signals();
    let wake = Wake::new(STOP_SIGNALS);
    let worker = Worker::new("top-refresh");
    let kept = Arc::new(Mutex::new(Refresher::new()));
    // Each refresh asked comes back on it: `None` for one that panicked.
    let (done, arrived) = mpsc::channel::<Option<Refresh>>();
    // Whether a refresh was asked and has not come back.
    let mut asked = false;
    let mut next = Instant::now();
    while !control.stop.load(Ordering::SeqCst) {
        if !control.paused.load(Ordering::SeqCst) && !asked {
            let view = control.view.lock().map(|v| v.clone()).unwrap_or_default();
            let taken = Instant::now();
            let mine = Arc::clone(&kept);
            let (done, woken) = (done.clone(), wake.waker());
            let job = move || {
                let mut r = mine.lock().unwrap_or_else(PoisonError::into_inner);
                r.refresh(&view, taken)
            };
            asked = worker
                .start(job, move |refresh| {
                    let _ = done.send(refresh.ok());
                    woken.wake();
                })
                .is_ok();
        }
        next += interval;
        let now = Instant::now();
        if next < now {
            next = now + interval;
        }
        while !control.stop.load(Ordering::SeqCst) {
            if signals.requested() {
                end_after_signal(control, &signals);
            }
            if asked && let Ok(back) = arrived.try_recv() {
                asked = false;
                if let Some(refresh) = back
                    && !deliver(refresh, interval, control, ui, tx, refreshed)
                {
                    return;
                }
            }
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // A stop signal, or a refresh come back, ends the sleep.
            wake.sleep(left);
        }
    }
}

/// Hands a refresh to the view: drawn here when the view is free, else to the terminal thread,
/// which has it (a key, a resize) and draws it when done. `false` when the terminal thread is
/// gone.
fn deliver(
    refresh: Refresh,
    interval: Duration,
    control: &Control,
    ui: &Mutex<Ui>,
    tx: &SyncSender<Refresh>,
    refreshed: &Waker,
) -> bool {
    let many = refresh.screen.procs.len() >= GIVE_BACK_ROWS;
    let wake_terminal = match ui.try_lock() {
        Ok(mut ui) => draw_refresh(&mut ui, refresh, interval, control),
        Err(TryLockError::Poisoned(p)) => {
            draw_refresh(&mut p.into_inner(), refresh, interval, control)
        }
        Err(TryLockError::WouldBlock) => match tx.try_send(refresh) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => false,
            Err(TrySendError::Disconnected(_)) => return false,
        },
    };
    if wake_terminal {
        refreshed.wake();
    }
    if many {
        crate::heap::give_back();
    }
    true
}

/// The sampling thread's drawing of `refresh`. Whether to wake the terminal thread: a frame
/// that could not be painted (the terminal refused a write) is left marked to paint, for the
/// terminal thread to paint again and end on the error.
fn draw_refresh(ui: &mut Ui, refresh: Refresh, interval: Duration, control: &Control) -> bool {
    if ui.take(refresh, interval) {
        control.set_view(&ui.state, ui.height);
    }
    let failed = ui.paint(interval, &control.late).is_err();
    ui.dirty |= failed;
    failed
}

/// After a stop signal: the terminal thread's half second, then the terminal back and exit
/// with 128 + the signal, as a shell reports a process a signal ended.
fn end_after_signal(control: &Control, signals: &Stop) {
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        if control.restored.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Not `mouse(false)`: the terminal thread that did not end holds the standard output,
    // and a terminal that hung up takes no mouse reports anyway. `give_back` gives up at once
    // on a terminal that is gone.
    term::give_back();
    let code = signals.signal().map_or(1, |s| 128 + s);
    std::process::exit(code);
}

/// Every process of the procfs root in use (Linux; none elsewhere).
fn host_pids() -> Vec<u32> {
    let Ok(roots) = hypomnesis::roots() else {
        return Vec::new();
    };
    if !cfg!(target_os = "linux") {
        return Vec::new();
    }
    std::fs::read_dir(&roots.procfs.path)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The context of each of `pids` the frame lists (see [`contexts::readable`]), and of the
/// host's processes when the frame follows them (no GPU), by listed pid: their lasting parts
/// as `lasting` keeps them.
fn contexts(
    lasting: &mut lasting::Lasting,
    frame: &Frame,
    pids: &[u32],
    containers: bool,
) -> BTreeMap<u32, hypomnesis::sampling::Identity> {
    let wanted: std::collections::BTreeSet<u32> = pids.iter().copied().collect();
    let rows = frame
        .devices
        .iter()
        .flat_map(|d| d.processes().unwrap_or_default());
    let mut read = contexts::readable(rows);
    read.extend(frame.rss.keys().map(|&p| (p, p)));
    let listed: std::collections::BTreeSet<u32> = read.keys().copied().collect();
    read.retain(|p, _| wanted.contains(p));
    lasting.read(&read, containers, |pid| listed.contains(&pid))
}

/// This process's RSS and CPU time, from the library: the RSS from `/proc/self/statm` kept
/// open on Linux (not `stat`, for which the kernel also sums each of this process's threads'
/// CPU times), the CPU time at the clock's resolution, not in `stat`'s 10 ms ticks (which made
/// 0.0% and 1.0% by turns, and a view that changed at every refresh).
fn own_context() -> ProcessContext {
    let mut ctx = ProcessContext::default();
    ctx.rss_bytes = hypomnesis::process_rss().ok();
    ctx.cpu_time = hypomnesis::process_cpu_time().ok();
    ctx
}
