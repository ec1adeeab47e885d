//! `hmn` as scripts written for 0.2.x call it: `fits` and its exit codes, `ps --pid` repeated,
//! `--min`, `--filter`, `--exit-status` and the sort aliases, the SPILL column and its keys,
//! `spill --interval` in milliseconds, `watch`'s selection, JSON Lines and exit codes, and a
//! process whose name is longer than the kernel's 15-byte `comm`.
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::hmn::run;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const LONG: &str = "Trainer-Worker-Number-Seven";

use crate::util::hmn::isolated_with_path as hmn;

fn with_fake(scenario: &str) -> Command {
    let mut c = crate::util::hmn::with_fake(scenario);
    c.env(
        "PATH",
        format!("/usr/bin:/bin:{}", support::empty_dir().display()),
    );
    c
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hmn-compat-{}-{name}", std::process::id()))
}

/// A copy of `sleep` named [`LONG`] (27 bytes; the kernel's `comm` holds 15 of them), running,
/// its pid in `pid_file`.
fn long_named(pid_file: &Path) -> Child {
    let exe = tmp("bin").join(LONG);
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    if !exe.exists() {
        std::fs::copy("/bin/sleep", &exe).unwrap();
    }
    let child = Command::new(&exe).arg("60").spawn().unwrap();
    wait_for_comm(child.id(), &LONG[..15]);
    std::fs::write(pid_file, child.id().to_string()).unwrap();
    child
}

/// A `sleep`, running, its pid in `pid_file`.
fn sleeper(pid_file: &Path) -> Child {
    let child = Command::new("sleep").arg("60").spawn().unwrap();
    wait_for_comm(child.id(), "sleep");
    std::fs::write(pid_file, child.id().to_string()).unwrap();
    child
}

