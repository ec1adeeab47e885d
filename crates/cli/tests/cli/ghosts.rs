//! `hmn ghosts` against the fake NVML listing real processes: a pid that has exited (a reaped
//! child), a real unreaped zombie, a live process that is none of them; and, as root on a GPU
//! node stood in by a private mount namespace (`util::gpunode`: `/dev/nvidia7` a character
//! device told by its number), real processes of the exited pid's process group holding it,
//! which `hmn` names as the holders of its memory. Exit 0 when there is no ghost and every
//! process was seen, 1 when there is one; `hmn doctor` sums them up.
//!
//! The node stand-in needs root, util-linux's `unshare` and the right to mount; where that is
//! missing it says `skipped: …` and passes, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1` (as
//! `.ci/run` sets).
#![cfg(target_os = "linux")]

use std::process::{Command, Output};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TOTAL: u64 = 143_771 * MIB;
const RESERVED: u64 = 616 * MIB;
const UUID: &str = "GPU-fa4e0000-0000-4000-8000-000000000000";

/// An H200 whose processes are `rows` (pid, bytes), all of its allocation theirs.
fn scenario(rows: &[(u32, u64)]) -> String {
    let used: u64 = rows.iter().map(|r| r.1).sum();
    let procs: Vec<String> = rows
        .iter()
        .map(|(p, b)| format!(r#"{{"pid": {p}, "used": {b}}}"#))
        .collect();
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "{UUID}", "total": {TOTAL},
            "reserved": {RESERVED}, "free": {free}, "compute_processes": [{procs}]}}]}}"#,
        free = TOTAL - RESERVED - used,
        procs = procs.join(", ")
    )
}

