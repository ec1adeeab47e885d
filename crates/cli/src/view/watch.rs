//! `hmn watch`'s rows (text and JSON Lines) and its closing summary.

use super::printable::printable;
use serde::Serialize;

use super::{format_size, size};

/// A row of output (also the JSON Lines `sample` record): 0.2.x's keys first, then ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// `sample`.
    pub kind: &'static str,
    pub t_ms: u128,
    /// When the interval's samples were taken (UTC, ISO 8601 with milliseconds): the same for
    /// every row of one interval.
    pub wall_clock: String,
    pub pid: u32,
    pub name: Option<String>,
    /// Dedicated memory on the watched GPU, bytes: on the row whose `event` is `exited`, the
    /// driver's figure while it still lists the pid (it charges the memory still), else
    /// `null`.
    pub used_bytes: Option<u64>,
    /// Change of `used_bytes` since the process's previous sample.
    pub used_delta: Option<i64>,
    /// Shared (system) memory the GPU holds for it, bytes (Windows WDDM; 0 elsewhere).
    pub shared_bytes: Option<u64>,
    pub shared_delta: Option<i64>,
    /// Whether the watched GPU spills now; `null` where spill is not measurable.
    pub spilling: Option<bool>,
    /// The GPU spills and this process holds at least 256 MiB of shared memory.
    pub paged: Option<bool>,
    /// The process is outside this PID namespace: `pid` is the driver's number, and nothing
    /// of it (RSS, owner, command) can be read here.
    pub outside_pid_namespace: bool,
    /// The owner (a name, or the uid), `None` when it cannot be read.
    pub user: Option<String>,
    /// The full command line (JSON only; the text row shows the short name).
    pub command: Option<String>,
    pub rss_bytes: Option<u64>,
    pub rss_delta_bytes: Option<i64>,
    /// The same as `used_bytes` (the key of earlier hmn releases).
    pub gpu_bytes: Option<u64>,
    pub gpu_delta_bytes: Option<i64>,
    /// `new`, `exited` or `pid reused` where it happens.
    pub event: Option<String>,
    /// The same as `spilling` (the key of earlier hmn releases).
    pub spill: Option<bool>,
}

/// `2026-12-02T06:12:03.123Z`: a time as UTC, ISO 8601 with milliseconds.
pub fn utc_millis(t: std::time::SystemTime) -> String {
    let since = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// `now - before`, when both are known (and the difference fits).
pub fn delta(now: Option<u64>, before: Option<u64>) -> Option<i64> {
    let (n, b) = (i128::from(now?), i128::from(before?));
    i64::try_from(n - b).ok()
}

fn signed(d: Option<i64>) -> String {
    match d {
        None => String::new(),
        Some(d) => {
            let mag = format_size(d.unsigned_abs());
            format!(" ({}{mag})", if d < 0 { "-" } else { "+" })
        }
    }
}

/// A text row.
pub fn row(r: &Row) -> String {
    let event = r
        .event
        .as_ref()
        .map_or(String::new(), |e| format!("  [{e}]"));
    let spill = match (r.spilling, r.paged) {
        (Some(true), Some(true)) => "  SPILL (paged)",
        (Some(true), _) => "  SPILL",
        (Some(false), _) => "  no spill",
        (None, _) => "",
    };
    #[allow(clippy::cast_precision_loss)] // display only
    let t = r.t_ms as f64 / 1000.0;
    format!(
        "{t:>7.1}s  {:>7}  {:<8}  {:<16}  RSS {}{}  GPU {}{}{spill}{event}",
        r.pid,
        printable(r.user.as_deref().unwrap_or("?")),
        printable(r.name.as_deref().unwrap_or("?")),
        size(r.rss_bytes),
        signed(r.rss_delta_bytes),
        size(r.used_bytes),
        signed(r.used_delta),
    )
}

/// The closing line of one followed process.
pub struct Followed<'a> {
    pub pid: u32,
    pub name: Option<&'a str>,
    /// The command line, shown after the figures when known.
    pub command: Option<&'a str>,
    /// RSS and GPU memory at the first sample.
    pub baseline: (Option<u64>, Option<u64>),
    pub peak: (Option<u64>, Option<u64>),
    pub ended: Option<&'a str>,
}

/// `  42 python3: RSS baseline 100 MiB, peak 300 MiB; GPU baseline 0 MiB, peak 1.0 GiB (exited)`.
pub fn closing(f: &Followed<'_>) -> String {
    format!(
        "  {} {}: RSS baseline {}, peak {}; GPU baseline {}, peak {}{}{}",
        f.pid,
        printable(f.name.unwrap_or("?")),
        size(f.baseline.0),
        size(f.peak.0),
        size(f.baseline.1),
        size(f.peak.1),
        f.ended.map_or(String::new(), |e| format!(" ({e})")),
        f.command
            .map_or(String::new(), |c| format!(" — {}", printable(c)))
    )
}

