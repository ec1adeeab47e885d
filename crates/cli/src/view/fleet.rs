//! `hmn fits --prometheus`'s answer: the fleet ranked by free memory, a reason in one line for
//! each GPU (or node) that does not fit, the GPUs that would once their ghosts are freed, the
//! targets not counted; and its JSON.

use std::fmt::Write as _;
use std::time::Duration;

use hypomnesis_fleet::fleet::Gpu;
use hypomnesis_fleet::{Fleet, NodeFit, Placement, Verdict};
use serde::Serialize;

use super::{format_size, human};

/// What the answer is about, beside the placement.
pub struct Asked<'a> {
    pub prometheus: &'a str,
    /// How many rows of the ranking the text shows.
    pub top: usize,
    /// With `--settle`: the samples each figure needs, and the GPUs not settled yet.
    pub settling: Option<(usize, &'a [String])>,
}

/// `node-a GPU 1` or `node-a GPU 1 MIG 3 (3g.71gb)`.
pub fn gpu_name(g: &Gpu) -> String {
    match &g.mig {
        Some(m) if m.profile.is_empty() => format!("{} GPU {} MIG {}", g.node, g.index, m.id),
        Some(m) => format!("{} GPU {} MIG {} ({})", g.node, g.index, m.id, m.profile),
        None => format!("{} GPU {}", g.node, g.index),
    }
}

