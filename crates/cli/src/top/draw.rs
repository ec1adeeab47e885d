//! Drawing `hmn top`: a pure function of the sampled [`Screen`] and the [`ViewState`], into
//! any ratatui frame (the terminal's, or the test backend's in the snapshot tests).

use std::fmt::Write as _;
use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Sparkline};

use super::model::{Bar, Change, Gpu, Proc, Screen};
use super::state::{Column, ViewState};
use crate::view::format_size;
use crate::view::printable::printable;

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

/// Draws the whole view.
pub fn draw(f: &mut Frame<'_>, screen: &Screen, state: &ViewState, interval: Duration) {
    let area = f.area();
    let theme = Theme { color: state.color };
    let gpu_lines = gpu_lines(screen, state, &theme, area.width, area.height);
    let gpu_height = u16::try_from(gpu_lines.len()).unwrap_or(u16::MAX);
    let [head, gpus, ram, table] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(gpu_height),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    f.render_widget(
        Paragraph::new(header(screen, state, &theme, interval)),
        head,
    );
    draw_gpus(f, gpus, gpu_lines, &theme, interval);
    f.render_widget(Paragraph::new(ram_line(screen, &theme)), ram);
    f.render_widget(
        Paragraph::new(table_lines(screen, state, &theme, table)),
        table,
    );
    if state.help {
        draw_help(f, area);
    }
}

fn header<'a>(screen: &Screen, state: &ViewState, theme: &Theme, interval: Duration) -> Line<'a> {
    let gpus = match &screen.gpus {
        Ok(g) if g.len() == 1 => "1 GPU".to_string(),
        Ok(g) => format!("{} GPUs", g.len()),
        Err(_) => "no GPU".to_string(),
    };
    let mut spans = vec![
        Span::styled("hmn top", theme.bold()),
        Span::raw(format!("  {gpus}, every {}", human(interval))),
    ];
    if let Some(g) = state.gpu {
        spans.push(Span::raw(format!("  [GPU {g}]")));
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
    spans.push(Span::styled("  ? help  q quit", theme.dim()));
    Line::from(spans)
}

/// The lines of the GPU part, leaving the process table at least five rows: every GPU with its
/// bar, legend, history and MIG instances when they fit, else fewer lines per GPU.
fn gpu_lines<'a>(
    screen: &'a Screen,
    state: &ViewState,
    theme: &Theme,
    width: u16,
    height: u16,
) -> Vec<GpuLine<'a>> {
    let gpus = match &screen.gpus {
        Ok(g) => g,
        Err(why) => {
            return wrap(&printable(why), usize::from(width))
                .into_iter()
                .map(|l| GpuLine::Text(Line::styled(l, theme.dim())))
                .collect();
        }
    };
    let budget = usize::from(height.saturating_sub(8)).max(gpus.len());
    for detail in [Detail::Full, Detail::Bar, Detail::Title] {
        let lines: Vec<GpuLine<'a>> = gpus
            .iter()
            .flat_map(|g| gpu_block(g, detail, state.gpu == Some(g.index), theme, width))
            .collect();
        if lines.len() <= budget || detail == Detail::Title {
            return lines;
        }
    }
    Vec::new()
}

/// `text` in lines of at most `width` characters, broken between words where it can be.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        while width > 0 && line.chars().count() > width {
            let rest: String = line.chars().skip(width).collect();
            lines.push(line.chars().take(width).collect());
            line = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// How much of each GPU is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    Full,
    Bar,
    Title,
}

