//! Putting a drawn frame on the terminal: only the rows that changed since the last frame
//! painted, and nothing at all when none did.
//!
//! ratatui's own `Terminal::draw` asks the terminal for its size (an open of `/dev/tty` and an
//! `ioctl`), diffs every cell of the screen against a second buffer of the last frame (taking
//! the Unicode width of each cell's symbol three times: half of `hmn top`'s instructions at 20
//! processes, by callgrind) and hides the cursor again, a write, at every frame. Here the size
//! comes from the terminal's resize events, and the last frame is kept as each row's bytes
//! (its symbols, and each style where it changes: about 400 bytes a row of 160 cells, where
//! a buffer of cells is 40 bytes a cell, 288 KB at 160x45 read cold at every refresh). A row
//! whose bytes are the last frame's is not written; a changed row is written whole, skipping
//! the cells that a wide character before them covers, as ratatui does.

use std::hash::{Hash, Hasher};
use std::io;

use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use unicode_width::UnicodeWidthStr;

/// The last frame painted, to compare the next one with.
#[derive(Debug, Default)]
pub struct Painter {
    /// Each row of the last frame, encoded by [`encode_row`]; none after [`Painter::forget`].
    last: Vec<Vec<u8>>,
    /// The last frame's size.
    area: Rect,
    /// The row being encoded (swapped with the last frame's when it differs).
    scratch: Vec<u8>,
}

impl Painter {
    /// Forgets what the terminal shows: the next frame is painted whole (after a suspend, or
    /// anything else that may have written over the screen).
    pub fn forget(&mut self) {
        self.last.clear();
    }

    /// Takes the terminal over from ratatui's drawing: the cursor hidden once, and the second
    /// buffer ratatui keeps for its own diff let go (a screen's worth of cells, about 280 KiB
    /// at 160x45), as frames are compared with the rows kept here.
    pub fn take_over<B: Backend>(&mut self, terminal: &mut Terminal<B>) -> io::Result<()> {
        terminal.hide_cursor()?;
        drop_spare(terminal);
        self.forget();
        Ok(())
    }

    /// The width of the frame last painted; `None` before the first, or after a resize or a
    /// [`Painter::forget`].
    pub fn width(&self) -> Option<u16> {
        (!self.last.is_empty()).then_some(self.area.width)
    }

    /// After a resize event: the terminal's size as it is now (a later resize may be under
    /// way), and the next frame painted whole, as a resized terminal may have moved or cleared
    /// what it showed.
    pub fn resized<B: Backend>(&mut self, terminal: &mut Terminal<B>) -> io::Result<()> {
        terminal.autoresize()?;
        drop_spare(terminal);
        self.forget();
        Ok(())
    }

