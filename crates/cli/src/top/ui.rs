//! What `hmn top`'s two threads share to draw: the terminal and what it shows. The sampling
//! thread draws each refresh itself when it finds the view free, so a refresh is measured and
//! painted by one thread: no hand-over, and the terminal thread sleeps through it (its wake,
//! two reads of its socket and a look for input cost about as much as the painting's own
//! system calls). The terminal thread draws for keys, resizes, job control and a late refresh.

use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ratatui::layout::Rect;

use super::draw::{self, Drawn, Late};
use super::model::{Refresh, Screen};
use super::paint::Painter;
use super::state::ViewState;
use super::term::Term;
use super::wake::LateTimer;

/// The terminal and what it shows, behind the lock both threads take to draw.
pub struct Ui {
    pub terminal: Term,
    pub painter: Painter,
    /// What the last frame drew its table from (a table that would come out the same is left).
    drawn: Drawn,
    pub state: ViewState,
    pub screen: Screen,
    pub fresh: Freshness,
    late: Option<Late>,
    /// Something changed since the last frame painted.
    pub dirty: bool,
    /// Where the table was drawn: its height bounds the selection's moves, a click maps to a row.
    pub table: Rect,
    /// The terminal's height, kept from resize events (asking the terminal opens /dev/tty).
    pub height: u16,
    /// Set when the terminal thread gives the terminal back: nothing is painted after.
    closed: bool,
}

impl Ui {
    pub fn new(terminal: Term, state: ViewState, now: Instant) -> Self {
        Self {
            terminal,
            painter: Painter::default(),
            drawn: Drawn::default(),
            state,
            screen: Screen::waiting(),
            fresh: Freshness::new(now),
            late: None,
            dirty: true,
            table: Rect::default(),
            height: 50,
            closed: false,
        }
    }

    /// Takes a refresh in (made every `interval`); the selection follows its process. Whether
    /// the selection moved (the view the sampling thread reads changed).
    pub fn take(&mut self, r: Refresh, interval: Duration) -> bool {
        let width = self.painter.width();
        self.dirty |= !draw::draws_alike(&self.screen, &r.screen, width, interval);
        (self.screen, self.fresh.taken) = (r.screen, Some(r.taken));
        let before = (self.state.top, self.state.selected);
        self.state
            .follow(&self.screen.procs, usize::from(self.table.height));
        let moved = (self.state.top, self.state.selected) != before;
        self.dirty |= moved;
        moved
    }

    /// Paints the frame when something changed, lateness included, unless the terminal was
    /// given back; then sets `timer` for when the view would turn late (or, while it is late,
    /// for its age to be shown again a second on).
    pub fn paint(&mut self, interval: Duration, timer: &LateTimer) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let now_late = self.fresh.late(Instant::now(), interval, self.state.paused);
        self.dirty |= now_late != self.late;
        // Built with the library's debug output, a measurement may write its lines over the
        // view (stderr is the same terminal) and scroll it, even one that then hangs: every
        // paint (each refresh, and each second while a refresh is late) is then whole.
        if cfg!(feature = "debug-output") {
            self.painter.forget();
            self.dirty = true;
        }
        self.late = now_late;
        if std::mem::take(&mut self.dirty) {
            let (screen, state, late) = (&self.screen, &self.state, self.late.as_ref());
            let drawn = &mut self.drawn;
            (self.table, _) = self
                .painter
                .draw_over(&mut self.terminal, |f, holds_last| {
                    draw::draw_over(f, screen, state, interval, late, drawn, holds_last)
                })?;
        }
        timer.set(self.wait(interval));
        Ok(())
    }

    /// How long the terminal thread may sleep when nothing wakes it (see [`wait_for`]).
    pub fn wait(&self, interval: Duration) -> Option<Duration> {
        wait_for(&self.fresh, interval, self.state.paused, Instant::now())
    }

    /// Nothing is painted from now on (the terminal is being given back), and the cursor is
    /// shown again (the terminal is never dropped, which would show it: the sampling thread,
    /// not waited for, shares it).
    pub fn close(&mut self) {
        self.closed = true;
        let _ = self.terminal.show_cursor();
    }
}

/// When the view last had figures or began to expect them, to tell a late refresh.
pub struct Freshness {
    /// When the figures shown were measured; `None` before the first refresh.
    pub taken: Option<Instant>,
    /// Since when a refresh is expected: the start, or the end of a pause.
    pub expected_since: Instant,
}

impl Freshness {
    pub fn new(now: Instant) -> Self {
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
    pub fn late(&self, now: Instant, interval: Duration, paused: bool) -> Option<Late> {
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

/// How long the terminal thread may sleep when nothing wakes it (a key, a refresh, a signal):
/// until the view would turn late (see [`Freshness::late`]), or a second while it is late (its
/// age is shown in whole seconds); no limit while paused, when it is never late.
pub fn wait_for(
    fresh: &Freshness,
    interval: Duration,
    paused: bool,
    now: Instant,
) -> Option<Duration> {
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

/// The view, locked; a thread that panicked holding it does not keep the other from it.
pub fn lock(ui: &Mutex<Ui>) -> MutexGuard<'_, Ui> {
    ui.lock().unwrap_or_else(PoisonError::into_inner)
}
