//! `hmn ps`: the rows, their order, the table, the stderr summary and the JSON.

use super::printable::printable;
use super::unseen;
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::io::{self, Write};

use clap::ValueEnum;
use hypomnesis::{Container, GpuContextKind, GpuProcessEntry, GpuQuerySource, ProcessContext};
use serde::Serialize;

use super::{MAX_COLUMN, cut, fit, format_size, json};

/// Sort orders of `hmn ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    Dedicated,
    Shared,
    Total,
    Pid,
    Name,
    User,
    Command,
    Rss,
}

/// A process row with the name of its device and what is known about the process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRow {
    pub entry: GpuProcessEntry,
    /// Owner, command line, host memory, container (`Default` where none could be read).
    pub ctx: ProcessContext,
    pub device_name: Option<String>,
    /// The device's maker, shown when it has no name.
    pub device_vendor: Option<hypomnesis::GpuVendor>,
}

impl PsRow {
    fn total(&self) -> u64 {
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

fn device_cell(index: u32, name: Option<&str>, vendor: Option<hypomnesis::GpuVendor>) -> String {
    match (name, vendor) {
        (Some(n), _) => format!("{index} {}", printable(n)),
        (None, Some(v)) => format!("{index} {}", vendor_label(v)),
        (None, None) => index.to_string(),
    }
}

/// The table's columns: header, right-aligned. GI and CI are shown only when a row has MIG
/// instance ids, NAMESPACE/POD only when a row's pod is named; COMMAND, last, is cut to the
/// terminal's width.
const COLUMNS: [(&str, bool); 11] = [
    ("PID", false),
    ("USER", false),
    ("TYPE", false),
    ("VRAM", true),
    ("SHARED", true),
    ("RSS", true),
    ("GI", true),
    ("CI", true),
    ("DEVICE", false),
    ("NAMESPACE/POD", false),
    ("COMMAND", false),
];
const GI: usize = 6;
const CI: usize = 7;
const POD: usize = 9;

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

/// Whether a row's pod is named (the NAMESPACE/POD column is then shown).
fn in_named_pod(r: &PsRow) -> bool {
    r.ctx
        .container
        .as_ref()
        .is_some_and(|c| c.namespace.is_some() && c.pod.is_some())
}

/// `C`, `G`, `C+G`, `M`, `M+C` (what nvidia-smi prints), `-` when the source does not say.
pub fn type_cell(kind: Option<GpuContextKind>) -> &'static str {
    kind.map_or("-", GpuContextKind::short)
}

/// The cells of a process row, in the table's column order.
fn row_cells(r: &PsRow) -> [String; 11] {
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
        r.ctx.rss_bytes.map_or_else(|| "?".into(), format_size),
        id(r.entry.gpu_instance_id),
        id(r.entry.compute_instance_id),
        device_cell(
            r.entry.device_index,
            r.device_name.as_deref(),
            r.device_vendor,
        ),
        pod_cell(r.ctx.container.as_ref()),
        command,
    ]
}

fn hidden_cells(h: &Hidden) -> [String; 11] {
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
        device_cell(h.device_index, h.device_name.as_deref(), h.device_vendor),
        dash(),
        unseen::not_visible_cell(h),
    ]
}

