//! `hmn run -- CMD…`: run a command and report the peaks of its whole process tree.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::cli::{JsonArg, Outcome, RootArgs};
use crate::sample::{self, Devices};

/// Options of `hmn run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Time between samples, e.g. 100ms or 1s.
    #[arg(long, default_value = "100ms", value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Duration,
    /// Write the timeline as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the timeline (RSS and GPU memory per device) as SVG to this file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub output: JsonArg,
    #[command(flatten)]
    pub roots: RootArgs,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// A duration argument (`100ms`, `2s`, `1.5s`), at least 1 ms.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    hypomnesis::__parsers::parse_duration(s)
}

/// One sample of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    pub t: Duration,
    pub rss: Option<u64>,
    pub gpu: Vec<Option<u64>>,
    pub device_used: Vec<Option<u64>>,
}

/// Per device peaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevicePeak {
    pub index: u32,
    pub name: Option<String>,
    pub total_bytes: Option<u64>,
    pub peak_gpu_bytes: Option<u64>,
    pub peak_device_used_bytes: Option<u64>,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_s: f64,
    pub samples: usize,
    pub interval_ms: u128,
    pub peak_rss_bytes: Option<u64>,
    pub peak_gpu_bytes: Option<u64>,
    pub devices: Vec<DevicePeak>,
}

/// Peaks of a timeline.
pub fn summarize(
    points: &[Point],
    devices: &Devices,
) -> (Option<u64>, Option<u64>, Vec<DevicePeak>) {
    let peak_rss = points.iter().map(|p| p.rss).fold(None, sample::max_opt);
    let total_gpu = |p: &Point| {
        let known: Vec<u64> = p.gpu.iter().flatten().copied().collect();
        (!known.is_empty()).then(|| known.iter().fold(0, |a: u64, b| a.saturating_add(*b)))
    };
    let peak_gpu = points.iter().map(total_gpu).fold(None, sample::max_opt);
    let per_device = (0..devices.count())
        .map(|i| {
            let at = |v: &Vec<Option<u64>>| v.get(i as usize).copied().flatten();
            DevicePeak {
                index: i,
                name: devices.name(i).map(String::from),
                total_bytes: devices.total(i),
                peak_gpu_bytes: points
                    .iter()
                    .map(|p| at(&p.gpu))
                    .fold(None, sample::max_opt),
                peak_device_used_bytes: points
                    .iter()
                    .map(|p| at(&p.device_used))
                    .fold(None, sample::max_opt),
            }
        })
        .collect();
    (peak_rss, peak_gpu, per_device)
}

