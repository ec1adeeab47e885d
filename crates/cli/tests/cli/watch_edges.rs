//! `hmn watch` at its edges: pids that do not exist, an exact `--duration`, `--top 0`, an idle
//! GPU, and a GPU process that appears after the watch started.
#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

fn hmn() -> Command {
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("LD_LIBRARY_PATH", support::empty_dir())
        .env("PATH", support::empty_dir());
    c
}

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

#[test]
fn pids_that_do_not_exist_are_said_at_once() {
    let mut exited = Command::new("true").spawn().unwrap();
    let gone = exited.id();
    exited.wait().unwrap();
    for pid in ["3999999", "0", &gone.to_string()] {
        let t = Instant::now();
        let o = hmn().args(["watch", pid]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{pid}: took {:?}",
            t.elapsed()
        );
        assert_eq!(o.status.code(), Some(1), "{pid}: {err}");
        assert!(
            err.contains(&format!("hmn watch: no process {pid}\n")),
            "{err}"
        );
        assert!(o.stdout.is_empty(), "{pid}: no rows");
    }
    // One of two exists: it is followed, the other said.
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
    assert!(err.contains("hmn watch: no process 3999999\n"), "{err}");
    assert!(err.contains("hmn watch: 1 process(es)"), "{err}");
    let _ = sleeper.kill();
    let _ = sleeper.wait();
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
    let times: Vec<u64> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["t_ms"]
                .as_u64()
                .unwrap()
        })
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

/// No process holds GPU memory when the watch starts: it waits, and follows the one that
/// appears.
#[test]
fn an_idle_gpu_is_watched_and_a_new_process_picked_up() {
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-new-{}.pid", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    let watch = with_pid_file(&pid_file)
        .args(["watch", "--interval", "200ms", "--duration", "3s", "--json"])
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
    assert!(
        t.elapsed() > Duration::from_millis(800),
        "the watch ran on to its duration: {err}"
    );
    assert!(
        err.starts_with("hmn watch: no process holds GPU memory yet; waiting"),
        "{err}"
    );
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!rows.is_empty(), "{err}");
    assert!(rows.iter().all(|r| r["pid"] == holder.id()), "{rows:?}");
    assert_eq!(rows[0]["event"], "new", "{rows:?}");
    assert_eq!(rows[0]["gpu_bytes"], 1_073_741_824_u64);
    assert!(rows[1..].iter().all(|r| r["event"].is_null()), "{rows:?}");
    assert!(err.contains("hmn watch: 1 process(es)"), "{err}");
}

/// A stop signal ends `hmn watch` with 128 + its number, as every hmn command (it exited 0),
/// after its closing summary.
#[test]
fn a_stop_signal_ends_watch_with_128_plus_its_number() {
    let pid_file = std::env::temp_dir().join(format!("hmn-watch-signal-{}", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    for (signal, n) in [(libc::SIGTERM, 15), (libc::SIGINT, 2), (libc::SIGHUP, 1)] {
        let child = with_pid_file(&pid_file)
            .args(["watch", "--interval", "100ms"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
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
        assert_eq!(
            out.status.code(),
            Some(128 + n),
            "signal {n}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