/// `2 ghosts holding 12.0 GiB` (by class when one: `an exited ghost holding 12.0 GiB`).
fn ghosts_phrase(g: &Gpu) -> Option<String> {
    let n = g.ghosts.len();
    match n {
        0 => None,
        1 => g
            .ghosts
            .iter()
            .next()
            .map(|(class, b)| format!("a ghost ({class}) holding {}", format_size(*b))),
        _ => Some(format!(
            "ghosts holding {} ({})",
            format_size(g.ghost_bytes()),
            g.ghosts
                .iter()
                .map(|(c, b)| format!("{c} {}", format_size(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Why `g` does not take `size` now, in one line.
pub fn reason(g: &Gpu, size: u64) -> String {
    let mut held = vec![format!("{} in use", format_size(g.used()))];
    if let Some(ghosts) = ghosts_phrase(g) {
        held.push(ghosts);
    }
    if let Some(b) = g.not_visible.filter(|&b| b > 0) {
        held.push(format!(
            "{} no visible process accounts for",
            format_size(b)
        ));
    }
    format!(
        "{}: {} free of {} ({}), {} requested",
        gpu_name(g),
        format_size(g.free),
        format_size(g.total),
        held.join(", "),
        format_size(size)
    )
}

/// Why `node` does not take `count` GPUs of `size`, in one line.
fn node_reason(n: &NodeFit, p: &Placement) -> String {
    let fit = n.gpus.len();
    format!(
        "{}: {} of its {} GPUs {} {} free, {} asked",
        n.node,
        fit,
        n.whole,
        if fit == 1 { "has" } else { "have" },
        format_size(p.size),
        p.count
    )
}

/// The answer as text.
pub fn text(fleet: &Fleet, p: &Placement, asked: &Asked<'_>) -> String {
    let mut s = String::new();
    let nodes: std::collections::BTreeSet<&str> =
        fleet.gpus.iter().map(|g| g.node.as_str()).collect();
    let fitting = p.ranked.iter().filter(|(_, v)| *v == Verdict::Fits).count();
    let ask = if p.count > 1 {
        format!("{} GPUs of {} on one node", p.count, format_size(p.size))
    } else {
        format_size(p.size)
    };
    let where_ = if p.count > 1 {
        let n = p
            .nodes
            .iter()
            .filter(|n| n.verdict == Verdict::Fits)
            .count();
        format!("fits on {n} of {} nodes", p.nodes.len())
    } else {
        format!("fits on {fitting} of {} GPUs", p.ranked.len())
    };
    let _ = writeln!(
        s,
        "{ask}: {where_} ({} nodes; {} queries to {})",
        nodes.len(),
        fleet.queries,
        asked.prometheus
    );
    if p.count > 1 && !p.nodes.is_empty() {
        s.push_str(&node_table(p, asked.top));
    } else if !p.ranked.is_empty() {
        s.push_str(&table(p, asked.top));
    }
    let mut no = Vec::new();
    let mut freed = Vec::new();
    if p.count > 1 {
        for n in &p.nodes {
            match n.verdict {
                Verdict::Fits => {}
                Verdict::OnceGhostsFreed => freed.push(format!(
                    "{}: {} GPUs would have {} free once their ghosts are freed: run `hmn ghosts` on {}",
                    n.node,
                    p.count,
                    format_size(p.size),
                    n.node
                )),
                Verdict::No => no.push(node_reason(n, p)),
            }
        }
    } else {
        for (g, v) in &p.ranked {
            match v {
                Verdict::Fits => {}
                Verdict::OnceGhostsFreed => freed.push(format!(
                    "{}: {} free and {}: run `hmn ghosts` on {}",
                    gpu_name(g),
                    format_size(g.free),
                    ghosts_phrase(g).unwrap_or_default(),
                    g.node
                )),
                Verdict::No => no.push(reason(g, p.size)),
            }
        }
    }
    section(&mut s, "Fits once its ghosts are freed:", &freed, asked.top);
    section(&mut s, "Does not fit:", &no, asked.top);
    let stale: Vec<String> = fleet.stale.iter().map(stale_line).collect();
    section(&mut s, "Not counted:", &stale, usize::MAX);
    if let Some((samples, moving)) = asked.settling {
        let title = format!("Not settled yet (free memory must hold over {samples} samples):");
        section(&mut s, &title, moving, asked.top);
    }
    section(&mut s, "Notes:", &fleet.notes, asked.top);
    section(&mut s, "Prometheus warned:", &fleet.warnings, asked.top);
    s
}

/// Why a target is not counted, in one line.
fn stale_line(t: &hypomnesis_fleet::Stale) -> String {
    let source = t.source.as_str();
    let Some(age) = t.age else {
        return format!(
            "{}: it stopped answering in the last {} ({source}): not counted",
            t.node,
            hypomnesis_fleet::fleet::NAMED_FOR
        );
    };
    let age = human(Duration::from_secs_f64(age.clamp(0.0, 1e9).round()));
    let (how, about) = if t.exact {
        ("", "")
    } else {
        ("it stopped answering; ", "about ")
    };
    format!(
        "{}: {how}its newest sample is {about}{age} old ({source}): not counted",
        t.node
    )
}

/// A titled list, its first `top` lines then how many more.
fn section(s: &mut String, title: &str, lines: &[String], top: usize) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(s, "{title}");
    for l in lines.iter().take(top) {
        let _ = writeln!(s, "  {l}");
    }
    if lines.len() > top {
        let _ = writeln!(
            s,
            "  … and {} more (--json lists them all)",
            lines.len() - top
        );
    }
}

/// The nodes for a job of several GPUs, fitting first: the GPUs each would use and their free
/// memory.
fn node_table(p: &Placement, top: usize) -> String {
    let mut rows: Vec<Vec<String>> = vec![vec![
        "NODE".into(),
        "GPUS".into(),
        format!("FREE (THE {} MOST FREE)", p.count),
        "VERDICT".into(),
    ]];
    for n in p.nodes.iter().take(top) {
        let gpus: Vec<&Gpu> = n
            .gpus
            .iter()
            .filter_map(|&i| p.ranked.get(i).map(|(g, _)| g))
            .collect();
        rows.push(vec![
            n.node.clone(),
            format!(
                "{} of {}",
                gpus.iter()
                    .map(|g| g.index.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                n.whole
            ),
            gpus.iter()
                .map(|g| format_size(g.free))
                .collect::<Vec<_>>()
                .join(", "),
            match n.verdict {
                Verdict::Fits => "fits".into(),
                Verdict::OnceGhostsFreed => "once ghosts are freed".into(),
                Verdict::No => "does not fit".into(),
            },
        ]);
    }
    let mut s = aligned(&rows);
    if p.nodes.len() > top {
        let _ = writeln!(
            s,
            "… and {} more nodes (--top, --json)",
            p.nodes.len() - top
        );
    }
    s
}

/// `rows` as columns two spaces apart, the last one unpadded.
fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                let w = widths.get(c).copied().unwrap_or(0);
                let _ = write!(line, "{cell:<w$}  ");
            }
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// The pods on `g`: the two largest, and how many more.
fn pods_cell(g: &Gpu) -> String {
    let mut pods = g
        .pods
        .iter()
        .take(2)
        .map(|p| match p.bytes {
            Some(b) => format!("{}/{} {}", p.namespace, p.pod, format_size(b)),
            None => format!("{}/{}", p.namespace, p.pod),
        })
        .collect::<Vec<_>>()
        .join(", ");
    let more = g.pods.len().saturating_sub(2);
    if more > 0 {
        let _ = write!(pods, " +{more}");
    }
    pods
}

/// The ranking's first `top` rows.
fn table(p: &Placement, top: usize) -> String {
    let mut rows: Vec<[String; 8]> = vec![[
        "NODE".into(),
        "GPU".into(),
        "MODEL".into(),
        "FREE".into(),
        "TOTAL".into(),
        "RESERVED".into(),
        "GHOSTS".into(),
        "PODS".into(),
    ]];
    for (g, v) in p.ranked.iter().take(top) {
        let gpu = match &g.mig {
            Some(m) if m.profile.is_empty() => format!("{} MIG {}", g.index, m.id),
            Some(m) => format!("{} MIG {} {}", g.index, m.id, m.profile),
            None => g.index.clone(),
        };
        let mark = match v {
            Verdict::Fits => "",
            Verdict::OnceGhostsFreed => " (ghosts)",
            Verdict::No => " (no)",
        };
        let pods = pods_cell(g);
        rows.push([
            g.node.clone(),
            gpu,
            model_cell(g),
            format!("{}{mark}", format_size(g.free)),
            format_size(g.total),
            g.reserved.map_or_else(|| "-".into(), format_size),
            if g.ghosts.is_empty() {
                "-".into()
            } else {
                format_size(g.ghost_bytes())
            },
            if pods.is_empty() { "-".into() } else { pods },
        ]);
    }
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    let mut s = aligned(&rows);
    if p.ranked.len() > top {
        let _ = writeln!(
            s,
            "… and {} more GPUs (--top, --json)",
            p.ranked.len() - top
        );
    }
    s
}

/// One GPU in JSON.
#[derive(Serialize)]
struct GpuJson<'a> {
    node: &'a str,
    gpu: &'a str,
    uuid: Option<&'a str>,
    model: Option<&'a str>,
    memory_model: Option<&'a str>,
    mig: Option<MigJson<'a>>,
    total_bytes: u64,
    free_bytes: u64,
    used_bytes: u64,
    reserved_bytes: Option<u64>,
    not_visible_bytes: Option<u64>,
    ghost_bytes: &'a std::collections::BTreeMap<String, u64>,
    pods: Vec<PodJson<'a>>,
    source: &'static str,
    age_seconds: Option<f64>,
    verdict: &'static str,
    reason: Option<String>,
}

#[derive(Serialize)]
struct MigJson<'a> {
    id: &'a str,
    profile: &'a str,
}

#[derive(Serialize)]
struct PodJson<'a> {
    namespace: &'a str,
    pod: &'a str,
    bytes: Option<u64>,
}

#[derive(Serialize)]
struct NodeJson<'a> {
    node: &'a str,
    verdict: &'static str,
    /// The GPUs it would use, as their `gpu` labels.
    gpus: Vec<&'a str>,
    reason: Option<String>,
}

#[derive(Serialize)]
struct StaleJson<'a> {
    node: &'a str,
    age_seconds: Option<f64>,
    /// Whether the age is exact (`false`: the target stopped answering; known to a second).
    age_exact: bool,
    source: &'static str,
}

#[derive(Serialize)]
struct AnswerJson<'a> {
    prometheus: &'a str,
    size_bytes: u64,
    count: u32,
    verdict: &'static str,
    fits: bool,
    queries: usize,
    gpus: Vec<GpuJson<'a>>,
    nodes: Option<Vec<NodeJson<'a>>>,
    stale: Vec<StaleJson<'a>>,
    not_settled: Option<&'a [String]>,
    notes: &'a [String],
    warnings: &'a [String],
}

