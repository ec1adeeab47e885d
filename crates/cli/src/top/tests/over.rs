//! A frame drawn over the last one, its process table and each line above it left where they
//! would come out the same, is the frame drawn whole, whatever changed between them.

#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use super::*;
use crate::top::draw::{Drawn, draw_over};
use crate::top::paint::Painter;
use crate::top::state::Nav;
use crate::view::groups::GroupBy;

/// A terminal painted as `hmn top` paints it, frame after frame.
struct Painted {
    t: Terminal<TestBackend>,
    painter: Painter,
    drawn: Drawn,
}

impl Painted {
    fn new() -> Self {
        let mut t = Terminal::new(TestBackend::new(110, 24)).unwrap();
        let mut painter = Painter::default();
        painter.take_over(&mut t).unwrap();
        Self {
            t,
            painter,
            drawn: Drawn::default(),
        }
    }

    /// Draws `screen` over the last frame; checks that the terminal shows, cell for cell and
    /// style for style, what a whole drawing shows; returns what was left as it was.
    fn show(&mut self, screen: &Screen, state: &ViewState) -> Left {
        let drawn = &mut self.drawn;
        let (left, _) = self
            .painter
            .draw_over(&mut self.t, |f, holds_last| {
                let (table, kept) = draw_over(
                    f,
                    screen,
                    state,
                    Duration::from_secs(1),
                    None,
                    drawn,
                    holds_last,
                );
                (Left::of(&kept, table), kept)
            })
            .unwrap();
        let (text, whole) = render(screen, state, 110, 24);
        assert_eq!(
            self.t.backend().buffer(),
            whole.buffer(),
            "drawn over the last frame, it is not the frame drawn whole:\n{text}"
        );
        left
    }
}

/// What a frame drawn over the last left as it was.
#[derive(Debug, PartialEq)]
struct Left {
    /// The process table, all its rows.
    table: bool,
    /// Rows above the table.
    above: usize,
    /// Rows above the table that were drawn.
    drawn_above: usize,
}

impl Left {
    /// Nothing: the frame drawn whole.
    const NONE: Self = Self {
        table: false,
        above: 0,
        drawn_above: 0,
    };

    fn of(kept: &[bool], table: ratatui::layout::Rect) -> Self {
        if !kept.contains(&true) {
            return Self::NONE;
        }
        let top = usize::from(table.y);
        let rows = kept.iter().skip(top).take(usize::from(table.height));
        let above = kept.iter().take(top).filter(|k| **k).count();
        Self {
            table: table.height > 0 && rows.clone().all(|k| *k),
            above,
            drawn_above: top - above,
        }
    }
}

