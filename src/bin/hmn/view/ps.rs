//! `hmn ps`: the rows, their order, the table, the stderr summary and the JSON.

use super::printable::printable;
use std::cmp::Reverse;
use std::fmt::Write as _;
use std::io::{self, Write};

use clap::ValueEnum;
use hypomnesis::{GpuProcessEntry, GpuQuerySource};
use serde::Serialize;

use super::{format_size, json};

/// Sort orders of `hmn ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    Dedicated,
    Shared,
    Total,
    Pid,
    Name,
}

/// A process row with the name of its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRow {
    pub entry: GpuProcessEntry,
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
    }
}

/// Memory of one GPU that no listed process accounts for, beyond the driver's own overhead:
/// held by processes the driver does not show to this caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    pub device_index: u32,
    pub device_name: Option<String>,
    pub device_vendor: Option<hypomnesis::GpuVendor>,
    pub bytes: u64,
}

fn device_cell(index: u32, name: Option<&str>, vendor: Option<hypomnesis::GpuVendor>) -> String {
    match (name, vendor) {
        (Some(n), _) => format!("{index} {}", printable(n)),
        (None, Some(v)) => format!("{index} {}", vendor_label(v)),
        (None, None) => index.to_string(),
    }
}

/// The cells of a process row, in the table's column order.
fn row_cells(r: &PsRow) -> [String; 7] {
    let id = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let pid = match (r.entry.host_pid, r.entry.outside_pid_namespace) {
        (Some(h), _) => format!("{} (host {h})", r.entry.pid),
        (None, true) => format!("{} (outside)", r.entry.pid),
        (None, false) => r.entry.pid.to_string(),
    };
    [
        pid,
        r.entry
            .name
            .as_deref()
            .map_or_else(|| "?".into(), |n| printable(n).into_owned()),
        format_size(r.entry.used_bytes),
        format_size(r.entry.shared_used_bytes),
        id(r.entry.gpu_instance_id),
        id(r.entry.compute_instance_id),
        device_cell(
            r.entry.device_index,
            r.device_name.as_deref(),
            r.device_vendor,
        ),
    ]
}

/// The `PID  NAME  VRAM  SHARED  DEVICE` table (nothing when there are no rows), then one
/// `-  (not visible from here)` row per GPU in `hidden`. When a row has MIG instance ids,
/// `GI  CI` columns come before `DEVICE` (`-` where a row has none).
pub fn ps_table(out: &mut impl Write, rows: &[PsRow], hidden: &[Hidden]) -> io::Result<()> {
    if rows.is_empty() && hidden.is_empty() {
        return Ok(());
    }
    let mig = rows
        .iter()
        .any(|r| r.entry.gpu_instance_id.is_some() || r.entry.compute_instance_id.is_some());
    let mut cells: Vec<[String; 7]> = rows.iter().map(row_cells).collect();
    cells.extend(hidden.iter().map(|h| {
        [
            "-".into(),
            "(not visible from here)".into(),
            format_size(h.bytes),
            "-".into(),
            "-".into(),
            "-".into(),
            device_cell(h.device_index, h.device_name.as_deref(), h.device_vendor),
        ]
    }));
    let header = ["PID", "NAME", "VRAM", "SHARED", "GI", "CI", "DEVICE"];
    let mut width = header.map(str::len);
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |c: [&str; 7]| {
        let mut s = format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  ",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3]
        );
        if mig {
            let _ = write!(
                s,
                "{:>w4$}  {:>w5$}  ",
                c[4],
                c[5],
                w4 = width[4],
                w5 = width[5]
            );
        }
        s.push_str(c[6]);
        s
    };
    writeln!(out, "{}", line(header))?;
    for c in &cells {
        writeln!(
            out,
            "{}",
            line([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6]])
        )?;
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

