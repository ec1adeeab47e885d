//! `hmn run` when hmn alone is signalled (a service manager, `kill`, a closed terminal), when its
//! outputs cannot be written, over long fast runs, and when the command exits at once.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

fn hmn() -> Command {
    let mut c = crate::util::hmn::isolated_with_test_path();
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hmn-runsig-{}-{name}", std::process::id()))
}

/// The children of `pid` (every thread's), then theirs.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Waits until a descendant of `pid` runs `name`; all the descendants then.
fn wait_for_descendant(pid: u32, name: &str) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let tree = descendants(pid);
        if tree.iter().any(|&p| comm(p) == name) {
            return tree;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{signal} {pid}");
}

/// `child`'s output once it exits, and how long that took; fails after `limit`.
fn wait_within(child: Child, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !waiter.is_finished() {
        if started.elapsed() > limit {
            kill(pid, "KILL");
            panic!("hmn did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (waiter.join().unwrap(), started.elapsed())
}

#[test]
fn a_signal_to_hmn_alone_reaches_the_whole_command_and_the_summary_still_prints() {
    let cases: [(&str, i32, &[&str], &str); 3] = [
        ("TERM", 15, &["sleep", "30"], "sleep"),
        ("HUP", 1, &["sleep", "30"], "sleep"),
        // The shell waits for its sleep; only a signal to both ends it at once.
        ("INT", 2, &["sh", "-c", "sleep 21; echo after"], "sleep"),
    ];
    for (signal, number, command, leaf) in cases {
        let csv = tmp(&format!("{signal}.csv"));
        let child = hmn()
            .args(["run", "--interval", "50ms", "--csv"])
            .arg(&csv)
            .arg("--")
            .args(command)
            .spawn()
            .unwrap();
        let tree = wait_for_descendant(child.id(), leaf);
        kill(child.id(), signal);
        let (o, took) = wait_within(child, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            took < Duration::from_secs(3),
            "SIG{signal}: took {took:?}\n{err}"
        );
        assert_eq!(o.status.code(), Some(128 + number), "SIG{signal}: {err}");
        assert!(err.contains("peak RAM"), "SIG{signal}: the summary: {err}");
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(!said.contains("after"), "the command went on: {said}");
        for p in tree {
            assert!(
                !support::running(p),
                "SIG{signal}: process {p} ({}) outlived hmn",
                comm(p)
            );
        }
        let rows = std::fs::read_to_string(&csv).unwrap();
        assert!(
            rows.starts_with("t_s,") && rows.lines().count() >= 2,
            "{rows}"
        );
        let _ = std::fs::remove_file(csv);
    }
}

#[test]
fn outputs_that_cannot_be_written_are_refused_before_the_command_runs() {
    let marker = tmp("ran");
    let _ = std::fs::remove_file(&marker);
    for option in ["--csv", "--plot"] {
        let o = hmn()
            .args(["run", option, "/nonexistent-dir/timeline", "--", "touch"])
            .arg(&marker)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{option}: {err}");
        assert!(
            err.starts_with("hmn run: cannot write /nonexistent-dir/timeline: "),
            "{option}: {err}"
        );
        assert!(!marker.exists(), "{option}: the command ran");
    }
}

fn vm_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A run sampling every millisecond for 20 s keeps hmn's memory flat after its first seconds,
/// with and without a plot (whose points are downsampled, peaks kept).
#[test]
fn memory_stays_flat_over_a_long_fast_run() {
    let scenario = write_scenario(
        r#"{"devices": [{"name": "NVIDIA H200", "total": 150754820096, "reserved": 643825664,
            "compute_processes": [{"pid": 1, "used": 1048576}]}]}"#,
    );
    let svg = tmp("long.svg");
    let start = |plot: bool| {
        let mut c = hmn();
        c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", &scenario)
            .args(["run", "--interval", "1ms"]);
        if plot {
            c.arg("--plot").arg(&svg);
        }
        c.args(["--", "sleep", "21"]).spawn().unwrap()
    };
    let runs = [start(false), start(true)];
    std::thread::sleep(Duration::from_secs(5));
    let warm: Vec<u64> = runs.iter().map(|c| vm_rss_kib(c.id())).collect();
    std::thread::sleep(Duration::from_secs(15));
    let late: Vec<u64> = runs.iter().map(|c| vm_rss_kib(c.id())).collect();
    for (run, (w, l)) in runs.into_iter().zip(warm.iter().zip(&late)) {
        let (o, _) = wait_within(run, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{err}");
        let samples: u64 = err
            .split_once("s (")
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            samples > 2_048,
            "more samples than the plot keeps points: {err}"
        );
        assert!(
            *l <= w + 1024,
            "hmn's RSS grew from {w} KiB at 5 s to {l} KiB at 20 s over {samples} samples"
        );
    }
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    let _ = std::fs::remove_file(svg);
}

/// A command that exits at once is often sampled as a zombie: its RSS is then unknown, never 0.
#[test]
fn a_command_sampled_after_it_exited_has_no_zero_peak() {
    for _ in 0..20 {
        let o = hmn()
            .args(["run", "--interval", "1ms", "--json", "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let peak = &v["peak_rss_bytes"];
        assert!(
            peak.is_null() || peak.as_u64().is_some_and(|b| b > 0),
            "peak RSS {peak} of `true`"
        );
    }
}