fn wait_for_comm(pid: u32, comm: &str) {
    let t = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or(true, |c| c.trim() != comm) {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "{pid} never ran {comm}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// One H200 (reserved 614 MiB, 100 GiB free) whose processes are `rows` (`{"pid_file": …}` or
/// `{"pid": …}` objects with `used`), and an empty second H200.
fn two_h200(rows: &str) -> String {
    format!(
        r#"{{"devices": [
            {{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {}, "compute_processes": [{rows}]}},
            {{"name": "NVIDIA H200", "total": {}, "free": {}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        100 * GIB,
        143_771 * MIB,
        143_771 * MIB
    )
}

#[test]
fn fits_answers_with_its_exit_code_and_one_line() {
    let sc = two_h200("");
    for (args, code, line) in [
        (
            &["fits", "12GiB"][..],
            0,
            "hmn: 12.0 GiB fits on GPU 0 [NVIDIA H200]: 100.0 GiB free\n",
        ),
        (
            &["fits", "1.5GiB", "--device", "1"],
            0,
            "hmn: 1.5 GiB fits on GPU 1 [NVIDIA H200]: 140.4 GiB free\n",
        ),
        (
            &["fits", "107374182400"],
            0,
            "hmn: 100.0 GiB fits on GPU 0 [NVIDIA H200]: 100.0 GiB free\n",
        ),
        (
            &["fits", "107374182401"],
            1,
            "hmn: 100.0 GiB does not fit on GPU 0 [NVIDIA H200]: 100.0 GiB free, 1 byte short\n",
        ),
        (
            &["fits", "120GiB"],
            1,
            "hmn: 120.0 GiB does not fit on GPU 0 [NVIDIA H200]: 100.0 GiB free, 20.0 GiB short\n",
        ),
        (
            &["fits", "1GiB", "--device", "2"],
            2,
            "hmn fits: GPU index 2 is out of range: 2 device(s) present\n",
        ),
    ] {
        let (c, out, err) = run(with_fake(&sc), args);
        assert_eq!(
            (c, out.as_str(), err.as_str()),
            (code, "", line),
            "{args:?}"
        );
    }
    // No GPU: 2, not 1 (the question has no answer); a bad size or --json: usage errors.
    let (c, out, err) = run(hmn(), &["fits", "1GiB"]);
    assert_eq!((c, out.as_str()), (2, ""), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for bad in [
        &["fits", "12GB"][..],
        &["fits", "lots"],
        &["--json", "fits", "1GiB"],
    ] {
        let (c, _, _) = run(with_fake(&sc), bad);
        assert_eq!(c, 2, "{bad:?}");
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn ps_pids_min_filter_exit_status_and_sort_aliases() {
    let (pa, pb) = (tmp("ps-a.pid"), tmp("ps-b.pid"));
    let (a, b) = (long_named(&pa), sleeper(&pb));
    let (ida, idb) = (a.id(), b.id());
    let sc = two_h200(&format!(
        r#"{{"pid_file": "{}", "used": {}}}, {{"pid_file": "{}", "used": {}}}"#,
        pa.display(),
        3 * GIB,
        pb.display(),
        512 * MIB
    ));
    let ps = |args: &[&str]| {
        let mut all = vec!["ps"];
        all.extend_from_slice(args);
        run(with_fake(&sc), &all)
    };
    let pids = |json: &str| -> Vec<u64> {
        serde_json::from_str::<serde_json::Value>(json)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["pid"].as_u64().unwrap())
            .collect()
    };
    // The whole name: in the table's COMMAND (its command line) and JSON's name.
    let (c, out, _) = ps(&["--json"]);
    assert_eq!(c, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], LONG, "{v}");
    assert_eq!(v[1]["name"], "sleep");
    // --pid repeated: any; one alone.
    let (a_s, b_s) = (ida.to_string(), idb.to_string());
    assert_eq!(
        pids(&ps(&["--pid", &a_s, "--pid", &b_s, "--json"]).1),
        [u64::from(ida), u64::from(idb)]
    );
    let (_, out, err) = ps(&["--pid", &b_s, "--json"]);
    assert_eq!(pids(&out), [u64::from(idb)]);
    assert!(
        err.starts_with(&format!("hmn: 1 GPU process found matching pid={b_s} ")),
        "{err}"
    );
    // --min: the footprint; 0 keeps everything.
    assert_eq!(pids(&ps(&["--min", "1GiB", "--json"]).1), [u64::from(ida)]);
    assert_eq!(pids(&ps(&["--min", "0", "--json"]).1).len(), 2);
    // --filter: a part of the name, any case, whole names included.
    let (_, out, err) = ps(&["--filter", "WORKER-NUMBER-seven", "--json"]);
    assert_eq!(pids(&out), [u64::from(ida)], "{err}");
    assert!(err.contains("matching filter=WORKER-NUMBER-seven"), "{err}");
    assert_eq!(
        pids(&ps(&["--filter", "nothing", "--filter", "slee", "--json"]).1),
        [u64::from(idb)]
    );
    // --exit-status: 0 something listed, 1 nothing; without it, 0 either way.
    assert_eq!(ps(&["--filter", "sleep", "--exit-status"]).0, 0);
    assert_eq!(ps(&["--filter", "python", "--exit-status"]).0, 1);
    assert_eq!(ps(&["--filter", "python"]).0, 0);
    assert_eq!(ps(&["--min", "100GiB", "--exit-status"]).0, 1);
    assert_eq!(ps(&["--device", "1", "--exit-status"]).0, 1, "an empty GPU");
    assert_eq!(ps(&["--device", "5", "--exit-status"]).0, 2, "no such GPU");
    // The sort keys and their 0.2.x aliases.
    for (key, first) in [
        ("vram", ida),
        ("dedicated", ida),
        ("committed", ida),
        ("total", ida),
    ] {
        assert_eq!(
            pids(&ps(&["--sort", key, "--json"]).1)[0],
            u64::from(first),
            "{key}"
        );
    }
    // SPILL: not measurable here, so n/a and null keys, never false.
    let (_, out, _) = ps(&[]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "PID", "USER", "TYPE", "VRAM", "SHARED", "SPILL", "RSS", "GPU", "DEVICE", "COMMAND"
        ]
    );
    // (The last row is the memory no listed process accounts for: no process, no verdict.)
    let rows: Vec<&str> = out
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('-'))
        .collect();
    assert!(
        rows.len() == 2 && rows.iter().all(|l| l.contains("  n/a  ")),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_str(&ps(&["--json"]).1).unwrap();
    for k in ["spilling", "paged", "shared_share"] {
        assert!(v[0][k].is_null(), "{k}: {v}");
    }
    stop(a);
    stop(b);
}

/// Rows whose name cannot be read cannot match `--filter`: counted on the summary, and an
/// empty answer that may have missed them is not a "no" (exit 2 under `--exit-status`).
#[test]
fn unnamed_rows_are_counted_and_make_an_empty_answer_uncertain() {
    let sc = two_h200(&format!(r#"{{"pid": 4194400, "used": {GIB}}}"#));
    let (c, out, err) = run(
        with_fake(&sc),
        &["ps", "--filter", "python", "--exit-status"],
    );
    assert_eq!((c, out.as_str()), (2, ""), "{err}");
    assert_eq!(
        err,
        "hmn: 0 GPU processes found matching filter=python; 1 process without a readable name \
         could not be matched.\n"
    );
    let (c, _, _) = run(with_fake(&sc), &["ps", "--filter", "python"]);
    assert_eq!(c, 0);
    // A pid filter is decided for every row: a plain no.
    let (c, _, _) = run(with_fake(&sc), &["ps", "--pid", "7", "--exit-status"]);
    assert_eq!(c, 1);
}

#[test]
fn spill_interval_is_milliseconds() {
    let t = Instant::now();
    let o = hmn()
        .args(["spill", "--interval", "100", "--json", "--", "sleep", "0.5"])
        .output()
        .unwrap();
    let took = t.elapsed();
    assert_eq!(o.status.code(), Some(0));
    assert!(
        took < Duration::from_millis(1500),
        "a 0.5 s command took {took:?}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "measurable",
        "spilled",
        "observations",
        "baseline_shared_bytes",
        "peak_shared_bytes",
        "peak_dedicated_bytes",
        "dedicated_limit_bytes",
        "total_spill_duration_ms",
        "episodes",
    ] {
        assert!(v.get(k).is_some(), "{k}: {v}");
    }
    assert_eq!(
        (v["measurable"].clone(), v["spilled"].clone()),
        (false.into(), false.into())
    );
    assert_eq!(v["device"], 0);
    for bad in ["0", "1.5", "soon"] {
        let o = hmn()
            .args(["spill", "--interval", bad, "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "--interval {bad}");
    }
    // The command's own status passes through.
    let o = hmn()
        .args(["spill", "--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
}

/// The JSON Lines of a run, each parsed.
fn records(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `hmn watch --json` record by record: `start`, a `sample` per process per interval with one
/// `wall_clock` per interval, `summary` last; the top set chosen at the start is kept (a
/// process that starts holding memory later is not followed without `--follow-new`); the
/// long name is whole.
#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn watch_json_lines_and_the_set_chosen_at_the_start() {
    let (pa, pb) = (tmp("w-a.pid"), tmp("w-b.pid"));
    let _ = std::fs::remove_file(&pb);
    let a = long_named(&pa);
    let sc = two_h200(&format!(
        r#"{{"pid_file": "{}", "used": {}}}, {{"pid_file": "{}", "used": {}}}"#,
        pa.display(),
        2 * GIB,
        pb.display(),
        4 * GIB
    ));
    let watch = with_fake(&sc)
        .args([
            "watch",
            "--interval",
            "200ms",
            "--duration",
            "1500ms",
            "--json",
            "--top",
            "3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let b = sleeper(&pb);
    let o = watch.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "no spill seen: {err}");
    let all = records(&o.stdout);
    let start = &all[0];
    assert_eq!(start["kind"], "start");
    assert_eq!(start["hmn_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(start["argv"][0], "hmn", "the program by its file name");
    assert_eq!(start["argv"][1], "watch");
    assert_eq!(
        (start["device"].clone(), start["device_name"].clone()),
        (0.into(), "NVIDIA H200".into())
    );
    assert_eq!(
        (start["interval_ms"].clone(), start["duration_ms"].clone()),
        (200.into(), 1500.into())
    );
    assert_eq!(start["selection"]["mode"], "top");
    assert_eq!(start["selection"]["top"], 3);
    let samples: Vec<&serde_json::Value> = all.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(samples.len() >= 5, "{all:?}");
    for s in &samples {
        assert_eq!(
            s["pid"],
            a.id(),
            "only the process chosen at the start: {s}"
        );
        assert_eq!(s["name"], LONG);
        assert_eq!(s["used_bytes"], 2 * GIB);
        assert_eq!(s["shared_bytes"], 0);
        assert!(s["spilling"].is_null() && s["paged"].is_null(), "{s}");
        let clock = s["wall_clock"].as_str().unwrap();
        assert!(
            clock.len() == 24 && clock.ends_with('Z') && clock.as_bytes()[10] == b'T',
            "{clock}"
        );
    }
    assert!(
        samples[0]["used_delta"].is_null(),
        "no delta at the first sample"
    );
    assert_eq!(samples[1]["used_delta"], 0);
    let summary = all.last().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert_eq!(summary["measurable"], false);
    assert_eq!(summary["spilled"], false);
    assert!(summary["spilling_at_attach"].is_null());
    assert!(summary["episodes"].as_array().unwrap().is_empty());
    let per = &summary["per_pid"][0];
    assert_eq!(
        (per["pid"].clone(), per["name"].clone()),
        (a.id().into(), LONG.into())
    );
    assert_eq!(
        (
            per["baseline_used_bytes"].clone(),
            per["peak_used_bytes"].clone()
        ),
        ((2 * GIB).into(), (2 * GIB).into())
    );
    assert!(per["paged"].is_null());
    assert_eq!(summary["per_pid"].as_array().unwrap().len(), 1);
    // With --follow-new the later, larger holder is followed too.
    let o = with_fake(&sc)
        .args([
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "300ms",
            "--json",
            "--follow-new",
        ])
        .output()
        .unwrap();
    let pids: std::collections::BTreeSet<u64> = records(&o.stdout)
        .iter()
        .filter(|r| r["kind"] == "sample")
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        pids,
        [u64::from(a.id()), u64::from(b.id())].into_iter().collect()
    );
    // --filter and --min choose among the holders.
    let chosen = |args: &[&str]| -> Vec<u64> {
        let mut all = vec![
            "watch",
            "--interval",
            "100ms",
            "--duration",
            "100ms",
            "--json",
        ];
        all.extend_from_slice(args);
        let o = with_fake(&sc).args(&all).output().unwrap();
        records(&o.stdout)
            .iter()
            .filter(|r| r["kind"] == "sample")
            .map(|r| r["pid"].as_u64().unwrap())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    assert_eq!(chosen(&["--filter", "number-seven"]), [u64::from(a.id())]);
    assert_eq!(chosen(&["--min", "3GiB"]), [u64::from(b.id())]);
    assert_eq!(chosen(&["--top", "1"]), [u64::from(b.id())], "the largest");
    stop(a);
    stop(b);
}

/// A pid that holds memory on another GPU than the one watched is named with that GPU.
#[test]
fn watch_names_the_gpu_a_pid_holds_memory_on() {
    let p = tmp("w-other.pid");
    let s = sleeper(&p);
    let sc = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200"}}, {{"name": "NVIDIA H200",
            "compute_processes": [{{"pid_file": "{}", "used": {}}}]}}]}}"#,
        p.display(),
        GIB
    );
    let o = with_fake(&sc)
        .args(["watch", "--interval", "100ms", "--duration", "200ms"])
        .arg(s.id().to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!(
            "hmn watch: pid {} holds no memory on GPU 0 but 1.0 GiB on GPU 1: re-run with --device 1\n",
            s.id()
        )),
        "{err}"
    );
    // Nothing to choose on GPU 0 without pids: exit 2, naming GPU 1.
    let o = with_fake(&sc).args(["watch"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("GPU 1 has 1 (re-run with --device 1)"),
        "{err}"
    );
    stop(s);
}

/// The exporter names a process whose `comm` the kernel cut by its whole name too.
#[cfg(feature = "serve")]
#[test]
fn the_exporter_names_a_long_named_process_whole() {
    let p = tmp("serve.pid");
    let s = long_named(&p);
    let sc = two_h200(&format!(
        r#"{{"pid_file": "{}", "used": {GIB}}}"#,
        p.display()
    ));
    let server = crate::util::serve::Server::start(support::FakeVariant::Modern, &sc, &[]);
    let t = server.get("/metrics").body;
    let line = t
        .lines()
        .find(|l| {
            l.starts_with("hypomnesis_gpu_process_memory_bytes{")
                && l.contains(&format!("pid=\"{}\"", s.id()))
        })
        .unwrap_or_else(|| panic!("{t}"));
    assert!(line.contains(&format!("process=\"{LONG}\"")), "{line}");
    stop(s);
}