/// The `PID  USER  TYPE  VRAM  SHARED  RSS  DEVICE  COMMAND` table (nothing when there are no
/// rows), then one `(not visible from here)` row per GPU in `hidden`. A row whose files cannot
/// be read has its reason after its pid: `(outside)`, `(hidden)`, `(exited)`, `(unreadable)`. When a row has MIG
/// instance ids, `GI  CI` columns come before `DEVICE`; when a row runs in a Kubernetes pod the
/// kubelet's logs name, `NAMESPACE/POD` comes before `COMMAND`. With `width` (a terminal's),
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
    let pods = rows.iter().any(in_named_pod);
    let shown: Vec<usize> = (0..COLUMNS.len())
        .filter(|&c| (mig || (c != GI && c != CI)) && (pods || c != POD))
        .collect();
    let mut cells: Vec<[String; 11]> = rows.iter().map(row_cells).collect();
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
    let line = |c: &[String; 11]| {
        let mut s = String::new();
        for &k in &shown {
            let (cell, w) = (c.get(k).map_or("", String::as_str), widths.get(k).copied());
            let right = COLUMNS.get(k).is_some_and(|(_, r)| *r);
            if k + 1 == COLUMNS.len() {
                s.push_str(&room.map_or_else(|| cell.to_string(), |r| cut(cell, r)));
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

/// `hmn: <N> GPU processes found[ matching pid=<p> device=<d> user=<u>][ (<total> committed total)].`
pub fn ps_summary(
    rows: &[PsRow],
    pid: Option<u32>,
    device: Option<u32>,
    user: Option<&str>,
) -> String {
    let n = rows.len();
    let mut s = format!(
        "hmn: {n} GPU process{} found",
        if n == 1 { "" } else { "es" }
    );
    let mut filters = Vec::new();
    if let Some(p) = pid {
        filters.push(format!("pid={p}"));
    }
    if let Some(d) = device {
        filters.push(format!("device={d}"));
    }
    if let Some(u) = user {
        filters.push(format!("user={}", printable(u)));
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
}

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

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut v = Vec::new();
        f(&mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

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
PID      USER  TYPE     VRAM  SHARED  RSS  DEVICE         COMMAND
4194400  ?     C     2.0 GiB   0 MiB    ?  0 NVIDIA L40S  ?
20038    ?     C     681 MiB   0 MiB    ?  0 NVIDIA L40S  ffmpeg
20037    ?     C     538 MiB   0 MiB    ?  0 NVIDIA L40S  ffmpeg
"
        );
        assert_eq!(
            ps_summary(&rows, None, None, None),
            "hmn: 3 GPU processes found (3.2 GiB committed total)."
        );
        assert_eq!(
            ps_summary(&rows[1..2], Some(20038), Some(0), None),
            "hmn: 1 GPU process found matching pid=20038 device=0 (681 MiB committed total)."
        );
        assert_eq!(
            ps_summary(&[], None, Some(1), Some("alice")),
            "hmn: 0 GPU processes found matching device=1 user=alice."
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
        }];
        assert_eq!(
            text(|w| ps_table(w, &rows, &hidden, None)),
            "\
PID    USER   TYPE     VRAM  SHARED      RSS  DEVICE         COMMAND
20038  bob    C     681 MiB   0 MiB  512 MiB  0 NVIDIA L40S  python3 eval.py
20037  alice  C     538 MiB   0 MiB  3.0 GiB  0 NVIDIA L40S  python3 train.py --epochs 90 --data /datasets/imagenet?[2J
7      ?      C+G   200 MiB   0 MiB        ?  0 NVIDIA L40S  Xorg
-      -      -     2.0 GiB       -        -  0 NVIDIA L40S  (not visible from here)
"
        );
        // 72 columns: the command is cut to what is left, every line fits.
        let narrow = text(|w| ps_table(w, &rows, &hidden, Some(72)));
        for line in narrow.lines() {
            assert!(line.chars().count() <= 72, "{line:?}");
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
PID    USER  TYPE      VRAM  SHARED  RSS  GI  CI  DEVICE         COMMAND
31337  ?     -     12.0 GiB   0 MiB    ?   2   1  0 NVIDIA H200  python3
31338  ?     -      4.0 GiB   0 MiB    ?   2   1  0 NVIDIA H200  python3
31600  ?     -      2.0 GiB   0 MiB    ?  10   0  0 NVIDIA H200  trainer
31401  ?     -      512 MiB   0 MiB    ?   2   1  0 NVIDIA H200  all_reduce_perf
31500  ?     -      100 MiB   0 MiB    ?   -   -  0 NVIDIA H200  ffmpeg
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
PID    USER  TYPE     VRAM  SHARED  RSS  DEVICE         COMMAND
31500  ?     -     100 MiB   0 MiB    ?  0 NVIDIA H200  ffmpeg
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
    /// logs do not name, `-` outside any pod; no column when no row's pod is named. `--json`
    /// has the names in the container object.
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
PID   USER  TYPE     VRAM  SHARED  RSS  DEVICE         NAMESPACE/POD      COMMAND
4242  ?     C     2.0 GiB   0 MiB    ?  0 NVIDIA L40S  ml-team/trainer-0  python3
4600  ?     C     1.0 GiB   0 MiB    ?  0 NVIDIA L40S  ?                  python3
4800  ?     C     100 MiB   0 MiB    ?  0 NVIDIA L40S  -                  Xorg
"
        );
        assert!(!text(|w| ps_table(w, &rows[1..], &[], None)).contains("NAMESPACE/POD"));
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
            line.contains(&format!("0 {}…", "D".repeat(MAX_COLUMN - 3))),
            "{line}"
        );
        assert!(line.ends_with("train.py"), "{line}");
        assert!(line.chars().count() < 400, "{}", line.chars().count());
        let v: serde_json::Value =
            serde_json::from_str(&text(|w| ps_json(w, std::slice::from_ref(&row)))).unwrap();
        assert_eq!(v[0]["user"].as_str().map(str::len), Some(65_536));
    }
}
