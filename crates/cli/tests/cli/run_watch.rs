//! `hmn run`, `hmn watch` and `hmn spill` end to end: real child processes that allocate and
//! touch memory, exit codes and signals, the fake NVML with the child's pid holding GPU memory,
//! the CSV and the SVG.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;

use crate::util::hmn::isolated_with_test_path as hmn;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hmn-run-{}-{name}", std::process::id()))
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// Allocate and touch `mib` MiB, hold it a moment.
fn alloc(mib: u64) -> String {
    format!("python3 -c 'b = bytearray({mib} << 20); import time; time.sleep(0.6)'")
}

#[test]
fn peak_rss_of_a_child_that_touches_300_mib() {
    let o = hmn()
        .args(["run", "--interval", "50ms", "--json", "--", "python3", "-c"])
        .arg("b = bytearray(300 << 20); import time; time.sleep(0.6)")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v = json(&o);
    assert!(v["peak_rss_bytes"].as_u64().unwrap() >= 300 * MIB, "{v}");
    assert_eq!(v["exit_code"], 0);
    assert!(v["samples"].as_u64().unwrap() >= 3);
    assert!(v["duration_s"].as_f64().unwrap() >= 0.5);
    // With --json the summary is the JSON object alone, as the help says.
    assert!(!err.contains("peak RAM"), "{err}");
}