/// A line of the GPU part: text, or a GPU's history (drawn by the sparkline widget).
enum GpuLine<'a> {
    Text(Line<'a>),
    History(&'a Gpu),
}

fn gpu_block<'a>(
    g: &'a Gpu,
    detail: Detail,
    picked: bool,
    theme: &Theme,
    width: u16,
) -> Vec<GpuLine<'a>> {
    let mut out = vec![GpuLine::Text(title(g, picked, theme))];
    let Some(bar) = g.bar else {
        return out;
    };
    if detail == Detail::Title {
        return out;
    }
    out.push(GpuLine::Text(bar_line(&bar, theme, usize::from(width))));
    if detail == Detail::Full {
        out.push(GpuLine::Text(legend(&bar, theme)));
        out.push(GpuLine::History(g));
        for m in &g.mig {
            out.push(GpuLine::Text(mig_line(m)));
        }
    }
    out
}

fn title<'a>(g: &Gpu, picked: bool, theme: &Theme) -> Line<'a> {
    let mark = if picked { "▶ " } else { "" };
    let info = match &g.info {
        Ok(i) => i,
        Err(why) => {
            return Line::from(vec![
                Span::styled(format!("{mark}GPU {}", g.index), theme.bold()),
                Span::styled(
                    format!("  could not be read: {}", printable(why)),
                    theme.fg(Color::Red),
                ),
            ]);
        }
    };
    let source = match info.driver_version.as_deref() {
        Some(v) => format!("{} {}", info.source, printable(v)),
        None => info.source.to_string(),
    };
    let mut text = format!(
        "  {}  ({source})  used {} of {}",
        printable(info.name_or_unknown()),
        format_size(info.used_bytes),
        format_size(info.total_bytes)
    );
    if let (Some(used), Some(total)) = (info.gtt_used_bytes, info.gtt_total_bytes) {
        let _ = write!(
            text,
            ", GTT {} of {}",
            format_size(used),
            format_size(total)
        );
    }
    if let Some(u) = g.util {
        match (u.gpu_percent, u.memory_percent) {
            (Some(g), Some(m)) => {
                let _ = write!(text, ", busy {g}% (mem {m}%)");
            }
            (Some(g), None) => {
                let _ = write!(text, ", busy {g}%");
            }
            (None, Some(m)) => {
                let _ = write!(text, ", mem busy {m}%");
            }
            (None, None) => {}
        }
    }
    match g.listed {
        Some(1) => text.push_str(", 1 process"),
        Some(n) => {
            let _ = write!(text, ", {n} processes");
        }
        None => text.push_str(", processes not readable"),
    }
    Line::from(vec![
        Span::styled(format!("{mark}GPU {}", g.index), theme.bold()),
        Span::raw(text),
    ])
}

/// The parts' widths in `cells`, in proportion, adding up to `cells`; a part that is not zero
/// gets at least one cell when there is room.
pub fn split(parts: [u64; 4], cells: usize) -> [usize; 4] {
    let total: u128 = parts.iter().map(|&p| u128::from(p)).sum();
    let mut out = [0_usize; 4];
    if total == 0 || cells == 0 {
        return out;
    }
    let cells128 = u128::try_from(cells).unwrap_or(0);
    for (o, &p) in out.iter_mut().zip(&parts) {
        let share = u128::from(p) * cells128 / total;
        *o = usize::try_from(share).unwrap_or(0);
        if p > 0 && *o == 0 {
            *o = 1;
        }
    }
    // Add or take the rounding's difference from the largest part.
    let sum: usize = out.iter().sum();
    if let Some(big) = out.iter_mut().max_by_key(|o| **o) {
        if sum < cells {
            *big += cells - sum;
        } else {
            *big = big.saturating_sub(sum - cells);
        }
    }
    out
}

fn bar_line<'a>(bar: &Bar, theme: &Theme, width: usize) -> Line<'a> {
    let cells = width.saturating_sub(2);
    let [r, h, x, f] = split(
        [bar.reserved.unwrap_or(0), bar.held, bar.hidden, bar.free],
        cells,
    );
    Line::from(vec![
        Span::raw("["),
        Span::styled(RESERVED.to_string().repeat(r), theme.reserved()),
        Span::styled(HELD.to_string().repeat(h), theme.held()),
        Span::styled(HIDDEN.to_string().repeat(x), theme.hidden()),
        Span::styled(FREE.to_string().repeat(f), theme.free()),
        Span::raw("]"),
    ])
}