/// A GPU's model, and where its memory is when that is not its own (`unified`: its figures
/// are the host's memory, which the CPU uses too).
pub fn model_cell(g: &Gpu) -> String {
    let model = g.model.clone().unwrap_or_else(|| "-".into());
    match g.memory_model.as_deref() {
        Some(m @ ("unified" | "coherent")) => format!("{model} ({m})"),
        _ => model,
    }
}

/// The answer as JSON.
pub fn json(fleet: &Fleet, p: &Placement, asked: &Asked<'_>) -> serde_json::Result<String> {
    let gpus = p
        .ranked
        .iter()
        .map(|(g, v)| GpuJson {
            node: &g.node,
            gpu: &g.index,
            uuid: g.uuid.as_deref(),
            model: g.model.as_deref(),
            memory_model: g.memory_model.as_deref(),
            mig: g.mig.as_ref().map(|m| MigJson {
                id: &m.id,
                profile: &m.profile,
            }),
            total_bytes: g.total,
            free_bytes: g.free,
            used_bytes: g.used(),
            reserved_bytes: g.reserved,
            not_visible_bytes: g.not_visible,
            ghost_bytes: &g.ghosts,
            pods: g
                .pods
                .iter()
                .map(|p| PodJson {
                    namespace: &p.namespace,
                    pod: &p.pod,
                    bytes: p.bytes,
                })
                .collect(),
            source: g.source.as_str(),
            age_seconds: g.age,
            verdict: v.as_str(),
            reason: (*v != Verdict::Fits).then(|| reason(g, p.size)),
        })
        .collect();
    let nodes = (p.count > 1).then(|| {
        p.nodes
            .iter()
            .map(|n| NodeJson {
                node: &n.node,
                verdict: n.verdict.as_str(),
                gpus: n
                    .gpus
                    .iter()
                    .filter_map(|&i| p.ranked.get(i).map(|(g, _)| g.index.as_str()))
                    .collect(),
                reason: (n.verdict == Verdict::No).then(|| node_reason(n, p)),
            })
            .collect()
    });
    let answer = AnswerJson {
        prometheus: asked.prometheus,
        size_bytes: p.size,
        count: p.count,
        verdict: p.verdict().as_str(),
        fits: p.verdict() == Verdict::Fits,
        queries: fleet.queries,
        gpus,
        nodes,
        stale: fleet
            .stale
            .iter()
            .map(|t| StaleJson {
                node: &t.node,
                age_seconds: t.age,
                age_exact: t.exact,
                source: t.source.as_str(),
            })
            .collect(),
        not_settled: asked.settling.map(|(_, m)| m),
        notes: &fleet.notes,
        warnings: &fleet.warnings,
    };
    serde_json::to_string_pretty(&answer)
}