fn hmn(scenario: &str, args: &[&str]) -> Output {
    crate::util::hmn::with_fake(scenario)
        .args(args)
        .output()
        .unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

/// The pid of a process that has exited and been reaped.
fn exited_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn an_exited_pid_is_a_ghost_and_the_exit_status_says_so() {
    let mut live = Command::new("sleep").arg("60").spawn().unwrap();
    let gone = exited_pid();
    let sc = scenario(&[(live.id(), GIB), (gone, 3 * GIB)]);
    let o = hmn(&sc, &["ghosts"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let row = out.lines().find(|l| l.contains(&gone.to_string())).unwrap();
    assert!(row.contains("exited") && row.contains("3.0 GiB"), "{out}");
    assert!(
        out.contains("1 ghost holding 3.0 GiB: exited 3.0 GiB"),
        "{out}"
    );
    assert!(
        !out.contains(&live.id().to_string()),
        "a live process is no ghost: {out}"
    );
    let j = json(&hmn(&sc, &["ghosts", "--json"]));
    assert_eq!(j["ghosts"][0]["class"], "exited");
    assert_eq!(j["ghosts"][0]["pid"], gone);
    assert_eq!(j["bytes_by_class"]["exited"], 3 * GIB);
    // No GPU's device file is known here (no driver information file): who holds the memory
    // cannot be told, so no scan is made and nothing is given.
    assert!(j["holder_scan"].is_null(), "{j}");
    assert_eq!(j["ghosts"][0]["remedy"]["action"], "unknown");
    assert!(
        j["ghosts"][0]["remedy"]["why"]
            .as_str()
            .unwrap()
            .contains("device file is not known here"),
        "{j}"
    );
    assert_eq!(j["complete"], true);
    // `hmn doctor` sums them up, and points at `hmn ghosts`.
    let o = hmn(&sc, &["doctor"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("ghosts: 1 holding 3.0 GiB (exited 3.0 GiB): `hmn ghosts` says why"),
        "{out}"
    );
    let j = json(&hmn(&sc, &["doctor", "--json"]));
    assert_eq!(j["ghosts"]["count"], 1);
    assert_eq!(j["ghosts"]["bytes_by_class"]["exited"], 3 * GIB);
    // The live process alone: no ghost, exit 0.
    let sc = scenario(&[(live.id(), GIB)]);
    let o = hmn(&sc, &["ghosts"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("no ghosts"));
    let j = json(&hmn(&sc, &["ghosts", "--json"]));
    assert_eq!(j["ghosts"], serde_json::json!([]));
    assert!(j["holder_scan"].is_null(), "nothing to explain, no scan");
    let out = String::from_utf8_lossy(&hmn(&sc, &["doctor"]).stdout).into_owned();
    assert!(out.contains("ghosts: none"), "{out}");
    live.kill().unwrap();
    live.wait().unwrap();
}

#[test]
fn a_real_zombie_names_the_parent_that_must_reap_it() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = format!("/proc/{pid}/stat");
    let t = std::time::Instant::now();
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
        assert!(t.elapsed().as_secs() < 10, "never a zombie");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let j = json(&hmn(&scenario(&[(pid, GIB)]), &["ghosts", "--json"]));
    child.wait().unwrap();
    let g = &j["ghosts"][0];
    assert_eq!(g["class"], "zombie", "{j}");
    assert_eq!(g["remedy"]["action"], "reap");
    assert_eq!(g["remedy"]["parent"], std::process::id());
}

/// As root on a GPU node stood in by a private mount namespace (`util::gpunode`): two
/// processes in the exited pid's process group hold `/dev/nvidia7` (the GPU by its device
/// number), one holds only a plain file of that name in a mount namespace of its own: the
/// two are the holders to kill, the third is nothing.
#[test]
fn the_processes_holding_the_device_file_are_named_as_the_holders() {
    if !crate::util::gpunode::can_stand_in() {
        return;
    }
    let lines = r#"
setsid sh -c 'echo $$ > '"$node"'/leader; sleep 30 < /dev/nvidia7 > /dev/null 2>&1 & echo $! > '"$node"'/a; sleep 30 < /dev/nvidia7 > /dev/null 2>&1 & echo $! > '"$node"'/b' &
wait $!
while [ ! -s "$node/b" ]; do sleep 0.01; done
leader=$(cat "$node/leader"); a=$(cat "$node/a"); b=$(cat "$node/b")
while [ -d /proc/$leader ]; do sleep 0.01; done
unshare --mount sh -c 'mount -t tmpfs x /dev && touch /dev/nvidia7 && exec sleep 30 < /dev/nvidia7' & c=$!
sleep 0.3
sed "s/LEADER/$leader/" "$FAKE_NVML_SCENARIO" > "$node/scenario.json"
echo "holders $a $b"
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" ghosts --json || true
kill $a $b $c
"#;
    let sc = scenario(&[(0, 2 * GIB)])
        .replace(r#""pid": 0"#, r#""pid": LEADER"#)
        .replace(UUID, crate::util::gpunode::UUID);
    let Some(o) = crate::util::gpunode::script(&sc, lines) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let (first, rest) = out
        .split_once('\n')
        .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&o.stderr)));
    let mut holders: Vec<u64> = first
        .strip_prefix("holders ")
        .unwrap()
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    holders.sort_unstable();
    let j: serde_json::Value = serde_json::from_str(rest)
        .unwrap_or_else(|e| panic!("{e}: {out}{}", String::from_utf8_lossy(&o.stderr)));
    let g = &j["ghosts"][0];
    assert_eq!(g["class"], "exited", "{j}");
    assert_eq!(g["holders"], serde_json::json!(holders), "{j}");
    assert_eq!(g["remedy"]["action"], "kill");
    assert_eq!(g["remedy"]["pids"], serde_json::json!(holders));
    let evidence = g["evidence"][1].as_str().unwrap();
    assert!(
        evidence.contains("holds /dev/nvidia7 and is in the process group"),
        "{evidence}"
    );
}

/// An H200 whose processes are `rows` (pid, bytes) and whose driver keeps `samples` (the
/// scenario's `process_samples` JSON, or none).
fn with_samples(rows: &[(u32, u64)], samples: Option<&str>) -> String {
    let sc = scenario(rows);
    match samples {
        Some(s) => sc.replacen(
            r#""compute_processes""#,
            &format!(r#""process_samples": {s}, "compute_processes""#),
            1,
        ),
        None => sc,
    }
}

#[test]
fn a_holder_the_driver_saw_do_nothing_is_idle_and_without_samples_it_is_not_known() {
    let idle = Command::new("sleep").arg("60").spawn().unwrap();
    let busy = Command::new("sleep").arg("60").spawn().unwrap();
    // Both older than the threshold.
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let samples = format!(
        r#"[{{"pid": {i}, "age_s": 5}}, {{"pid": {b}, "age_s": 0.2, "sm": 30, "mem": 4}}]"#,
        i = idle.id(),
        b = busy.id()
    );
    let rows = [(idle.id(), 2 * GIB), (busy.id(), GIB)];
    let sc = with_samples(&rows, Some(&samples));
    let o = hmn(&sc, &["ghosts", "--json", "--idle-after", "1s"]);
    assert_eq!(o.status.code(), Some(1));
    let j = json(&o);
    assert_eq!(j["ghosts"].as_array().unwrap().len(), 1, "{j}");
    let g = &j["ghosts"][0];
    assert_eq!(
        (&g["class"], &g["pid"]),
        (&"idle".into(), &idle.id().into())
    );
    assert!(
        g["evidence"][0]
            .as_str()
            .unwrap()
            .contains("no activity sample"),
        "{g}"
    );
    assert_eq!(g["remedy"]["pids"], serde_json::json!([idle.id()]));
    assert_eq!(j["bytes_by_class"]["idle"], 2 * GIB);
    // The text's row and footer.
    let out =
        String::from_utf8_lossy(&hmn(&sc, &["ghosts", "--idle-after", "1s"]).stdout).into_owned();
    assert!(
        out.contains("1 ghost holding 2.0 GiB: idle 2.0 GiB"),
        "{out}"
    );
    // Under the default ten minutes these young processes are not idle.
    assert_eq!(hmn(&sc, &["ghosts"]).status.code(), Some(0));
    // A driver that keeps no samples: not called idle, and said.
    let o = hmn(
        &with_samples(&rows, None),
        &["ghosts", "--json", "--idle-after", "1s"],
    );
    assert_eq!(o.status.code(), Some(0));
    let j = json(&o);
    let unseen = j["unseen"].to_string();
    assert!(
        unseen.contains("whether its holders are idle is not known")
            && unseen.contains("nvmlDeviceGetProcessUtilization is not supported"),
        "{j}"
    );
    for mut c in [idle, busy] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn a_process_whose_pod_the_kubelet_removed_is_in_a_gone_pod() {
    // The kubelet fixture's pid 4242 is in pod 6a2b5c3d-…; a copy of its node's log layout
    // without that pod's directory is a node that deleted the pod.
    let fixture = support::fixtures("kubelet");
    let rootfs = empty_dir();
    let copy = Command::new("cp")
        .arg("-a")
        .arg(fixture.join("rootfs/var"))
        .arg(&rootfs)
        .status()
        .unwrap();
    assert!(copy.success());
    let pods = rootfs.join("var/log/pods");
    let run = |rootfs: &std::path::Path| {
        let sc = r#"{"devices": [{"name": "NVIDIA H200", "total": 150754820096,
            "compute_processes": [{"pid": 4242, "used": 42949672960}]}]}"#;
        let mut c = crate::util::hmn::hmn();
        c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", write_scenario(sc))
            .env("HYPOMNESIS_SYSFS", empty_dir())
            .arg("--procfs")
            .arg(fixture.join("proc"))
            .arg("--rootfs")
            .arg(rootfs)
            .args(["ghosts", "--json"]);
        c.output().unwrap()
    };
    let o = run(&rootfs);
    assert_eq!(
        o.status.code(),
        Some(0),
        "its directory is there: {}",
        json(&o)
    );
    std::fs::remove_dir_all(pods.join("ml-team_trainer-0_6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"))
        .unwrap();
    let o = run(&rootfs);
    assert_eq!(o.status.code(), Some(1));
    let j = json(&o);
    let g = &j["ghosts"][0];
    assert_eq!(
        (&g["class"], &g["pid"]),
        (&"gone_pod".into(), &4242.into()),
        "{j}"
    );
    let evidence = g["evidence"].to_string();
    assert!(
        evidence.contains("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
            && evidence.contains("has no directory for it"),
        "{evidence}"
    );
    assert_eq!(j["bytes_by_class"]["gone_pod"], 40 * GIB);
}

#[test]
fn ps_why_marks_each_row_and_sums_the_ghosts_by_class() {
    let mut live = Command::new("sleep").arg("60").spawn().unwrap();
    let gone = exited_pid();
    let mut zombie = Command::new("true").spawn().unwrap();
    let stat = format!("/proc/{}/stat", zombie.id());
    while !std::fs::read_to_string(&stat).is_ok_and(|s| s.contains(") Z ")) {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let rows = [(live.id(), GIB), (gone, 3 * GIB), (zombie.id(), 2 * GIB)];
    // 5 GiB allocated beyond the listed rows: memory no process accounts for.
    let sc = scenario(&rows).replace(
        &format!(r#""free": {}"#, TOTAL - RESERVED - 6 * GIB),
        &format!(r#""free": {}"#, TOTAL - RESERVED - 11 * GIB),
    );
    let o = hmn(&sc, &["ps", "--why"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    let header = out.lines().next().unwrap();
    assert!(header.contains("WHY"), "{out}");
    let cell = |pid: &str| {
        let found = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(pid))
            .unwrap_or_else(|| panic!("no row {pid}: {out}"));
        found
            .split_whitespace()
            .find(|w| ["-", "exited", "zombie", "unaccounted"].contains(w))
            .map(str::to_owned)
    };
    assert_eq!(cell(&gone.to_string()).as_deref(), Some("exited"), "{out}");
    assert_eq!(
        cell(&zombie.id().to_string()).as_deref(),
        Some("zombie"),
        "{out}"
    );
    let hidden = out.lines().find(|l| l.contains("not visible")).unwrap();
    assert!(hidden.contains("unaccounted"), "{out}");
    assert!(
        out.contains(
            "3 ghosts holding 10.0 GiB: exited 3.0 GiB, zombie 2.0 GiB, unaccounted 5.0 GiB"
        ),
        "{out}"
    );
    // Filtered to the live process: the footer sums only what the rows shown hold, and counts
    // the others (as seen on an H200, where `ps --why --pid` summed an idle holder it hid).
    let live_pid = live.id().to_string();
    let o = hmn(&sc, &["ps", "--why", "--pid", &live_pid]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains(
            "no ghosts in the rows shown; 3 more ghosts in rows not shown (`hmn ghosts` lists \
             every one)"
        ),
        "{out}"
    );
    let gone_pid = gone.to_string();
    let o = hmn(&sc, &["ps", "--why", "--pid", &gone_pid]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("1 ghost holding 3.0 GiB in the rows shown: exited 3.0 GiB; 2 more ghosts"),
        "{out}"
    );
    // Without --why: no column, no footer.
    let plain = String::from_utf8_lossy(&hmn(&sc, &["ps"]).stdout).into_owned();
    assert!(
        !plain.contains("WHY") && !plain.contains("ghost"),
        "{plain}"
    );
    // JSON: each row's ghost, null for the live one; no key without --why.
    let j = json(&hmn(&sc, &["ps", "--why", "--json"]));
    let row = |pid: u32| {
        j.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap()
            .clone()
    };
    assert_eq!(row(gone)["ghost"]["class"], "exited");
    assert_eq!(row(zombie.id())["ghost"]["remedy"]["action"], "reap");
    assert!(row(live.id())["ghost"].is_null() && row(live.id()).get("ghost").is_some());
    let j = json(&hmn(&sc, &["ps", "--json"]));
    assert!(j[0].get("ghost").is_none());
    zombie.wait().unwrap();
    live.kill().unwrap();
    live.wait().unwrap();
}
