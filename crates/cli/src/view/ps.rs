//! `hmn ps`: the rows, their order, the table, the stderr summary and the JSON.

use super::printable::printable;
use super::unseen;
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::io::{self, Write};

use clap::ValueEnum;
use hypomnesis::{Container, GpuContextKind, GpuProcessEntry, GpuQuerySource, ProcessContext};
use serde::Serialize;

use super::ghosts::Why;
use super::{MAX_COLUMN, cut, fit, format_size, json};

/// Sort orders of `hmn ps` (`vram` is `dedicated`, `committed` is `total`, as in 0.2.x).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    #[value(alias = "vram")]
    Dedicated,
    Shared,
    #[value(alias = "committed")]
    Total,
    Pid,
    Name,
    User,
    Command,
    Rss,
}

/// A process row with the name of its device and what is known about the process.
#[derive(Debug, Clone, PartialEq)]
pub struct PsRow {
    pub entry: GpuProcessEntry,
    /// Owner, command line, host memory, container (`Default` where none could be read).
    pub ctx: ProcessContext,
    pub device_name: Option<String>,
    /// The device's maker, shown when it has no name.
    pub device_vendor: Option<hypomnesis::GpuVendor>,
    /// The row's part in its device's spill (Windows WDDM); `None` where spill is not
    /// measurable.
    pub spill: Option<RowSpill>,
    /// What `--why` found of it.
    pub why: Why,
    /// Where its GPU's memory is a NUMA node of the kernel's (a coherent machine in NUMA
    /// mode): that node, and this process's bytes on it (`None` when its `numa_maps` cannot
    /// be read); `None` elsewhere.
    pub gpu_node: Option<(u32, Option<u64>)>,
}

/// One row's part in its device's spill, from one sample of the adapter's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowSpill {
    /// Whether the device spills now ([`hypomnesis::snapshot_is_spilling`]'s rule).
    pub spilling: bool,
    /// The device spills and this row holds at least 256 MiB of shared memory.
    pub paged: bool,
    /// This row's fraction of the device's shared bytes (0 when the device has none).
    pub shared_share: f64,
}

impl RowSpill {
    /// The row's part, given whether its device spills and the device's shared bytes.
    pub fn of(spilling: bool, device_shared: u64, row_shared: u64) -> Self {
        #[allow(clippy::cast_precision_loss)] // a ratio of byte counts
        let share = if device_shared == 0 {
            0.0
        } else {
            (row_shared as f64 / device_shared as f64).clamp(0.0, 1.0)
        };
        Self {
            spilling,
            paged: spilling && row_shared >= hypomnesis::spill::DEFAULT_SHARED_GROWTH_BYTES,
            shared_share: (share * 10_000.0).round() / 10_000.0,
        }
    }
}

/// The SPILL cell: `paged`, `yes` (the device spills, not this row), `no`, or `n/a` where
/// spill is not measurable.
fn spill_cell(s: Option<RowSpill>) -> &'static str {
    match s {
        None => "n/a",
        Some(RowSpill { paged: true, .. }) => "paged",
        Some(RowSpill { spilling: true, .. }) => "yes",
        Some(_) => "no",
    }
}

impl PsRow {
    /// Dedicated plus shared bytes: the row's footprint (`--min`, `--sort total`).
    pub fn total(&self) -> u64 {
        self.entry
            .used_bytes
            .saturating_add(self.entry.shared_used_bytes)
    }
}

/// The line on process rows the sources left out.
pub fn dropped_rows_line(n: u64) -> String {
    format!(
        "hmn: {n} process row{} left out: no memory figure, pid 0, or more memory than the \
         device has (`hmn doctor` says which source)",
        if n == 1 { "" } else { "s" }
    )
}

/// The order of `hmn ps`: the chosen key, then VRAM descending, name, pid.
pub fn sort_rows(rows: &mut [PsRow], key: SortKey) {
    let tie = |r: &PsRow| {
        (
            Reverse(r.entry.used_bytes),
            r.entry.name.clone(),
            r.entry.pid,
        )
    };
    match key {
        SortKey::Dedicated => rows.sort_by_key(tie),
        SortKey::Shared => rows.sort_by_key(|r| (Reverse(r.entry.shared_used_bytes), tie(r))),
        SortKey::Total => rows.sort_by_key(|r| (Reverse(r.total()), tie(r))),
        SortKey::Pid => rows.sort_by_key(|r| (r.entry.pid, r.entry.device_index)),
        SortKey::Name => {
            rows.sort_by_key(|r| (r.entry.name.is_none(), r.entry.name.clone(), tie(r)));
        }
        // Unknown owners and commands last; host memory largest first, unknown last.
        SortKey::User => rows.sort_by_key(|r| (r.ctx.user.is_none(), r.ctx.user.clone(), tie(r))),
        SortKey::Command => rows.sort_by_key(|r| {
            let command = r.ctx.command.clone().or_else(|| r.entry.name.clone());
            (command.is_none(), command, tie(r))
        }),
        SortKey::Rss => rows.sort_by_key(|r| (Reverse(r.ctx.rss_bytes), tie(r))),
    }
}