fn legend<'a>(bar: &Bar, theme: &Theme) -> Line<'a> {
    let mut spans = Vec::new();
    if let Some(r) = bar.reserved {
        spans.push(Span::styled(
            format!(" {RESERVED} reserved {}", format_size(r)),
            theme.reserved(),
        ));
    }
    let held = if bar.reserved.is_some() {
        "held by processes"
    } else {
        "used"
    };
    spans.push(Span::styled(
        format!("  {HELD} {held} {}", format_size(bar.held)),
        theme.held(),
    ));
    if bar.hidden > 0 {
        spans.push(Span::styled(
            format!(
                "  {HIDDEN} not visible from here {}",
                format_size(bar.hidden)
            ),
            theme.hidden(),
        ));
    }
    spans.push(Span::styled(
        format!("  {FREE} free {}", format_size(bar.free)),
        theme.free(),
    ));
    Line::from(spans)
}

fn mig_line<'a>(m: &hypomnesis::MigGpuInstance) -> Line<'a> {
    let id = m
        .gpu_instance_id
        .map_or_else(|| "?".to_string(), |i| i.to_string());
    let profile = m.profile.as_deref().map(printable).unwrap_or_default();
    let figures = match (m.used_bytes, m.total_bytes) {
        (Some(u), Some(t)) => format!("used {} of {}", format_size(u), format_size(t)),
        _ => "figures unknown".to_string(),
    };
    Line::raw(format!("  MIG GI {id} {profile}  {figures}"))
}

fn draw_gpus(
    f: &mut Frame<'_>,
    area: Rect,
    lines: Vec<GpuLine<'_>>,
    theme: &Theme,
    interval: Duration,
) {
    let rows = Layout::vertical(lines.iter().map(|_| Constraint::Length(1))).split(area);
    for (line, rect) in lines.into_iter().zip(rows.iter()) {
        match line {
            GpuLine::Text(l) => f.render_widget(Paragraph::new(l), *rect),
            GpuLine::History(g) => draw_history(f, *rect, g, theme, interval),
        }
    }
}

/// The used memory over the last refreshes, scaled to the total, with its span as a label.
fn draw_history(f: &mut Frame<'_>, rect: Rect, g: &Gpu, theme: &Theme, interval: Duration) {
    let cells = usize::from(rect.width.saturating_sub(18));
    let n = g.history.len().min(cells);
    let span = interval.saturating_mul(u32::try_from(n.saturating_sub(1)).unwrap_or(u32::MAX));
    let label = if n <= 1 {
        " used, 1 sample".to_string()
    } else {
        format!(" used, last {}", human(span))
    };
    let label_width = u16::try_from(label.chars().count()).unwrap_or(0);
    let [spark, text] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(label_width)]).areas(rect);
    let cells = usize::from(spark.width);
    let data: Vec<u64> = g
        .history
        .iter()
        .skip(g.history.len().saturating_sub(cells))
        .copied()
        .collect();
    let total = g.bar.map_or(1, |b| b.total.max(1));
    f.render_widget(
        Sparkline::default()
            .data(&data)
            .max(total)
            .style(theme.held()),
        spark,
    );
    f.render_widget(Paragraph::new(Span::styled(label, theme.dim())), text);
}

/// `250ms`, `1s`, `1.5s`, `4m`, `2m30s`, `1h5m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        return if ms.is_multiple_of(1000) {
            format!("{}s", ms / 1000)
        } else {
            format!("{:.1}s", d.as_secs_f64())
        };
    }
    let s = d.as_secs();
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

fn ram_line<'a>(screen: &Screen, theme: &Theme) -> Line<'a> {
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
    Line::from(vec![
        Span::raw(ram),
        Span::styled(format!("  ·  this view: {rss} RSS, {cpu} CPU"), theme.dim()),
    ])
}

