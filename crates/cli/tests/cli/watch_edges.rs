//! `hmn watch` at its edges: pids that do not exist, options that do not go together, an exact
//! `--duration`, `--top 0`, an idle GPU, a GPU process that appears after the watch started,
//! and a stop signal.
#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

use crate::util::hmn::isolated as hmn;

/// A scenario whose one GPU process is whoever's pid is in `pid_file` (none while it is absent).
fn with_pid_file(pid_file: &std::path::Path) -> Command {
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": 150754820096,
            "compute_processes": [{{"pid_file": "{}", "used": 1073741824}}]}}]}}"#,
        pid_file.display()
    );
    let mut c = hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario));
    c
}

/// The JSON Lines of a `hmn watch --json` run, each parsed.
fn records(o: &std::process::Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The `sample` records alone.
fn samples(records: &[serde_json::Value]) -> Vec<serde_json::Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "sample")
        .cloned()
        .collect()
}

/// A pid that names no process gets one warning and is followed all the same (0.2.x), until
/// the duration ends.
#[test]
fn pids_that_do_not_exist_are_said_once_and_still_watched() {
    let mut exited = Command::new("true").spawn().unwrap();
    let gone = exited.id();
    exited.wait().unwrap();
    for pid in ["3999999", "0", &gone.to_string()] {
        let o = hmn()
            .args(["watch", pid, "--interval", "100ms", "--duration", "300ms"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{pid}: {err}");
        let warning =
            format!("hmn watch: pid {pid} names no running process; following it all the same\n");
        assert_eq!(err.matches(&warning).count(), 1, "{err}");
        assert!(err.contains("hmn watch: 1 process(es)"), "{err}");
        let rows = String::from_utf8_lossy(&o.stdout);
        assert!(
            rows.lines().count() >= 3,
            "{pid}: a row per interval: {rows}"
        );
        assert!(rows.lines().all(|l| l.contains("RSS unknown")), "{rows}");
    }
    // One of two exists: both are followed, the other said.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let o = hmn()
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "300ms",
            "3999999",
        ])
        .arg(sleeper.id().to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("hmn watch: pid 3999999 names no running process"),
        "{err}"
    );
    assert!(
        !err.contains(&format!("pid {} names", sleeper.id())),
        "{err}"
    );
    assert!(err.contains("hmn watch: 2 process(es)"), "{err}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

/// What chooses processes (`--follow-new`, `--filter`, `--min`) does not go with pids, and a
/// GPU that is not there is a hard error: exit 2 at once, before any row.
#[test]
fn choosing_options_with_pids_and_a_bad_device_exit_2() {
    for args in [
        &["watch", "1", "--follow-new"][..],
        &["watch", "1", "--filter", "python"],
        &["watch", "1", "--min", "1GiB"],
    ] {
        let o = hmn().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("cannot be given with pids"), "{err}");
        assert!(o.stdout.is_empty());
    }
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-dev-{}.pid", std::process::id()));
    let o = with_pid_file(&pid_file)
        .args(["watch", "--device", "3", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GPU index 3 is out of range: 1 device(s) present"),
        "{err}"
    );
    assert!(
        o.stdout.is_empty(),
        "no start record for a watch that never began"
    );
}

#[test]
fn a_duration_is_kept_to_one_interval() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let t = Instant::now();
    let o = hmn()
        .args(["watch", "--interval", "1s", "--duration", "3s", "--json"])
        .arg(sleeper.id().to_string())
        .output()
        .unwrap();
    let took = t.elapsed();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(4),
        "--duration 3s took {took:?}"
    );
    let times: Vec<u64> = samples(&records(&o))
        .iter()
        .map(|r| r["t_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(times.len(), 4, "samples at 0, 1, 2 and 3 s: {times:?}");
    assert!(times[3] >= 3_000 && times[3] < 3_500, "{times:?}");
}

#[test]
fn top_zero_is_a_usage_error() {
    let o = hmn().args(["watch", "--top", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--top"));
}

/// No process holds GPU memory when the watch starts: without `--follow-new` there is nothing
/// to watch (exit 2, at once); with it, it waits and follows the one that appears.
#[test]
fn an_idle_gpu_is_watched_and_a_new_process_picked_up() {
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-new-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    let t = Instant::now();
    let o = with_pid_file(&pid_file)
        .args(["watch", "--interval", "200ms", "--duration", "3s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(t.elapsed() < Duration::from_secs(2), "{err}");
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "hmn watch: no process holds memory on GPU 0, so there is nothing to watch \
         (--follow-new waits for one)\n"
    );
    let watch = with_pid_file(&pid_file)
        .args([
            "watch",
            "--interval",
            "200ms",
            "--duration",
            "3s",
            "--json",
            "--follow-new",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let mut holder = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(&pid_file, holder.id().to_string()).unwrap();
    let t = Instant::now();
    let o = watch.wait_with_output().unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    let _ = std::fs::remove_file(&pid_file);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        t.elapsed() > Duration::from_millis(800),
        "the watch ran on to its duration: {err}"
    );
    assert!(
        err.starts_with("hmn watch: no process on GPU 0 is chosen yet; waiting"),
        "{err}"
    );
    let all = records(&o);
    assert_eq!(all[0]["kind"], "start");
    assert_eq!(all[0]["selection"]["mode"], "follow_new");
    assert_eq!(all.last().unwrap()["kind"], "summary");
    let rows = samples(&all);
    assert!(!rows.is_empty(), "{err}");
    assert!(rows.iter().all(|r| r["pid"] == holder.id()), "{rows:?}");
    assert_eq!(rows[0]["event"], "new", "{rows:?}");
    assert_eq!(rows[0]["used_bytes"], 1_073_741_824_u64);
    assert_eq!(rows[0]["gpu_bytes"], 1_073_741_824_u64);
    assert!(rows[1..].iter().all(|r| r["event"].is_null()), "{rows:?}");
    assert!(err.contains("hmn watch: 1 process(es)"), "{err}");
}

/// A stop signal ends `hmn watch` after its closing summary with the codes of its answer (0:
/// no spill seen), as 0.2.x's Ctrl-C does: not 128 + the signal.
#[test]
fn a_stop_signal_ends_watch_with_its_summary_and_its_answer() {
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-signal-{}", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let child = with_pid_file(&pid_file)
            .args(["watch", "--interval", "100ms", "--follow-new", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(700));
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: kill(2) with a pid and a signal number; no memory is involved.
        #[allow(unsafe_code)]
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0);
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "signal {signal}: {err}");
        assert!(err.contains("hmn watch: 0 process(es) over "), "{err}");
        let all = records(&out);
        assert_eq!(all.last().unwrap()["kind"], "summary", "{all:?}");
    }
}

/// A process that exits while the driver still lists its pid with memory: the row that says
/// it exited keeps the driver's figure (the driver charges it), not `null`; its RSS, which
/// no process has any more, is `null`.
#[test]
fn an_exited_process_the_driver_still_charges_keeps_its_figure() {
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-gone-{}.pid", std::process::id()));
    let mut holder = Command::new("sleep").arg("0.7").spawn().unwrap();
    std::fs::write(&pid_file, holder.id().to_string()).unwrap();
    let reaper = std::thread::spawn(move || holder.wait().unwrap());
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let o = with_pid_file(&pid_file)
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
    let _ = std::fs::remove_file(&pid_file);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let all = records(&o);
    let rows = samples(&all);
    assert!(rows.len() >= 2, "{rows:?}");
    assert!(rows[0]["rss_bytes"].as_u64().is_some(), "{rows:?}");
    assert_eq!(rows[0]["used_bytes"], 1_073_741_824_u64, "{rows:?}");
    let last = rows.last().unwrap();
    assert_eq!(last["event"], "exited", "{rows:?}");
    assert_eq!(
        last["used_bytes"], 1_073_741_824_u64,
        "the driver's figure: {last}"
    );
    assert_eq!(last["gpu_bytes"], 1_073_741_824_u64, "{last}");
    assert_eq!(last["used_delta"], 0, "{last}");
    assert!(last["rss_bytes"].is_null(), "{last}");
    let summary = all.last().unwrap();
    assert_eq!(summary["per_pid"][0]["ended"], "exited", "{summary}");
    assert_eq!(
        summary["per_pid"][0]["peak_used_bytes"], 1_073_741_824_u64,
        "{summary}"
    );
}