/// A command line as a shell would take it back: words with spaces, quotes or other
/// characters the shell reads are single-quoted; control characters are shown as `?`.
pub fn shell_words(words: &[String]) -> String {
    let quote = |w: &String| {
        let w: String = w
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let plain = !w.is_empty()
            && w.chars()
                .all(|c| c.is_alphanumeric() || "-_./=:,+@%".contains(c));
        if plain {
            w
        } else {
            format!("'{}'", w.replace('\'', "'\\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The summary printed on stderr.
pub fn render_summary(s: &Summary) -> String {
    let mut out = String::new();
    let how = match (s.exit_code, s.signal) {
        (_, Some(sig)) => format!("was killed by signal {sig}"),
        (Some(c), None) => format!("exited with status {c}"),
        (None, None) => "ended".to_string(),
    };
    let _ = writeln!(
        out,
        "hmn run: `{}` {how} after {:.1} s ({} samples, every {} ms)",
        shell_words(&s.command),
        s.duration_s,
        s.samples,
        s.interval_ms
    );
    let _ = writeln!(
        out,
        "  peak RSS (process tree): {}",
        sample::size(s.peak_rss_bytes)
    );
    for d in &s.devices {
        let name = d.name.as_ref().map_or(String::new(), |n| format!(" [{n}]"));
        let total = d.total_bytes.map_or(String::new(), |t| {
            format!(" of {}", crate::render::format_size(t))
        });
        let _ = writeln!(
            out,
            "  GPU {}{name}: peak {} held by the process tree; device peak used {}{total}",
            d.index,
            sample::size(d.peak_gpu_bytes),
            sample::size(d.peak_device_used_bytes)
        );
    }
    if s.devices.is_empty() {
        out.push_str("  GPU: no GPU source answered\n");
    }
    out
}

/// The timeline as CSV: `t_s,rss_bytes,gpu0_bytes,gpu0_device_used_bytes,…` (empty = unknown).
pub fn render_csv(points: &[Point], devices: u32) -> String {
    let mut out = String::from("t_s,rss_bytes");
    for i in 0..devices {
        let _ = write!(out, ",gpu{i}_bytes,gpu{i}_device_used_bytes");
    }
    out.push('\n');
    let cell = |v: Option<u64>| v.map_or(String::new(), |b| b.to_string());
    for p in points {
        let _ = write!(out, "{:.3},{}", p.t.as_secs_f64(), cell(p.rss));
        for i in 0..devices as usize {
            let _ = write!(
                out,
                ",{},{}",
                cell(p.gpu.get(i).copied().flatten()),
                cell(p.device_used.get(i).copied().flatten())
            );
        }
        out.push('\n');
    }
    out
}

fn status_parts(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        (status.code(), status.signal())
    }
    #[cfg(not(unix))]
    {
        (status.code(), None)
    }
}

/// The exit status `hmn run` passes on: the command's code, or 128 + the signal.
pub fn passed_on(code: Option<i32>, signal: Option<i32>) -> u8 {
    match (code, signal) {
        (_, Some(sig)) => u8::try_from(128 + sig.clamp(0, 127)).unwrap_or(255),
        (Some(c), None) => u8::try_from(c.rem_euclid(256)).unwrap_or(255),
        (None, None) => 1,
    }
}

pub fn run(args: &RunArgs, out: &mut impl Write, err: &mut impl Write) -> io::Result<Outcome> {
    let json = args.output.json;
    let Some((program, rest)) = args.command.split_first() else {
        writeln!(err, "hmn run: no command given (hmn run -- CMD ARGS…)")?;
        return Ok(Outcome::Code(2));
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = Arc::clone(&interrupted);
        // Ctrl-C reaches the command (same terminal); hmn stays to print the summary.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    let started = Instant::now();
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            writeln!(
                err,
                "hmn run: cannot start {}: {e}",
                program.to_string_lossy()
            )?;
            return Ok(Outcome::Code(127));
        }
    };
    let pid = child.id();
    let devices = Devices::discover();
    let mut points: Vec<Point> = Vec::new();
    let mut forwarded = false;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        let tree = hypomnesis::process_tree(pid).unwrap_or_else(|_| vec![pid]);
        let set: HashSet<u32> = tree.iter().copied().collect();
        points.push(Point {
            t: started.elapsed(),
            rss: sample::rss_sum(&tree),
            gpu: sample::gpu_sums(devices.count(), &set),
            device_used: sample::device_used(devices.count()),
        });
        let wake = Instant::now() + args.interval;
        while Instant::now() < wake {
            if child.try_wait()?.is_some() {
                break;
            }
            if interrupted.load(Ordering::SeqCst) && !forwarded {
                // A terminal's Ctrl-C already reached the command; a signal sent to hmn alone
                // did not: pass it on if the command is still running a moment later.
                std::thread::sleep(Duration::from_millis(200));
                if child.try_wait()?.is_none() {
                    crate::sys::interrupt(pid);
                }
                forwarded = true;
            }
            std::thread::sleep(Duration::from_millis(10).min(args.interval));
        }
    };
    let duration = started.elapsed();
    let (code, signal) = status_parts(status);
    let (peak_rss, peak_gpu, per_device) = summarize(&points, &devices);
    let summary = Summary {
        command: args
            .command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        exit_code: code,
        signal,
        duration_s: duration.as_secs_f64(),
        samples: points.len(),
        interval_ms: args.interval.as_millis(),
        peak_rss_bytes: peak_rss,
        peak_gpu_bytes: peak_gpu,
        devices: per_device,
    };
    if let Some(path) = &args.csv
        && let Err(e) = std::fs::write(path, render_csv(&points, devices.count()))
    {
        writeln!(err, "hmn run: cannot write {}: {e}", path.display())?;
    }
    if let Some(path) = &args.plot
        && let Err(e) = crate::plot::draw(path, &points, &devices, &summary)
    {
        writeln!(err, "hmn run: cannot draw {}: {e}", path.display())?;
    }
    write!(err, "{}", render_summary(&summary))?;
    if json {
        // The command's status is passed on even when stdout is closed.
        crate::render::unless_closed(crate::render::json(out, &summary))?;
    }
    Ok(Outcome::Code(passed_on(code, signal)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn pt(ms: u64, rss: u64, gpu: Option<u64>, used: Option<u64>) -> Point {
        Point {
            t: Duration::from_millis(ms),
            rss: Some(rss),
            gpu: vec![gpu],
            device_used: vec![used],
        }
    }

    #[test]
    fn command_lines_read_back() {
        let w = |v: &[&str]| shell_words(&v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>());
        assert_eq!(
            w(&["python3", "train.py", "--lr=3e-4"]),
            "python3 train.py --lr=3e-4"
        );
        assert_eq!(
            w(&["sh", "-c", "echo $$ > /tmp/p; it's"]),
            "sh -c 'echo $$ > /tmp/p; it'\\''s'"
        );
        assert_eq!(w(&["a\nb", ""]), "'a?b' ''");
    }

    #[test]
    fn exit_statuses() {
        assert_eq!(passed_on(Some(0), None), 0);
        assert_eq!(passed_on(Some(3), None), 3);
        assert_eq!(passed_on(None, Some(15)), 143);
        assert_eq!(passed_on(None, Some(9)), 137);
        assert_eq!(passed_on(Some(-1), None), 255);
        assert_eq!(passed_on(None, None), 1);
    }

    #[test]
    fn peaks_csv_and_summary() {
        let devices = Devices { list: vec![None] };
        let points = vec![
            pt(0, 10 * MIB, Some(0), Some(100 * MIB)),
            pt(100, 300 * MIB, Some(64 * MIB), None),
            pt(200, 20 * MIB, None, Some(90 * MIB)),
        ];
        let (rss, gpu, per) = summarize(&points, &devices);
        assert_eq!((rss, gpu), (Some(300 * MIB), Some(64 * MIB)));
        assert_eq!(per[0].peak_gpu_bytes, Some(64 * MIB));
        assert_eq!(per[0].peak_device_used_bytes, Some(100 * MIB));
        assert_eq!(
            render_csv(&points, 1),
            format!(
                "t_s,rss_bytes,gpu0_bytes,gpu0_device_used_bytes\n0.000,{},0,{}\n0.100,{},{},\n0.200,{},,{}\n",
                10 * MIB,
                100 * MIB,
                300 * MIB,
                64 * MIB,
                20 * MIB,
                90 * MIB
            )
        );
        let s = Summary {
            command: vec!["python3".into(), "train.py".into()],
            exit_code: Some(0),
            signal: None,
            duration_s: 12.34,
            samples: 3,
            interval_ms: 100,
            peak_rss_bytes: rss,
            peak_gpu_bytes: gpu,
            devices: per,
        };
        assert_eq!(
            render_summary(&s),
            "hmn run: `python3 train.py` exited with status 0 after 12.3 s (3 samples, every 100 ms)\n  peak RSS (process tree): 300 MiB\n  GPU 0: peak 64 MiB held by the process tree; device peak used 100 MiB\n"
        );
    }
}
