//! The process table of `hmn top`: the columns that fit the width, and one line a process.

use std::sync::Arc;

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

use super::Theme;
use crate::top::model::{Change, Proc, Screen};
use crate::top::state::{Column, ViewState};
use crate::view::format_size;
use crate::view::groups::{GroupBy, key_cell};
use crate::view::printable::printable;

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

/// Everything [`table_lines`] draws from, and where: two frames with equal keys draw the same
/// table. What it reads of the screen beyond its rows (the ghosts' marks, how many GPUs,
/// whether there are none, the memory no listed process accounts for) is kept as those
/// figures; a new read of the screen in `table_lines` belongs here too, or a table drawn over
/// the last would go stale.
#[derive(Debug, Clone)]
pub(super) struct TableKey {
    area: Rect,
    procs: Arc<Vec<Proc>>,
    ghosts: super::DrawnGhosts,
    gpus: Result<usize, ()>,
    hidden: u64,
    state: ViewState,
}

impl TableKey {
    pub(super) fn new(screen: &Screen, state: &ViewState, area: Rect) -> Self {
        Self {
            area,
            procs: Arc::clone(&screen.procs),
            ghosts: super::drawn_ghosts(screen),
            gpus: screen.gpus.as_ref().map(Vec::len).map_err(|_| ()),
            hidden: hidden_bytes(screen, state),
            // What the last action said is the header's, not the table's.
            state: ViewState {
                message: None,
                ..state.clone()
            },
        }
    }
}

impl PartialEq for TableKey {
    fn eq(&self, other: &Self) -> bool {
        self.area == other.area
            && (Arc::ptr_eq(&self.procs, &other.procs) || self.procs == other.procs)
            && self.ghosts == other.ghosts
            && self.gpus == other.gpus
            && self.hidden == other.hidden
            && self.state == other.state
    }
}

pub(super) fn table_lines<'a>(
    screen: &Screen,
    state: &ViewState,
    theme: &Theme,
    area: Rect,
) -> Vec<Line<'a>> {
    if let Some(by) = state.group {
        return group_lines(screen, state, by, theme, area);
    }
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
            crate::view::fit(&h, c.width.max(h.chars().count()), right)
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
    let window = state.window(rows.len(), usize::from(area.height));
    let selected = state.selected;
    for p in rows.iter().skip(window.first).take(window.shown) {
        let line = proc_line(p, screen.ghost_of(p.pid), &cols, state, theme);
        let picked = selected.is_some_and(|s| s.pid == p.pid && s.start == p.start);
        lines.push(if picked {
            selected_line(&line, area.width)
        } else {
            line
        });
    }
    if window.shown < rows.len() && area.height > 1 {
        lines.push(Line::styled(
            format!(
                "  rows {}–{} of {}  ·  ↑ ↓ PgUp PgDn Home End, Enter: details, k: signal",
                window.first + 1,
                window.first + window.shown,
                window.total
            ),
            theme.dim(),
        ));
    }
    lines
}

/// A row as the selected one: reversed, padded to the width so the bar runs across.
fn selected_line(line: &Line<'_>, width: u16) -> Line<'static> {
    let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
    let pad = usize::from(width).saturating_sub(text.chars().count());
    Line::styled(
        format!("{text}{}", " ".repeat(pad)),
        line.style.add_modifier(Modifier::REVERSED),
    )
}

fn proc_line<'a>(
    p: &Proc,
    ghost: Option<crate::top::model::Mark>,
    cols: &[Col],
    state: &ViewState,
    theme: &Theme,
) -> Line<'a> {
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
                (Column::Gpu, Some(g)) => {
                    p.gpu.get(g).map_or_else(|| "-".into(), |&b| format_size(b))
                }
                (Column::Gpu, None) => format_size(state.gpu_bytes(p)),
                (Column::Rss, _) => p.rss.map_or_else(|| "?".into(), format_size),
                (Column::Cpu, _) => p.cpu.map_or_else(|| "-".into(), |c| format!("{c:.1}")),
                (Column::Command, _) => {
                    let c = p
                        .command
                        .as_deref()
                        .map_or_else(|| "?".into(), |c| printable(c).into_owned());
                    let c = if p.mps_server {
                        format!("{c} (MPS server)")
                    } else {
                        c
                    };
                    // Why its owner and command are unknown, as `hmn ps` marks it.
                    let c = match p.unreadable {
                        Some(why) => format!("{c} ({})", crate::view::unseen::mark(why)),
                        None => c,
                    };
                    // A ghost's mark comes first, where a cut command cannot hide it.
                    let c = match ghost {
                        Some(crate::top::model::Mark::Ghost(g)) => format!("[{g}] {c}"),
                        Some(crate::top::model::Mark::Fact(g)) => format!("({g}) {c}"),
                        None => c,
                    };
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
                crate::view::fit(&text, c.width, right)
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

/// The grouped table (`G`): one line a group, `<KEY>  PROCS  GPU MEM  RSS`, largest GPU memory
/// first; the group's name takes the room left.
fn group_lines<'a>(
    screen: &Screen,
    state: &ViewState,
    by: GroupBy,
    theme: &Theme,
    area: Rect,
) -> Vec<Line<'a>> {
    let groups = state.groups(&screen.procs);
    let name_width = usize::from(area.width)
        .saturating_sub(6 + 10 + 10 + 3)
        .max(8);
    let line = |key: &str, procs: &str, gpu: &str, rss: &str| {
        format!(
            "{} {} {} {}",
            crate::view::fit(key, name_width, false),
            crate::view::fit(procs, 6, true),
            crate::view::fit(gpu, 10, true),
            crate::view::fit(rss, 10, true),
        )
    };
    let mut lines = vec![Line::styled(
        line(by.heading(), "PROCS", "GPU MEM▼", "RSS"),
        theme.bold().add_modifier(Modifier::REVERSED),
    )];
    if groups.is_empty() {
        lines.push(Line::styled("  (no process to group)", theme.dim()));
    }
    let room = usize::from(area.height.saturating_sub(1));
    for g in groups.iter().take(room) {
        lines.push(Line::raw(line(
            &crate::view::cut(&key_cell(&g.key, by), name_width),
            &g.processes.to_string(),
            &format_size(g.gpu),
            &g.rss.map_or_else(|| "?".into(), format_size),
        )));
    }
    // The memory no listed process accounts for, as `hmn ps --group-by` shows it (not under
    // a filter, which it cannot match).
    let hidden = hidden_bytes(screen, state);
    if hidden > 0 && state.filter.is_empty() && lines.len() <= room {
        lines.push(Line::styled(
            line("(not visible from here)", "-", &format_size(hidden), "-"),
            theme.hidden(),
        ));
    }
    lines
}

/// The memory the GPUs shown (the picked one, else all) hold for processes not listed here.
fn hidden_bytes(screen: &Screen, state: &ViewState) -> u64 {
    screen.gpus.as_ref().map_or(0, |gpus| {
        gpus.iter()
            .filter(|g| state.gpu.is_none_or(|i| i == g.index))
            .filter_map(|g| g.bar.map(|b| b.hidden))
            .fold(0, u64::saturating_add)
    })
}
