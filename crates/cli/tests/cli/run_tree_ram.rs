//! `hmn run`'s peak RAM of a process tree counts a page its processes share once: a parent
//! that touched 200 MiB and forked four children that only sleep (the pages shared copy on
//! write) has an RSS summed over its tree of five times that, and a PSS summed of once; the
//! peak is the latter, each process's RSS is in `processes`, the RSS summed in
//! `peak_rss_sum_bytes`. A child whose PSS cannot be read (it made itself not dumpable, so
//! only a tracer with `CAP_SYS_PTRACE` may read its `smaps_rollup`) is counted by its RSS and
//! named.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::hmn::isolated_with_test_path as hmn;

const MIB: u64 = 1 << 20;

/// A parent that touches `mib` MiB, then forks `children` that sleep a second and a half and
/// exit (the first `blind` of them first make themselves not dumpable), writing each child's
/// pid on a line of stderr (stdout is `hmn`'s JSON); it waits for them.
fn forking_parent(mib: u64, children: usize, blind: usize) -> String {
    format!(
        "import ctypes, os, sys, time
b = bytearray({mib} << 20)
b[::4096] = b'\\x01' * (len(b) // 4096)
for i in range({children}):
    pid = os.fork()
    if pid == 0:
        if i < {blind}:
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        time.sleep(1.5)
        os._exit(0)
    print(pid, file=sys.stderr, flush=True)
for _ in range({children}):
    os.wait()
"
    )
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The `processes` entry of `pid`.
fn member(v: &serde_json::Value, pid: u64) -> &serde_json::Value {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {}", v["processes"]))
}

#[test]
fn copy_on_write_workers_count_once() {
    let o = hmn()
        .args(["run", "--interval", "50ms", "--json", "--", "python3", "-c"])
        .arg(forking_parent(200, 4, 0))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    eprintln!("peak RAM {} MiB", peak / MIB);
    assert!(
        (200 * MIB..=300 * MIB).contains(&peak),
        "peak RAM within 1.5 times the 200 MiB touched: {peak} bytes: {v}"
    );
    let sum = v["peak_rss_sum_bytes"].as_u64().unwrap();
    eprintln!("RSS summed {} MiB", sum / MIB);
    assert!(sum >= 900 * MIB, "RSS summed over five processes: {v}");
    assert_eq!(v["peak_rss_measure"], "pss", "{v}");
    assert!(v["peak_rss_processes"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(v["rss_counted_pids"], serde_json::json!([]), "{v}");
    // The parent and its four children (`python3` may be a shim whose own processes came
    // and went before it ran Python).
    let workers: Vec<&serde_json::Value> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["peak_rss_bytes"].as_u64().unwrap() >= 200 * MIB)
        .collect();
    assert_eq!(workers.len(), 5, "each maps the 200 MiB: {v}");
    for p in workers {
        let rss = p["peak_rss_bytes"].as_u64().unwrap();
        let pss = p["peak_pss_bytes"].as_u64().unwrap();
        assert!(pss <= rss / 4 * 3, "and shares them: {p}");
    }
}

/// A directory under the temporary directory that everyone may read and run from, emptied
/// first, with `hmn` in it.
fn open_dir_with_hmn(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hmn-tree-ram-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    let hmn = d.join("hmn");
    std::fs::copy(env!("CARGO_BIN_EXE_hmn"), &hmn).unwrap();
    std::fs::set_permissions(&hmn, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `hmn` (the copy in `dir`) as a user without `CAP_SYS_PTRACE`: as this one, or (for root,
/// who has it) as `nobody` through `setpriv`; `None` (said) when root has no `setpriv`.
fn without_ptrace(dir: &Path) -> Option<Command> {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some(hmn());
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        assert!(
            std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "root without setpriv, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it"
        );
        eprintln!("skipped: root without setpriv");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
        .arg(dir.join("hmn"))
        .current_dir(dir);
    // The environment `hmn()` sets, and the settings it removes.
    for (k, v) in hmn().get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    Some(c)
}

#[test]
fn a_process_whose_pss_cannot_be_read_is_counted_by_rss_and_named() {
    let dir = open_dir_with_hmn("blind");
    let Some(mut c) = without_ptrace(&dir) else {
        return;
    };
    let o = c
        .args(["run", "--interval", "50ms", "--json", "--", "python3", "-c"])
        .arg(forking_parent(64, 2, 1))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let pids: Vec<u64> = err.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), 2, "{err}");
    let v = json(&o);
    let (blind, seen) = (pids[0], pids[1]);
    assert_eq!(
        v["rss_counted_pids"],
        serde_json::json!([blind]),
        "the child that is not dumpable, alone: {v}"
    );
    assert!(member(&v, blind)["peak_pss_bytes"].is_null(), "{v}");
    assert!(member(&v, blind)["peak_rss_bytes"].as_u64().unwrap() >= 64 * MIB);
    assert!(member(&v, seen)["peak_pss_bytes"].as_u64().unwrap() > 0);
    let _ = std::fs::remove_dir_all(&dir);
}