pub use super::unseen::Hidden;

/// The DEVICE cell: the model, else its maker, else `?`.
fn device_cell(name: Option<&str>, vendor: Option<hypomnesis::GpuVendor>) -> String {
    match (name, vendor) {
        (Some(n), _) => printable(n).into_owned(),
        (None, Some(v)) => vendor_label(v).to_string(),
        (None, None) => "?".to_string(),
    }
}

/// The table's columns: header, right-aligned. ON-GPU-NODE is shown only when a row's GPU
/// memory is a NUMA node, GI and CI only when a row has MIG instance ids, NAMESPACE/POD only
/// when a row runs in a pod, WHY only with `--why`; COMMAND, last, is cut to the terminal's
/// width.
const COLUMNS: [(&str, bool); 15] = [
    ("PID", false),
    ("USER", false),
    ("TYPE", false),
    ("VRAM", true),
    ("SHARED", true),
    ("SPILL", false),
    ("RSS", true),
    ("ON-GPU-NODE", true),
    ("GI", true),
    ("CI", true),
    ("GPU", true),
    ("DEVICE", false),
    ("NAMESPACE/POD", false),
    ("WHY", false),
    ("COMMAND", false),
];
const NODE: usize = 7;
const GI: usize = 8;
const CI: usize = 9;
const POD: usize = 12;
const WHY: usize = 13;

/// `namespace/pod` of a row's Kubernetes pod: `-` outside any pod, `?` in a pod whose names
/// the kubelet's logs do not give.
fn pod_cell(c: Option<&Container>) -> String {
    match c {
        Some(Container {
            namespace: Some(ns),
            pod: Some(pod),
            ..
        }) => format!("{}/{}", printable(ns), printable(pod)),
        Some(c) if c.pod_uid.is_some() => "?".into(),
        _ => "-".into(),
    }
}

/// Whether a row runs in a Kubernetes pod, named or not (the NAMESPACE/POD column is then
/// shown: `?` for a pod nothing here names, rather than no column at all).
fn in_a_pod(r: &PsRow) -> bool {
    r.ctx
        .container
        .as_ref()
        .is_some_and(|c| c.pod_uid.is_some() || (c.namespace.is_some() && c.pod.is_some()))
}

/// `C`, `G`, `C+G`, `M`, `M+C` (what nvidia-smi prints), `-` when the source does not say.
pub fn type_cell(kind: Option<GpuContextKind>) -> &'static str {
    kind.map_or("-", GpuContextKind::short)
}

/// The cells of a process row, in the table's column order.
fn row_cells(r: &PsRow) -> [String; 15] {
    let id = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let pid = match (r.entry.host_pid, unseen::reason_of(&r.entry)) {
        (Some(h), _) => format!("{} (host {h})", r.entry.pid),
        (None, Some(why)) => format!("{} ({})", r.entry.pid, unseen::mark(why)),
        (None, None) => r.entry.pid.to_string(),
    };
    // The command line; the short name where it cannot be read.
    let command = r
        .ctx
        .command
        .as_deref()
        .or(r.entry.name.as_deref())
        .map_or_else(|| "?".into(), |c| printable(c).into_owned());
    let command = if r.entry.mps_server {
        format!("{command} (MPS server)")
    } else {
        command
    };
    [
        pid,
        r.ctx
            .user
            .as_deref()
            .map_or_else(|| "?".into(), |u| printable(u).into_owned()),
        type_cell(r.entry.context).into(),
        format_size(r.entry.used_bytes),
        format_size(r.entry.shared_used_bytes),
        spill_cell(r.spill).into(),
        r.ctx.rss_bytes.map_or_else(|| "?".into(), format_size),
        match r.gpu_node {
            Some((_, Some(b))) => format_size(b),
            Some((_, None)) => "?".into(),
            None => "-".into(),
        },
        id(r.entry.gpu_instance_id),
        id(r.entry.compute_instance_id),
        r.entry.device_index.to_string(),
        device_cell(r.device_name.as_deref(), r.device_vendor),
        pod_cell(r.ctx.container.as_ref()),
        r.why.cell().unwrap_or("-").into(),
        command,
    ]
}

