//! `hmn` in a PID namespace of its own with its own `/proc` (a container started without the
//! host's PID namespace and without the host's procfs). A driver before 570.86.15 numbers
//! processes as the initial namespace does, so a listed pid that also exists here is another
//! process; from 570.86.15 the driver numbers them as the caller's namespace does. The test
//! makes the namespace with `unshare --pid --fork --mount-proc`, starts a `sleep` there, and has
//! the fake NVML list that sleep's local number with 29 GiB: under a 565 driver the row must be
//! outside, unnamed, with no command, and nothing may be read or signalled under that number;
//! under a 590 driver it is the local sleep.
//!
//! Needs root and util-linux's `unshare`; where they are missing the test says `skipped: …` and
//! passes, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1` (as `.ci/run` sets).
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;

use support::{FakeVariant, fake_nvml, write_scenario};

const GIB: u64 = 1 << 30;
/// The script's exit code when the namespace cannot be made.
const NO_NAMESPACE: i32 = 97;

fn skip(what: &str) {
    assert!(
        std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
        "{what}, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it (root and util-linux's unshare)"
    );
    eprintln!("skipped: {what}");
}

/// A folder of its own for each call: the tests run beside each other in one process.
fn dir() -> PathBuf {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("hmn-pidns-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `hmn ARGS` (each a shell word) inside a new PID namespace with its own procfs, after a
/// `sleep 777` whose local pid the fake lists (once it is `sleep`: `setsid` runs first under
/// that pid, and a loaded machine once let hmn read it then); returns (exit code, stdout,
/// stderr, the pid).
fn in_namespace(driver: &str, args: &str) -> Option<(i32, String, String, u32)> {
    let d = dir();
    let (pid_file, out, err) = (d.join("pid"), d.join("out"), d.join("err"));
    let scenario = format!(
        r#"{{"driver_version": "{driver}", "devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [{{"pid_file": "{}", "used": {}}}]}}]}}"#,
        143_771_u64 << 20,
        100 * GIB,
        pid_file.display(),
        29 * GIB + (300 << 20)
    );
    let scenario = write_scenario(&scenario);
    let script = format!(
        "setsid sleep 777 & s=$!; \
         i=0; while [ \"$(cat /proc/$s/comm 2>/dev/null)\" != sleep ] && [ $i -lt 500 ]; do \
         sleep 0.01; i=$((i+1)); done; echo $s > {pid}; \
         HYPOMNESIS_NVML_LIBRARY={lib} FAKE_NVML_SCENARIO={sc} HYPOMNESIS_SYSFS={empty} \
         PATH={empty} {hmn} {args} > {out} 2> {err}; rc=$?; kill $s; exit $rc",
        pid = pid_file.display(),
        lib = fake_nvml(FakeVariant::Modern).display(),
        sc = scenario.display(),
        empty = support::empty_dir().display(),
        hmn = env!("CARGO_BIN_EXE_hmn"),
        out = out.display(),
        err = err.display(),
    );
    let o = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "sh", "-c"])
        .arg(format!("{script} || exit $?"))
        .output();
    let Ok(o) = o else {
        skip("unshare is not installed");
        return None;
    };
    if !o.status.success() && !out.exists() {
        skip(&format!(
            "a PID namespace cannot be made here (root?): {}",
            String::from_utf8_lossy(&o.stderr)
        ));
        let _ = NO_NAMESPACE;
        return None;
    }
    let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    let pid: u32 = read(&pid_file).trim().parse().unwrap();
    let r = (o.status.code().unwrap_or(-1), read(&out), read(&err), pid);
    let _ = std::fs::remove_dir_all(d);
    let _ = std::fs::remove_file(scenario);
    Some(r)
}

#[test]
fn a_driver_pid_that_exists_here_is_not_taken_for_the_local_process() {
    let Some((code, out, err, pid)) = in_namespace("565.57.01", "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &rows[0];
    assert_eq!(row["pid"], pid, "{rows}");
    assert_eq!(row["unreadable"], "outside_pid_namespace", "{row}");
    assert_eq!(row["outside_pid_namespace"], true, "{row}");
    assert!(row["name"].is_null() && row["command"].is_null(), "{row}");
    assert!(row["user"].is_null() && row["rss_bytes"].is_null(), "{row}");
    assert_eq!(row["used_bytes"], 29 * GIB + (300 << 20));
    let Some((_, out, err, pid)) = in_namespace("565.57.01", "ps") else {
        return;
    };
    assert!(
        out.contains(&format!("{pid} (outside)")) && !out.contains("sleep 777"),
        "{out}"
    );
    assert!(err.contains("outside"), "{err}");
    // `hmn watch PID` follows the local process's RSS, and puts no GPU memory on it.
    let Some((code, out, err, _)) = in_namespace(
        "565.57.01",
        "watch --interval 100ms --duration 200ms --json $s",
    ) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let used: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "sample")
        .map(|r| r["used_bytes"].clone())
        .collect();
    assert!(!used.is_empty() && used.iter().all(|u| *u == 0), "{out}");
}

/// From 570.86.15 the driver numbers processes as the caller's PID namespace does (and leaves
/// out those it cannot see): the listed number is the local sleep, named and placed here.
#[test]
fn a_driver_that_numbers_as_the_caller_does_places_the_local_process() {
    let Some((code, out, err, pid)) = in_namespace("590.48.01", "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &rows[0];
    assert_eq!(row["pid"], pid, "{rows}");
    assert!(row["unreadable"].is_null(), "{row}");
    assert_eq!(row["outside_pid_namespace"], false, "{row}");
    assert_eq!(row["name"], "sleep", "{row}");
    assert!(
        row["command"]
            .as_str()
            .is_some_and(|c| c.contains("sleep 777")),
        "{row}"
    );
}
