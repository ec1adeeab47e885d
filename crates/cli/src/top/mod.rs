//! `hmn top`: a live, full-screen view of GPU and RAM memory and who holds it.
//!
//! - `model`: what one refresh shows, made on the sampling thread from the one sampler's frame;
//! - `state`: the view's own state (sort, filter, pause, GPU, help) and the keys;
//! - `draw`: both drawn into a ratatui frame (over the last one, its unchanged table left),
//!   tested through the test backend;
//! - `ui`: the terminal and what it shows, behind the lock both threads take to paint.
//!
//! The sampling thread reads only what the view shows (each GPU's figures, processes and MIG
//! instances; the listed processes' owner, command, RSS and CPU time; the host's RAM) and
//! nothing while paused, and paints each refresh itself; the terminal thread paints when a key
//! changes the view, the terminal is resized, a refresh is late, or a refresh found the view
//! locked and was handed over.

pub mod draw;
mod ghosts;
mod lasting;
pub mod model;
mod paint;
pub mod select;
mod signal;
pub mod state;
mod suspend;
mod term;
#[cfg(test)]
mod tests;
mod ui;
mod wake;

use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::ProcessContext;
use ratatui::crossterm::event::{
    self, DisableMouseCapture, EnableMouseCapture, Event, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::crossterm::execute;
use ratatui::layout::Rect;

use crate::args::{self, RootArgs};
use crate::collect::contexts;
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use draw::Late;
use hypomnesis::sampling::{Frame, Sampler, Want};
use model::{Builder, Screen};
use state::{Action, Confirm, ViewState};
use state::{Nav, Pick, Sig};
use ui::{Ui, lock};
use wake::{LateTimer, Wake, Waker};

/// The signals that end `hmn top` (see [`Stop`]), which both threads wake for.
#[cfg(unix)]
const STOP_SIGNALS: &[i32] = &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
#[cfg(not(unix))]
const STOP_SIGNALS: &[i32] = &[];

/// Options of `hmn top`.
#[derive(Debug, Clone, Args)]
pub struct TopArgs {
    /// Time between refreshes (at least 100ms).
    #[arg(long, default_value = "1s", value_parser = args::duration, value_name = "DURATION")]
    pub interval: Duration,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// What the terminal thread tells the sampling thread: stop, pause, and the view (its order,
/// filter and height decide whose contexts a refresh reads).
#[derive(Debug, Default)]
struct Control {
    stop: AtomicBool,
    paused: AtomicBool,
    view: Mutex<(ViewState, usize)>,
    /// Set by the terminal thread when it has given the terminal back.
    restored: AtomicBool,
    /// When the view turns late: set by the thread that drew last, slept on by the terminal
    /// thread.
    late: LateTimer,
}

impl Control {
    fn set_view(&self, state: &ViewState, room: u16) {
        if let Ok(mut v) = self.view.lock() {
            *v = (state.clone(), usize::from(room));
        }
    }
}

/// Puts the terminal back as it was (main screen, cooked mode, cursor shown) when dropped:
/// on return, on error, and when a panic unwinds (the panic hook does it too).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        mouse(false);
        term::give_back();
    }
}

/// Mouse reports on or off (the wheel scrolls, a click selects); best effort: a terminal
/// without them still has the keys.
pub(crate) fn mouse(on: bool) {
    let _ = if on {
        execute!(io::stdout(), EnableMouseCapture)
    } else {
        execute!(io::stdout(), DisableMouseCapture)
    };
}

