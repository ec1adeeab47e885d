//! Drawing `hmn top`: a function of the sampled [`Screen`] and the [`ViewState`], into any
//! ratatui frame (the terminal's, or the test backend's in the snapshot tests). Drawn over the
//! last frame ([`draw_over`]), it leaves a process table, and each line above it, that would
//! come out the same; the frame is then what drawing it whole gives
//! (`crates/cli/src/top/tests/over.rs`).

use std::sync::Arc;
use std::time::Duration;

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Widget};

use super::model::Screen;
use super::state::ViewState;
use crate::view::format_size;
pub use crate::view::human;
use crate::view::printable::printable;

mod detail;
pub(super) mod gpus;
mod rows;
mod table;

use gpus::{GpuLine, gpu_lines};
use rows::Row;
use table::{TableKey, table_lines};

/// Lines drawn one to a row and cut at the area's width: what `Paragraph` draws for lines
/// that never wrap, without its passes over every cell of the area (and of each row) for a
/// style that is most often none. A line with a style of its own still gets it across its
/// whole row. (A refresh a second spent a tenth of its time in those passes.)
pub(super) struct Rows<'a>(pub Vec<Line<'a>>);

impl Widget for Rows<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        for (line, y) in self.0.iter().zip(area.top()..area.bottom()) {
            line_row(buf, Rect::new(area.x, y, area.width, 1), line);
        }
    }
}

/// `line` drawn on the row `rect` as [`Rows`] draws each of its lines.
pub(super) fn line_row(buf: &mut Buffer, rect: Rect, line: &Line<'_>) {
    if line.style != Style::default() {
        buf.set_style(rect, line.style);
    }
    set_line(buf, rect.x, rect.y, line, rect.width);
}

/// `Buffer::set_line`, with its spans of ASCII text set a byte to a cell: a printable ASCII
/// character is one grapheme one cell wide, and a control character is left out, as
/// `set_line` does, without its grapheme split and width lookups (a quarter of `hmn top`'s
/// instructions at 20 processes, by callgrind). Other spans go through `set_stringn`.
pub(super) fn set_line(buf: &mut Buffer, x: u16, y: u16, line: &Line<'_>, max_width: u16) {
    let (mut x, mut remaining) = (x, max_width);
    for span in line {
        if remaining == 0 {
            break;
        }
        let style = line.style.patch(span.style);
        let text: &str = span.content.as_ref();
        let width = if text.is_ascii() {
            let room = buf.area.right().saturating_sub(x).min(remaining);
            let mut w = 0;
            for b in text.bytes().filter(|b| !b.is_ascii_control()) {
                if w == room {
                    break;
                }
                if let Some(cell) = buf.cell_mut((x + w, y)) {
                    cell.set_char(char::from(b)).set_style(style);
                }
                w += 1;
            }
            w
        } else {
            let end = buf.set_stringn(x, y, text, usize::from(remaining), style).0;
            end.saturating_sub(x)
        };
        x += width;
        remaining = remaining.saturating_sub(width);
    }
}

/// The bar's glyphs, one per part, told apart without colour too.
pub const RESERVED: char = '▒';
pub const HELD: char = '█';
pub const HIDDEN: char = '▓';
pub const FREE: char = '░';

/// Styles, or none at all under `NO_COLOR`.
struct Theme {
    color: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    /// Bold and dim are no colours: kept under `NO_COLOR`.
    fn bold(&self) -> Style {
        let _ = self.color;
        Style::default().add_modifier(Modifier::BOLD)
    }
    /// A refresh that is late: bold, red where colour is allowed.
    fn late(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    fn dim(&self) -> Style {
        let _ = self.color;
        Style::default().add_modifier(Modifier::DIM)
    }
    fn reserved(&self) -> Style {
        self.fg(Color::DarkGray)
    }
    fn held(&self) -> Style {
        self.fg(Color::Green)
    }
    fn hidden(&self) -> Style {
        self.fg(Color::Magenta)
    }
    fn free(&self) -> Style {
        self.fg(Color::Gray)
    }
}

/// A refresh that has not come when it should have: the view says so, and on what it waits,
/// instead of showing old figures as live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Late {
    /// How old the figures shown are, in whole seconds; `None` before the first refresh.
    pub age: Option<Duration>,
    /// How long the view has waited for figures, when it has none yet.
    pub waited: Duration,
    /// What the measurement is still waiting on (a file, a driver call), when the library
    /// says; `None`: nothing it names.
    pub on: Option<String>,
}