    /// Draws a frame with `draw` into the terminal's buffer and paints it; returns what `draw`
    /// returned and how many rows were written. The terminal's size is the one it last knew
    /// (`Terminal::autoresize` on a resize event keeps it right). The whole frame is drawn:
    /// the tests' form of [`Painter::draw_over`].
    #[cfg(test)]
    pub fn draw<B: Backend, R>(
        &mut self,
        terminal: &mut Terminal<B>,
        draw: impl FnOnce(&mut ratatui::Frame<'_>) -> R,
    ) -> io::Result<(R, usize)> {
        self.draw_over(terminal, |f, _| {
            f.buffer_mut().reset();
            (draw(f), Vec::new())
        })
    }

    /// Draws a frame over the last one and paints it. `draw` is told whether the terminal's
    /// buffer still holds the frame last painted (not after [`Painter::forget`] or a resize),
    /// clears what it draws over, and returns what else it returns and which rows (from the
    /// top, `true` for each) it left as they were, which are then taken as unchanged without
    /// being compared (when the buffer did not hold the last frame, they are painted all the
    /// same).
    pub fn draw_over<B: Backend, R>(
        &mut self,
        terminal: &mut Terminal<B>,
        draw: impl FnOnce(&mut ratatui::Frame<'_>, bool) -> (R, Vec<bool>),
    ) -> io::Result<(R, usize)> {
        let holds_last = !self.last.is_empty() && self.area == terminal.current_buffer_mut().area;
        let (drawn, kept) = draw(&mut terminal.get_frame(), holds_last);
        let kept = if holds_last { kept } else { Vec::new() };
        // Out of the terminal while its backend paints it, then back, to be drawn into next.
        let next = std::mem::take(terminal.current_buffer_mut());
        let result = self.paint(terminal.backend_mut(), &next, &kept);
        *terminal.current_buffer_mut() = next;
        result.map(|rows| (drawn, rows))
    }

    /// Paints `next` through `backend`: the rows that differ from the last frame, or every row
    /// after [`Painter::forget`] or a change of size. Returns how many rows were written, and
    /// keeps `next`'s rows as the last frame. The rows marked in `unchanged` (from the top) are
    /// the last frame's, unless it is painted whole.
    fn paint<B: Backend>(
        &mut self,
        backend: &mut B,
        next: &Buffer,
        unchanged: &[bool],
    ) -> io::Result<usize> {
        let width = usize::from(next.area.width).max(1);
        let height = usize::from(next.area.height);
        let whole = self.area != next.area || self.last.len() != height;
        if whole {
            self.area = next.area;
            self.last.clear();
            self.last.resize_with(height, Vec::new);
        }
        let mut updates: Vec<(u16, u16, &Cell)> = Vec::new();
        let mut rows = 0;
        for (((row, y), kept), &same) in next
            .content
            .chunks(width)
            .zip(next.area.top()..next.area.bottom())
            .zip(self.last.iter_mut())
            .zip(unchanged.iter().chain(std::iter::repeat(&false)))
        {
            if !whole && same {
                continue;
            }
            self.scratch.clear();
            encode_row(row, &mut self.scratch);
            if !whole && *kept == self.scratch {
                continue;
            }
            // The cells that changed, where the row the terminal shows is known; else all.
            let cells = if whole {
                None
            } else {
                cells_to_write(row, &self.scratch, kept)
            };
            std::mem::swap(kept, &mut self.scratch);
            rows += 1;
            row_updates(row, next.area.left(), y, cells.as_deref(), &mut updates);
        }
        if !updates.is_empty() {
            backend.draw(updates.into_iter())?;
            Backend::flush(backend)?;
        }
        Ok(rows)
    }
}

/// Replaces the terminal's buffer that is not drawn into with an empty one (a resize makes it
/// whole again, hence after each).
fn drop_spare<B: Backend>(terminal: &mut Terminal<B>) {
    terminal.swap_buffers();
    *terminal.current_buffer_mut() = Buffer::empty(Rect::default());
    terminal.swap_buffers();
}

/// Appends `row` to `out` so that two rows give the same bytes only when their cells are
/// alike: each cell's symbol (UTF-8, which never holds the bytes 0xFE and 0xFF), then 0xFF
/// when its style (colours, modifiers, whether it is skipped) is the cell before's, else 0xFE,
/// the length of the style's bytes (two bytes) and the style's bytes as its derived `Hash`
/// writes them. [`Cells`] reads it back, cell by cell.
fn encode_row(row: &[Cell], out: &mut Vec<u8>) {
    let mut before = None;
    for cell in row {
        out.extend_from_slice(cell.symbol().as_bytes());
        let style = Some((cell.style(), cell.skip));
        if style == before {
            out.push(0xFF);
            continue;
        }
        out.extend_from_slice(&[0xFE, 0, 0]);
        let at = out.len();
        style.hash(&mut Bytes(out));
        let len = u16::try_from(out.len() - at).unwrap_or(u16::MAX);
        if let Some(slot) = out.get_mut(at - 2..at) {
            slot.copy_from_slice(&len.to_le_bytes());
        }
        before = style;
    }
}

/// The cells of a row [`encode_row`] wrote, each as its symbol's bytes and its style's (the
/// cell before's, where it says so).
struct Cells<'a> {
    rest: &'a [u8],
    style: &'a [u8],
}

impl<'a> Cells<'a> {
    fn of(encoded: &'a [u8]) -> Self {
        Self {
            rest: encoded,
            style: &[],
        }
    }
}

impl<'a> Iterator for Cells<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let end = self.rest.iter().position(|&b| b >= 0xFE)?;
        let (symbol, tail) = self.rest.split_at(end);
        let (&mark, tail) = tail.split_first()?;
        self.rest = tail;
        if mark == 0xFE {
            let (len, tail) = self.rest.split_first_chunk::<2>()?;
            let (style, tail) = tail.split_at_checked(usize::from(u16::from_le_bytes(*len)))?;
            (self.style, self.rest) = (style, tail);
        }
        Some((symbol, self.style))
    }
}

