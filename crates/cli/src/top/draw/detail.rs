//! The selected process in detail (Enter): its whole command line, owner, container and pod,
//! start, RSS and CPU, GPU memory per GPU, and its GPU memory over the session.

use ratatui::text::Line;

use super::Theme;
use crate::top::model::{Change, Focus, Proc, Screen};
use crate::view::format_size;
use crate::view::printable::printable;

/// The lines of the detail view of `p`, `width` columns wide; `started` says when it started,
/// where known.
pub(super) fn detail_lines<'a>(
    screen: &Screen,
    p: &Proc,
    started: Option<String>,
    theme: &Theme,
    width: u16,
) -> Vec<Line<'a>> {
    let unknown = || "?".to_string();
    let mut lines = vec![Line::styled(
        format!(
            "process {}  (Esc: back to the table, k: send a signal)",
            p.pid
        ),
        theme.bold(),
    )];
    let field = |name: &str, value: String| Line::raw(format!("  {name:<10} {value}"));
    let command = p
        .command
        .as_deref()
        .map_or_else(unknown, |c| printable(c).into_owned());
    // The whole command line, wrapped to the width.
    let room = usize::from(width).saturating_sub(13).max(20);
    let chars: Vec<char> = command.chars().collect();
    for (i, chunk) in chars.chunks(room).enumerate() {
        let text: String = chunk.iter().collect();
        lines.push(if i == 0 {
            field("command", text)
        } else {
            Line::raw(format!("  {:<10} {text}", ""))
        });
    }
    if p.change == Change::Gone {
        lines.push(field("state", "exited since the last refresh".into()));
    }
    lines.push(field(
        "user",
        p.user
            .as_deref()
            .map_or_else(unknown, |u| printable(u).into_owned()),
    ));
    if p.outside {
        lines.push(field(
            "namespace",
            "another PID namespace: its files cannot be read from here".into(),
        ));
    }
    lines.extend(container_lines(p));
    lines.push(field("started", started.unwrap_or_else(unknown)));
    lines.push(field("RSS", p.rss.map_or_else(unknown, format_size)));
    lines.push(field(
        "CPU",
        p.cpu
            .map_or_else(|| "-".into(), |c| format!("{c:.1}% of one core")),
    ));
    let per_gpu: Vec<String> = p
        .gpu
        .iter()
        .map(|(g, b)| format!("GPU {g} {}", format_size(*b)))
        .collect();
    lines.push(field(
        "GPU memory",
        if per_gpu.is_empty() {
            "none".into()
        } else {
            per_gpu.join(", ")
        },
    ));
    match screen.focus.as_ref().filter(|f| f.pid == p.pid) {
        Some(f) => lines.extend(history_lines(f, theme, width)),
        None => lines.push(field("history", "from the next refresh".into())),
    }
    lines
}

/// The container and pod lines of `p`.
fn container_lines<'a>(p: &Proc) -> Vec<Line<'a>> {
    let field = |name: &str, value: String| Line::raw(format!("  {name:<10} {value}"));
    let mut lines = Vec::new();
    match p.container.as_deref() {
        None => lines.push(field("container", "none known".into())),
        Some(c) => {
            let short: String = c.id.chars().take(12).collect();
            let runtime = c.runtime.as_deref().map(|r| format!(" ({})", printable(r)));
            let name = c.name.as_deref().map(|n| format!("{} ", printable(n)));
            lines.push(field(
                "container",
                format!(
                    "{}{}{}",
                    name.unwrap_or_default(),
                    printable(&short),
                    runtime.unwrap_or_default()
                ),
            ));
            if let Some(pod) = &c.pod {
                lines.push(field(
                    "pod",
                    match &c.namespace {
                        Some(ns) => format!("{}/{}", printable(ns), printable(pod)),
                        None => printable(pod).into_owned(),
                    },
                ));
            }
        }
    }
    lines
}

/// Eight levels of a bar, lowest first.
const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The history as a sparkline scaled to its peak, with the peak and the span it covers.
fn history_lines<'a>(f: &Focus, theme: &Theme, width: u16) -> Vec<Line<'a>> {
    let peak = f.history.iter().copied().max().unwrap_or(0);
    let room = usize::from(width).saturating_sub(13).max(8);
    let points = f
        .history
        .get(f.history.len().saturating_sub(room)..)
        .unwrap_or_default();
    let spark: String = points
        .iter()
        .map(|&v| {
            if peak == 0 {
                '▁'
            } else {
                let level = u128::from(v) * 7 / u128::from(peak);
                let level = usize::try_from(level).unwrap_or(7);
                LEVELS.get(level).copied().unwrap_or('█')
            }
        })
        .collect();
    let per = if f.per_point == 1 {
        "a point per refresh".to_string()
    } else {
        format!("each point the largest of {} refreshes", f.per_point)
    };
    vec![
        Line::raw(format!("  {:<10} {spark}", "history")),
        Line::styled(
            format!(
                "  {:<10} peak {} over {} refreshes ({per})",
                "",
                format_size(peak),
                f.refreshes
            ),
            theme.dim(),
        ),
    ]
}
