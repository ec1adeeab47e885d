//! The fleet view drawn: a row per node (or the open node's GPUs, pods and processes), a title
//! with the fleet's sums and how fresh they are, and the keys.

use std::time::Instant;

use hypomnesis_fleet::{Fleet, Node, Process, Source};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::fetch::Detail;
use super::view::{Column, View, share};
use crate::view::{fit, format_size, human};

fn size(b: Option<u64>) -> String {
    b.map_or_else(|| "–".to_string(), format_size)
}

fn secs(age: f64) -> String {
    if !age.is_finite() {
        return "?".to_string();
    }
    if age < 0.5 {
        return "0s".to_string();
    }
    human(std::time::Duration::from_secs_f64(
        age.clamp(0.0, 1e9).round(),
    ))
}

/// A stale node's age cell: `stale 3m12s`, or `gone ~2m` for one that stopped answering.
fn age_cell(n: &Node) -> String {
    match (n.stale, n.exact, n.age) {
        (false, _, Some(a)) => secs(a),
        (true, true, Some(a)) => format!("stale {}", secs(a)),
        (true, false, Some(a)) => format!("gone ~{}", secs(a)),
        (true, _, None) => "gone".to_string(),
        (false, _, None) => "–".to_string(),
    }
}

fn pod_cell(n: &Node) -> String {
    n.largest_pod.as_ref().map_or_else(
        || "–".to_string(),
        |p| match p.bytes {
            Some(b) => format!("{}/{} {}", p.namespace, p.pod, format_size(b)),
            None => format!("{}/{}", p.namespace, p.pod),
        },
    )
}

/// The node table's columns and their widths (the pod's takes what is left).
fn widths(area: u16, name: usize) -> [usize; 9] {
    let fixed = [name, 4, 10, 10, 5, 9, 9, 0, 13];
    let taken: usize = fixed.iter().sum::<usize>() + fixed.len();
    let mut w = fixed;
    if let Some(pod) = w.get_mut(7) {
        *pod = usize::from(area).saturating_sub(taken).max(12);
    }
    w
}

fn cells(n: &Node) -> [String; 9] {
    [
        n.name.clone(),
        n.gpus.map_or_else(|| "–".into(), |g| g.to_string()),
        size(n.used()),
        size(n.total),
        share(n).map_or_else(|| "–".into(), |s| format!("{}%", (s + 5) / 10)),
        size(n.reserved),
        match n.source {
            Source::Dcgm => "n/a".to_string(),
            Source::Hypomnesis => size(n.ghosts),
        },
        pod_cell(n),
        age_cell(n),
    ]
}

fn row_text(texts: &[String], w: &[usize; 9]) -> String {
    let mut out = String::new();
    for (i, (t, width)) in texts.iter().zip(w).enumerate() {
        let right = matches!(i, 1..=6);
        out.push_str(&fit(t, *width, right));
        out.push(' ');
    }
    out
}

fn style(view: &View, color: Color) -> Style {
    if view.color {
        Style::default().fg(color)
    } else {
        Style::default()
    }
}

/// The title: what the fleet holds, and how fresh.
fn title(view: &View, now: Instant) -> String {
    let Some(last) = &view.last else {
        return format!("hmn top · fleet · {} · asking…", view.url);
    };
    let (ago, took) = (
        secs(now.saturating_duration_since(last.at).as_secs_f64()),
        human(last.took),
    );
    let Ok(nodes) = &last.nodes else {
        return format!("hmn top · fleet · took {took}, {ago} ago · {}", view.url);
    };
    let live = nodes.nodes.iter().filter(|n| !n.stale);
    let (gpus, used, total) = live.fold((0, 0, 0), |(g, u, t), n| {
        (
            g + n.gpus.unwrap_or(0),
            u + n.used().unwrap_or(0),
            t + n.total.unwrap_or(0),
        )
    });
    let stale = nodes.nodes.iter().filter(|n| n.stale).count();
    format!(
        "hmn top · fleet · {} nodes ({stale} stale) · {gpus} GPUs · used {} of {} · {} queries took {took}, {ago} ago · {}",
        nodes.nodes.len() - stale,
        format_size(used),
        format_size(total),
        nodes.queries,
        view.url,
    )
}