#[test]
fn a_frame_drawn_over_the_last_is_the_frame_drawn_whole() {
    let mut p = Painted::new();
    let screen = two_gpus();
    let mut state = ViewState::default();
    assert_eq!(
        p.show(&screen, &state),
        Left::NONE,
        "the first frame is drawn whole"
    );
    let same = p.show(&screen, &state);
    assert!(
        same.table && same.above > 3 && same.drawn_above == 0,
        "{same:?}"
    );

    // The GPU history grew, the RAM moved, the header says something: the table and the other
    // lines above it stay; those three are drawn.
    let mut next = screen.clone();
    if let Ok(gpus) = &mut next.gpus {
        gpus[0].history.push(50 * GIB);
    }
    next.ram = Ok(HostMemory::new(24 * GIB, Some(3 * GIB)));
    state.message = Some(Ok("sent".into()));
    let moved = p.show(&next, &state);
    assert!(moved.table && moved.drawn_above == 3, "{moved:?}");
    // The same rows in a new list, as each refresh makes them: still the same table.
    next.procs = std::sync::Arc::new(next.procs.as_ref().clone());
    assert_eq!(p.show(&next, &state), same);

    // What the table draws from: a row's figure, the selection, ghosts (which also move the
    // table down a line), the GPUs' count, the memory no row accounts for (grouped).
    let mut moved = next.clone();
    let mut procs = moved.procs.as_ref().clone();
    procs[0].rss = Some(9 * GIB);
    moved.procs = std::sync::Arc::new(procs);
    let table_only = Left {
        table: false,
        ..same
    };
    assert_eq!(p.show(&moved, &state), table_only);
    state.navigate(Nav::Down(1), &moved.procs, 10);
    assert_eq!(p.show(&moved, &state), table_only);
    assert_eq!(p.show(&moved, &state), same);
    let mut haunted = moved.clone();
    let mut report = hypomnesis::GhostReport::default();
    report.ghosts = vec![hypomnesis::Ghost::new(
        hypomnesis::GhostClass::Idle,
        1,
        Some(5151),
        20 * GIB,
    )];
    haunted.ghosts = Some(std::sync::Arc::new(report));
    // The key line is new, and the table a line lower.
    let key = p.show(&haunted, &state);
    assert!(!key.table && key.drawn_above == 1, "{key:?}");
    let below = p.show(&haunted, &state);
    assert!(below.table && below.above == same.above + 1, "{below:?}");
    // The next look, its evidence reworded (as at every look): the table stays.
    let mut relooked = haunted.ghosts.as_deref().unwrap().clone();
    relooked.ghosts[0].evidence = vec!["idle for 40 s".into()];
    haunted.ghosts = Some(std::sync::Arc::new(relooked));
    assert_eq!(p.show(&haunted, &state), below);
    // Another process the ghost: the key line is drawn again, the marks move.
    let mut report = haunted.ghosts.as_deref().unwrap().clone();
    report.ghosts[0].pid = Some(4242);
    haunted.ghosts = Some(std::sync::Arc::new(report));
    let marks = p.show(&haunted, &state);
    assert!(!marks.table && marks.drawn_above == 1, "{marks:?}");
    // One GPU: its lines go, the RAM line and the table move up.
    let mut one = haunted.clone();
    if let Ok(gpus) = &mut one.gpus {
        gpus.truncate(1);
    }
    let fewer = p.show(&one, &state);
    assert!(!fewer.table && fewer.drawn_above > 0, "{fewer:?}");
    state.group = Some(GroupBy::User);
    assert!(!p.show(&one, &state).table);
    let mut less_hidden = one.clone();
    if let Ok(gpus) = &mut less_hidden.gpus
        && let Some(bar) = &mut gpus[0].bar
    {
        bar.hidden /= 2;
    }
    assert!(!p.show(&less_hidden, &state).table);
    state.group = None;
}

/// Help, the details and a forgotten terminal: the frame is drawn whole, and the next left.
#[test]
fn a_frame_drawn_over_something_else_is_drawn_whole() {
    let mut p = Painted::new();
    let screen = two_gpus();
    let mut state = ViewState::default();
    state.navigate(Nav::Down(1), &screen.procs, 10);
    assert_eq!(p.show(&screen, &state), Left::NONE);
    // Help over the table, then gone: drawn whole both times, then left again.
    state.help = true;
    assert_eq!(p.show(&screen, &state), Left::NONE);
    assert_eq!(p.show(&screen, &state), Left::NONE, "never left under help");
    state.help = false;
    assert_eq!(p.show(&screen, &state), Left::NONE);
    assert!(p.show(&screen, &state).table);

    // The details take the view; back from them, the view is drawn whole.
    state.inspect = true;
    assert_eq!(p.show(&screen, &state), Left::NONE);
    state.inspect = false;
    assert_eq!(p.show(&screen, &state), Left::NONE);

    // A terminal whose screen may have been written over (a suspend) is painted whole.
    p.painter.forget();
    assert_eq!(p.show(&screen, &state), Left::NONE);
    let again = p.show(&screen, &state);
    assert!(again.table && again.drawn_above == 0, "{again:?}");
}
