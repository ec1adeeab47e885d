//! `hmn top`: a live, full-screen view of GPU and RAM memory and who holds it.
//!
//! - `model`: what one refresh shows, made on the sampling thread from the one sampler's frame;
//! - `state`: the view's own state (sort, filter, pause, GPU, help) and the keys;
//! - `draw`: both drawn into a ratatui frame (over the last one, its unchanged table left),
//!   tested through the test backend;
//! - `ui`: the terminal and what it shows, behind the lock both threads take to paint;
//! - `events`: the terminal thread's loop, which reads keys and does what they ask;
//! - `input` and `keys`: the terminal's input, read by the view itself (on Unix) and made into
//!   keys, mouse reports and resizes, every press of a burst counted;
//! - `sampling`: the sampling thread, which measures each refresh and paints it;
//! - `fleet`: `hmn top --prometheus`, the fleet's nodes through Prometheus (its own fetching
//!   thread, state and frame; the terminal, input and wake parts shared).
//!
//! The sampling thread reads only what the view shows (each GPU's figures, processes and MIG
//! instances; the listed processes' owner, command, RSS and CPU time; the host's RAM) and
//! nothing while paused, and paints each refresh itself; the terminal thread paints when a key
//! changes the view, the terminal is resized, a refresh is late, or a refresh found the view
//! locked and was handed over.

pub mod draw;
mod events;
#[cfg(feature = "fleet")]
pub mod fleet;
mod ghosts;
mod input;
#[cfg(unix)]
mod keys;
mod lasting;
pub mod model;
mod paint;
mod sampling;
pub mod select;
mod signal;
pub mod state;
mod suspend;
mod term;
#[cfg(test)]
mod tests;
mod ui;
mod wake;

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;

use crate::args::{self, RootArgs};
use crate::outcome::Outcome;
use sampling::Control;
use state::ViewState;
use term::Restore;
use ui::Ui;
use wake::{STOP_SIGNALS, Wake};

/// Options of `hmn top`.
#[derive(Debug, Clone, Args)]
pub struct TopArgs {
    /// Time between refreshes (at least 100ms) [default: 1s; 5s with --prometheus].
    #[arg(long, value_parser = args::duration, value_name = "DURATION")]
    pub interval: Option<Duration>,
    #[cfg(feature = "fleet")]
    #[command(flatten)]
    pub fleet: FleetTopArgs,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// Options of `hmn top` across a fleet.
#[cfg(feature = "fleet")]
#[derive(Debug, Clone, Args)]
pub struct FleetTopArgs {
    /// Show every node the Prometheus server at this URL (http:// or https://) scrapes, live:
    /// hypomnesis's series (`hmn serve`), else dcgm-exporter's.
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,
    /// A node whose newest sample is older than this is marked stale (with its age).
    #[arg(long, value_parser = args::duration, value_name = "DURATION", default_value = "2m",
          requires = "prometheus")]
    pub stale_after: Duration,
    #[command(flatten)]
    pub client: crate::prometheus::PrometheusArgs,
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
    #[cfg(feature = "fleet")]
    if let Some(url) = &args.fleet.prometheus {
        // Each refresh's queries are asked from threads of their own: their answers go in the
        // one arena (a thread's own arena kept its pages resident after the answer was read).
        crate::heap::one_arena();
        let client = match args.fleet.client.client(url) {
            Ok(c) => c,
            Err(e) => {
                writeln!(err, "hmn top: {e}")?;
                return Ok(Outcome::Code(2));
            }
        };
        let interval = args.interval.unwrap_or(Duration::from_secs(5));
        return fleet::run(
            client,
            args.fleet.stale_after,
            interval.max(Duration::from_millis(100)),
            colour_allowed(),
        );
    }
    let interval = args
        .interval
        .unwrap_or(Duration::from_secs(1))
        .max(Duration::from_millis(100));
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
    let sampler = {
        let (control, ui) = (Arc::clone(&control), Arc::clone(&ui));
        let refreshed = wake.waker();
        std::thread::Builder::new()
            .name("hmn-top-sampler".into())
            .spawn(move || sampling::sample_loop(interval, &control, &ui, &tx, &refreshed))?
    };
    let result = events::show(&ui, restore, interval, &control, &rx, &jobs, &wake);
    control.restored.store(true, Ordering::SeqCst);
    control.stop.store(true, Ordering::SeqCst);
    drop(rx);
    // The sampler may be inside a driver call that does not return: it is not waited for.
    drop(sampler);
    result.map(|signal| signal.map_or(Outcome::Success, Outcome::stopped_by))
}