/// The line under the title: an error, the filter and the sort, notes and warnings.
fn status<'a>(view: &View) -> Line<'a> {
    if let Some(e) = &view.error {
        return Line::from(Span::styled(
            format!("refresh failed (last good figures shown): {e}"),
            style(view, Color::Red).add_modifier(Modifier::BOLD),
        ));
    }
    let mut parts = vec![format!(
        "sort: {} {}",
        view.sort.title(),
        if view.descending { "↓" } else { "↑" }
    )];
    if view.editing || !view.filter.is_empty() {
        parts.push(format!(
            "filter: /{}{}",
            view.filter,
            if view.editing { "▏" } else { "" }
        ));
    }
    if let Some(Ok(nodes)) = view.last.as_ref().map(|s| &s.nodes) {
        if let Some(w) = nodes.warnings.first() {
            parts.push(format!("Prometheus warns: {w}"));
        }
        if !nodes.notes.is_empty() {
            parts.push(format!(
                "{} notes: {}",
                nodes.notes.len(),
                nodes.notes.join("; ")
            ));
        }
    }
    Line::from(parts.join(" · "))
}

/// Draws the view on `f`.
pub fn draw(f: &mut Frame<'_>, view: &mut View, now: Instant) {
    let area = f.area();
    let mut lines: Vec<Line<'_>> = vec![
        Line::from(Span::styled(
            match &view.open {
                Some(n) => node_title(view, n, now),
                None => title(view, now),
            },
            Style::default().add_modifier(Modifier::BOLD),
        )),
        status(view),
    ];
    let body = usize::from(area.height).saturating_sub(3);
    view.page = body.saturating_sub(1).max(1);
    match view.open.clone() {
        None => node_rows(view, area, body, &mut lines),
        Some(node) => node_lines(view, &node, area, body, &mut lines),
    }
    let keys = if view.open.is_some() {
        "Esc back  ↑↓ scroll  q quit"
    } else if view.editing {
        "type to filter  Enter keep  Esc clear"
    } else {
        "↑↓ select  Enter open node  / filter  < > sort  r reverse  q quit"
    };
    while lines.len() + 1 < usize::from(area.height) {
        lines.push(Line::from(""));
    }
    lines.push(Line::from(Span::styled(
        keys,
        Style::default().add_modifier(Modifier::DIM),
    )));
    f.render_widget(Paragraph::new(lines), Rect { ..area });
}

fn node_rows(view: &mut View, area: Rect, body: usize, lines: &mut Vec<Line<'_>>) {
    let rows = view.rows();
    let name = rows
        .iter()
        .map(|n| n.name.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 28);
    let w = widths(area.width, name);
    let head: Vec<String> = Column::ALL
        .iter()
        .map(|c| {
            let mark = if *c == view.sort {
                if view.descending { "↓" } else { "↑" }
            } else {
                ""
            };
            format!("{}{mark}", c.title())
        })
        .collect();
    let head_style = Style::default().add_modifier(Modifier::REVERSED);
    let at = view.selected_index(&rows);
    let shown = body.saturating_sub(1).max(1);
    // The selected row stays in sight.
    let mut scroll = view.scroll.min(rows.len().saturating_sub(1));
    if at < scroll {
        scroll = at;
    } else if at >= scroll + shown {
        scroll = at + 1 - shown;
    }
    let texts: Vec<(String, bool, bool)> = rows
        .iter()
        .enumerate()
        .skip(scroll)
        .take(shown)
        .map(|(i, n)| (row_text(&cells(n), &w), i == at, n.stale))
        .collect();
    let empty = rows.is_empty();
    drop(rows);
    view.scroll = scroll;
    lines.push(Line::from(Span::styled(row_text(&head, &w), head_style)));
    if empty {
        lines.push(Line::from(match &view.last {
            None => "asking Prometheus…",
            Some(_) if view.filter.is_empty() => "no node exports GPU memory series here",
            Some(_) => "no node matches the filter",
        }));
    }
    for (text, selected, stale) in texts {
        let mut s = if stale {
            style(view, Color::Yellow).add_modifier(Modifier::DIM)
        } else {
            Style::default()
        };
        if selected {
            s = s.add_modifier(Modifier::REVERSED);
        }
        lines.push(Line::from(Span::styled(text, s)));
    }
}

fn node_title(view: &View, n: &Node, now: Instant) -> String {
    let target: Vec<String> = n.target.iter().map(|(_, v)| v.clone()).collect();
    let fresh = view.last.as_ref().map_or_else(String::new, |l| {
        let of_nodes = l.nodes.as_ref().map_or(0, |n| n.queries);
        let of_node = match &l.detail {
            Some(Detail {
                read: Ok((f, _)), ..
            }) => f.queries,
            _ => 0,
        };
        format!(
            " · {} queries took {}, {} ago",
            of_nodes + of_node,
            human(l.took),
            secs(now.saturating_duration_since(l.at).as_secs_f64()),
        )
    });
    format!(
        "hmn top · fleet · node {} ({}) · {}{fresh}",
        n.name,
        target.join(" "),
        n.source.as_str()
    )
}