impl Late {
    fn sentence(&self) -> String {
        let when = match self.age {
            Some(age) => format!("figures {} old", human(age)),
            None => format!("no figures after {}", human(self.waited)),
        };
        match &self.on {
            Some(on) => format!("{when}: waiting for {}", printable(on)),
            None => format!("{when}: the refresh has not returned"),
        }
    }
}

/// Draws the whole view; `late` when a refresh is overdue. Returns where the process table
/// is (its header line first), for the mouse. (The snapshot tests' form of [`draw_over`].)
#[cfg(test)]
pub fn draw(
    f: &mut Frame<'_>,
    screen: &Screen,
    state: &ViewState,
    interval: Duration,
    late: Option<&Late>,
) -> Rect {
    draw_over(
        f,
        screen,
        state,
        interval,
        late,
        &mut Drawn::default(),
        false,
    )
    .0
}

/// What the last frame drew its process table from, to draw the next one over it.
#[derive(Debug, Default)]
pub struct Drawn {
    /// `None` when no table was drawn, or something was drawn over it (help, a question).
    table: Option<TableKey>,
    /// What each row above the table was drawn from (none when the frame was not this view).
    rows: rows::Memo,
}

/// Draws the view over the frame `drawn` says was drawn last, when `holds_last` (the frame's
/// buffer still holds it): a process table that would come out the same is left as it is,
/// neither cleared nor drawn again, and so is each line above it that would (most refreshes
/// change a GPU's history line and nothing else); all else is cleared and drawn. Returns where
/// the table is, and which rows (from the top) were left as they were: none when the whole
/// frame was drawn.
pub fn draw_over(
    f: &mut Frame<'_>,
    screen: &Screen,
    state: &ViewState,
    interval: Duration,
    late: Option<&Late>,
    drawn: &mut Drawn,
    holds_last: bool,
) -> (Rect, Vec<bool>) {
    let last = drawn.table.take();
    let last_rows = std::mem::take(&mut drawn.rows);
    let area = f.area();
    let theme = Theme { color: state.color };
    let inspected = state
        .inspect
        .then(|| state.selected_proc(&screen.procs))
        .flatten();
    if let Some(p) = inspected {
        let rest = draw_details(f, screen, state, (&theme, interval, late), p);
        return (rest, Vec::new());
    }
    let gpu_lines = gpu_lines(screen, state, &theme, area.width, area.height, interval);
    let gpu_height = u16::try_from(gpu_lines.len()).unwrap_or(u16::MAX);
    let ghosts = ghost_line(screen, &theme);
    let [head, gpus, ram, key, table] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_height),
        Constraint::Length(1),
        Constraint::Length(u16::from(ghosts.is_some())),
        Constraint::Min(0),
    ])
    .areas(area);
    let overlaid = state.confirm.is_some() || state.help;
    let now = (!overlaid).then(|| TableKey::new(screen, state, table));
    // Over the last frame where it was this view at this size, with nothing drawn over it.
    let over = holds_last && !overlaid && last_rows.holds(area.height);
    if !over {
        f.buffer_mut().reset();
    }
    let header = header(screen, state, &theme, interval, late);
    let lines = lines_above(
        header,
        (gpus, gpu_lines),
        ram_line(screen, &theme),
        ghosts,
        [head, ram, key],
    );
    let mut kept = vec![false; usize::from(area.height)];
    let table_rows = table.top()..table.bottom();
    let memo = rows::draw_rows(
        f.buffer_mut(),
        area,
        lines,
        last_rows,
        over,
        &table_rows,
        &mut kept,
    );
    if over && now.is_some() && last == now {
        for k in kept
            .iter_mut()
            .skip(usize::from(table.y.saturating_sub(area.y)))
            .take(usize::from(table.height))
        {
            *k = true;
        }
    } else {
        if over {
            rows::clear(f.buffer_mut(), table_rows);
        }
        f.render_widget(Rows(table_lines(screen, state, &theme, table)), table);
    }
    if let Some(c) = &state.confirm {
        draw_confirm(f, area, c);
    }
    if state.help {
        draw_help(f, area, state.group.is_some());
    }
    drawn.table = now;
    drawn.rows = if overlaid {
        rows::Memo::default()
    } else {
        memo
    };
    (table, kept)
}

