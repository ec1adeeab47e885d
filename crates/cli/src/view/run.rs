//! `hmn run`'s views: the summary on stderr, the CSV timeline, and the command line quoted.

use super::printable::printable;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use super::size;

/// One sample of the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Point {
    pub t: Duration,
    /// What the process tree holds in RAM (`Frame::tree_ram`): a lone process's RSS, several
    /// processes' PSS summed; `None` at a sample that read no PSS of several.
    pub rss: Option<u64>,
    /// GPU memory the tree holds, per device.
    pub gpu: Vec<Option<u64>>,
    /// Used memory of each device.
    pub device_used: Vec<Option<u64>>,
    /// What the other processes (not the tree's) hold on each device, where its processes
    /// could be listed.
    pub others: Vec<Option<u64>>,
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

/// A process of the tree that held GPU memory during the run, with who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub pid: u32,
    /// Owner, when it could be read (once, when the process was first seen holding memory).
    pub user: Option<String>,
    /// Full command line, when it could be read.
    pub command: Option<String>,
    /// Its peak GPU memory, all devices together.
    pub peak_gpu_bytes: u64,
    /// Its peak resident set.
    pub peak_rss_bytes: Option<u64>,
}

/// A process of the tree, with its peaks (`--json`'s `processes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub pid: u32,
    /// Its name when first seen.
    pub name: Option<String>,
    /// Its peak resident set (a page it shares with others counted whole).
    pub peak_rss_bytes: Option<u64>,
    /// Its peak proportional set size (a shared page divided among the processes that map
    /// it); `null` when never read (a lone process, or one whose PSS could not be read).
    pub peak_pss_bytes: Option<u64>,
}

/// How the tree's figure at its peak was made (`--json`'s `peak_rss_measure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// The RSS of a lone process.
    Rss,
    /// The PSS of several processes summed: a page they share counted once.
    Pss,
    /// The PSS of several summed, and the RSS of those whose PSS could not be read.
    PssAndRss,
    /// The RSS of several summed: not one PSS could be read.
    RssSum,
}

/// The tree's figure at its peak sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RamPeak {
    pub bytes: u64,
    pub measure: Measure,
    /// How many processes it counts.
    pub processes: usize,
    /// How many of them are counted by RSS (their PSS could not be read).
    pub by_rss: usize,
}

/// Holders shown in the text summary; `--json` has them all.
const HOLDERS_SHOWN: usize = 10;

/// The result of a run (also `--json`'s object).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub command: Vec<String>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration_s: f64,
    pub samples: usize,
    pub interval_ms: u128,
    /// The tree's peak RAM: a lone process's RSS, several processes' PSS summed (a page they
    /// share counted once), with the RSS of those in `rss_counted_pids` in place of theirs.
    pub peak_rss_bytes: Option<u64>,
    pub peak_gpu_bytes: Option<u64>,
    pub devices: Vec<DevicePeak>,
    /// The processes of the tree that held GPU memory, largest peak first.
    pub gpu_processes: Vec<Holder>,
    /// How `peak_rss_bytes` was made at its sample.
    pub peak_rss_measure: Option<Measure>,
    /// How many processes `peak_rss_bytes` counts.
    pub peak_rss_processes: Option<usize>,
    /// The peak of the tree's RSS summed at every sample (what `peak_rss_bytes` was before
    /// 0.2.15: a page shared by several processes counted in each).
    pub peak_rss_sum_bytes: Option<u64>,
    /// The processes whose PSS could not be read at some sample (another user's, one not
    /// dumpable, a kernel before 4.14): their RSS was counted in the tree's figure instead.
    pub rss_counted_pids: Vec<u32>,
    /// The processes of the tree with their peaks, largest RSS first (at most 1,024: those
    /// alive at the end and the largest that exited).
    pub processes: Vec<Member>,
    /// How many exited processes `processes` leaves out (each smaller than those it lists).
    pub processes_left_out: u64,
    /// The tree's figure at its peak sample (the text summary's).
    #[serde(skip)]
    pub ram_peak: Option<RamPeak>,
    /// On each GPU the tree held memory on, the other processes' memory over the run and the
    /// largest changes among them.
    pub neighbours: Vec<NeighbourGpu>,
    /// Ghosts on those GPUs at the end that were not there at the start (`hmn ghosts` says
    /// more of each).
    pub ghosts_appeared: Vec<GhostSeen>,
    /// What a serving engine printed about its memory as it started, beside the driver's
    /// figures (`null` when no engine line was recognised, or with `--output-as-is`).
    pub engine: Option<crate::engine::ledger::EngineReport>,
}