fn node_lines<'a>(view: &mut View, node: &Node, area: Rect, body: usize, out: &mut Vec<Line<'a>>) {
    let detail = view.last.as_ref().and_then(|l| l.detail.as_ref());
    let mut lines: Vec<Line<'a>> = match detail {
        None => vec![Line::from("asking Prometheus about this node…")],
        Some(Detail { read: Err(e), .. }) => vec![Line::from(Span::styled(
            format!("could not read this node: {e}"),
            style(view, Color::Red),
        ))],
        Some(Detail {
            read: Ok((fleet, processes)),
            ..
        }) => detail_lines(node, fleet, processes, area.width),
    };
    view.scroll = view.scroll.min(lines.len().saturating_sub(1));
    out.extend(lines.drain(..).skip(view.scroll).take(body));
}

fn detail_lines<'a>(
    node: &Node,
    fleet: &Fleet,
    processes: &[Process],
    width: u16,
) -> Vec<Line<'a>> {
    let bold = Style::default().add_modifier(Modifier::REVERSED);
    let mut lines = Vec::new();
    if node.stale {
        lines.push(Line::from(format!(
            "this node's newest sample is old ({}): what Prometheus last had",
            age_cell(node)
        )));
    }
    let w = usize::from(width);
    lines.push(Line::from(Span::styled(
        fit(
            &format!(
                "{:<5} {:<24} {:>10} {:>10} {:>10} {:>9} {:>9}  PODS",
                "GPU", "MODEL", "USED", "FREE", "TOTAL", "RESERVED", "GHOSTS"
            ),
            w,
            false,
        ),
        bold,
    )));
    let mut gpus: Vec<_> = fleet.gpus.iter().collect();
    gpus.sort_by(|a, b| {
        (&a.index, &a.mig.as_ref().map(|m| &m.id)).cmp(&(&b.index, &b.mig.as_ref().map(|m| &m.id)))
    });
    for g in &gpus {
        let name = match &g.mig {
            Some(m) => format!("{}/{}", g.index, m.id),
            None => g.index.clone(),
        };
        let model = match &g.mig {
            Some(m) => format!("MIG {}", m.profile),
            None => crate::view::fleet::model_cell(g),
        };
        let ghosts = match g.source {
            Source::Dcgm => "n/a".to_string(),
            Source::Hypomnesis => format_size(g.ghost_bytes()),
        };
        let pods: Vec<String> = g
            .pods
            .iter()
            .map(|p| match p.bytes {
                Some(b) => format!("{}/{} {}", p.namespace, p.pod, format_size(b)),
                None => format!("{}/{}", p.namespace, p.pod),
            })
            .collect();
        lines.push(Line::from(fit(
            &format!(
                "{:<5} {} {:>10} {:>10} {:>10} {:>9} {:>9}  {}",
                name,
                fit(&model, 24, false),
                format_size(g.used()),
                format_size(g.free),
                format_size(g.total),
                size(g.reserved),
                ghosts,
                if pods.is_empty() {
                    "–".to_string()
                } else {
                    pods.join(", ")
                }
            ),
            w,
            false,
        )));
    }
    if gpus.is_empty() {
        lines.push(Line::from("no GPU with recent samples"));
    }
    lines.push(Line::from(""));
    process_lines(node, processes, w, &mut lines);
    for note in fleet.notes.iter().chain(&fleet.warnings) {
        lines.push(Line::from(format!("note: {note}")));
    }
    lines
}

/// The open node's processes, largest first.
fn process_lines(node: &Node, processes: &[Process], w: usize, lines: &mut Vec<Line<'_>>) {
    let bold = Style::default().add_modifier(Modifier::REVERSED);
    lines.push(Line::from(Span::styled(
        fit(
            &format!(
                "{:>8} {:<12} {:<20} {:>4} {:>10}  POD",
                "PID", "USER", "PROCESS", "GPU", "MEMORY"
            ),
            w,
            false,
        ),
        bold,
    )));
    if processes.is_empty() {
        lines.push(Line::from(if node.source == Source::Dcgm {
            "dcgm-exporter exports no per-process series"
        } else {
            "no process holds memory here (or its series are switched off)"
        }));
    }
    for p in processes {
        lines.push(Line::from(fit(
            &format!(
                "{:>8} {} {} {:>4} {:>10}  {}",
                p.pid,
                fit(p.user.as_deref().unwrap_or("–"), 12, false),
                fit(&p.name, 20, false),
                p.gpu,
                format_size(p.bytes),
                p.pod
                    .as_ref()
                    .map_or_else(|| "–".to_string(), |(ns, pod)| format!("{ns}/{pod}"))
            ),
            w,
            false,
        )));
    }
}