/// Why memory is not visible from here and what to do, for the GPUs in `hidden`.
pub fn hidden_line(hidden: &[Hidden]) -> String {
    let total = hidden.iter().map(|h| h.bytes).fold(0, u64::saturating_add);
    let gpus: Vec<String> = hidden.iter().map(|h| h.device_index.to_string()).collect();
    format!(
        "hmn: {} on GPU {} is held by processes not visible from here: the driver lists only \
         the processes of this PID namespace (and, on some systems, of this user). To see them, \
         run hmn in the host's PID namespace (docker run --pid=host, Kubernetes hostPID: \
         true), with --procfs /host/proc where the container mounts a /proc of its own.",
        format_size(total),
        gpus.join(", ")
    )
}

/// `hmn: <N> GPU processes found[ matching pid=<p> device=<d>][ (<total> committed total)].`
pub fn ps_summary(rows: &[PsRow], pid: Option<u32>, device: Option<u32>) -> String {
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
    name: Option<&'a str>,
    used_bytes: u64,
    shared_used_bytes: u64,
    device_index: u32,
    device_name: Option<&'a str>,
    context: Option<hypomnesis::GpuContextKind>,
    source: GpuQuerySource,
    gpu_instance_id: Option<u32>,
    compute_instance_id: Option<u32>,
}

pub fn ps_json(out: &mut impl Write, rows: &[PsRow]) -> io::Result<()> {
    let v: Vec<PsJson<'_>> = rows
        .iter()
        .map(|r| PsJson {
            pid: r.entry.pid,
            host_pid: r.entry.host_pid,
            outside_pid_namespace: r.entry.outside_pid_namespace,
            name: r.entry.name.as_deref(),
            used_bytes: r.entry.used_bytes,
            shared_used_bytes: r.entry.shared_used_bytes,
            device_index: r.entry.device_index,
            device_name: r.device_name.as_deref(),
            context: r.entry.context,
            source: r.entry.source,
            gpu_instance_id: r.entry.gpu_instance_id,
            compute_instance_id: r.entry.compute_instance_id,
        })
        .collect();
    json(out, &v)
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(all(test, feature = "test-helpers"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::{GpuContextKind, GpuVendor};

    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

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
            text(|w| ps_table(w, &rows, &[])),
            "\
PID      NAME       VRAM  SHARED  DEVICE
4194400  ?       2.0 GiB   0 MiB  0 NVIDIA L40S
20038    ffmpeg  681 MiB   0 MiB  0 NVIDIA L40S
20037    ffmpeg  538 MiB   0 MiB  0 NVIDIA L40S
"
        );
        assert_eq!(
            ps_summary(&rows, None, None),
            "hmn: 3 GPU processes found (3.2 GiB committed total)."
        );
        assert_eq!(
            ps_summary(&rows[1..2], Some(20038), Some(0)),
            "hmn: 1 GPU process found matching pid=20038 device=0 (681 MiB committed total)."
        );
        assert_eq!(
            ps_summary(&[], None, Some(1)),
            "hmn: 0 GPU processes found matching device=1."
        );
        assert_eq!(text(|w| ps_table(w, &[], &[])), "");
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
            text(|w| ps_table(w, &rows, &[])),
            "\
PID    NAME                 VRAM  SHARED  GI  CI  DEVICE
31337  python3          12.0 GiB   0 MiB   2   1  0 NVIDIA H200
31338  python3           4.0 GiB   0 MiB   2   1  0 NVIDIA H200
31600  trainer           2.0 GiB   0 MiB  10   0  0 NVIDIA H200
31401  all_reduce_perf   512 MiB   0 MiB   2   1  0 NVIDIA H200
31500  ffmpeg            100 MiB   0 MiB   -   -  0 NVIDIA H200
"
        );
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["gpu_instance_id"], 2);
        assert_eq!(v[0]["compute_instance_id"], 1);
        assert!(v[4]["gpu_instance_id"].is_null() && v[4]["compute_instance_id"].is_null());
        // Without instance ids the table keeps its five columns.
        assert_eq!(
            text(|w| ps_table(w, &rows[4..], &[])),
            "\
PID    NAME       VRAM  SHARED  DEVICE
31500  ffmpeg  100 MiB   0 MiB  0 NVIDIA H200
"
        );
    }
}
