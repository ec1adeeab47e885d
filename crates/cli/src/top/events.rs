//! `hmn top`'s terminal thread: its loop reads keys, mouse reports and resizes and does what
//! they ask of the view, and draws for them, for job control, for a late refresh and for a
//! refresh the sampling thread could not draw.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{Event, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;

use super::input::Input;
use super::model::{self, Refresh, Screen};
use super::sampling::Control;
use super::signal;
use super::state::{Action, Confirm, Nav, Pick, Sig, ViewState};
use super::suspend;
use super::term::{self, Restore, mouse};
use super::ui::{Ui, lock};
use super::wake::{self, Wake};
use crate::collect::stop::Stop;

/// The terminal thread: reads keys, and draws for them, for a resize, job control, a late
/// refresh and a refresh the sampling thread could not draw (it found the view locked), until
/// quit (`None`) or a stop signal (its number). The terminal is given back when `restore`
/// drops, at the end, after the view is closed to the sampling thread.
pub fn show(
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
    let mut input = Input::new();
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
        // An event was read: another may be ready already, so look before sleeping.
        if !input.ready() {
            wake.wait_terminal(timeout, input.wait(Instant::now()), &control.late)?;
        }
        if wake::terminal_gone() {
            return Ok(Ended::HungUp);
        }
        // Every event there is, in the order they came, before the next paint: a burst of
        // moves (a key held down, sent at once, the wheel turned) is done press by press and
        // painted once. Any other event is painted before the next is done (it may change
        // the table's place or size, which the next key or click needs).
        let mut ui = lock(ui);
        for _ in 0..BATCH {
            let event = match input.next() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(_) if wake::terminal_gone() => return Ok(Ended::HungUp),
                Err(e) => return Err(e),
            };
            match on_event(&event, &mut ui, control, jobs)? {
                Next::Quit => return Ok(Ended::Asked),
                Next::Paint => break,
                Next::More => {}
            }
        }
    }
    Ok(Ended::Asked)
}

/// The most events done between two paints (a flood of input is painted as it goes).
const BATCH: usize = 4096;

/// What the loop does after an event.
enum Next {
    Quit,
    /// Paint before the next event.
    Paint,
    /// Go on with the next event, if there is one.
    More,
}

/// Does what `event` asks of the view.
fn on_event(
    event: &Event,
    ui: &mut Ui,
    control: &Control,
    jobs: &suspend::JobControl,
) -> io::Result<Next> {
    let action = match *event {
        Event::Key(key) => ui.state.on_key(key, ui.screen.gpu_count()),
        Event::Mouse(m) => on_mouse(m, &ui.state, ui.table),
        Event::Resize(_, rows) => {
            ui.height = rows;
            ui.painter.resized(&mut ui.terminal)?;
            control.set_view(&ui.state, ui.height);
            ui.dirty = true;
            return Ok(Next::Paint);
        }
        _ => Action::None,
    };
    // A move changes only the selection (and the rows in view): the next event may follow
    // it before a paint.
    let next = if matches!(action, Action::Move(_) | Action::None) {
        Next::More
    } else {
        Next::Paint
    };
    match apply(
        action,
        &mut ui.state,
        &ui.screen,
        usize::from(ui.table.height),
    ) {
        After::Quit => return Ok(Next::Quit),
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
    Ok(next)
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
pub(super) fn ask_signal(state: &mut ViewState, screen: &Screen) {
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