/// A column of the table as drawn: which, its header, its width.
struct Col {
    column: Column,
    /// For per-GPU memory columns, the GPU.
    gpu: Option<u32>,
    header: String,
    width: usize,
}

/// The columns that fit `width`: PID, GPU memory and COMMAND always; then RSS, USER, CPU% and
/// TYPE as room allows (in that order of importance); one GPU column per GPU when there are
/// two to four and none is picked.
fn columns(screen: &Screen, state: &ViewState, width: usize) -> Vec<Col> {
    const COMMAND_MIN: usize = 12;
    let n_gpus = screen.gpus.as_ref().map_or(0, Vec::len);
    let col = |column: Column, gpu: Option<u32>, width: usize| Col {
        column,
        gpu,
        header: match gpu {
            Some(g) => format!("GPU{g}"),
            None => column.name().to_string(),
        },
        width,
    };
    let gpu_cols: Vec<Col> = match state.gpu {
        // No GPU: no GPU column (the table lists the host's processes).
        _ if n_gpus == 0 => Vec::new(),
        Some(g) => vec![col(Column::Gpu, Some(g), 9)],
        None if (2..=4).contains(&n_gpus) => (0..n_gpus)
            .filter_map(|g| u32::try_from(g).ok())
            .map(|g| col(Column::Gpu, Some(g), 9))
            .collect(),
        None => vec![col(Column::Gpu, None, 9)],
    };
    let optional = [
        (Column::Rss, 9),
        (Column::User, 10),
        (Column::Cpu, 6),
        (Column::Type, 4),
    ];
    let fixed = 8 + gpu_cols.iter().map(|c| c.width + 1).sum::<usize>() + 1;
    let mut room = width.saturating_sub(fixed + COMMAND_MIN);
    let mut keep = Vec::new();
    for (c, w) in optional {
        if w < room {
            room -= w + 1;
            keep.push(c);
        }
    }
    let mut out = vec![col(Column::Pid, None, 8)];
    for c in [Column::User, Column::Type] {
        if keep.contains(&c) {
            out.push(col(c, None, if c == Column::User { 10 } else { 4 }));
        }
    }
    out.extend(gpu_cols);
    for c in [Column::Rss, Column::Cpu] {
        if keep.contains(&c) {
            out.push(col(c, None, if c == Column::Rss { 9 } else { 6 }));
        }
    }
    out.push(col(Column::Command, None, 0));
    out
}

/// `s` cut to `width` characters (the last one `…` when cut), padded to it, right-aligned
/// when `right`.
fn cell(s: &str, width: usize, right: bool) -> String {
    let text = crate::view::cut(s, width);
    if right {
        format!("{text:>width$}")
    } else {
        format!("{text:<width$}")
    }
}

fn table_lines<'a>(screen: &Screen, state: &ViewState, theme: &Theme, area: Rect) -> Vec<Line<'a>> {
    let cols = columns(screen, state, usize::from(area.width));
    let arrow = if state.descending { "▼" } else { "▲" };
    let mut sorted_marked = false;
    // Without a GPU column the GPU order is the RSS order.
    let sort = match state.sort {
        Column::Gpu if !cols.iter().any(|c| c.column == Column::Gpu) => Column::Rss,
        other => other,
    };
    let head: Vec<String> = cols
        .iter()
        .map(|c| {
            let mut h = c.header.clone();
            if c.column == sort && !sorted_marked {
                sorted_marked = true;
                h.push_str(arrow);
            }
            let right = !matches!(
                c.column,
                Column::Pid | Column::User | Column::Type | Column::Command
            );
            cell(&h, c.width.max(h.chars().count()), right)
        })
        .collect();
    let mut lines = vec![Line::styled(
        head.join(" "),
        theme.bold().add_modifier(Modifier::REVERSED),
    )];
    let rows = state.rows(&screen.procs);
    if rows.is_empty() {
        let why = if screen.procs.is_empty() && screen.gpus.is_err() {
            "no process can be read here"
        } else if screen.procs.is_empty() {
            "no process holds GPU memory that this view can see"
        } else {
            "no process matches"
        };
        lines.push(Line::styled(format!("  ({why})"), theme.dim()));
    }
    let room = usize::from(area.height.saturating_sub(1));
    let shown = rows.len().min(room);
    for p in rows.iter().take(if rows.len() > room {
        room.saturating_sub(1)
    } else {
        shown
    }) {
        lines.push(proc_line(p, &cols, state, theme));
    }
    if rows.len() > room && room > 0 {
        let more = rows.len() - room.saturating_sub(1);
        lines.push(Line::styled(format!("  … {more} more"), theme.dim()));
    }
    lines
}