/// Which cells of `row` (encoded as `next`) to write over the row the terminal shows (encoded
/// as `last`), as ratatui's own diff picks them: each that changed, and after a wide character
/// (before or now) the cells it covered, but those a wide character now covers and those
/// ratatui marks to be skipped. `None` when `last` is not a row of as many cells.
fn cells_to_write(row: &[Cell], next: &[u8], last: &[u8]) -> Option<Vec<bool>> {
    let (mut now, mut before) = (Cells::of(next), Cells::of(last));
    let mut out = Vec::with_capacity(row.len());
    let (mut invalidated, mut covered) = (0_usize, 0_usize);
    for cell in row {
        let (now, before) = (now.next()?, before.next()?);
        out.push(!cell.skip && (now != before || invalidated > 0) && covered == 0);
        let width = cell.symbol().width();
        let width_before = std::str::from_utf8(before.0).map_or(1, UnicodeWidthStr::width);
        covered = width.saturating_sub(1);
        invalidated = width.max(width_before).max(invalidated).saturating_sub(1);
    }
    before.next().is_none().then_some(out)
}

/// A `Hasher` that keeps the bytes it is given: a value's derived `Hash` written out.
struct Bytes<'a>(&'a mut Vec<u8>);

impl Hasher for Bytes<'_> {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        0
    }
}