/// How `hmn watch` chose what it follows (the `start` record's `selection`).
#[derive(Debug, Clone, Serialize)]
pub struct Selection {
    /// `pids` (named on the command line), `top` (the largest holders at the start) or
    /// `follow_new` (the largest holders at every sample).
    pub mode: &'static str,
    pub pids: Vec<u32>,
    pub top: u32,
    pub filters: Vec<String>,
    pub min_bytes: Option<u64>,
}

/// The first JSON Lines record of `hmn watch --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Start {
    pub kind: &'static str,
    pub hmn_version: &'static str,
    /// The command line, its program reduced to its file name.
    pub argv: Vec<String>,
    pub device: u32,
    pub device_name: Option<String>,
    pub interval_ms: u128,
    pub duration_ms: Option<u128>,
    pub selection: Selection,
}

/// One followed process in the `summary` record.
#[derive(Debug, Clone, Serialize)]
pub struct PerPid {
    pub pid: u32,
    pub name: Option<String>,
    pub baseline_used_bytes: Option<u64>,
    pub peak_used_bytes: Option<u64>,
    pub baseline_shared_bytes: Option<u64>,
    pub peak_shared_bytes: Option<u64>,
    /// Whether it was ever paged (see [`Row::paged`]); `null` where spill is not measurable.
    pub paged: Option<bool>,
    pub baseline_rss_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
    /// `exited` or `pid reused` when it ended before the watch did.
    pub ended: Option<&'static str>,
}

/// The last JSON Lines record of `hmn watch --json` (a capture without it was cut short).
#[derive(Debug, Serialize)]
pub struct WatchSummary {
    pub kind: &'static str,
    #[serde(flatten)]
    pub report: super::spill::ReportKeys,
    /// One sample of the GPU's counters when the watch began; `null` where not measurable.
    pub spilling_at_attach: Option<bool>,
    pub per_pid: Vec<PerPid>,
    pub duration_ms: u128,
    /// The other processes on the watched GPU over the watch, the largest changes named.
    pub neighbours: Vec<super::run::NeighbourGpu>,
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::view::MIB;

    #[test]
    fn wall_clock_is_utc_with_milliseconds() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(utc_millis(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2026-12-02T06:12:03.123Z, and a leap day.
        let t = UNIX_EPOCH + Duration::from_millis(1_796_191_923_123);
        assert_eq!(utc_millis(t), "2026-12-02T06:12:03.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_millis(leap), "2000-02-29T00:00:00.000Z");
        let end = UNIX_EPOCH + Duration::from_millis(253_402_300_799_999);
        assert_eq!(utc_millis(end), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn rows() {
        let r = Row {
            kind: "sample",
            t_ms: 1500,
            wall_clock: "2026-12-02T06:12:03.123Z".into(),
            pid: 42,
            name: Some("python3".into()),
            used_bytes: Some(0),
            used_delta: delta(Some(0), Some(64 * MIB)),
            shared_bytes: Some(0),
            shared_delta: Some(0),
            spilling: None,
            paged: None,
            outside_pid_namespace: false,
            user: Some("alice".into()),
            command: Some("python3 train.py".into()),
            rss_bytes: Some(300 * MIB),
            rss_delta_bytes: delta(Some(300 * MIB), Some(100 * MIB)),
            gpu_bytes: Some(0),
            gpu_delta_bytes: delta(Some(0), Some(64 * MIB)),
            event: None,
            spill: None,
        };
        let spilling = Row {
            spilling: Some(true),
            paged: Some(false),
            ..r.clone()
        };
        assert!(
            row(&spilling).ends_with("(-64 MiB)  SPILL"),
            "{}",
            row(&spilling)
        );
        assert_eq!(
            row(&r),
            "    1.5s       42  alice     python3           RSS 300 MiB (+200 MiB)  GPU 0 MiB (-64 MiB)"
        );
        let gone = Row {
            event: Some("exited".into()),
            rss_bytes: None,
            rss_delta_bytes: None,
            used_bytes: None,
            used_delta: None,
            gpu_bytes: None,
            gpu_delta_bytes: None,
            user: None,
            ..r
        };
        assert_eq!(
            row(&gone),
            "    1.5s       42  ?         python3           RSS unknown  GPU unknown  [exited]"
        );
        assert_eq!(delta(None, Some(1)), None);
        assert_eq!(
            closing(&Followed {
                pid: 42,
                name: Some("sleep"),
                command: None,
                baseline: (Some(MIB), None),
                peak: (Some(2 * MIB), None),
                ended: Some("exited"),
            }),
            "  42 sleep: RSS baseline 1 MiB, peak 2 MiB; GPU baseline unknown, peak unknown (exited)"
        );
        assert_eq!(
            closing(&Followed {
                pid: 42,
                name: Some("python3"),
                command: Some("python3 train.py\x1b[2J"),
                baseline: (Some(MIB), Some(0)),
                peak: (Some(2 * MIB), Some(MIB)),
                ended: None,
            }),
            "  42 python3: RSS baseline 1 MiB, peak 2 MiB; GPU baseline 0 MiB, peak 1 MiB — python3 train.py?[2J"
        );
    }
}
