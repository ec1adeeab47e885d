//! `hmn spill`'s report: each GPU's spill episodes, as text on stderr or one JSON object.

use std::fmt::Write as _;
use std::time::Duration;

use hypomnesis::spill::SpillMachine;
use serde::Serialize;

use super::format_size;

/// One spill episode in the JSON report.
#[derive(Debug, Serialize)]
pub struct EpisodeJson {
    start_s: f64,
    duration_s: f64,
    peak_shared_bytes: u64,
}

/// One GPU in the JSON report.
#[derive(Debug, Serialize)]
pub struct DeviceJson {
    index: u32,
    episodes: Vec<EpisodeJson>,
    spill_s: f64,
    peak_dedicated_bytes: u64,
    peak_shared_bytes: u64,
    baseline_shared_bytes: Option<u64>,
}

/// `hmn spill --json`: what ran, whether spill was measurable, and each GPU's episodes.
#[derive(Debug, Serialize)]
pub struct ReportJson {
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_s: f64,
    pub measurable: bool,
    pub not_measurable_reason: Option<String>,
    pub devices: Vec<DeviceJson>,
}

/// One GPU's part of the JSON report.
pub fn device_json(index: u32, t: &SpillMachine, now: Duration) -> DeviceJson {
    let (ded, shared) = t.peaks();
    DeviceJson {
        index,
        episodes: t
            .spans()
            .iter()
            .map(|e| EpisodeJson {
                start_s: e.start.as_secs_f64(),
                duration_s: e.duration(now).as_secs_f64(),
                peak_shared_bytes: e.peak_shared_bytes,
            })
            .collect(),
        spill_s: t.total_spill_time().as_secs_f64(),
        peak_dedicated_bytes: ded,
        peak_shared_bytes: shared,
        baseline_shared_bytes: t.baseline_shared_bytes(),
    }
}

/// The end-of-run report of one GPU.
pub fn render_episodes(index: u32, t: &SpillMachine, now: Duration) -> String {
    let (ded, shared) = t.peaks();
    let mut s = format!(
        "  GPU {index}: {} spill episode(s), {:.1} s spilling; peak dedicated {}, peak shared {} (baseline {})\n",
        t.spans().len(),
        t.total_spill_time().as_secs_f64(),
        format_size(ded),
        format_size(shared),
        format_size(t.baseline_shared_bytes().unwrap_or(0)),
    );
    for e in t.spans() {
        let _ = writeln!(
            s,
            "    from {:.1} s for {:.1} s: shared up to {}",
            e.start.as_secs_f64(),
            e.duration(now).as_secs_f64(),
            format_size(e.peak_shared_bytes)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use hypomnesis::spill::{SpillSample, SpillThresholds};

    use super::*;

    #[test]
    fn json_report_of_a_tracker() {
        let mut t = SpillMachine::new(8 << 30, SpillThresholds::default());
        t.observe(SpillSample::new(Duration::ZERO, 1 << 30, 100 << 20));
        t.observe(SpillSample::new(Duration::from_secs(1), 7 << 30, 600 << 20));
        let d = device_json(1, &t, Duration::from_secs(4));
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["index"], 1);
        assert_eq!(v["episodes"][0]["start_s"], 1.0);
        assert_eq!(v["episodes"][0]["duration_s"], 3.0);
        assert_eq!(v["peak_dedicated_bytes"], 7_u64 << 30);
        assert_eq!(v["baseline_shared_bytes"], 100_u64 << 20);
    }

    #[test]
    fn episode_report() {
        let mut t = SpillMachine::new(8 << 30, SpillThresholds::default());
        t.observe(SpillSample::new(Duration::ZERO, 1 << 30, 100 << 20));
        t.observe(SpillSample::new(Duration::from_secs(1), 7 << 30, 600 << 20));
        t.observe(SpillSample::new(Duration::from_secs(3), 1 << 30, 600 << 20));
        assert_eq!(
            render_episodes(0, &t, Duration::from_secs(4)),
            "  GPU 0: 1 spill episode(s), 2.0 s spilling; peak dedicated 7.0 GiB, peak shared 600 MiB (baseline 100 MiB)\n    from 1.0 s for 2.0 s: shared up to 600 MiB\n"
        );
    }
}