/// A ghost found on a GPU the command used at its end, not at its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GhostSeen {
    pub gpu: u32,
    /// The pid the driver charges; `None` for memory no listed process accounts for.
    pub pid: Option<u32>,
    pub name: Option<String>,
    /// `exited`, `zombie`, `stuck`, … (as `hmn ghosts` names them).
    pub class: &'static str,
    pub bytes: u64,
    /// Whether the pid was one of the command's own processes.
    pub own: bool,
}

/// The ghosts that appeared while the command ran.
fn ghost_lines(out: &mut String, ghosts: &[GhostSeen]) {
    for g in ghosts {
        let size = super::format_size(g.bytes);
        let held = match g.pid {
            Some(pid) => {
                let own = if g.own {
                    ", one of the command's own"
                } else {
                    ""
                };
                let name = g
                    .name
                    .as_deref()
                    .map_or(String::new(), |n| format!(" {}", printable(n)));
                format!("{size} charged to pid {pid}{name} ({}){own}", g.class)
            }
            None => format!("{size} that no listed process accounts for ({})", g.class),
        };
        let _ = writeln!(
            out,
            "  a ghost appeared on GPU {} while it ran: {held} (`hmn ghosts` says more)",
            g.gpu
        );
    }
}

/// The other processes on a GPU the command used, over its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeighbourGpu {
    pub index: u32,
    /// What the others held at the command's first sample, at its last, and at their peak.
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub peak_bytes: u64,
    /// `end_bytes` less `start_bytes`.
    pub change_bytes: i64,
    /// The others whose memory moved, the largest change first (at most 10).
    pub processes: Vec<Neighbour>,
    /// How many others moved that `processes` leaves out (each smaller).
    pub processes_left_out: usize,
}

/// One other process whose memory moved on a GPU while the command ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbour {
    pub pid: u32,
    pub user: Option<String>,
    pub command: Option<String>,
    pub namespace: Option<String>,
    pub pod: Option<String>,
    /// What it held at the command's first sample (0 for one that came later), at the last (0
    /// for one gone), and at its peak.
    pub start_bytes: u64,
    pub end_bytes: u64,
    pub peak_bytes: u64,
    pub change_bytes: i64,
    /// When its memory first moved and last changed, seconds into the run.
    pub moved_from_s: Option<f64>,
    pub moved_until_s: Option<f64>,
}

impl Eq for Neighbour {}

/// `+21.4 GiB`, `-1.0 GiB`, `±0 MiB`.
fn signed_size(b: i64) -> String {
    let sign = match b.signum() {
        1 => "+",
        -1 => "-",
        _ => "±",
    };
    format!("{sign}{}", super::format_size(b.unsigned_abs()))
}