#[test]
fn a_grandchild_that_allocates_is_counted() {
    let script = format!("{}; exit 0", alloc(300));
    let o = hmn()
        .args([
            "run",
            "--interval",
            "50ms",
            "--json",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let v = json(&o);
    assert!(
        v["peak_rss_bytes"].as_u64().unwrap() >= 300 * MIB,
        "the sh's child allocated: {v}"
    );
}

#[test]
fn exit_codes_and_signals_pass_through() {
    let o = hmn()
        .args(["run", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exited with status 7"));
    let o = hmn()
        .args(["run", "--", "sh", "-c", "kill -TERM $$"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(143));
    assert!(String::from_utf8_lossy(&o.stderr).contains("was killed by signal 15"));
    let o = hmn()
        .args(["run", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(127));
    let o = hmn().args(["run"]).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "a missing command is a usage error"
    );
    let o = hmn()
        .args(["run", "--interval", "soon", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ctrl_c_reaches_the_command_and_the_summary_still_prints() {
    let child = hmn()
        .args(["run", "--interval", "50ms", "--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let o = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(o.status.code(), Some(130), "SIGINT = 128 + 2");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("was killed by signal 2") && err.contains("peak RAM"),
        "{err}"
    );
}

/// Every peak label of a plot lies inside the 960-pixel-wide picture (its width estimated from
/// its font size), whichever way it is anchored.
fn labels_inside(doc: &roxmltree::Document<'_>) {
    let mut peaks = 0;
    for n in doc.descendants().filter(|n| n.has_tag_name("text")) {
        let text = n.text().unwrap_or("").trim();
        if !text.starts_with("peak") {
            continue;
        }
        peaks += 1;
        let num = |a: &str| n.attribute(a).and_then(|v| v.parse::<f64>().ok()).unwrap();
        let (x, y, size) = (num("x"), num("y"), num("font-size"));
        #[allow(clippy::cast_precision_loss)]
        let width = text.chars().count() as f64 * size * 0.6;
        let (left, right) = match n.attribute("text-anchor") {
            Some("end") => (x - width, x),
            Some("middle") => (x - width / 2.0, x + width / 2.0),
            _ => (x, x + width),
        };
        assert!(
            left >= 0.0 && right <= 960.0 && (0.0..=540.0).contains(&y),
            "{text:?} at x {x} ({left}..{right}), y {y} leaves the picture"
        );
    }
    assert!(peaks > 0, "no peak labels");
}

#[test]
fn plot_labels_stay_inside_and_capacity_is_marked() {
    // RSS grows until the command exits, so its peak is the last sample, at the right edge; the
    // GPU (1 GiB, 64 MiB reserved) is nearly full, so its capacity is drawn as lines.
    let pid_file = tmp("edge.pid");
    let _ = std::fs::remove_file(&pid_file);
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA Small", "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid_file": "{}", "used": {}}}]}}]}}"#,
        1024 * MIB,
        64 * MIB,
        256 * MIB,
        pid_file.display(),
        700 * MIB
    );
    let svg = tmp("edge.svg");
    let script = format!(
        "echo $$ > '{}'; python3 -c 'import time\nb = []\nfor _ in range(12):\n    b.append(bytearray(16 << 20)); time.sleep(0.05)'",
        pid_file.display()
    );
    let o = hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        .args(["run", "--interval", "50ms", "--plot"])
        .arg(&svg)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&svg_text).unwrap();
    labels_inside(&doc);
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for want in [
        "GPU 0 total 1.0 GiB",
        "GPU 0 usable (total − reserved) 960 MiB",
    ] {
        assert!(texts.contains(&want), "{want:?} missing from {texts:?}");
    }
    assert!(
        !texts.iter().any(|t| t.starts_with("off scale")),
        "{texts:?}"
    );
    // The RSS peak is the last sample: its label is anchored to its left.
    let rss_peak = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter(|n| n.text().is_some_and(|t| t.trim().starts_with("peak")))
        .max_by(|a, b| {
            let x = |n: &roxmltree::Node<'_, '_>| {
                n.attribute("x")
                    .and_then(|x| x.parse::<f64>().ok())
                    .unwrap()
            };
            x(a).total_cmp(&x(b))
        })
        .unwrap();
    assert_eq!(rss_peak.attribute("text-anchor"), Some("end"));
    for f in [svg, pid_file] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn gpu_memory_of_the_child_from_the_fake_nvml_csv_and_svg() {
    let pid_file = tmp("child.pid");
    let _ = std::fs::remove_file(&pid_file);
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid_file": "{}", "used": {}}}]}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB,
        pid_file.display(),
        3072 * MIB
    );
    let (csv, svg) = (tmp("timeline.csv"), tmp("timeline.svg"));
    let script = format!("echo $$ > '{}'; {}; exit 0", pid_file.display(), alloc(64));
    let o = hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        .args(["run", "--interval", "50ms", "--json", "--csv"])
        .arg(&csv)
        .arg("--plot")
        .arg(&svg)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let v = json(&o);
    assert_eq!(v["peak_gpu_bytes"], 3072 * MIB, "{v}");
    assert_eq!(v["devices"][0]["peak_gpu_bytes"], 3072 * MIB);
    assert_eq!(
        v["devices"][0]["peak_device_used_bytes"],
        (143_771 - 110_796) * MIB
    );
    assert_eq!(v["devices"][0]["name"], "NVIDIA H200");
    assert!(
        !err.contains("held by the process tree"),
        "JSON alone: {err}"
    );
    // The holder, with who it is: the shell that wrote its pid.
    let holders = v["gpu_processes"].as_array().unwrap();
    assert_eq!(holders.len(), 1, "{v}");
    assert_eq!(holders[0]["peak_gpu_bytes"], 3072 * MIB);
    assert!(
        holders[0]["command"]
            .as_str()
            .unwrap()
            .starts_with("sh -c echo $$ > "),
        "{v}"
    );
    let me = hypomnesis::process_context(std::process::id());
    assert_eq!(holders[0]["user"].as_str(), me.user.as_deref());
    assert!(!err.contains(": peak 3.0 GiB GPU, "), "JSON alone: {err}");
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert!(
        csv_text.starts_with("t_s,rss_bytes,gpu0_bytes,gpu0_device_used_bytes\n"),
        "{csv_text}"
    );
    assert!(
        csv_text
            .lines()
            .skip(1)
            .any(|l| l.contains(&format!(",{},", 3072 * MIB))),
        "{csv_text}"
    );
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&svg_text).unwrap();
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for want in [
        "RAM (process tree)",
        "GPU 0 NVIDIA H200",
        "time (s)",
        "memory (GiB)",
    ] {
        assert!(
            texts.iter().any(|t| t.contains(want)),
            "{want} missing from {texts:?}"
        );
    }
    assert!(
        texts.iter().any(|t| t.starts_with("peak 3.0 GiB")),
        "{texts:?}"
    );
    // 3 GiB of a 140 GiB GPU: its capacity is written out rather than squashing the data.
    assert!(
        texts.iter().any(|t| t.starts_with(
            "off scale: GPU 0 total 140.4 GiB; GPU 0 usable (total − reserved) 139.8 GiB"
        )),
        "{texts:?}"
    );
    labels_inside(&doc);
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline") || n.has_tag_name("path"))
        .count();
    assert!(lines >= 2, "two series drawn: {lines}");
    for f in [csv, svg, pid_file] {
        let _ = std::fs::remove_file(f);
    }
}

/// Waits until process `pid` runs `name` (a child is named after its parent until it execs).
fn wait_for_exec(pid: u32, name: &str) {
    let started = std::time::Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or(true, |c| c.trim() != name) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{pid} never ran {name}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn watch_follows_a_live_pid_and_notices_its_exit() {
    let mut sleeper = Command::new("sleep").arg("0.7").spawn().unwrap();
    let pid = sleeper.id().to_string();
    wait_for_exec(sleeper.id(), "sleep");
    // Reap it as soon as it exits (a zombie is still "exited" to hmn, but be a good parent).
    let reaper = std::thread::spawn(move || sleeper.wait().unwrap());
    let o = hmn()
        .args([
            "watch",
            &pid,
            "--interval",
            "200ms",
            "--duration",
            "3s",
            "--json",
        ])
        .output()
        .unwrap();
    reaper.join().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let records: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[0]["kind"], "start");
    assert_eq!(records.last().unwrap()["kind"], "summary");
    let rows: Vec<serde_json::Value> = records
        .into_iter()
        .filter(|r| r["kind"] == "sample")
        .collect();
    assert!(rows.len() >= 3, "{rows:?}");
    assert!(rows[0]["rss_bytes"].as_u64().unwrap() > 0);
    assert_eq!(rows[0]["name"], "sleep");
    assert_eq!(rows[0]["command"], "sleep 0.7");
    let me = hypomnesis::process_context(std::process::id());
    assert_eq!(
        rows[0]["user"].as_str(),
        me.user.as_deref(),
        "the owner, as for this test"
    );
    assert!(rows[1]["rss_delta_bytes"].is_i64(), "{rows:?}");
    assert_eq!(rows.last().unwrap()["event"], "exited");
    assert!(
        err.contains(&format!("  {pid} sleep: RSS baseline "))
            && err.contains("(exited) — sleep 0.7"),
        "{err}"
    );
    // Text mode, a duration, and a pid that does not exist.
    let o = hmn()
        .args([
            "watch",
            &std::process::id().to_string(),
            "--interval",
            "100ms",
            "--duration",
            "300ms",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().count() >= 2 && text.contains("RSS "), "{text}");
    // No GPU here, and no pid: nothing to choose, exit 2 at once.
    let o = hmn()
        .args(["watch", "--interval", "100ms", "--duration", "500ms"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no GPU here, so no process to choose"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // With --follow-new it waits for a holder until its duration ends.
    let t = Instant::now();
    let o = hmn()
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "500ms",
            "--follow-new",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(t.elapsed() >= Duration::from_millis(500));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is chosen yet; waiting"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn spill_says_it_is_not_measurable_here_and_still_runs_the_command() {
    let o = hmn()
        .args(["spill", "--", "sh", "-c", "echo ran; exit 4"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ran\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("spill is not measurable here"), "{err}");
}

/// A device's name, UUID, PCI bus id, NUMA node, addressing mode and memory total (the bound
/// on a process list's rows) are asked of the driver once a session, its process lists at
/// every sample (the fake counts the calls, written at most once a second).
#[test]
fn a_devices_lasting_facts_are_asked_once_and_its_lists_at_each_sample() {
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB,
    );
    let log = tmp("facts-calls.log");
    let _ = std::fs::remove_file(&log);
    let o = hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        .env("FAKE_NVML_CALL_LOG", &log)
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "2500ms",
            "--follow-new",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let count = |f: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(f)?.strip_prefix(' ')?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        count("nvmlDeviceGetComputeRunningProcesses_v3") >= 5,
        "{text}"
    );
    // The device's figures once at the start (with its v2 memory), the lists' bound kept.
    assert!(count("nvmlDeviceGetMemoryInfo") <= 2, "{text}");
    assert_eq!(count("nvmlDeviceGetMemoryInfo_v2"), 1, "{text}");
    for once in [
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetPciInfo_v3",
        "nvmlDeviceGetNumaNodeId",
        "nvmlDeviceGetAddressingMode",
    ] {
        assert_eq!(count(once), 1, "{once}: {text}");
    }
}
