//! Spill reports (`hmn spill`, `hmn watch`'s summary): each GPU's episodes as text on stderr,
//! and the keys of a report in JSON, as 0.2.x names them.

use std::fmt::Write as _;
use std::time::Duration;

use hypomnesis::{SpillEpisode, SpillReport};
use serde::Serialize;

use super::format_size;

/// Milliseconds of a duration, for JSON.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One episode in JSON: 0.2.x's keys, then ours.
#[derive(Debug, Serialize)]
pub struct EpisodeKeys {
    start_label: String,
    end_label: Option<String>,
    peak_shared_bytes: u64,
    observations: usize,
    duration_ms: u64,
    /// When it started, seconds since the sampling began.
    start_s: Option<f64>,
    peak_dedicated_bytes: Option<u64>,
}

impl EpisodeKeys {
    fn of(e: &SpillEpisode) -> Self {
        Self {
            start_label: e.start_label.clone(),
            end_label: e.end_label.clone(),
            peak_shared_bytes: e.peak_shared_bytes,
            observations: e.observations,
            duration_ms: ms(e.duration),
            start_s: e.start.map(|d| d.as_secs_f64()),
            peak_dedicated_bytes: e.peak_dedicated_bytes,
        }
    }
}

/// The keys of a spill report, as `hmn spill --json` and `hmn watch --json`'s summary give
/// them. Without a report (spill not measurable) every figure is 0 and `measurable` false.
#[derive(Debug, Serialize)]
pub struct ReportKeys {
    measurable: bool,
    spilled: bool,
    observations: usize,
    baseline_shared_bytes: u64,
    peak_shared_bytes: u64,
    peak_dedicated_bytes: u64,
    dedicated_limit_bytes: u64,
    total_spill_duration_ms: u64,
    episodes: Vec<EpisodeKeys>,
}

impl ReportKeys {
    pub fn of(r: Option<&SpillReport>) -> Self {
        match r {
            Some(r) => Self {
                measurable: r.measurable,
                spilled: r.spilled(),
                observations: r.observations,
                baseline_shared_bytes: r.baseline_shared_bytes,
                peak_shared_bytes: r.peak_shared_bytes,
                peak_dedicated_bytes: r.peak_dedicated_bytes,
                dedicated_limit_bytes: r.dedicated_limit_bytes,
                total_spill_duration_ms: ms(r.total_spill_duration()),
                episodes: r.episodes.iter().map(EpisodeKeys::of).collect(),
            },
            None => Self {
                measurable: false,
                spilled: false,
                observations: 0,
                baseline_shared_bytes: 0,
                peak_shared_bytes: 0,
                peak_dedicated_bytes: 0,
                dedicated_limit_bytes: 0,
                total_spill_duration_ms: 0,
                episodes: Vec::new(),
            },
        }
    }
}

/// One GPU's report in `hmn spill --json`'s `devices`.
#[derive(Debug, Serialize)]
pub struct DeviceJson {
    pub index: u32,
    #[serde(flatten)]
    pub report: ReportKeys,
}

/// `hmn spill --json`: the report of the `--device` GPU (0.2.x's keys), then what ran and
/// every GPU's report.
#[derive(Debug, Serialize)]
pub struct ReportJson {
    #[serde(flatten)]
    pub report: ReportKeys,
    pub device: u32,
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_s: f64,
    pub not_measurable_reason: Option<String>,
    pub devices: Vec<DeviceJson>,
}

/// The end-of-run report of one GPU.
pub fn render_episodes(index: u32, r: &SpillReport) -> String {
    let mut s = format!(
        "  GPU {index}: {} spill episode(s), {:.1} s spilling over {} sample(s); peak dedicated {}, peak shared {} (baseline {})\n",
        r.episodes.len(),
        r.total_spill_duration().as_secs_f64(),
        r.observations,
        format_size(r.peak_dedicated_bytes),
        format_size(r.peak_shared_bytes),
        format_size(r.baseline_shared_bytes),
    );
    for e in &r.episodes {
        let end = e.end_label.as_deref().map_or_else(
            || "still spilling at the end".to_string(),
            |l| format!("until {l}"),
        );
        let _ = writeln!(
            s,
            "    from {} for {:.1} s ({end}): shared up to {}",
            e.start_label,
            e.duration.as_secs_f64(),
            format_size(e.peak_shared_bytes)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use hypomnesis::SpillTracker;
    use hypomnesis::spill::SpillSample;

    use super::*;

    fn tracked() -> SpillReport {
        let mut t = SpillTracker::fed(8 << 30);
        t.observe_sample("0 ms", SpillSample::new(Duration::ZERO, 1 << 30, 100 << 20));
        t.observe_sample(
            "1000 ms",
            SpillSample::new(Duration::from_secs(1), 7 << 30, 600 << 20),
        );
        t.observe_sample(
            "3000 ms",
            SpillSample::new(Duration::from_secs(3), 1 << 30, 600 << 20),
        );
        t.into_report()
    }

    #[test]
    fn json_keys_of_a_report() {
        let v = serde_json::to_value(ReportKeys::of(Some(&tracked()))).unwrap();
        assert_eq!(v["measurable"], true);
        assert_eq!(v["spilled"], true);
        assert_eq!(v["observations"], 3);
        assert_eq!(v["baseline_shared_bytes"], 100_u64 << 20);
        assert_eq!(v["peak_dedicated_bytes"], 7_u64 << 30);
        assert_eq!(v["dedicated_limit_bytes"], 8_u64 << 30);
        assert_eq!(v["total_spill_duration_ms"], 2000);
        let e = &v["episodes"][0];
        assert_eq!(e["start_label"], "1000 ms");
        assert_eq!(e["end_label"], "3000 ms");
        assert_eq!(e["duration_ms"], 2000);
        assert_eq!(e["observations"], 1);
        assert_eq!(e["start_s"], 1.0);
        let none = serde_json::to_value(ReportKeys::of(None)).unwrap();
        assert_eq!(none["measurable"], false);
        assert_eq!(none["spilled"], false);
        assert_eq!(none["episodes"], serde_json::json!([]));
    }

    #[test]
    fn episode_report() {
        assert_eq!(
            render_episodes(0, &tracked()),
            "  GPU 0: 1 spill episode(s), 2.0 s spilling over 3 sample(s); peak dedicated 7.0 GiB, peak shared 600 MiB (baseline 100 MiB)\n    from 1000 ms for 2.0 s (until 3000 ms): shared up to 600 MiB\n"
        );
    }
}
