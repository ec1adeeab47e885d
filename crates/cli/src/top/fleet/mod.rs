//! `hmn top --prometheus URL`: the fleet live, from the Prometheus it already runs: a row per
//! node (its GPUs, used and total memory, the driver's reservation, ghosts, its largest pod),
//! sorted and filtered with `hmn top`'s keys; Enter opens a node (its GPUs, pods and
//! processes, from the per-GPU, per-pod and per-process series), Esc goes back. A refresh is a
//! few queries whatever the fleet's size, never one per node; stale nodes are marked with
//! their age.
//!
//! - `fetch`: the thread that asks Prometheus each refresh;
//! - `view`: the view's state and what each key does;
//! - `draw`: the frame.

pub mod draw;
pub mod fetch;
#[cfg(test)]
mod tests;
pub mod view;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypomnesis_fleet::Client;
use ratatui::crossterm::event::{Event, KeyEventKind};

use super::input::Input;
use super::suspend::{JobControl, resume};
use super::term::{self, Restore, Term};
use super::wake::{self, LateTimer, STOP_SIGNALS, Wake};
use crate::collect::stop::Stop;
use crate::outcome::Outcome;
use fetch::Shared;
use view::{Action, View};

/// How often the view is drawn when nothing else changes (the title's age).
const TICK: Duration = Duration::from_secs(1);

/// SIGHUP's number, for a terminal that hung up.
const SIGHUP: i32 = 1;

/// Runs the fleet view until quit or a stop signal.
pub fn run(
    client: Client,
    stale_after: Duration,
    interval: Duration,
    color: bool,
) -> io::Result<Outcome> {
    #[cfg(unix)]
    let winch: &[i32] = &[libc::SIGWINCH];
    #[cfg(not(unix))]
    let winch: &[i32] = &[];
    let jobs = JobControl::install();
    let wake = Wake::new(&[STOP_SIGNALS, jobs.signals(), winch].concat());
    let stop = Stop::on_signals();
    let mut terminal = term::take()?;
    let restore = Restore;
    let shared = Arc::new(Shared::default());
    let url = client.base().to_string();
    let fetcher = {
        let (shared, waker) = (Arc::clone(&shared), wake.waker());
        std::thread::Builder::new()
            .name("hmn-top-fleet".into())
            .spawn(move || fetch::fetch_loop(&client, stale_after, interval, &shared, &waker))?
    };
    let mut view = View::new(&url, color);
    let result = show(&mut terminal, &mut view, &shared, (&wake, &jobs), &stop);
    shared.stop();
    drop(restore);
    // A query under way ends within its timeout; the thread is not waited for.
    drop(fetcher);
    result.map(|hung_up| {
        let signal = if hung_up {
            Some(stop.signal().unwrap_or(SIGHUP))
        } else {
            stop.signal()
        };
        signal.map_or(Outcome::Success, Outcome::stopped_by)
    })
}

/// The terminal loop: draws each refresh and each key's change. Returns whether the terminal
/// hung up.
fn show(
    terminal: &mut Term,
    view: &mut View,
    shared: &Shared,
    (wake, jobs): (&Wake, &JobControl),
    stop: &Stop,
) -> io::Result<bool> {
    let mut input = Input::new();
    let timer = LateTimer::new();
    let mut dirty = true;
    let mut drawn = Instant::now();
    while !stop.requested() {
        // Stopped from outside (SIGTSTP) or continued: the terminal is given back, or taken
        // again and drawn whole.
        if jobs.stop_requested() {
            jobs.suspend(terminal)?;
            dirty = true;
        } else if jobs.continued() {
            resume(terminal)?;
            dirty = true;
        }
        if let Some(s) = shared.take() {
            view.take(s);
            dirty = true;
        }
        if dirty {
            terminal.draw(|f| draw::draw(f, view, Instant::now()))?;
            (dirty, drawn) = (false, Instant::now());
        }
        if !input.ready() {
            // The title's age moves each second, refreshed or not (a slow Prometheus shows).
            timer.set(Some(TICK));
            wake.wait_terminal(Some(TICK), input.wait(Instant::now()), &timer)?;
        }
        dirty |= drawn.elapsed() >= TICK;
        if wake::terminal_gone() {
            return Ok(true);
        }
        // Every event there is before the next draw: a burst of presses is done press by
        // press and drawn once.
        for _ in 0..4096 {
            let event = match input.next() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(_) if wake::terminal_gone() => return Ok(true),
                Err(e) => return Err(e),
            };
            match event {
                Event::Key(key) if key.kind != KeyEventKind::Release => match view.on_key(key) {
                    Action::Quit => return Ok(false),
                    Action::Open(node) => {
                        shared.open(node.map(|n| *n));
                        dirty = true;
                    }
                    Action::Redraw => dirty = true,
                    Action::Suspend => {
                        jobs.suspend(terminal)?;
                        dirty = true;
                    }
                    Action::Nothing => {}
                },
                Event::Resize(..) => {
                    terminal.autoresize()?;
                    dirty = true;
                }
                _ => {}
            }
        }
    }
    Ok(false)
}