/// The others on each GPU of `gpus` (those the command used, or the watched one): their memory
/// at the start and the end, and the largest changes, each with who and when.
/// `during` says over what: `while it ran` (`hmn run`), `over the watch` (`hmn watch`).
pub fn neighbour_lines(out: &mut String, gpus: &[NeighbourGpu], during: &str) {
    for g in gpus {
        let f = super::format_size;
        if g.processes.is_empty() && g.peak_bytes == 0 {
            let _ = writeln!(
                out,
                "  others on GPU {}: none (no other process held memory there {during})",
                g.index
            );
            continue;
        }
        if g.processes.is_empty() {
            let _ = writeln!(
                out,
                "  others on GPU {}: {} throughout (no other process's memory moved)",
                g.index,
                f(g.start_bytes)
            );
            continue;
        }
        let _ = writeln!(
            out,
            "  others on GPU {} {during}: {} at the start, {} at the end (peak {}): {}",
            g.index,
            f(g.start_bytes),
            f(g.end_bytes),
            f(g.peak_bytes),
            signed_size(g.change_bytes)
        );
        for p in &g.processes {
            let mut who = printable(p.user.as_deref().unwrap_or("?")).into_owned();
            if let Some(pod) = &p.pod {
                let ns = p.namespace.as_deref().unwrap_or("?");
                who = format!("{who}, pod {}/{}", printable(ns), printable(pod));
            }
            let verb = match p.change_bytes.signum() {
                1 => format!("grew by {}", f(p.change_bytes.unsigned_abs())),
                -1 => format!("shrank by {}", f(p.change_bytes.unsigned_abs())),
                _ => format!("went up to {} and back", f(p.peak_bytes)),
            };
            let when = match (p.moved_from_s, p.moved_until_s) {
                (Some(a), Some(b)) if (b - a).abs() < 1e-9 => format!(" at {a:.1} s"),
                (Some(a), Some(b)) => format!(", {a:.1}–{b:.1} s"),
                _ => String::new(),
            };
            let command = match (&p.user, &p.command) {
                (None, None) => {
                    "(not found here: it exited, or runs in another PID namespace)".into()
                }
                (_, c) => printable(c.as_deref().unwrap_or("?")).into_owned(),
            };
            let _ = writeln!(
                out,
                "    pid {} ({who}) {verb} ({} → {}{when}): {command}",
                p.pid,
                f(p.start_bytes),
                f(p.end_bytes),
            );
        }
        if g.processes_left_out > 0 {
            let _ = writeln!(
                out,
                "    … and {} more whose memory moved less (--json)",
                g.processes_left_out
            );
        }
    }
}