/// The details of process `p`, which take the whole view below the title line; returns where
/// they are.
fn draw_details(
    f: &mut Frame<'_>,
    screen: &Screen,
    state: &ViewState,
    (theme, interval, late): (&Theme, Duration, Option<&Late>),
    p: &super::model::Proc,
) -> Rect {
    f.buffer_mut().reset();
    let area = f.area();
    let [head, rest] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    f.render_widget(
        Rows(vec![header(screen, state, theme, interval, late)]),
        head,
    );
    let started = screen
        .focus
        .as_ref()
        .filter(|f| f.pid == p.pid)
        .and_then(|f| f.age)
        .map(|age| format!("{} ago", human(age)));
    f.render_widget(
        Rows(detail::detail_lines(screen, p, started, theme, rest.width)),
        rest,
    );
    if let Some(c) = &state.confirm {
        draw_confirm(f, area, c);
    }
    rest
}

/// The lines above the table, each with its row: the header, the GPU part's lines (as many as
/// its area has rows), the RAM line and the ghosts' key, where their areas have room.
fn lines_above<'a>(
    header: Line<'a>,
    (gpus, gpu_lines): (Rect, Vec<GpuLine<'a>>),
    ram_line: Line<'a>,
    ghosts: Option<Line<'a>>,
    [head, ram, key]: [Rect; 3],
) -> Vec<(u16, Row<'a>)> {
    let mut lines = Vec::with_capacity(gpu_lines.len() + 3);
    lines.push((head, Row::Text(header)));
    let gpu_rows = (gpus.top()..gpus.bottom()).map(|y| Rect {
        y,
        height: 1,
        ..gpus
    });
    lines.extend(gpu_rows.zip(gpu_lines).map(|(rect, line)| match line {
        GpuLine::Text(l) => (rect, Row::Text(l)),
        GpuLine::History(h) => (rect, Row::History(h)),
    }));
    lines.push((ram, Row::Text(ram_line)));
    if let Some(line) = ghosts {
        lines.push((key, Row::Text(line)));
    }
    lines
        .into_iter()
        .filter(|(rect, _)| rect.height > 0)
        .map(|(rect, row)| (rect.y, row))
        .collect()
}

/// The question before a signal goes: which process, which signal, and the keys.
fn draw_confirm(f: &mut Frame<'_>, area: Rect, c: &super::state::Confirm) {
    let command: String = printable(&c.command).chars().take(60).collect();
    let lines = vec![
        Line::raw(format!(" Send {} to pid {}?", c.sig.name(), c.pick.pid)),
        Line::raw(format!(" {command}")),
        Line::raw(""),
        Line::raw(" t SIGTERM · i SIGINT · 9 SIGKILL"),
        Line::raw(" Enter or y: send   Esc or n: cancel"),
    ];
    draw_box(f, area, 70, " hmn top: signal ", lines);
}

/// `lines` in a bordered box titled `title`, at most `width` wide, over the middle of `area`.
fn draw_box(f: &mut Frame<'_>, area: Rect, width: u16, title: &str, lines: Vec<Line<'_>>) {
    let height = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let width = area.width.min(width);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title.to_string())),
        rect,
    );
}

fn header<'a>(
    screen: &Screen,
    state: &ViewState,
    theme: &Theme,
    interval: Duration,
    late: Option<&Late>,
) -> Line<'a> {
    let gpus = match &screen.gpus {
        Ok(g) if g.len() == 1 => "1 GPU".to_string(),
        Ok(g) => format!("{} GPUs", g.len()),
        Err(_) => "no GPU".to_string(),
    };
    let mut spans = vec![
        Span::styled("hmn top", theme.bold()),
        Span::raw(format!("  {gpus}, every {}", human(interval))),
    ];
    if let Some(late) = late {
        spans.push(Span::styled(format!("  {}", late.sentence()), theme.late()));
    }
    if let Some(g) = state.gpu {
        spans.push(Span::raw(format!("  [GPU {g}]")));
    }
    if let Some(by) = state.group {
        spans.push(Span::raw(format!("  [by {}]", by.heading().to_lowercase())));
    }
    if state.editing || !state.filter.is_empty() {
        let cursor = if state.editing { "_" } else { "" };
        spans.push(Span::raw(format!(
            "  filter: {}{cursor}",
            printable(&state.filter)
        )));
    }
    if state.paused {
        spans.push(Span::styled("  PAUSED", theme.bold()));
    }
    match &state.message {
        Some(Ok(said)) => spans.push(Span::styled(format!("  {said}"), theme.fg(Color::Green))),
        Some(Err(why)) => spans.push(Span::styled(format!("  {why}"), theme.late())),
        None => {}
    }
    spans.push(Span::styled("  ? help  q quit", theme.dim()));
    Line::from(spans)
}

