//! `hmn run`'s neighbours: the other processes on the GPU the command uses, followed while it
//! runs. The fake NVML lists the command's shell (2 GiB), a neighbour that grows from 3 to 24
//! GiB while the command runs (its figure in a file the command rewrites), and one that appears
//! midway with 1 GiB; the report names both, with who and when, in the text, the JSON and the
//! plot.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::{Command, Stdio};

use support::{FakeVariant, fake_nvml, write_scenario};

use crate::util::hmn::isolated_with_test_path as hmn;

const GIB: u64 = 1 << 30;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hmn-neighbours-{}-{name}", std::process::id()))
}

/// Runs `hmn run ARGS -- sh -c SCRIPT` with the scenario; its output.
fn run_with(args: &[&str], script: &str, scenario: &str) -> std::process::Output {
    hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .args(["run", "--interval", "50ms"])
        .args(args)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap()
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn the_others_on_the_gpu_are_followed_and_the_largest_named() {
    let mut steady = Command::new("sleep")
        .arg("61")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut late = Command::new("sleep")
        .arg("62")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let (me, grows, late_pid) = (tmp("me.pid"), tmp("grows.used"), tmp("late.pid"));
    let svg = tmp("plot.svg");
    for f in [&me, &grows, &late_pid] {
        let _ = std::fs::remove_file(f);
    }
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [
                {{"pid_file": "{}", "used": {}}},
                {{"pid": {}, "used": {}, "used_file": "{}"}},
                {{"pid_file": "{}", "used": {}}}]}}]}}"#,
        141 * GIB,
        100 * GIB,
        me.display(),
        2 * GIB,
        steady.id(),
        3 * GIB,
        grows.display(),
        late_pid.display(),
        GIB
    );
    // The command: holds its 2 GiB, then its neighbour grows to 24 GiB, then another comes.
    let script = format!(
        "echo $$ > '{me}'; sleep 0.4; echo {grown} > '{grows}'; sleep 0.4; echo {late} > '{late_pid}'; sleep 0.4",
        me = me.display(),
        grows = grows.display(),
        grown = 24 * GIB,
        late = late.id(),
        late_pid = late_pid.display(),
    );
    let o = run_with(
        &["--json", "--plot", svg.to_str().unwrap()],
        &script,
        &scenario,
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = &v["neighbours"][0];
    assert_eq!(n["index"], 0, "{v:#}");
    assert_eq!(n["start_bytes"], 3 * GIB, "{n:#}");
    assert_eq!(n["end_bytes"], 25 * GIB, "{n:#}");
    assert_eq!(n["change_bytes"], 22 * GIB, "{n:#}");
    let first = &n["processes"][0];
    assert_eq!(first["pid"], steady.id(), "{n:#}");
    assert_eq!(first["command"], "sleep 61");
    assert_eq!(
        (first["start_bytes"].as_u64(), first["end_bytes"].as_u64()),
        (Some(3 * GIB), Some(24 * GIB))
    );
    let moved = first["moved_from_s"].as_f64().unwrap();
    assert!((0.3..1.5).contains(&moved), "{first:#}");
    let second = &n["processes"][1];
    assert_eq!(second["pid"], late.id(), "{n:#}");
    assert_eq!(
        (
            second["start_bytes"].as_u64(),
            second["change_bytes"].as_i64()
        ),
        (Some(0), Some(1 << 30))
    );
    // The command's own memory is not a neighbour's.
    assert_eq!(n["processes"].as_array().unwrap().len(), 2, "{n:#}");
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.contains("other processes on GPU 0"),
        "the plot draws the others"
    );

    // The text says the same, in lines a person reads.
    for f in [&me, &grows, &late_pid] {
        let _ = std::fs::remove_file(f);
    }
    let o = run_with(&[], &script, &scenario);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("others on GPU 0 while it ran: 3.0 GiB at the start, 25.0 GiB at the end (peak 25.0 GiB): +22.0 GiB"),
        "{err}"
    );
    let line = err
        .lines()
        .find(|l| l.contains(&format!("pid {} (", steady.id())))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("grew by 21.0 GiB (3.0 GiB → 24.0 GiB at ") && line.ends_with(": sleep 61"),
        "{line}"
    );
    assert!(err.contains(&format!("pid {} (", late.id())), "{err}");
    for f in [&me, &grows, &late_pid, &svg] {
        let _ = std::fs::remove_file(f);
    }
    let _ = steady.kill();
    let _ = late.kill();
    let _ = steady.wait();
    let _ = late.wait();
}

