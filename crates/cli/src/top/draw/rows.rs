//! The lines above the process table (the header, each GPU's lines, the RAM line, the ghosts'
//! key), each kept from one frame to the next while it would come out the same: at a refresh a
//! second, most refreshes change one of them (a GPU's history) and none of the others, and a
//! line left as it was is neither cleared, drawn, nor compared again when painted.

use std::ops::Range;

use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::gpus::History;

/// One line above the table, to draw on a row of its own.
pub(super) enum Row<'a> {
    Text(Line<'a>),
    History(History),
}

/// What a row was drawn from, kept with the frame.
#[derive(Debug, PartialEq)]
pub(super) enum Shown {
    Text(Line<'static>),
    History(History),
}

impl Row<'_> {
    /// Whether drawing it gives the cells `shown` gave.
    fn is(&self, shown: &Shown) -> bool {
        match (self, shown) {
            (Row::Text(line), Shown::Text(kept)) => {
                let kept: &Line<'_> = kept;
                kept == line
            }
            (Row::History(h), Shown::History(kept)) => h == kept,
            _ => false,
        }
    }

    fn render(&self, buf: &mut Buffer, rect: Rect) {
        match self {
            Row::Text(line) => super::line_row(buf, rect, line),
            Row::History(h) => h.render(buf, rect),
        }
    }

    fn into_shown(self) -> Shown {
        match self {
            Row::Text(line) => Shown::Text(owned(line)),
            Row::History(h) => Shown::History(h),
        }
    }
}

/// `line` with its text owned, to keep past the screen it was made from.
fn owned(line: Line<'_>) -> Line<'static> {
    Line {
        spans: line
            .spans
            .into_iter()
            .map(|s| Span::styled(s.content.into_owned(), s.style))
            .collect(),
        style: line.style,
        alignment: line.alignment,
    }
}

/// What each row of the last frame was drawn from: a row of the table, or of a frame drawn whole
/// under something drawn over it, has none.
#[derive(Debug, Default)]
pub(super) struct Memo(Vec<Option<Shown>>);

impl Memo {
    /// Whether the last frame kept what its rows were drawn from, at `height` rows.
    pub(super) fn holds(&self, height: u16) -> bool {
        !self.0.is_empty() && self.0.len() == usize::from(height)
    }
}

/// Draws `rows` (each with its row `y`) into `buf`, over the last frame when `over` (the buffer
/// holds the frame `last` was kept with): a row whose line would come out the same is left,
/// any other cleared and drawn, and a row that is neither one of them nor one of the `table`'s
/// is cleared. Marks the rows left in `kept` (by row from the top of `area`) and returns what
/// the frame's rows were drawn from.
pub(super) fn draw_rows(
    buf: &mut Buffer,
    area: Rect,
    rows: Vec<(u16, Row<'_>)>,
    mut last: Memo,
    over: bool,
    table: &Range<u16>,
    kept: &mut [bool],
) -> Memo {
    let mut now: Vec<Option<Shown>> = std::iter::repeat_with(|| None)
        .take(usize::from(area.height))
        .collect();
    for (y, row) in rows {
        let i = usize::from(y.saturating_sub(area.y));
        let same = over
            && last
                .0
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|s| row.is(s));
        if same {
            if let (Some(k), Some(slot), Some(was)) =
                (kept.get_mut(i), now.get_mut(i), last.0.get_mut(i))
            {
                *k = true;
                *slot = was.take();
            }
            continue;
        }
        if over {
            clear(buf, y..y + 1);
        }
        row.render(buf, Rect::new(area.x, y, area.width, 1));
        if let Some(slot) = now.get_mut(i) {
            *slot = Some(row.into_shown());
        }
    }
    if over {
        for (slot, y) in now.iter().zip(area.top()..) {
            if slot.is_none() && !table.contains(&y) {
                clear(buf, y..y + 1);
            }
        }
    }
    Memo(now)
}

/// Resets every cell of the rows `rows`.
pub(super) fn clear(buf: &mut Buffer, rows: Range<u16>) {
    let width = usize::from(buf.area.width).max(1);
    let skip = usize::from(rows.start.saturating_sub(buf.area.top()));
    let take = usize::from(rows.end.saturating_sub(rows.start));
    for row in buf.content.chunks_mut(width).skip(skip).take(take) {
        row.iter_mut().for_each(Cell::reset);
    }
}