fn ram_line<'a>(screen: &Screen, theme: &Theme) -> Line<'a> {
    let (ram, me) = ram_texts(screen);
    Line::from(vec![Span::raw(ram), Span::styled(me, theme.dim())])
}

/// The RAM line's two parts: the host's RAM, and this view's own footprint.
fn ram_texts(screen: &Screen) -> (String, String) {
    let ram = match &screen.ram {
        Ok(m) => match m.available_bytes {
            Some(a) => format!(
                "RAM {}, {} available",
                format_size(m.total_bytes),
                format_size(a)
            ),
            None => format!("RAM {}", format_size(m.total_bytes)),
        },
        Err(why) => format!("RAM: {}", printable(why)),
    };
    let rss = screen.me.rss.map_or_else(|| "?".into(), format_size);
    let cpu = screen
        .me
        .cpu
        .map_or_else(|| "-".into(), |c| format!("{c:.1}%"));
    (ram, format!("  ·  this view: {rss} RSS, {cpu} CPU"))
}

/// Whether two refreshes draw the same view: every figure they show alike, the host's RAM and
/// this view's own footprint as the RAM line prints them (their bytes move at every refresh,
/// their printed figures seldom), and each GPU's history as its line shows it on a terminal
/// `width` wide (`None`: not known yet, the whole history compared). A view that would draw
/// alike is not drawn again, which in a steady view (once the GPU history's line is full, after
/// a refresh per cell of it) is most refreshes.
pub fn draws_alike(a: &Screen, b: &Screen, width: Option<u16>, interval: Duration) -> bool {
    let gpus = match (&a.gpus, &b.gpus, width) {
        (Ok(x), Ok(y), Some(width)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|(x, y)| gpus::drawn_alike(x, y, width, interval))
        }
        _ => a.gpus == b.gpus,
    };
    gpus && (Arc::ptr_eq(&a.procs, &b.procs) || a.procs == b.procs)
        && a.focus == b.focus
        && drawn_ghosts(a) == drawn_ghosts(b)
        && ram_texts(a) == ram_texts(b)
}

/// What the view draws of the latest look for ghosts (the line under the RAM and the rows'
/// marks): each ghost's class, GPU, pid and bytes. The rest of a look (each ghost's evidence
/// and holders, the scan's figures and time) is `hmn ghosts`'s, and changes at every look.
pub(super) fn drawn_ghosts(screen: &Screen) -> DrawnGhosts {
    screen
        .ghosts
        .as_ref()
        .map_or_else(DrawnGhosts::default, |r| {
            let ghosts = r
                .ghosts
                .iter()
                .map(|g| (g.class, g.device_index, g.pid, g.bytes))
                .collect();
            let facts = r.facts.iter().map(|f| (f.class, f.pid)).collect();
            (ghosts, facts)
        })
}

/// What the view draws of a look for ghosts: each ghost's class, GPU, pid and bytes, and each
/// fact's class and pid (a row's mark).
pub(super) type DrawnGhosts = (
    Vec<(hypomnesis::GhostClass, u32, Option<u32>, u64)>,
    Vec<(hypomnesis::GhostClass, u32)>,
);

/// The key to the ghosts' marks, when the latest look found any: each ghost's class, pid (or
/// GPU, for memory no process accounts for) and bytes, largest first.
fn ghost_line<'a>(screen: &Screen, theme: &Theme) -> Option<Line<'a>> {
    let report = screen.ghosts.as_ref().filter(|r| !r.ghosts.is_empty())?;
    let mut ghosts: Vec<&hypomnesis::Ghost> = report.ghosts.iter().collect();
    ghosts.sort_by_key(|g| std::cmp::Reverse(g.bytes));
    let each: Vec<String> = ghosts
        .iter()
        .map(|g| {
            let who = g
                .pid
                .map_or_else(|| format!("GPU {}", g.device_index), |p| format!("pid {p}"));
            format!("[{}] {who} {}", g.class, format_size(g.bytes))
        })
        .collect();
    let total = ghosts.iter().fold(0_u64, |a, g| a.saturating_add(g.bytes));
    Some(Line::from(vec![
        Span::styled(
            format!("ghosts: {} held  ", format_size(total)),
            theme.late(),
        ),
        Span::raw(each.join(", ")),
        Span::styled("  ·  `hmn ghosts` says why", theme.dim()),
    ]))
}