#[test]
fn a_command_alone_on_its_gpu_has_no_neighbour_to_tell_of() {
    let me = tmp("alone.pid");
    let _ = std::fs::remove_file(&me);
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [{{"pid_file": "{}", "used": {}}}]}}]}}"#,
        141 * GIB,
        100 * GIB,
        me.display(),
        2 * GIB
    );
    let script = format!("echo $$ > '{}'; sleep 0.3", me.display());
    let o = run_with(&["--json"], &script, &scenario);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = &v["neighbours"][0];
    assert_eq!(
        (n["start_bytes"].as_u64(), n["change_bytes"].as_i64()),
        (Some(0), Some(0)),
        "{v:#}"
    );
    assert!(n["processes"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_file(&me);
    let o = run_with(
        &[],
        &format!("echo $$ > '{}'; sleep 0.3", me.display()),
        &scenario,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("others on GPU 0: none (no other process held memory there while it ran)"),
        "{err}"
    );
    let _ = std::fs::remove_file(&me);
}

/// `hmn run --wait-for SIZE --settle N`: the command starts only once SIZE fits in a free figure
/// that held; a neighbour still loading (the free figure moving) holds it back, and a wait that
/// ends first exits 75 without starting it.
#[test]
fn the_launch_gate_starts_the_command_once_free_memory_held() {
    let free = tmp("gate.free");
    let started = tmp("gate.started");
    let _ = std::fs::remove_file(&started);
    std::fs::write(&free, (10 * GIB).to_string()).unwrap();
    let scenario = write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {}, "free_file": "{}"}}]}}"#,
        141 * GIB,
        10 * GIB,
        free.display()
    ));
    let gate = |args: &[&str]| {
        hmn()
            .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", &scenario)
            .arg("run")
            .args(args)
            .args(["--", "sh", "-c"])
            .arg(format!("date +%s.%N > '{}'", started.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // A neighbour loads, then lets go in steps (10 → 60 → 100 GiB free), then it holds.
    let child = gate(&["--wait-for", "50GiB", "--settle", "4", "--every", "200ms"]);
    let t = std::time::Instant::now();
    for gib in [60, 100] {
        std::thread::sleep(std::time::Duration::from_millis(500));
        std::fs::write(&free, (gib * GIB).to_string()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    // 60 GiB free at 0.5 s would fit, but it had not held: the command waited for 100 GiB to
    // hold over four samples after the last step (1 s in).
    assert!(
        t.elapsed() >= std::time::Duration::from_millis(1500),
        "{err}"
    );
    assert!(
        err.contains("50.0 GiB fits on GPU 0")
            && err.contains("held over 4 samples")
            && err.contains("starting the command"),
        "{err}"
    );
    assert!(started.exists(), "the command ran");
    // Never fits: exit 75 once the wait is over, the command not started.
    let _ = std::fs::remove_file(&started);
    let o = gate(&[
        "--wait-for",
        "120GiB",
        "--every",
        "100ms",
        "--wait-timeout",
        "600ms",
    ])
    .wait_with_output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(75), "{err}");
    assert!(
        err.contains("the wait is over") && err.contains("the command was not started"),
        "{err}"
    );
    assert!(!started.exists(), "the command did not run");
    let _ = std::fs::remove_file(&free);
}

/// `hmn watch PID`: the other processes on the watched GPU are followed too, and the summary
/// names the one that grew while the watched process ran.
#[test]
fn watch_names_the_neighbour_that_grew() {
    let mut watched = Command::new("sleep")
        .arg("63")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut other = Command::new("sleep")
        .arg("64")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let grows = tmp("watch.used");
    std::fs::write(&grows, GIB.to_string()).unwrap();
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [
                {{"pid": {}, "used": {}}},
                {{"pid": {}, "used": {}, "used_file": "{}"}}]}}]}}"#,
        141 * GIB,
        100 * GIB,
        watched.id(),
        4 * GIB,
        other.id(),
        GIB,
        grows.display()
    );
    let child = hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "1500ms",
            "--json",
        ])
        .arg(watched.id().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    std::fs::write(&grows, (9 * GIB).to_string()).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let text = String::from_utf8_lossy(&o.stdout);
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let n = &summary["neighbours"][0];
    assert_eq!(n["index"], 0, "{summary:#}");
    assert_eq!(
        (n["start_bytes"].as_u64(), n["end_bytes"].as_u64()),
        (Some(GIB), Some(9 * GIB))
    );
    assert_eq!(n["processes"][0]["pid"], other.id(), "{n:#}");
    assert_eq!(n["processes"][0]["command"], "sleep 64");
    assert_eq!(
        n["processes"].as_array().unwrap().len(),
        1,
        "the watched one is no neighbour"
    );
    assert!(
        err.contains("grew by 8.0 GiB (1.0 GiB → 9.0 GiB at "),
        "{err}"
    );
    let _ = std::fs::remove_file(&grows);
    let _ = watched.kill();
    let _ = other.kill();
    let _ = watched.wait();
    let _ = other.wait();
}

/// A ghost that appears beside the command (a pid the driver charges and this host no longer
/// has) is named at the end; one there before it started is not.
#[test]
fn a_ghost_that_appeared_while_it_ran_is_named() {
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let mut before = Command::new("true").spawn().unwrap();
    before.wait().unwrap();
    let (me, ghost) = (tmp("ghost-me.pid"), tmp("ghost.pid"));
    for f in [&me, &ghost] {
        let _ = std::fs::remove_file(f);
    }
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [
                {{"pid_file": "{}", "used": {}}},
                {{"pid": {}, "used": {}}},
                {{"pid_file": "{}", "used": {}}}]}}]}}"#,
        141 * GIB,
        100 * GIB,
        me.display(),
        2 * GIB,
        before.id(),
        GIB,
        ghost.display(),
        5 * GIB
    );
    // The command removes its own pid file before it ends: its memory is given back.
    let script = format!(
        "echo $$ > '{me}'; sleep 0.3; echo {gone} > '{ghost}'; sleep 0.3; rm '{me}'",
        me = me.display(),
        gone = gone.id(),
        ghost = ghost.display()
    );
    let o = run_with(&["--json"], &script, &scenario);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let appeared = v["ghosts_appeared"].as_array().unwrap();
    assert_eq!(appeared.len(), 1, "{v:#}");
    assert_eq!(appeared[0]["pid"], gone.id());
    assert_eq!(appeared[0]["class"], "exited");
    assert_eq!(appeared[0]["bytes"], 5 * GIB);
    assert_eq!(appeared[0]["own"], false);
    for f in [&me, &ghost] {
        let _ = std::fs::remove_file(f);
    }
}