fn hidden_cells(h: &Hidden) -> [String; 15] {
    let dash = || "-".to_string();
    [
        dash(),
        dash(),
        dash(),
        format_size(h.bytes),
        dash(),
        dash(),
        dash(),
        dash(),
        dash(),
        dash(),
        h.device_index.to_string(),
        device_cell(h.device_name.as_deref(), h.device_vendor),
        dash(),
        h.why.cell().unwrap_or("-").into(),
        unseen::not_visible_cell(h),
    ]
}

/// The `PID  USER  TYPE  VRAM  SHARED  SPILL  RSS  GPU  DEVICE  COMMAND` table (nothing when there are no
/// rows), then one `(not visible from here)` row per GPU in `hidden`. A row whose files cannot
/// be read has its reason after its pid: `(outside)`, `(hidden)`, `(exited)`, `(unreadable)`. When a row has MIG
/// instance ids, `GI  CI` columns come before `GPU`; when a row runs in a Kubernetes pod,
/// `NAMESPACE/POD` comes before `COMMAND` (`?` for a pod nothing here names). With `width` (a terminal's),
/// COMMAND is cut so that each line fits; without it, it is whole.
pub fn ps_table(
    out: &mut impl Write,
    rows: &[PsRow],
    hidden: &[Hidden],
    width: Option<usize>,
) -> io::Result<()> {
    if rows.is_empty() && hidden.is_empty() {
        return Ok(());
    }
    let mig = rows
        .iter()
        .any(|r| r.entry.gpu_instance_id.is_some() || r.entry.compute_instance_id.is_some());
    let pods = rows.iter().any(in_a_pod);
    // The memory no row accounts for is marked too: the column shows for it alone.
    let why = rows.iter().any(|r| r.why.cell().is_some())
        || hidden.iter().any(|h| h.why.cell().is_some());
    let node = rows.iter().any(|r| r.gpu_node.is_some());
    let shown: Vec<usize> = (0..COLUMNS.len())
        .filter(|&c| {
            (mig || (c != GI && c != CI))
                && (pods || c != POD)
                && (why || c != WHY)
                && (node || c != NODE)
        })
        .collect();
    let mut cells: Vec<[String; 15]> = rows.iter().map(row_cells).collect();
    cells.extend(hidden.iter().map(hidden_cells));
    let mut widths = COLUMNS.map(|(h, _)| h.len());
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count().min(MAX_COLUMN));
        }
    }
    // What is left of the terminal for COMMAND, at least 8 characters.
    let before_command: usize = shown
        .iter()
        .filter(|&&c| c + 1 < COLUMNS.len())
        .map(|&c| widths.get(c).copied().unwrap_or(0) + 2)
        .sum();
    let room = width.map(|w| w.saturating_sub(before_command).max(8));
    let line = |c: &[String; 15]| {
        let mut s = String::new();
        for &k in &shown {
            let (cell, w) = (c.get(k).map_or("", String::as_str), widths.get(k).copied());
            let right = COLUMNS.get(k).is_some_and(|(_, r)| *r);
            if k + 1 == COLUMNS.len() {
                s.push_str(&room.map_or(std::borrow::Cow::Borrowed(cell), |r| cut(cell, r)));
            } else {
                s.push_str(&fit(cell, w.unwrap_or(0), right));
                s.push_str("  ");
            }
        }
        s
    };
    writeln!(out, "{}", line(&COLUMNS.map(|(h, _)| h.to_string())))?;
    for c in &cells {
        writeln!(out, "{}", line(c))?;
    }
    Ok(())
}

fn vendor_label(v: hypomnesis::GpuVendor) -> &'static str {
    match v {
        hypomnesis::GpuVendor::Nvidia => "NVIDIA GPU",
        hypomnesis::GpuVendor::Amd => "AMD GPU",
        hypomnesis::GpuVendor::Intel => "Intel GPU",
        hypomnesis::GpuVendor::Apple => "Apple GPU",
        _ => "GPU",
    }
}

/// What `hmn ps` was asked to keep, for its summary line.
#[derive(Debug, Clone, Default)]
pub struct Asked<'a> {
    pub pids: &'a [u32],
    pub device: Option<u32>,
    pub user: Option<&'a str>,
    pub filters: &'a [String],
    pub min: Option<u64>,
}