/// A command line as a shell would take it back: words with spaces, quotes or other
/// characters the shell reads are single-quoted; control characters are shown as `?`.
pub fn shell_words(words: &[String]) -> String {
    let quote = |w: &String| {
        let w = printable(w).into_owned();
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
pub fn summary(s: &RunSummary) -> String {
    let mut out = String::new();
    let how = match (s.exit_code, s.signal) {
        (_, Some(sig)) => format!("was killed by signal {sig}"),
        (Some(c), None) => format!("exited with status {c}"),
        (None, None) => "ended".to_string(),
    };
    let _ = writeln!(
        out,
        "hmn run: `{}` {how} after {:.1} s ({} sample{}, every {} ms)",
        shell_words(&s.command),
        s.duration_s,
        s.samples,
        if s.samples == 1 { "" } else { "s" },
        s.interval_ms
    );
    ram_lines(&mut out, s);
    for d in &s.devices {
        let name = d.name.as_ref().map_or(String::new(), |n| format!(" [{n}]"));
        let total = d
            .total_bytes
            .map_or(String::new(), |t| format!(" of {}", super::format_size(t)));
        let _ = writeln!(
            out,
            "  GPU {}{name}: peak {} held by the process tree; device peak used {}{total}",
            d.index,
            size(d.peak_gpu_bytes),
            size(d.peak_device_used_bytes)
        );
    }
    if s.devices.is_empty() {
        out.push_str("  GPU: no GPU source answered\n");
    }
    neighbour_lines(&mut out, &s.neighbours, "while it ran");
    ghost_lines(&mut out, &s.ghosts_appeared);
    if let Some(e) = &s.engine {
        super::engine::lines(&mut out, e);
    }
    for h in s.gpu_processes.iter().take(HOLDERS_SHOWN) {
        let _ = writeln!(
            out,
            "  pid {} ({}): peak {} GPU, {} RSS: {}",
            h.pid,
            printable(h.user.as_deref().unwrap_or("?")),
            super::format_size(h.peak_gpu_bytes),
            size(h.peak_rss_bytes),
            printable(h.command.as_deref().unwrap_or("?"))
        );
    }
    if let Some(more) = s
        .gpu_processes
        .len()
        .checked_sub(HOLDERS_SHOWN)
        .filter(|&n| n > 0)
    {
        let _ = writeln!(
            out,
            "  … and {more} more processes that held GPU memory (--json)"
        );
    }
    out
}

/// The tree's peak RAM and how it was made; the RSS summed where that differs; the processes
/// whose RSS stood in for their PSS.
fn ram_lines(out: &mut String, s: &RunSummary) {
    let how = s.ram_peak.map_or(String::new(), |r| {
        let n = r.processes;
        match r.measure {
            Measure::Rss => " (RSS of one process)".to_string(),
            Measure::Pss => format!(" (PSS of {n} processes summed: shared pages counted once)"),
            Measure::PssAndRss => format!(
                " (PSS of {n} processes summed; RSS for {} of them, whose PSS could not be read)",
                r.by_rss
            ),
            Measure::RssSum => format!(" (RSS of {n} processes summed: no PSS could be read)"),
        }
    });
    let _ = writeln!(
        out,
        "  peak RAM (process tree): {}{how}",
        size(s.peak_rss_bytes)
    );
    if s.peak_rss_sum_bytes.is_some() && s.peak_rss_sum_bytes != s.peak_rss_bytes {
        let _ = writeln!(
            out,
            "  peak RSS summed over the tree: {} (a page shared by several processes counted in each)",
            size(s.peak_rss_sum_bytes)
        );
    }
    if let Some((first, rest)) = s.rss_counted_pids.split_first() {
        let mut pids = first.to_string();
        for p in rest.iter().take(9) {
            let _ = write!(pids, ", {p}");
        }
        if rest.len() > 9 {
            let _ = write!(pids, " and {} more", rest.len() - 9);
        }
        let _ = writeln!(
            out,
            "  note: PSS could not be read for pid {pids} (another user's, not dumpable, or a \
             kernel before 4.14): their RSS is counted instead"
        );
    }
}

/// The CSV header for `devices` GPUs: `t_s,rss_bytes,gpu0_bytes,gpu0_device_used_bytes,…`.
pub fn csv_header(devices: usize) -> String {
    let mut out = String::from("t_s,rss_bytes");
    for i in 0..devices {
        let _ = write!(out, ",gpu{i}_bytes,gpu{i}_device_used_bytes");
    }
    out.push('\n');
    out
}

/// One CSV row (an empty cell is unknown).
pub fn csv_row(p: &Point, devices: usize) -> String {
    let cell = |v: Option<u64>| v.map_or(String::new(), |b| b.to_string());
    let mut out = format!("{:.3},{}", p.t.as_secs_f64(), cell(p.rss));
    for i in 0..devices {
        let _ = write!(
            out,
            ",{},{}",
            cell(p.gpu.get(i).copied().flatten()),
            cell(p.device_used.get(i).copied().flatten())
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::view::MIB;

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

    /// A run of one process: 300 MiB of RSS, 64 MiB on one GPU.
    fn lone_summary() -> RunSummary {
        RunSummary {
            command: vec!["python3".into(), "train.py".into()],
            exit_code: Some(0),
            signal: None,
            duration_s: 12.34,
            samples: 3,
            interval_ms: 100,
            peak_rss_bytes: Some(300 * MIB),
            peak_gpu_bytes: Some(64 * MIB),
            devices: vec![DevicePeak {
                index: 0,
                name: None,
                total_bytes: None,
                peak_gpu_bytes: Some(64 * MIB),
                peak_device_used_bytes: Some(100 * MIB),
            }],
            gpu_processes: Vec::new(),
            peak_rss_measure: Some(Measure::Rss),
            peak_rss_processes: Some(1),
            peak_rss_sum_bytes: Some(300 * MIB),
            rss_counted_pids: Vec::new(),
            processes: Vec::new(),
            processes_left_out: 0,
            ram_peak: Some(RamPeak {
                bytes: 300 * MIB,
                measure: Measure::Rss,
                processes: 1,
                by_rss: 0,
            }),
            neighbours: Vec::new(),
            ghosts_appeared: Vec::new(),
            engine: None,
        }
    }

    #[test]
    fn csv_and_summary() {
        let p = |ms: u64, rss: u64, gpu: Option<u64>, used: Option<u64>| Point {
            t: Duration::from_millis(ms),
            rss: Some(rss),
            gpu: vec![gpu],
            device_used: vec![used],
            others: vec![],
        };
        let rows: String = [
            p(0, 10 * MIB, Some(0), Some(100 * MIB)),
            p(100, 300 * MIB, Some(64 * MIB), None),
            p(200, 20 * MIB, None, Some(90 * MIB)),
        ]
        .iter()
        .map(|p| csv_row(p, 1))
        .collect();
        assert_eq!(
            format!("{}{rows}", csv_header(1)),
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
        let s = lone_summary();
        assert_eq!(
            summary(&s),
            "hmn run: `python3 train.py` exited with status 0 after 12.3 s (3 samples, every 100 ms)\n  peak RAM (process tree): 300 MiB (RSS of one process)\n  GPU 0: peak 64 MiB held by the process tree; device peak used 100 MiB\n"
        );
        let holder = |pid: u32| Holder {
            pid,
            user: Some("alice".into()),
            command: Some("python3 train.py\x1b[2J".into()),
            peak_gpu_bytes: 64 * MIB,
            peak_rss_bytes: None,
        };
        let many = RunSummary {
            gpu_processes: (1..=12).map(holder).collect(),
            ..s.clone()
        };
        let text = summary(&many);
        assert!(
            text.contains(
                "\n  pid 1 (alice): peak 64 MiB GPU, unknown RSS: python3 train.py?[2J\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("  pid 10 (alice)") && !text.contains("  pid 11 "),
            "{text}"
        );
        assert!(
            text.ends_with("  … and 2 more processes that held GPU memory (--json)\n"),
            "{text}"
        );
    }

    /// Several processes: the PSS summed, the RSS summed beside it, and the processes whose RSS
    /// stood in for their PSS named.
    #[test]
    fn a_trees_ram_says_what_it_counts() {
        let s = RunSummary {
            peak_rss_bytes: Some(520 * MIB),
            peak_rss_measure: Some(Measure::PssAndRss),
            peak_rss_processes: Some(9),
            peak_rss_sum_bytes: Some(4600 * MIB),
            rss_counted_pids: (100..112).collect(),
            ram_peak: Some(RamPeak {
                bytes: 520 * MIB,
                measure: Measure::PssAndRss,
                processes: 9,
                by_rss: 2,
            }),
            ..lone_summary()
        };
        let text = summary(&s);
        assert!(
            text.contains(
                "\n  peak RAM (process tree): 520 MiB (PSS of 9 processes summed; RSS for 2 of them, \
                 whose PSS could not be read)\n  peak RSS summed over the tree: 4.5 GiB (a page \
                 shared by several processes counted in each)\n  note: PSS could not be read for \
                 pid 100, 101, 102, 103, 104, 105, 106, 107, 108, 109 and 2 more (another user's, \
                 not dumpable, or a kernel before 4.14): their RSS is counted instead\n"
            ),
            "{text}"
        );
        let pss = RunSummary {
            rss_counted_pids: Vec::new(),
            ram_peak: s.ram_peak.map(|r| RamPeak {
                measure: Measure::Pss,
                by_rss: 0,
                ..r
            }),
            ..s.clone()
        };
        assert!(
            summary(&pss).contains(
                "  peak RAM (process tree): 520 MiB (PSS of 9 processes summed: shared pages \
                 counted once)\n  peak RSS summed"
            ),
            "{}",
            summary(&pss)
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["peak_rss_measure"], "pss_and_rss");
        assert_eq!(json["peak_rss_sum_bytes"], 4600 * MIB);
        assert_eq!(json["rss_counted_pids"][0], 100);
        assert!(json.get("ram_peak").is_none(), "text only: {json}");
    }
}
