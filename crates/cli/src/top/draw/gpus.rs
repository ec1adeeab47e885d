//! The GPU part of `hmn top`: each GPU's title, memory bar and legend, history and MIG
//! instances, fitted to the rows left above the table.

use std::fmt::Write as _;
use std::time::Duration;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Sparkline, Widget};

use super::{FREE, HELD, HIDDEN, RESERVED, Theme, human};
use crate::top::model::{Bar, Gpu, Screen};
use crate::top::state::ViewState;
use crate::view::format_size;
use crate::view::printable::printable;

/// The lines of the GPU part, leaving the process table at least five rows: every GPU with its
/// bar, legend, history and MIG instances when they fit, else fewer lines per GPU.
pub(super) fn gpu_lines<'a>(
    screen: &'a Screen,
    state: &ViewState,
    theme: &Theme,
    width: u16,
    height: u16,
    interval: Duration,
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
            .flat_map(|g| {
                let picked = state.gpu == Some(g.index);
                gpu_block(g, detail, picked, theme, width, interval)
            })
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
pub(super) enum Detail {
    Full,
    Bar,
    Title,
}

/// A line of the GPU part: text, or a GPU's history (drawn by the sparkline widget).
pub(super) enum GpuLine<'a> {
    Text(Line<'a>),
    History(History),
}

fn gpu_block<'a>(
    g: &'a Gpu,
    detail: Detail,
    picked: bool,
    theme: &Theme,
    width: u16,
    interval: Duration,
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
        out.push(GpuLine::History(History::of(g, theme, width, interval)));
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
    // Of what: a unified GPU's figures are the host's pool, a coherent one's its own memory.
    let of = match info.memory_model {
        Some(hypomnesis::MemoryModel::Unified) => " unified memory (the host's)",
        Some(hypomnesis::MemoryModel::Coherent) => " (coherent with the CPU's)",
        _ => "",
    };
    let mut text = format!(
        "  {}  ({source})  used {} of {}{of}",
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
    // Its memory as a NUMA node: what the kernel placed there, beside the driver's figures.
    if let Some(n) = info.numa_node {
        match (info.numa_node_used_bytes, info.numa_node_total_bytes) {
            (Some(used), Some(total)) => {
                let _ = write!(
                    text,
                    ", node {n} {} of {}",
                    format_size(used),
                    format_size(total)
                );
            }
            _ => {
                let _ = write!(text, ", node {n} ?");
            }
        }
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

/// A GPU's history line as drawn: the used memory over the last refreshes, scaled to the
/// total, with its span as a label. Two alike draw the same cells.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct History {
    /// The latest points, one a cell of the sparkline.
    points: Vec<u64>,
    /// The sparkline's full height: the GPU's total.
    max: u64,
    label: String,
    spark: Style,
    dim: Style,
}

impl History {
    fn of(g: &Gpu, theme: &Theme, width: u16, interval: Duration) -> Self {
        let (label, points) = shown_history(g, width, interval);
        Self {
            points: points.to_vec(),
            max: g.bar.map_or(1, |b| b.total.max(1)),
            label,
            spark: theme.held(),
            dim: theme.dim(),
        }
    }

    /// Draws it on the row `rect`.
    pub(super) fn render(&self, buf: &mut Buffer, rect: Rect) {
        let (spark, text) = history_areas(rect, &self.label);
        Sparkline::default()
            .data(&self.points)
            .max(self.max)
            .style(self.spark)
            .render(spark, buf);
        let label = Line::from(Span::styled(self.label.as_str(), self.dim));
        super::line_row(buf, text, &label);
    }
}

/// Whether GPUs `a` and `b` draw alike on a terminal `width` wide: every figure alike, and
/// their histories as their lines show them.
pub(super) fn drawn_alike(a: &Gpu, b: &Gpu, width: u16, interval: Duration) -> bool {
    // Every field named: one added later is compared, or left out, on purpose.
    let Gpu {
        index,
        info,
        bar,
        history: _,
        mig,
        listed,
        util,
    } = a;
    *index == b.index
        && *info == b.info
        && *bar == b.bar
        && *mig == b.mig
        && *listed == b.listed
        && *util == b.util
        && shown_history(a, width, interval) == shown_history(b, width, interval)
}

/// What the history line of `g` shows on a row `width` wide: its label, and the latest points
/// of the history, as many as the sparkline beside the label has cells.
pub(super) fn shown_history(g: &Gpu, width: u16, interval: Duration) -> (String, &[u64]) {
    let cells = usize::from(width.saturating_sub(18));
    let n = g.history.len().min(cells);
    let span = interval.saturating_mul(u32::try_from(n.saturating_sub(1)).unwrap_or(u32::MAX));
    let label = if n <= 1 {
        " used, 1 sample".to_string()
    } else {
        format!(" used, last {}", human(span))
    };
    let (spark, _) = history_areas(Rect::new(0, 0, width, 1), &label);
    let shown = usize::from(spark.width);
    let points = g
        .history
        .get(g.history.len().saturating_sub(shown)..)
        .unwrap_or_default();
    (label, points)
}

/// The sparkline's part of a history row, and its label's: the label at the right, whole
/// where the row has room (the split `Layout` makes of `[Min(0), Length(label)]`, without its
/// solver, which cost as much as the rest of a refresh's comparison of two views).
fn history_areas(rect: Rect, label: &str) -> (Rect, Rect) {
    let label_width = u16::try_from(label.chars().count())
        .unwrap_or(u16::MAX)
        .min(rect.width);
    let spark = Rect {
        width: rect.width - label_width,
        ..rect
    };
    let text = Rect {
        x: rect.x + spark.width,
        width: label_width,
        ..rect
    };
    (spark, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::{Constraint, Layout};

    /// The history row splits as ratatui's layout splits it, label or row the wider.
    #[test]
    fn the_history_row_splits_as_the_layout_does() {
        for width in 0..120 {
            for len in 0..40 {
                let label = "x".repeat(len);
                let rect = Rect::new(3, 7, width, 1);
                let lw = u16::try_from(len).unwrap_or(u16::MAX);
                let [spark, text] =
                    Layout::horizontal([Constraint::Min(0), Constraint::Length(lw)]).areas(rect);
                assert_eq!(history_areas(rect, &label), (spark, text), "{width} {len}");
            }
        }
    }
}