/// `hmn: <N> GPU processes found[ matching pid=<p>,<q> device=<d> user=<u> filter=<f>,<g>
/// min=<size>][ (<total> committed total)][; <k> without a name could not be matched].`, or
/// `hmn: 0 GPU processes found (no GPU to list).` when there was no device to ask.
pub fn ps_summary(rows: &[PsRow], asked: &Asked<'_>, unnamed: usize, no_gpu: bool) -> String {
    if no_gpu {
        return "hmn: 0 GPU processes found (no GPU to list).".to_string();
    }
    let n = rows.len();
    let mut s = format!(
        "hmn: {n} GPU process{} found",
        if n == 1 { "" } else { "es" }
    );
    let mut filters = Vec::new();
    if !asked.pids.is_empty() {
        let pids: Vec<String> = asked.pids.iter().map(u32::to_string).collect();
        filters.push(format!("pid={}", pids.join(",")));
    }
    if let Some(d) = asked.device {
        filters.push(format!("device={d}"));
    }
    if let Some(u) = asked.user {
        filters.push(format!("user={}", printable(u)));
    }
    if !asked.filters.is_empty() {
        filters.push(format!("filter={}", printable(&asked.filters.join(","))));
    }
    if let Some(m) = asked.min.filter(|&m| m > 0) {
        filters.push(format!("min={}", format_size(m)));
    }
    if !filters.is_empty() {
        let _ = write!(s, " matching {}", filters.join(" "));
    }
    if n > 0 {
        let total: u64 = rows
            .iter()
            .map(|r| r.entry.used_bytes)
            .fold(0, u64::saturating_add);
        let _ = write!(s, " ({} committed total)", format_size(total));
    }
    if unnamed > 0 {
        let _ = write!(
            s,
            "; {unnamed} process{} without a readable name could not be matched",
            if unnamed == 1 { "" } else { "es" }
        );
    }
    s.push('.');
    s
}

#[derive(Serialize)]
struct PsJson<'a> {
    pid: u32,
    host_pid: Option<u32>,
    outside_pid_namespace: bool,
    unreadable: Option<hypomnesis::UnreadableReason>,
    name: Option<&'a str>,
    used_bytes: u64,
    shared_used_bytes: u64,
    device_index: u32,
    device_name: Option<&'a str>,
    context: Option<hypomnesis::GpuContextKind>,
    mps_server: bool,
    source: GpuQuerySource,
    gpu_instance_id: Option<u32>,
    compute_instance_id: Option<u32>,
    uid: Option<u32>,
    user: Option<&'a str>,
    command: Option<&'a str>,
    rss_bytes: Option<u64>,
    container: Option<&'a Container>,
    /// Whether the device spills now; `null` where spill is not measurable (never `false`).
    spilling: Option<bool>,
    /// The device spills and this row holds at least 256 MiB of shared memory.
    paged: Option<bool>,
    /// This row's fraction of the device's shared bytes, 0 to 1.
    shared_share: Option<f64>,
    /// The NUMA node that is the row's GPU's memory (a coherent machine in NUMA mode).
    numa_node: Option<u32>,
    /// This process's bytes on that node (part of its RSS, not of its VRAM).
    numa_node_bytes: Option<u64>,
    /// With `--why`: the ghost this row is, `null` for none (absent without `--why`).
    #[serde(skip_serializing_if = "Option::is_none")]
    ghost: Option<GhostCell<'a>>,
    /// With `--why`: a fact about it that is no proof of a ghost (an orphan at work), `null`
    /// for none (absent without `--why`).
    #[serde(skip_serializing_if = "Option::is_none")]
    ghost_fact: Option<FactCell<'a>>,
}

/// A row's fact under `--why`: `null` when it has none.
#[derive(Serialize)]
#[serde(transparent)]
struct FactCell<'a>(Option<&'a hypomnesis::GhostFact>);

/// A row's ghost under `--why`: `null` when it is none.
#[derive(Serialize)]
#[serde(transparent)]
struct GhostCell<'a>(Option<&'a hypomnesis::Ghost>);