/// The cells of `row` (at `x`, `y`) to write: those `pick` marks, or where it is `None`,
/// every cell but those a wide character before them covers and those ratatui marks to be
/// skipped.
fn row_updates<'a>(
    row: &'a [Cell],
    x: u16,
    y: u16,
    pick: Option<&[bool]>,
    out: &mut Vec<(u16, u16, &'a Cell)>,
) {
    if let Some(pick) = pick {
        let picked = row.iter().zip(x..).zip(pick).filter(|(_, p)| **p);
        out.extend(picked.map(|((cell, cx), _)| (cx, y, cell)));
        return;
    }
    let mut covered = 0_usize;
    for (cell, cx) in row.iter().zip(x..) {
        if covered > 0 {
            covered -= 1;
            continue;
        }
        if cell.skip {
            continue;
        }
        out.push((cx, y, cell));
        covered = cell.symbol().width().saturating_sub(1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use ratatui::backend::TestBackend;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Modifier, Style};

    fn shown(backend: &TestBackend) -> Vec<String> {
        let b = backend.buffer();
        (0..b.area.height)
            .map(|y| {
                (0..b.area.width)
                    .map(|x| b[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect()
    }

    /// Paints a frame of `lines` (each set at the start of its row) on `t`; the rows written.
    fn show(p: &mut Painter, t: &mut Terminal<TestBackend>, lines: &[&str]) -> usize {
        p.draw(t, |f| {
            for (y, l) in (0..).zip(lines) {
                f.buffer_mut().set_string(0, y, l, Style::default());
            }
        })
        .unwrap()
        .1
    }

    #[test]
    fn only_changed_rows_are_written_and_nothing_when_none_changed() {
        let mut t = Terminal::new(TestBackend::new(12, 3)).unwrap();
        let mut p = Painter::default();
        p.take_over(&mut t).unwrap();
        assert_eq!(show(&mut p, &mut t, &["a", "b", "c"]), 3);
        assert_eq!(show(&mut p, &mut t, &["a", "B", "c"]), 1);
        assert_eq!(shown(t.backend())[1], "B           ");
        assert_eq!(show(&mut p, &mut t, &["a", "B", "c"]), 0);
        // A style is a change too.
        let ((), rows) = p
            .draw(&mut t, |f| {
                for (y, l) in (0..).zip(["a", "B", "c"]) {
                    f.buffer_mut().set_string(0, y, l, Style::default());
                }
                f.buffer_mut()
                    .set_style(Rect::new(0, 2, 1, 1), Style::default().fg(Color::Red));
            })
            .unwrap();
        assert_eq!(rows, 1);
        assert_eq!(t.backend().buffer()[(0, 2)].fg, Color::Red);
        p.forget();
        assert_eq!(show(&mut p, &mut t, &["a", "B", "c"]), 3);
        assert_eq!(t.backend().buffer()[(0, 2)].fg, Color::Reset);
    }

    /// A shorter line over a longer one clears its tail; a wide character's second cell is not
    /// written over, and what it covered before is written again when it goes.
    #[test]
    fn rows_are_written_whole_around_wide_characters() {
        let mut t = Terminal::new(TestBackend::new(12, 3)).unwrap();
        let mut p = Painter::default();
        show(&mut p, &mut t, &["trainer-0", "", ""]);
        show(&mut p, &mut t, &["eval", "学習x", ""]);
        let rows = shown(t.backend());
        assert_eq!(rows[0], "eval        ");
        assert!(rows[1].starts_with("学"), "{rows:?}");
        assert_eq!(t.backend().buffer()[(4, 1)].symbol(), "x");
        show(&mut p, &mut t, &["eval", "abcde", ""]);
        assert_eq!(shown(t.backend())[1], "abcde       ");
    }

    /// Rows a drawing over the last frame says it left are taken as painted: not compared, not
    /// written; once the terminal is forgotten, the drawing is told its buffer holds nothing to
    /// keep, and every row is painted.
    #[test]
    fn rows_left_as_they_were_are_not_compared_until_forgotten() {
        let mut t = Terminal::new(TestBackend::new(6, 3)).unwrap();
        let mut p = Painter::default();
        p.take_over(&mut t).unwrap();
        let over = |p: &mut Painter, t: &mut Terminal<TestBackend>, middle: &str| {
            p.draw_over(t, |f, holds_last| {
                let buf = f.buffer_mut();
                buf.reset();
                buf.set_string(0, 0, "top", Style::default());
                buf.set_string(0, 1, middle, Style::default());
                (holds_last, vec![false, true, false])
            })
            .unwrap()
        };
        assert_eq!(over(&mut p, &mut t, "a"), (false, 3));
        // The middle row differs from what was painted, but the drawing says it left it.
        assert_eq!(over(&mut p, &mut t, "b"), (true, 0));
        assert_eq!(shown(t.backend())[1], "a     ");
        p.forget();
        assert_eq!(over(&mut p, &mut t, "b"), (false, 3));
        assert_eq!(shown(t.backend())[1], "b     ");
    }

    /// A terminal resized is painted whole at its new size.
    #[test]
    fn another_size_is_painted_whole() {
        let mut t = Terminal::new(TestBackend::new(12, 3)).unwrap();
        let mut p = Painter::default();
        show(&mut p, &mut t, &["a", "b", "c"]);
        t.backend_mut().resize(10, 2);
        p.resized(&mut t).unwrap();
        assert_eq!(show(&mut p, &mut t, &["a", "b"]), 2);
        assert_eq!(show(&mut p, &mut t, &["a", "b"]), 0);
        assert_eq!(shown(t.backend()), ["a         ", "b         "]);
    }

    fn cell(symbol: &str, fg: Color, bold: bool, skip: bool) -> Cell {
        let mut c = Cell::default();
        c.set_symbol(symbol).set_fg(fg);
        if bold {
            c.modifier = Modifier::BOLD;
        }
        c.skip = skip;
        c
    }

    fn encoded(row: &[Cell]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_row(row, &mut out);
        out
    }

    /// Rows that differ only where one cell's symbol ends and the next begins, or in one
    /// cell's style (an Indexed colour against an Rgb one, bold, skipped), encode apart.
    #[test]
    fn rows_alike_in_their_text_but_not_their_cells_encode_apart() {
        let r = Color::Reset;
        let a = [cell("ab", r, false, false), cell("c", r, false, false)];
        let b = [cell("a", r, false, false), cell("bc", r, false, false)];
        assert_ne!(encoded(&a), encoded(&b));
        let plain = [cell("x", r, false, false), cell("y", r, false, false)];
        for other in [
            [
                cell("x", r, false, false),
                cell("y", Color::Indexed(1), false, false),
            ],
            [
                cell("x", r, false, false),
                cell("y", Color::Rgb(1, 0, 0), false, false),
            ],
            [cell("x", r, false, false), cell("y", r, true, false)],
            [cell("x", r, false, false), cell("y", r, false, true)],
        ] {
            assert_ne!(encoded(&plain), encoded(&other), "{other:?}");
        }
        assert_eq!(encoded(&plain), encoded(&plain.clone()));
    }

    fn any_cell() -> impl Strategy<Value = Cell> {
        let symbols = prop_oneof![
            Just(" "),
            Just("a"),
            Just("ab"),
            Just("b"),
            Just("学"),
            Just("")
        ];
        let colours = prop_oneof![
            Just(Color::Reset),
            Just(Color::Red),
            (0_u8..3).prop_map(Color::Indexed),
            (0_u8..2, 0_u8..2).prop_map(|(r, g)| Color::Rgb(r, g, 0)),
        ];
        (symbols, colours, any::<bool>(), any::<bool>())
            .prop_map(|(s, fg, bold, skip)| cell(s, fg, bold, skip))
    }

    proptest! {
        /// Two rows encode alike exactly when their cells are alike.
        #[test]
        fn rows_encode_alike_only_when_alike(
            a in proptest::collection::vec(any_cell(), 0..6),
            b in proptest::collection::vec(any_cell(), 0..6),
        ) {
            prop_assert_eq!(encoded(&a) == encoded(&b), a == b);
        }

        /// The cells written over a row are those ratatui's own diff of the two rows picks,
        /// wide characters, their covered cells and skipped cells included.
        #[test]
        fn the_cells_written_are_ratatuis_diff(
            (a, b) in (1_usize..8).prop_flat_map(|n| (
                proptest::collection::vec(any_cell(), n),
                proptest::collection::vec(any_cell(), n),
            )),
        ) {
            let area = Rect::new(0, 0, u16::try_from(a.len()).unwrap(), 1);
            let before = Buffer { area, content: a.clone() };
            let now = Buffer { area, content: b.clone() };
            let theirs: Vec<(u16, u16, Cell)> =
                before.diff(&now).into_iter().map(|(x, y, c)| (x, y, c.clone())).collect();
            let pick = cells_to_write(&b, &encoded(&b), &encoded(&a)).unwrap();
            let mut ours = Vec::new();
            row_updates(&b, 0, 0, Some(&pick), &mut ours);
            let ours: Vec<(u16, u16, Cell)> =
                ours.into_iter().map(|(x, y, c)| (x, y, c.clone())).collect();
            prop_assert_eq!(ours, theirs);
        }
    }

    /// A row of another length than the one painted is written whole.
    #[test]
    fn a_row_of_another_length_is_not_diffed() {
        let r = Color::Reset;
        let row = [cell("a", r, false, false), cell("b", r, false, false)];
        assert!(cells_to_write(&row, &encoded(&row), &encoded(&row[..1])).is_none());
        assert!(cells_to_write(&row[..1], &encoded(&row[..1]), &encoded(&row)).is_none());
    }
}