/// The keys, in a box over the middle of the view. The grouped table has no process to select,
/// see or signal: its help says so instead of offering those keys.
fn draw_help(f: &mut Frame<'_>, area: Rect, grouped: bool) {
    const KEYS: [(&str, &str); 18] = [
        ("q, Esc, Ctrl-C", "quit"),
        (
            "↑ ↓, PgUp PgDn",
            "select a process (the wheel scrolls, a click selects)",
        ),
        ("Home, End", "the first, the last process"),
        ("Enter", "the selected process in detail (Esc: back)"),
        ("k, F9", "send it TERM, INT or KILL, after a yes"),
        ("Ctrl-Z", "suspend (fg brings the view back)"),
        ("?, h", "this help (Esc closes it)"),
        ("< >, ← →", "sort by the column to the left / right"),
        ("r", "reverse the order"),
        (
            "/",
            "filter by pid, user, command, namespace or pod (Enter keeps, Esc clears)",
        ),
        ("p, space", "pause (nothing is read while paused)"),
        ("g, Tab", "the next GPU: its processes and memory only"),
        ("0-9", "that GPU"),
        ("a", "all GPUs"),
        ("G", "group by user, pod, namespace, container, or none"),
        (
            "the bar",
            "▒ reserved, █ held, ▓ not visible from here, ░ free",
        ),
        (
            "PID +n, -n",
            "a process new since the last refresh, gone since",
        ),
        ("[idle] …", "a ghost: the line under RAM lists them"),
    ];
    const GROUPED: (&str, &str) = (
        "↑ ↓, Enter, k",
        "none in the grouped table: G until ungrouped selects, shows, signals a process",
    );
    let process_keys = ["↑ ↓, PgUp PgDn", "Home, End", "Enter", "k, F9"];
    let mut shown: Vec<(&str, &str)> = Vec::with_capacity(KEYS.len());
    for key in KEYS {
        match (grouped, process_keys.iter().position(|k| *k == key.0)) {
            (true, Some(0)) => shown.push(GROUPED),
            (true, Some(_)) => {}
            _ => shown.push(key),
        }
    }
    let lines: Vec<Line<'_>> = shown
        .iter()
        .map(|(k, what)| Line::raw(format!(" {k:<15} {what}")))
        .collect();
    draw_box(f, area, 80, " hmn top: keys ", lines);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Style};
    use ratatui::text::{Line, Span};

    /// Text of printable ASCII, control characters, wide and combining characters.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                4 => proptest::char::range(' ', '~'),
                1 => prop_oneof![Just('\t'), Just('\n'), Just('\r'), Just('\u{7f}'), Just('\u{1b}')],
                1 => prop_oneof![Just('学'), Just('█'), Just('é'), Just('\u{301}'), Just('🙂')],
            ],
            0..30,
        )
        .prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        /// The fast path sets every cell as ratatui's `Buffer::set_line` does, wherever the line
        /// starts and however much room it has.
        #[test]
        fn set_line_is_ratatuis(
            spans in proptest::collection::vec((text(), any::<bool>()), 0..5),
            x in 0_u16..30,
            max_width in 0_u16..40,
        ) {
            let line = Line::from(
                spans
                    .iter()
                    .map(|(t, red)| {
                        let style = if *red { Style::default().fg(Color::Red) } else { Style::default() };
                        Span::styled(t.clone(), style)
                    })
                    .collect::<Vec<_>>(),
            )
            .style(Style::default().bg(Color::Blue));
            let area = Rect::new(0, 0, 32, 1);
            let (mut ours, mut theirs) = (Buffer::empty(area), Buffer::empty(area));
            super::set_line(&mut ours, x, 0, &line, max_width);
            theirs.set_line(x, 0, &line, max_width);
            prop_assert_eq!(ours, theirs);
        }
    }
}
