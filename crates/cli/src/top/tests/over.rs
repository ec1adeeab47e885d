//! A frame drawn over the last one, its process table left where it would come out the same,
//! is the frame drawn whole, whatever changed between them.

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
    /// style for style, what a whole drawing shows; returns how many rows were left as they were.
    fn show(&mut self, screen: &Screen, state: &ViewState) -> usize {
        let drawn = &mut self.drawn;
        let (kept, _) = self
            .painter
            .draw_over(&mut self.t, |f, holds_last| {
                let (_, kept) = draw_over(
                    f,
                    screen,
                    state,
                    Duration::from_secs(1),
                    None,
                    drawn,
                    holds_last,
                );
                (kept.len(), kept)
            })
            .unwrap();
        let (text, whole) = render(screen, state, 110, 24);
        assert_eq!(
            self.t.backend().buffer(),
            whole.buffer(),
            "drawn over the last frame, it is not the frame drawn whole:\n{text}"
        );
        kept
    }
}

#[test]
fn a_frame_drawn_over_the_last_is_the_frame_drawn_whole() {
    let mut p = Painted::new();
    let screen = two_gpus();
    let mut state = ViewState::default();
    assert_eq!(p.show(&screen, &state), 0, "the first frame is drawn whole");
    let table = p.show(&screen, &state);
    assert!(table > 3, "the same table is left as it was ({table} rows)");

    // The GPU history grew, the RAM moved, the header says something: the table stays.
    let mut next = screen.clone();
    if let Ok(gpus) = &mut next.gpus {
        gpus[0].history.push(50 * GIB);
    }
    next.ram = Ok(HostMemory::new(24 * GIB, Some(3 * GIB)));
    state.message = Some(Ok("sent".into()));
    assert_eq!(p.show(&next, &state), table);
    // The same rows in a new list, as each refresh makes them: still the same table.
    next.procs = std::sync::Arc::new(next.procs.as_ref().clone());
    assert_eq!(p.show(&next, &state), table);

    // What the table draws from: a row's figure, the selection, ghosts (which also move the
    // table down a line), the GPUs' count, the memory no row accounts for (grouped).
    let mut moved = next.clone();
    let mut procs = moved.procs.as_ref().clone();
    procs[0].rss = Some(9 * GIB);
    moved.procs = std::sync::Arc::new(procs);
    assert_eq!(p.show(&moved, &state), 0);
    state.navigate(Nav::Down(1), &moved.procs, 10);
    assert_eq!(p.show(&moved, &state), 0);
    assert_eq!(p.show(&moved, &state), table);
    let mut haunted = moved.clone();
    let mut report = hypomnesis::GhostReport::default();
    report.ghosts = vec![hypomnesis::Ghost::new(
        hypomnesis::GhostClass::Idle,
        1,
        Some(5151),
        20 * GIB,
    )];
    haunted.ghosts = Some(std::sync::Arc::new(report));
    assert_eq!(p.show(&haunted, &state), 0);
    assert_eq!(p.show(&haunted, &state), table - 1);
    // The next look, its evidence reworded (as at every look): the table stays.
    let mut relooked = haunted.ghosts.as_deref().unwrap().clone();
    relooked.ghosts[0].evidence = vec!["idle for 40 s".into()];
    haunted.ghosts = Some(std::sync::Arc::new(relooked));
    assert_eq!(p.show(&haunted, &state), table - 1);
    // Another process the ghost: the key line stays, the marks move.
    let mut report = haunted.ghosts.as_deref().unwrap().clone();
    report.ghosts[0].pid = Some(4242);
    haunted.ghosts = Some(std::sync::Arc::new(report));
    assert_eq!(p.show(&haunted, &state), 0);
    let mut one = haunted.clone();
    if let Ok(gpus) = &mut one.gpus {
        gpus.truncate(1);
    }
    assert_eq!(p.show(&one, &state), 0);
    state.group = Some(GroupBy::User);
    assert_eq!(p.show(&one, &state), 0);
    let mut less_hidden = one.clone();
    if let Ok(gpus) = &mut less_hidden.gpus
        && let Some(bar) = &mut gpus[0].bar
    {
        bar.hidden /= 2;
    }
    assert_eq!(p.show(&less_hidden, &state), 0);
    state.group = None;

    // Help over the table, then gone: drawn whole both times, then left again.
    state.help = true;
    assert_eq!(p.show(&less_hidden, &state), 0);
    assert_eq!(p.show(&less_hidden, &state), 0, "never left under help");
    state.help = false;
    assert_eq!(p.show(&less_hidden, &state), 0);
    assert!(p.show(&less_hidden, &state) > 0);

    // The details take the view; back from them, the table is drawn whole.
    state.inspect = true;
    assert_eq!(p.show(&less_hidden, &state), 0);
    state.inspect = false;
    assert_eq!(p.show(&less_hidden, &state), 0);

    // A terminal whose screen may have been written over (a suspend) is painted whole.
    p.painter.forget();
    assert_eq!(p.show(&less_hidden, &state), 0);
    assert!(p.show(&less_hidden, &state) > 0);
}
