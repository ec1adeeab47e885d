//! `hmn watch [PID…]`: follow processes' RAM and GPU memory over time.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use hypomnesis::spill::{SpillSample, SpillThresholds, SpillTracker};
use serde::Serialize;

use crate::cli::{JsonArg, Outcome, RootArgs};
use crate::run::parse_interval;
use crate::sample::{self, Devices};

/// Options of `hmn watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Process ids to follow; without any, the top GPU memory holders.
    #[arg(value_name = "PID")]
    pub pids: Vec<u32>,
    /// Time between samples.
    #[arg(long, default_value = "1s", value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl-C or every process has exited).
    #[arg(long, value_parser = parse_interval, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Without pids, follow this many of the largest GPU memory holders.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
}

/// One followed process.
#[derive(Debug, Clone)]
struct Target {
    pid: u32,
    name: Option<String>,
    start: Option<u64>,
    first: Option<(Option<u64>, Option<u64>)>,
    last: (Option<u64>, Option<u64>),
    peak: (Option<u64>, Option<u64>),
    ended: Option<&'static str>,
}

/// A row of output (also the JSON Lines object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub t_ms: u128,
    pub pid: u32,
    pub name: Option<String>,
    pub rss_bytes: Option<u64>,
    pub rss_delta_bytes: Option<i64>,
    pub gpu_bytes: Option<u64>,
    pub gpu_delta_bytes: Option<i64>,
    /// `exited` or `pid reused` on the last row of a process.
    pub event: Option<String>,
    /// Windows (WDDM): whether a GPU is spilling into shared memory now (the SPILL column);
    /// `None` where spill is not measurable.
    pub spill: Option<bool>,
}

fn delta(now: Option<u64>, before: Option<u64>) -> Option<i64> {
    let (n, b) = (i128::from(now?), i128::from(before?));
    i64::try_from(n - b).ok()
}

fn signed(d: Option<i64>) -> String {
    match d {
        None => String::new(),
        Some(d) => {
            let mag = crate::render::format_size(d.unsigned_abs());
            format!(" ({}{mag})", if d < 0 { "-" } else { "+" })
        }
    }
}

/// A text row.
pub fn render_row(r: &Row) -> String {
    let event = r
        .event
        .as_ref()
        .map_or(String::new(), |e| format!("  [{e}]"));
    let spill = match r.spill {
        Some(true) => "  SPILL",
        Some(false) => "  no spill",
        None => "",
    };
    #[allow(clippy::cast_precision_loss)] // display only
    let t = r.t_ms as f64 / 1000.0;
    format!(
        "{t:>7.1}s  {:>7}  {:<16}  RSS {}{}  GPU {}{}{spill}{event}",
        r.pid,
        r.name.as_deref().unwrap_or("?"),
        sample::size(r.rss_bytes),
        signed(r.rss_delta_bytes),
        sample::size(r.gpu_bytes),
        signed(r.gpu_delta_bytes),
    )
}

/// The largest GPU holders now, by total across devices.
fn top_holders(n: usize, devices: u32) -> Vec<u32> {
    let mut per: HashMap<u32, u64> = HashMap::new();
    for i in 0..devices {
        for (pid, b) in sample::gpu_by_pid(i).unwrap_or_default() {
            let e = per.entry(pid).or_insert(0);
            *e = e.saturating_add(b);
        }
    }
    let mut v: Vec<(u32, u64)> = per.into_iter().collect();
    v.sort_by_key(|(p, b)| (std::cmp::Reverse(*b), *p));
    v.into_iter().take(n).map(|(p, _)| p).collect()
}