fn proc_line<'a>(p: &Proc, cols: &[Col], state: &ViewState, theme: &Theme) -> Line<'a> {
    let cells: Vec<String> = cols
        .iter()
        .map(|c| {
            let text = match (c.column, c.gpu) {
                (Column::Pid, _) => match p.change {
                    Change::New => format!("+{}", p.pid),
                    Change::Gone => format!("-{}", p.pid),
                    Change::Steady => p.pid.to_string(),
                },
                (Column::User, _) => p
                    .user
                    .as_deref()
                    .map_or_else(|| "?".into(), |u| printable(u).into_owned()),
                (Column::Type, _) => crate::view::ps::type_cell(p.kind).to_string(),
                (Column::Gpu, Some(g)) => p
                    .gpu
                    .get(&g)
                    .map_or_else(|| "-".into(), |&b| format_size(b)),
                (Column::Gpu, None) => format_size(state.gpu_bytes(p)),
                (Column::Rss, _) => p.rss.map_or_else(|| "?".into(), format_size),
                (Column::Cpu, _) => p.cpu.map_or_else(|| "-".into(), |c| format!("{c:.1}")),
                (Column::Command, _) => {
                    let c = p
                        .command
                        .as_deref()
                        .map_or_else(|| "?".into(), |c| printable(c).into_owned());
                    if p.change == Change::Gone {
                        format!("(exited) {c}")
                    } else {
                        c
                    }
                }
            };
            let right = !matches!(
                c.column,
                Column::Pid | Column::User | Column::Type | Column::Command
            );
            if c.column == Column::Command {
                text
            } else {
                cell(&text, c.width, right)
            }
        })
        .collect();
    let style = match p.change {
        Change::New => theme.fg(Color::Green).add_modifier(Modifier::BOLD),
        Change::Gone => theme.dim(),
        Change::Steady => Style::default(),
    };
    Line::styled(cells.join(" "), style)
}

/// The keys, in a box over the middle of the view.
fn draw_help(f: &mut Frame<'_>, area: Rect) {
    const KEYS: [(&str, &str); 11] = [
        ("q, Esc, Ctrl-C", "quit"),
        ("?, h", "this help (Esc closes it)"),
        ("< >, ← →", "sort by the column to the left / right"),
        ("r", "reverse the order"),
        (
            "/",
            "filter by pid, user or command (Enter keeps, Esc clears)",
        ),
        ("p, space", "pause (nothing is read while paused)"),
        ("g, Tab", "the next GPU: its processes and memory only"),
        ("0-9", "that GPU"),
        ("a", "all GPUs"),
        (
            "the bar",
            "▒ reserved, █ held, ▓ not visible from here, ░ free",
        ),
        (
            "PID +n, -n",
            "a process new since the last refresh, gone since",
        ),
    ];
    let lines: Vec<Line<'_>> = KEYS
        .iter()
        .map(|(k, what)| Line::raw(format!(" {k:<15} {what}")))
        .collect();
    let height = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let width = area.width.min(80);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    };
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" hmn top: keys ")),
        rect,
    );
}