pub fn ps_json(out: &mut impl Write, rows: &[PsRow]) -> io::Result<()> {
    let v: Vec<PsJson<'_>> = rows
        .iter()
        .map(|r| PsJson {
            pid: r.entry.pid,
            host_pid: r.entry.host_pid,
            outside_pid_namespace: r.entry.outside_pid_namespace,
            unreadable: r.entry.unreadable,
            name: r.entry.name.as_deref(),
            used_bytes: r.entry.used_bytes,
            shared_used_bytes: r.entry.shared_used_bytes,
            device_index: r.entry.device_index,
            device_name: r.device_name.as_deref(),
            context: r.entry.context,
            mps_server: r.entry.mps_server,
            source: r.entry.source,
            gpu_instance_id: r.entry.gpu_instance_id,
            compute_instance_id: r.entry.compute_instance_id,
            uid: r.ctx.uid,
            user: r.ctx.user.as_deref(),
            command: r.ctx.command.as_deref(),
            rss_bytes: r.ctx.rss_bytes,
            container: r.ctx.container.as_ref(),
            spilling: r.spill.map(|s| s.spilling),
            paged: r.spill.map(|s| s.paged),
            shared_share: r.spill.map(|s| s.shared_share),
            ghost: r.why.cell().map(|_| GhostCell(r.why.ghost())),
            ghost_fact: r.why.cell().map(|_| FactCell(r.why.fact())),
            numa_node: r.gpu_node.map(|(n, _)| n),
            numa_node_bytes: r.gpu_node.and_then(|(_, b)| b),
        })
        .collect();
    json(out, &v)
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::{GpuContextKind, GpuVendor};

    use super::*;

    use crate::view::{GIB, MIB};

    use crate::view::text;

    fn entry(pid: u32, name: Option<&str>, used: u64, shared: u64, device: u32) -> PsRow {
        PsRow {
            entry: GpuProcessEntry::builder()
                .pid(pid)
                .name(name.map(String::from))
                .used_bytes(used)
                .shared_used_bytes(shared)
                .device_index(device)
                .context(Some(GpuContextKind::Compute))
                .build(),
            ctx: ProcessContext::default(),
            device_name: Some("NVIDIA L40S".into()),
            device_vendor: Some(GpuVendor::Nvidia),
            spill: None,
            why: Why::NotAsked,
            gpu_node: None,
        }
    }

    #[test]
    fn ps_table_and_summary() {
        let mut rows = vec![
            entry(20037, Some("ffmpeg"), 538 * MIB, 0, 0),
            entry(4_194_400, None, 2 * GIB, 0, 0),
            entry(20038, Some("ffmpeg"), 681 * MIB, 0, 0),
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        assert_eq!(
            text(|w| ps_table(w, &rows, &[], None)),
            "\
PID      USER  TYPE     VRAM  SHARED  SPILL  RSS  GPU  DEVICE       COMMAND
4194400  ?     C     2.0 GiB   0 MiB  n/a      ?    0  NVIDIA L40S  ?
20038    ?     C     681 MiB   0 MiB  n/a      ?    0  NVIDIA L40S  ffmpeg
20037    ?     C     538 MiB   0 MiB  n/a      ?    0  NVIDIA L40S  ffmpeg
"
        );
        assert_eq!(
            ps_summary(&rows, &Asked::default(), 0, false),
            "hmn: 3 GPU processes found (3.2 GiB committed total)."
        );
        let asked = Asked {
            pids: &[20038, 7],
            device: Some(0),
            ..Asked::default()
        };
        assert_eq!(
            ps_summary(&rows[1..2], &asked, 0, false),
            "hmn: 1 GPU process found matching pid=20038,7 device=0 (681 MiB committed total)."
        );
        let asked = Asked {
            device: Some(1),
            user: Some("alice"),
            ..Asked::default()
        };
        assert_eq!(
            ps_summary(&[], &asked, 0, false),
            "hmn: 0 GPU processes found matching device=1 user=alice."
        );
        let filters = ["python".to_string(), "Torch".to_string()];
        let asked = Asked {
            filters: &filters,
            min: Some(512 * MIB),
            ..Asked::default()
        };
        assert_eq!(
            ps_summary(&rows[1..2], &asked, 3, false),
            "hmn: 1 GPU process found matching filter=python,Torch min=512 MiB (681 MiB committed total); 3 processes without a readable name could not be matched."
        );
        assert_eq!(
            ps_summary(&[], &Asked::default(), 1, true),
            "hmn: 0 GPU processes found (no GPU to list)."
        );
        assert_eq!(text(|w| ps_table(w, &[], &[], None)), "");
        sort_rows(&mut rows, SortKey::Pid);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20037, 20038, 4_194_400]
        );
        sort_rows(&mut rows, SortKey::Name);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20038, 20037, 4_194_400]
        );
        let mut shared = vec![
            entry(1, Some("a"), 10 * MIB, 0, 0),
            entry(2, Some("b"), MIB, 50 * MIB, 0),
        ];
        sort_rows(&mut shared, SortKey::Shared);
        assert_eq!(shared[0].entry.pid, 2);
        sort_rows(&mut shared, SortKey::Total);
        assert_eq!(shared[0].entry.pid, 2);
        sort_rows(&mut shared, SortKey::Dedicated);
        assert_eq!(shared[0].entry.pid, 1);
    }

    fn with_context(mut r: PsRow, user: &str, command: &str, rss: u64) -> PsRow {
        r.ctx.uid = Some(1000);
        r.ctx.user = Some(user.into());
        r.ctx.command = Some(command.into());
        r.ctx.rss_bytes = Some(rss);
        r
    }

    /// `--why` with no process row, only the memory no process accounts for, marked as a
    /// ghost: the WHY column is shown for it (the footer sums that ghost; the row must say it).
    #[test]
    fn the_why_column_shows_for_the_hidden_row_alone() {
        let ghost = hypomnesis::Ghost::new(hypomnesis::GhostClass::Unaccounted, 0, None, 2 * GIB);
        let hidden = [Hidden {
            device_index: 0,
            device_name: Some("NVIDIA H200".into()),
            device_vendor: None,
            bytes: 2 * GIB,
            mps: false,
            hidepid: None,
            why: Why::Ghost(Box::new(ghost)),
        }];
        let table = text(|w| ps_table(w, &[], &hidden, None));
        let header = table.lines().next().unwrap();
        assert!(header.contains("WHY"), "{table}");
        assert!(
            table.lines().nth(1).unwrap().contains("unaccounted"),
            "{table}"
        );
    }

    #[test]
    fn context_columns_sorts_and_a_narrow_terminal() {
        let mut graphics = entry(7, Some("Xorg"), 200 * MIB, 0, 0);
        graphics.entry.context = Some(GpuContextKind::ComputeAndGraphics);
        let mut rows = vec![
            with_context(
                entry(20037, Some("python3"), 538 * MIB, 0, 0),
                "alice",
                "python3 train.py --epochs 90 --data /datasets/imagenet\x1b[2J",
                3 * GIB,
            ),
            with_context(
                entry(20038, Some("python3"), 681 * MIB, 0, 0),
                "bob",
                "python3 eval.py",
                512 * MIB,
            ),
            graphics,
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        let hidden = [Hidden {
            device_index: 0,
            device_name: Some("NVIDIA L40S".into()),
            device_vendor: None,
            bytes: 2 * GIB,
            mps: false,
            hidepid: None,
            why: Why::NotAsked,
        }];
        assert_eq!(
            text(|w| ps_table(w, &rows, &hidden, None)),
            "\
PID    USER   TYPE     VRAM  SHARED  SPILL      RSS  GPU  DEVICE       COMMAND
20038  bob    C     681 MiB   0 MiB  n/a    512 MiB    0  NVIDIA L40S  python3 eval.py
20037  alice  C     538 MiB   0 MiB  n/a    3.0 GiB    0  NVIDIA L40S  python3 train.py --epochs 90 --data /datasets/imagenet?[2J
7      ?      C+G   200 MiB   0 MiB  n/a          ?    0  NVIDIA L40S  Xorg
-      -      -     2.0 GiB       -  -            -    0  NVIDIA L40S  (not visible from here)
"
        );
        // 82 columns: the command is cut to what is left, every line fits.
        let narrow = text(|w| ps_table(w, &rows, &hidden, Some(82)));
        for line in narrow.lines() {
            assert!(line.chars().count() <= 82, "{line:?}");
        }
        assert!(narrow.contains("  python3 tr…\n"), "{narrow}");
        // Too narrow for anything: the command keeps 8 characters.
        assert!(text(|w| ps_table(w, &rows, &[], Some(10))).contains("  python3…\n"));
        sort_rows(&mut rows, SortKey::User);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20037, 20038, 7]
        );
        sort_rows(&mut rows, SortKey::Command);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![7, 20038, 20037]
        );
        sort_rows(&mut rows, SortKey::Rss);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20037, 20038, 7]
        );
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["user"], "alice");
        assert_eq!(v[0]["uid"], 1000);
        assert_eq!(v[0]["rss_bytes"], 3 * GIB);
        assert!(
            v[0]["command"]
                .as_str()
                .unwrap()
                .ends_with("imagenet\x1b[2J"),
            "JSON keeps the command whole"
        );
        assert!(v[2]["user"].is_null() && v[2]["container"].is_null());
        assert_eq!(v[2]["context"], "compute_and_graphics");
    }

    /// Where spill is measurable (Windows), SPILL says whether the device spills and whether
    /// the row is paged; elsewhere it reads n/a and the JSON keys are null, never false.
    #[test]
    fn the_spill_column_and_keys() {
        let spilled = |pid, shared, spill| {
            let mut r = entry(pid, Some("p"), GIB, shared, 0);
            r.spill = spill;
            r
        };
        let rows = [
            spilled(1, 300 * MIB, Some(RowSpill::of(true, 400 * MIB, 300 * MIB))),
            spilled(2, 100 * MIB, Some(RowSpill::of(true, 400 * MIB, 100 * MIB))),
            spilled(3, 0, Some(RowSpill::of(false, 0, 0))),
            spilled(4, 0, None),
        ];
        let cells: Vec<&str> = rows.iter().map(|r| spill_cell(r.spill)).collect();
        assert_eq!(cells, ["paged", "yes", "no", "n/a"]);
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(
            (v[0]["spilling"].clone(), v[0]["paged"].clone()),
            (true.into(), true.into())
        );
        assert_eq!(v[0]["shared_share"], 0.75);
        assert_eq!(v[1]["paged"], false);
        assert_eq!(v[1]["shared_share"], 0.25);
        assert_eq!(
            (v[2]["spilling"].clone(), v[2]["shared_share"].clone()),
            (false.into(), 0.0.into())
        );
        for k in ["spilling", "paged", "shared_share"] {
            assert!(v[3][k].is_null(), "{k}: {}", v[3]);
        }
        // Four decimals.
        assert!((RowSpill::of(true, 3 * MIB, MIB).shared_share - 0.3333).abs() < 1e-12);
    }

    #[test]
    fn ps_json_rows() {
        let rows = vec![entry(7, None, MIB, 0, 1)];
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["pid"], 7);
        assert!(v[0]["name"].is_null());
        assert_eq!(v[0]["used_bytes"], MIB);
        assert_eq!(v[0]["shared_used_bytes"], 0);
        assert_eq!(v[0]["device_index"], 1);
        assert_eq!(v[0]["device_name"], "NVIDIA L40S");
        assert_eq!(v[0]["context"], "compute");
        assert_eq!(text(|w| ps_json(w, &[])), "[]\n");
    }

    #[test]
    fn ps_shows_gi_and_ci_when_a_row_has_them() {
        let row = |pid: u32, name: &str, used: u64, ids: Option<(u32, u32)>| PsRow {
            entry: GpuProcessEntry::builder()
                .pid(pid)
                .name(Some(name.into()))
                .used_bytes(used)
                .gpu_instance_id(ids.map(|i| i.0))
                .compute_instance_id(ids.map(|i| i.1))
                .build(),
            ctx: ProcessContext::default(),
            device_name: Some("NVIDIA H200".into()),
            device_vendor: Some(GpuVendor::Nvidia),
            spill: None,
            why: Why::NotAsked,
            gpu_node: None,
        };
        let mut rows = vec![
            row(31337, "python3", 12288 * MIB, Some((2, 1))),
            row(31401, "all_reduce_perf", 512 * MIB, Some((2, 1))),
            row(31338, "python3", 4096 * MIB, Some((2, 1))),
            row(31500, "ffmpeg", 100 * MIB, None),
            row(31600, "trainer", 2 * GIB, Some((10, 0))),
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        assert_eq!(
            text(|w| ps_table(w, &rows, &[], None)),
            "\
PID    USER  TYPE      VRAM  SHARED  SPILL  RSS  GI  CI  GPU  DEVICE       COMMAND
31337  ?     -     12.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  python3
31338  ?     -      4.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  python3
31600  ?     -      2.0 GiB   0 MiB  n/a      ?  10   0    0  NVIDIA H200  trainer
31401  ?     -      512 MiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  all_reduce_perf
31500  ?     -      100 MiB   0 MiB  n/a      ?   -   -    0  NVIDIA H200  ffmpeg
"
        );
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["gpu_instance_id"], 2);
        assert_eq!(v[0]["compute_instance_id"], 1);
        assert!(v[4]["gpu_instance_id"].is_null() && v[4]["compute_instance_id"].is_null());
        // Without instance ids there are no GI and CI columns.
        assert_eq!(
            text(|w| ps_table(w, &rows[4..], &[], None)),
            "\
PID    USER  TYPE     VRAM  SHARED  SPILL  RSS  GPU  DEVICE       COMMAND
31500  ?     -     100 MiB   0 MiB  n/a      ?    0  NVIDIA H200  ffmpeg
"
        );
    }

    fn in_pod(mut r: PsRow, names: Option<(&str, &str, &str)>) -> PsRow {
        let mut c = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod6a2b5c3d_1e2f_4a5b_8c9d_0e1f2a3b4c5d.slice/\
             cri-containerd-{}.scope",
            "c0ffee01".repeat(8)
        ))
        .unwrap();
        if let Some((ns, pod, name)) = names {
            c.namespace = Some(ns.into());
            c.pod = Some(pod.into());
            c.name = Some(name.into());
        }
        r.ctx.container = Some(c);
        r
    }

    /// A row in a named pod shows NAMESPACE/POD before COMMAND: `?` for a pod the kubelet's
    /// logs do not name (the column is shown for it alone: dropping it hid that the process
    /// runs in a pod), `-` outside any pod; no column when no row is in a pod. `--json` has the
    /// names in the container object.
    #[test]
    fn pods_are_named_when_the_kubelet_logs_name_them() {
        let mut rows = vec![
            in_pod(
                entry(4242, Some("python3"), 2 * GIB, 0, 0),
                Some(("ml-team", "trainer-0", "worker")),
            ),
            in_pod(entry(4600, Some("python3"), GIB, 0, 0), None),
            entry(4800, Some("Xorg"), 100 * MIB, 0, 0),
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        assert_eq!(
            text(|w| ps_table(w, &rows, &[], None)),
            "\
PID   USER  TYPE     VRAM  SHARED  SPILL  RSS  GPU  DEVICE       NAMESPACE/POD      COMMAND
4242  ?     C     2.0 GiB   0 MiB  n/a      ?    0  NVIDIA L40S  ml-team/trainer-0  python3
4600  ?     C     1.0 GiB   0 MiB  n/a      ?    0  NVIDIA L40S  ?                  python3
4800  ?     C     100 MiB   0 MiB  n/a      ?    0  NVIDIA L40S  -                  Xorg
"
        );
        let unnamed = text(|w| ps_table(w, &rows[1..], &[], None));
        assert!(
            unnamed.contains("NAMESPACE/POD") && unnamed.contains("  ?  "),
            "{unnamed}"
        );
        assert!(!text(|w| ps_table(w, &rows[2..], &[], None)).contains("NAMESPACE/POD"));
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        let c = &v[0]["container"];
        assert_eq!(c["namespace"], "ml-team");
        assert_eq!(c["pod"], "trainer-0");
        assert_eq!(c["name"], "worker");
        assert_eq!(c["pod_uid"], "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d");
        assert_eq!(c["runtime"], "containerd");
        assert!(v[1]["container"]["namespace"].is_null() && v[1]["container"]["name"].is_null());
        assert!(v[2]["container"].is_null());
    }

    /// A user name longer than Rust's widest width (65,535) panicked the table; every column
    /// but the last is cut at `MAX_COLUMN` with `…`, and `--json` keeps the name whole.
    #[test]
    fn a_name_of_any_length_is_cut_in_the_table_and_whole_in_json() {
        let long = "u".repeat(65_536);
        let device = "D".repeat(70_000);
        let mut row = with_context(entry(9, Some("python3"), MIB, 0, 0), &long, "train.py", MIB);
        row.device_name = Some(device.clone());
        let table = text(|w| ps_table(w, std::slice::from_ref(&row), &[], None));
        let line = table.lines().nth(1).unwrap();
        let user = format!("{}…", "u".repeat(MAX_COLUMN - 1));
        assert!(line.contains(&format!("{user}  ")), "{line}");
        assert!(
            line.contains(&format!("  0  {}…", "D".repeat(MAX_COLUMN - 1))),
            "{line}"
        );
        assert!(line.ends_with("train.py"), "{line}");
        assert!(line.chars().count() < 400, "{}", line.chars().count());
        let v: serde_json::Value =
            serde_json::from_str(&text(|w| ps_json(w, std::slice::from_ref(&row)))).unwrap();
        assert_eq!(v[0]["user"].as_str().map(str::len), Some(65_536));
    }
}