#[allow(clippy::too_many_lines)] // one sampling loop, read top to bottom
pub fn run(args: &WatchArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let json = args.output.json;
    let devices = Devices::discover();
    let pids = if args.pids.is_empty() {
        top_holders(args.top, devices.count())
    } else {
        args.pids.clone()
    };
    if pids.is_empty() {
        writeln!(
            err,
            "hmn watch: no process holds GPU memory now; name pids to follow (hmn watch PID…)"
        )?;
        return Ok(Outcome::Success);
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&stop);
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let mut targets: Vec<Target> = pids
        .iter()
        .map(|&pid| Target {
            pid,
            name: hypomnesis::process_name(pid),
            start: hypomnesis::process_start_time(pid),
            first: None,
            last: (None, None),
            peak: (None, None),
            ended: None,
        })
        .collect();
    let started = Instant::now();
    // The SPILL column: one tracker per GPU whose residency is measurable (Windows WDDM).
    let mut spill: Vec<Option<SpillTracker>> = (0..devices.count())
        .map(|i| {
            hypomnesis::adapter_residency(i)
                .ok()
                .map(|r| SpillTracker::new(r.capacity_bytes, SpillThresholds::default()))
        })
        .collect();
    loop {
        let t_ms = started.elapsed().as_millis();
        let mut spilling: Option<bool> = None;
        for (i, t) in (0_u32..).zip(spill.iter_mut()) {
            if let (Some(t), Ok(r)) = (t.as_mut(), hypomnesis::adapter_residency(i)) {
                let now = t.observe(SpillSample::new(
                    started.elapsed(),
                    r.dedicated_bytes,
                    r.shared_bytes,
                ));
                spilling = Some(spilling.unwrap_or(false) || now);
            }
        }
        let maps: Vec<Option<HashMap<u32, u64>>> =
            (0..devices.count()).map(sample::gpu_by_pid).collect();
        for tg in targets.iter_mut().filter(|t| t.ended.is_none()) {
            let start_now = hypomnesis::process_start_time(tg.pid);
            let rss = hypomnesis::process_rss_of(tg.pid).ok();
            let event = match (tg.start, start_now) {
                (Some(a), Some(b)) if a != b => Some("pid reused"),
                (Some(_), None) => Some("exited"),
                _ if rss.is_none() && tg.first.is_some() && tg.last.0.is_some() => Some("exited"),
                _ => None,
            };
            let gpu = if maps.iter().all(Option::is_none) {
                None
            } else {
                Some(
                    maps.iter()
                        .flatten()
                        .filter_map(|m| m.get(&tg.pid))
                        .fold(0_u64, |a, b| a.saturating_add(*b)),
                )
            };
            let (rss, gpu) = if event.is_some() {
                (None, None)
            } else {
                (rss, gpu)
            };
            let row = Row {
                t_ms,
                pid: tg.pid,
                name: tg.name.clone(),
                rss_bytes: rss,
                rss_delta_bytes: delta(rss, tg.last.0),
                gpu_bytes: gpu,
                gpu_delta_bytes: delta(gpu, tg.last.1),
                event: event.map(String::from),
                spill: spilling,
            };
            if json {
                serde_json::to_writer(&mut *out, &row).map_err(io::Error::other)?;
                writeln!(out)?;
            } else {
                writeln!(out, "{}", render_row(&row))?;
            }
            out.flush()?;
            if let Some(e) = event {
                tg.ended = Some(e);
                continue;
            }
            if tg.first.is_none() {
                tg.first = Some((rss, gpu));
            }
            tg.last = (rss, gpu);
            tg.peak = (
                sample::max_opt(tg.peak.0, rss),
                sample::max_opt(tg.peak.1, gpu),
            );
        }
        let done = targets.iter().all(|t| t.ended.is_some())
            || stop.load(Ordering::SeqCst)
            || args
                .duration
                .is_some_and(|d| started.elapsed() + args.interval > d);
        if done {
            break;
        }
        let wake = Instant::now() + args.interval;
        while Instant::now() < wake && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20).min(args.interval));
        }
    }
    writeln!(
        err,
        "hmn watch: {} process(es) over {:.1} s",
        targets.len(),
        started.elapsed().as_secs_f64()
    )?;
    for t in &targets {
        let (b_rss, b_gpu) = t.first.unwrap_or((None, None));
        writeln!(
            err,
            "  {} {}: RSS baseline {}, peak {}; GPU baseline {}, peak {}{}",
            t.pid,
            t.name.as_deref().unwrap_or("?"),
            sample::size(b_rss),
            sample::size(t.peak.0),
            sample::size(b_gpu),
            sample::size(t.peak.1),
            t.ended.map_or(String::new(), |e| format!(" ({e})"))
        )?;
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn rows() {
        let r = Row {
            t_ms: 1500,
            pid: 42,
            name: Some("python3".into()),
            rss_bytes: Some(300 * MIB),
            rss_delta_bytes: delta(Some(300 * MIB), Some(100 * MIB)),
            gpu_bytes: Some(0),
            gpu_delta_bytes: delta(Some(0), Some(64 * MIB)),
            event: None,
            spill: None,
        };
        let spilling = Row {
            spill: Some(true),
            ..r.clone()
        };
        assert!(
            render_row(&spilling).ends_with("(-64 MiB)  SPILL"),
            "{}",
            render_row(&spilling)
        );
        assert_eq!(
            render_row(&r),
            "    1.5s       42  python3           RSS 300 MiB (+200 MiB)  GPU 0 MiB (-64 MiB)"
        );
        let gone = Row {
            event: Some("exited".into()),
            rss_bytes: None,
            rss_delta_bytes: None,
            gpu_bytes: None,
            gpu_delta_bytes: None,
            ..r
        };
        assert_eq!(
            render_row(&gone),
            "    1.5s       42  python3           RSS unknown  GPU unknown  [exited]"
        );
        assert_eq!(delta(None, Some(1)), None);
    }
}