/// Whether `NO_COLOR` asks for no colour (set and not empty, as no-color.org says).
pub fn colour_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `TERM` when it names a terminal without cursor addressing (`dumb`, as Emacs' shell and some
/// CI consoles set it), where a full-screen view would print its escape sequences as text.
fn dumb_terminal() -> Option<String> {
    let term = std::env::var("TERM").ok()?;
    term.trim().eq_ignore_ascii_case("dumb").then_some(term)
}

pub fn run(args: &TopArgs, err: &mut impl Write) -> io::Result<Outcome> {
    if !io::stdout().is_terminal() {
        writeln!(
            err,
            "hmn top: standard output is not a terminal; for a log of figures use `hmn watch`, \
             for one reading `hmn` or `hmn ps`"
        )?;
        return Ok(Outcome::Code(2));
    }
    if let Some(term) = dumb_terminal() {
        writeln!(
            err,
            "hmn top: this terminal (TERM={term}) cannot move the cursor, which a full-screen view \
             needs; for a log of figures use `hmn watch`, for one reading `hmn` or `hmn ps`"
        )?;
        return Ok(Outcome::Code(2));
    }
    let interval = args.interval.max(Duration::from_millis(100));
    // The sampling thread allocates each refresh's rows: in the one arena, not one of its own.
    crate::heap::one_arena();
    let control = Arc::new(Control::default());
    // One refresh in flight at most: a terminal thread that falls behind skips refreshes
    // rather than queueing them.
    let (tx, rx) = mpsc::sync_channel(1);
    let jobs = suspend::JobControl::install();
    // The terminal thread wakes for the stop signals, the job-control ones, a resize, and a
    // refresh (the sampler wakes it).
    #[cfg(unix)]
    let winch: &[i32] = &[libc::SIGWINCH];
    #[cfg(not(unix))]
    let winch: &[i32] = &[];
    let wake = Wake::new(&[STOP_SIGNALS, jobs.signals(), winch].concat());
    // The terminal is taken before the sampler starts: what the library writes to stderr
    // meanwhile (its debug output) lands on the alternate screen, not in the shell's.
    let terminal = term::take()?;
    let restore = Restore;
    let state = ViewState {
        color: colour_allowed(),
        ..ViewState::default()
    };
    let ui = Arc::new(Mutex::new(Ui::new(terminal, state, Instant::now())));
    let sampling = {
        let (control, ui) = (Arc::clone(&control), Arc::clone(&ui));
        let refreshed = wake.waker();
        std::thread::Builder::new()
            .name("hmn-top-sampler".into())
            .spawn(move || sample_loop(interval, &control, &ui, &tx, &refreshed))?
    };
    let result = show(&ui, restore, interval, &control, &rx, &jobs, &wake);
    control.restored.store(true, Ordering::SeqCst);
    control.stop.store(true, Ordering::SeqCst);
    drop(rx);
    // The sampler may be inside a driver call that does not return: it is not waited for.
    drop(sampling);
    result.map(|signal| signal.map_or(Outcome::Success, Outcome::stopped_by))
}

/// One refresh: what it shows, and when its measurement began (how old its figures are).
pub struct Refresh {
    screen: Screen,
    taken: Instant,
}

/// When the view last had figures or began to expect them, to tell a late refresh.
pub struct Freshness {
    /// When the figures shown were measured; `None` before the first refresh.
    taken: Option<Instant>,
    /// Since when a refresh is expected: the start, or the end of a pause.
    expected_since: Instant,
}

impl Freshness {
    fn new(now: Instant) -> Self {
        Self {
            taken: None,
            expected_since: now,
        }
    }

    /// When a refresh every `interval` turns late: one interval missed and at least a second
    /// more after the figures shown were measured (or the view began to expect them).
    fn late_at(&self, interval: Duration) -> Instant {
        let since = self
            .taken
            .map_or(self.expected_since, |t| t.max(self.expected_since));
        since + interval + interval.max(Duration::from_secs(1))
    }

    /// Whether, at `now`, a refresh every `interval` is overdue: one interval missed and at
    /// least a second more (a slow measurement is not yet a late one). Never while paused.
    fn late(&self, now: Instant, interval: Duration, paused: bool) -> Option<Late> {
        if paused || now < self.late_at(interval) {
            return None;
        }
        let whole = |d: Duration| Duration::from_secs(d.as_secs());
        Some(Late {
            age: self.taken.map(|t| whole(now.saturating_duration_since(t))),
            waited: whole(now.saturating_duration_since(self.expected_since)),
            on: hypomnesis::in_flight().first().map(ToString::to_string),
        })
    }
}

/// The terminal thread: reads keys, and draws for them, for a resize, job control, a late
/// refresh and a refresh the sampling thread could not draw (it found the view locked), until
/// quit (`None`) or a stop signal (its number). The terminal is given back when `restore`
/// drops, at the end, after the view is closed to the sampling thread.
fn show(
    ui: &Mutex<Ui>,
    restore: Restore,
    interval: Duration,
    control: &Control,
    rx: &Receiver<Refresh>,
    jobs: &suspend::JobControl,
    wake: &Wake,
) -> io::Result<Option<i32>> {
    let _restore = restore;
    let stop = Stop::on_signals();
    let result = terminal_loop(ui, interval, control, rx, jobs, wake, &stop);
    lock(ui).close();
    // A terminal that hung up ends the view as its SIGHUP would (which may be on its way).
    result.map(|ended| match ended {
        Ended::Asked => stop.signal(),
        Ended::HungUp => Some(stop.signal().unwrap_or(SIGHUP)),
    })
}

/// SIGHUP's number (1 wherever there are signals), for a terminal that hung up.
const SIGHUP: i32 = 1;

/// How the terminal thread's loop ended.
enum Ended {
    /// Quit from the keyboard, or a stop signal.
    Asked,
    /// The terminal hung up.
    HungUp,
}

fn terminal_loop(
    ui: &Mutex<Ui>,
    interval: Duration,
    control: &Control,
    rx: &Receiver<Refresh>,
    jobs: &suspend::JobControl,
    wake: &Wake,
    stop: &Stop,
) -> io::Result<Ended> {
    {
        let mut ui = lock(ui);
        let ui = &mut *ui;
        // Under the lock: the sampling thread may be painting, and escape sequences written
        // from two threads at once could be cut into each other.
        mouse(true);
        // Frames are painted by `paint`, not `Terminal::draw`.
        ui.painter.take_over(&mut ui.terminal)?;
        ui.height = ui.terminal.size().map_or(50, |s| s.height);
        control.set_view(&ui.state, ui.height);
    }
    // An event was read: another may be waiting in crossterm's queue, so look before sleeping.
    let mut pending = false;
    while !stop.requested() {
        let timeout = {
            let mut ui = lock(ui);
            let ui = &mut *ui;
            if back_from_job_control(jobs, &mut ui.terminal)? {
                (ui.fresh.expected_since, ui.dirty) = (Instant::now(), true);
                ui.painter.forget();
                control.set_view(&ui.state, ui.height);
            }
            if let Some(r) = rx.try_iter().last()
                && ui.take(r, interval)
            {
                control.set_view(&ui.state, ui.height);
            }
            ui.paint(interval, &control.late)?;
            ui.wait(interval)
        };
        if !pending {
            wake.wait_terminal(timeout, &control.late)?;
        }
        if wake::terminal_gone() {
            return Ok(Ended::HungUp);
        }
        pending = event::poll(Duration::ZERO)?;
        if !pending {
            continue;
        }
        let event = event::read()?;
        let mut ui = lock(ui);
        let ui = &mut *ui;
        let action = match event {
            Event::Key(key) => ui.state.on_key(key, ui.screen.gpu_count()),
            Event::Mouse(m) => on_mouse(m, &ui.state, ui.table),
            Event::Resize(_, rows) => {
                ui.height = rows;
                ui.painter.resized(&mut ui.terminal)?;
                control.set_view(&ui.state, ui.height);
                ui.dirty = true;
                Action::None
            }
            _ => Action::None,
        };
        match apply(
            action,
            &mut ui.state,
            &ui.screen,
            usize::from(ui.table.height),
        ) {
            After::Quit => break,
            After::Suspend => {
                jobs.suspend(&mut ui.terminal)?;
                (ui.fresh.expected_since, ui.dirty) = (Instant::now(), true);
                ui.painter.forget();
            }
            After::Redraw => {
                if control.paused.swap(ui.state.paused, Ordering::SeqCst) && !ui.state.paused {
                    ui.fresh.expected_since = Instant::now();
                }
                ui.dirty = true;
            }
            After::Nothing => {}
        }
        if !matches!(action, Action::None | Action::Quit) {
            control.set_view(&ui.state, ui.height);
        }
    }
    Ok(Ended::Asked)
}

/// Whether the view has just had the terminal back from job control: suspended here (^Z, a
/// stop signal) and continued, or stopped by a signal nobody can catch (SIGSTOP) and continued,
/// when the shell may have put the terminal back in cooked mode and written over the view.
fn back_from_job_control(
    jobs: &suspend::JobControl,
    terminal: &mut term::Term,
) -> io::Result<bool> {
    if jobs.stop_requested() {
        jobs.suspend(terminal)?;
        Ok(true)
    } else if jobs.continued() {
        suspend::resume(terminal)?;
        Ok(true)
    } else {
        Ok(false)
    }
}

/// How long the terminal thread may sleep when nothing wakes it (a key, a refresh, a signal):
/// until the view would turn late (see [`Freshness::late`]), or a second while it is late (its
/// age is shown in whole seconds); no limit while paused, when it is never late.
fn wait_for(fresh: &Freshness, interval: Duration, paused: bool, now: Instant) -> Option<Duration> {
    if paused {
        return None;
    }
    let left = fresh.late_at(interval).saturating_duration_since(now);
    Some(if left.is_zero() {
        Duration::from_secs(1)
    } else {
        left.max(Duration::from_millis(10))
    })
}

/// What the loop does after a key or a mouse report.
enum After {
    Quit,
    Suspend,
    Redraw,
    Nothing,
}

/// Does what `action` asks of the view's state (`height`: the table's).
fn apply(action: Action, state: &mut ViewState, screen: &Screen, height: usize) -> After {
    match action {
        Action::Quit => return After::Quit,
        Action::Suspend => return After::Suspend,
        Action::None => return After::Nothing,
        // A new order or filter: the selection stays on its process, in view.
        Action::Redraw => state.follow(&screen.procs, height),
        Action::Move(nav) => state.navigate(nav, &screen.procs, height),
        Action::AskSignal => ask_signal(state, screen),
        Action::Send => {
            if let Some(c) = state.confirm.take() {
                state.message = Some(signal::send(c.pick, c.sig));
            }
        }
    }
    After::Redraw
}

/// The wheel moves the selection three rows; a click on a row of the table selects it. Not
/// while the help, the details or a question is shown, nor in the grouped table.
fn on_mouse(m: MouseEvent, state: &ViewState, table: Rect) -> Action {
    if state.help || state.inspect || state.confirm.is_some() || state.group.is_some() {
        return Action::None;
    }
    match m.kind {
        MouseEventKind::ScrollUp => Action::Move(Nav::Up(3)),
        MouseEventKind::ScrollDown => Action::Move(Nav::Down(3)),
        MouseEventKind::Down(MouseButton::Left)
            if m.row > table.y && m.row < table.y.saturating_add(table.height) =>
        {
            Action::Move(Nav::InView(usize::from(m.row - table.y - 1)))
        }
        _ => Action::None,
    }
}

/// `k`: the question about the selected process, or why there is none to ask about.
fn ask_signal(state: &mut ViewState, screen: &Screen) {
    if state.group.is_some() {
        state.message = Some(Err(
            "select a process first: the grouped table has none (G ungroups)".into(),
        ));
        return;
    }
    match state.selected_proc(&screen.procs) {
        // The driver's number of a process in another PID namespace: a local process may
        // have it too, so nothing is offered.
        Some(p) if p.unreadable == Some(hypomnesis::UnreadableReason::OutsidePidNamespace) => {
            state.message = Some(Err(format!(
                "pid {} is outside this PID namespace: the number is the driver's, and hmn \
                 cannot signal that process from here",
                p.pid
            )));
        }
        Some(p) if p.outside => {
            state.message = Some(Err(format!(
                "pid {} cannot be read from here, so hmn does not signal it",
                p.pid
            )));
        }
        Some(p) if p.change != model::Change::Gone => {
            state.confirm = Some(Confirm {
                pick: Pick::of(p),
                command: p.command.as_deref().unwrap_or("?").to_owned(),
                sig: Sig::Term,
            });
        }
        Some(p) => state.message = Some(Err(format!("pid {} has exited", p.pid))),
        None => state.message = Some(Err("no process is selected".into())),
    }
}

/// The sampling thread: a refresh every `interval` (none while paused), until stopped or the
/// terminal thread is gone. It also watches for a stop signal the terminal thread cannot see:
/// when the terminal hangs up (its window closed, tmux killed), reading keys may never return,
/// so after a signal the terminal thread gets half a second to end before this thread gives
/// the terminal back (as far as it still can) and ends the process.
/// Rows from which a refresh hands the allocator's free pages back after it: one of 2,000
/// processes frees about 200 KB that the heap would otherwise keep between refreshes (the
/// rows' list before, the driver's lists), where one of a few dozen frees a few pages, not
/// worth the trim's walk of the heap at every refresh.
const GIVE_BACK_ROWS: usize = 256;

fn sample_loop(
    interval: Duration,
    control: &Control,
    ui: &Mutex<Ui>,
    tx: &SyncSender<Refresh>,
    refreshed: &Waker,
) {
    let signals = Stop::on_signals();
    let wake = Wake::new(STOP_SIGNALS);
    let mut want = Want::NONE;
    (want.devices, want.processes, want.unnamed) = (true, true, true);
    (want.mig, want.utilization) = (true, true);
    let sampler = Sampler::new(want);
    let mut builder = Builder::default();
    let mut lasting = lasting::Lasting::default();
    let mut ghosts = ghosts::GhostLook::default();
    let mut next = Instant::now();
    // Without a GPU the table lists the host's processes by RSS (Linux): the sampler follows
    // every pid, from the refresh after the one that found no GPU.
    let mut host_mode = false;
    while !control.stop.load(Ordering::SeqCst) {
        if !control.paused.load(Ordering::SeqCst) {
            let taken = Instant::now();
            let pids = if host_mode { host_pids() } else { Vec::new() };
            let frame = sampler.frame(&pids);
            host_mode = !matches!(frame.count, Ok(n) if n > 0);
            let view = control.view.lock().map(|v| v.clone()).unwrap_or_default();
            let mut screen = builder.screen(
                &frame,
                |procs| {
                    contexts(
                        &mut lasting,
                        &frame,
                        &view.0.wanted(procs, view.1),
                        view.0.wants_containers(),
                    )
                },
                hypomnesis::host_memory().map_err(|e| e.to_string()),
                &own_context(),
                view.0.selected.map(|s| s.pid),
            );
            screen.ghosts = ghosts.refresh(&frame);
            let many = screen.procs.len() >= GIVE_BACK_ROWS;
            let refresh = Refresh { screen, taken };
            // Drawn here when the view is free; else handed to the terminal thread, which has
            // it (a key, a resize) and draws it when done.
            let wake_terminal = match ui.try_lock() {
                Ok(mut ui) => draw_refresh(&mut ui, refresh, interval, control),
                Err(TryLockError::Poisoned(p)) => {
                    draw_refresh(&mut p.into_inner(), refresh, interval, control)
                }
                Err(TryLockError::WouldBlock) => match tx.try_send(refresh) {
                    Ok(()) => true,
                    Err(TrySendError::Full(_)) => false,
                    Err(TrySendError::Disconnected(_)) => return,
                },
            };
            if wake_terminal {
                refreshed.wake();
            }
            if many {
                crate::heap::give_back();
            }
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
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // A stop signal ends the sleep (see `end_after_signal`).
            wake.sleep(left);
        }
    }
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
) -> BTreeMap<u32, lasting::Context> {
    let wanted: std::collections::BTreeSet<u32> = pids.iter().copied().collect();
    let rows = frame
        .devices
        .iter()
        .flat_map(|d| d.processes().unwrap_or_default());
    let mut read = contexts::readable(rows);
    read.extend(frame.rss.keys().map(|&p| (p, p)));
    let listed: std::collections::BTreeSet<u32> = read.keys().copied().collect();
    read.retain(|p, _| wanted.contains(p));
    lasting.read(read, containers, |pid| listed.contains(&pid))
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

impl Screen {
    /// Before the first refresh.
    pub fn waiting() -> Self {
        Self {
            gpus: Err("reading the GPUs…".into()),
            ram: Err("reading…".into()),
            me: model::Footprint::default(),
            procs: std::sync::Arc::default(),
            focus: None,
            ghosts: None,
        }
    }

    /// How many GPUs there are to pick from.
    pub fn gpu_count(&self) -> u32 {
        self.gpus
            .as_ref()
            .map_or(0, |g| u32::try_from(g.len()).unwrap_or(u32::MAX))
    }
}
