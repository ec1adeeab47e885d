//! `hmn fits --prometheus` against a real Prometheus scraping five `hmn serve` on loopback (one
//! with a ghost, one with two GPUs, one in MIG mode, one stopped mid-test to go stale, one whose
//! GPU's memory is the host's: unified) and a
//! dcgm-exporter stand-in serving text in that exporter's format; then `--count`, `--selector`,
//! `--json`, the exit codes, and the `--wait`/`--settle` gate. Local `--wait`/`--settle` runs
//! against the fake NVML with a free figure that moves, then holds.
//!
//! `prometheus` is used when on PATH; without it the fleet test prints `skipped: …` and passes,
//! unless `HYPOMNESIS_REQUIRE_EXTERNAL=1`.
#![cfg(all(feature = "serve", feature = "fleet", target_os = "linux"))]

use crate::util::serve as serving;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serving::{Prometheus, Server};
use support::{FakeVariant, external};

const GIB: u64 = 1 << 30;

/// One GPU of a scenario.
fn gpu(name: &str, uuid: &str, total_gib: u64, free_gib: u64, extra: &str) -> String {
    format!(
        r#"{{"name": "{name}", "uuid": "{uuid}", "total": {}, "free": {}, "reserved": {} {extra}}}"#,
        total_gib * GIB,
        free_gib * GIB,
        GIB / 2
    )
}

/// A zombie: a `sleep 0` whose parent (`sleep 600`, exec'd by the shell) never reaps it. Its
/// pid, and the parent to kill.
fn zombie() -> (u32, std::process::Child) {
    let mut parent = Command::new("sh")
        .args(["-c", "sleep 0 & echo $!; exec sleep 600"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')))
    {
        assert!(Instant::now() < until, "pid {pid} never became a zombie");
        std::thread::sleep(Duration::from_millis(20));
    }
    (pid, parent)
}

/// dcgm-exporter's text for one A100 on node-e (in MiB, as that exporter gives it), served
/// on loopback until the test ends.
fn dcgm_standin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let labels = r#"gpu="0",UUID="GPU-eeeeeeee-0000-4000-8000-000000000000",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",Hostname="node-e",DCGM_FI_DRIVER_VERSION="570.86.15",container="trainer",namespace="train",pod="bert-0""#;
    let body = format!(
        "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n\
         # TYPE DCGM_FI_DEV_FB_FREE gauge\nDCGM_FI_DEV_FB_FREE{{{labels}}} 40000\n\
         # HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n\
         # TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{{{labels}}} 40500\n\
         # HELP DCGM_FI_DEV_FB_RESERVED Framebuffer memory reserved (in MiB).\n\
         # TYPE DCGM_FI_DEV_FB_RESERVED gauge\nDCGM_FI_DEV_FB_RESERVED{{{labels}}} 537\n"
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0_u8; 4096];
            let _ = stream.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
        }
    });
    addr
}

fn fits(args: &[&str]) -> Output {
    let mut c = crate::util::hmn::hmn();
    c.arg("fits").args(args);
    c.output().unwrap()
}

fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
#[allow(clippy::too_many_lines, clippy::many_single_char_names)]
fn a_fleet_through_a_real_prometheus() {
    let Some(binary) = external("prometheus") else {
        return;
    };
    let (ghost, mut ghost_parent) = zombie();
    let a = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}]}}"#,
            gpu(
                "NVIDIA H200",
                "GPU-aaaaaaaa-0000-4000-8000-000000000000",
                141,
                100,
                &format!(
                    r#", "compute_processes": [{{"pid": {ghost}, "used": {}}}]"#,
                    20 * GIB
                )
            )
        ),
        &[],
    );
    let b = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}, {}]}}"#,
            gpu(
                "NVIDIA H100 80GB HBM3",
                "GPU-bbbbbbbb-0000-4000-8000-000000000000",
                80,
                70,
                ""
            ),
            gpu(
                "NVIDIA H100 80GB HBM3",
                "GPU-bbbbbbbb-0000-4000-8000-000000000001",
                80,
                30,
                ""
            )
        ),
        &[],
    );
    let c = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}]}}"#,
            gpu(
                "NVIDIA H200",
                "GPU-cccccccc-0000-4000-8000-000000000000",
                141,
                120,
                &format!(
                    r#", "mig_mode": 1, "mig_devices": [
                    {{"gpu_instance_id": 1, "name": "NVIDIA H200 MIG 3g.71gb", "total": {}, "free": {}}},
                    {{"gpu_instance_id": 2, "name": "NVIDIA H200 MIG 3g.71gb", "total": {}, "free": {}}}]"#,
                    71 * GIB,
                    60 * GIB,
                    70 * GIB,
                    10 * GIB
                )
            )
        ),
        &[],
    );
    let mut d = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}]}}"#,
            gpu(
                "NVIDIA H200",
                "GPU-dddddddd-0000-4000-8000-000000000000",
                141,
                95,
                ""
            )
        ),
        &[],
    );
    // node-u: a GB10, whose memory is the host's (NVML says NOT_SUPPORTED, ATS addressing):
    // its figures are the host's pool, here a procfs of 128 GiB with 100 GiB available.
    let procfs = std::env::temp_dir().join(format!("hmn-fleet-unified-{}", std::process::id()));
    std::fs::create_dir_all(&procfs).unwrap();
    std::fs::write(
        procfs.join("meminfo"),
        format!(
            "MemTotal:       {} kB\nMemFree:        {} kB\nMemAvailable:   {} kB\n",
            128 * GIB / 1024,
            90 * GIB / 1024,
            100 * GIB / 1024
        ),
    )
    .unwrap();
    let mut unified = serving::serve_command(
        FakeVariant::Modern,
        r#"{"devices": [{"name": "NVIDIA GB10", "uuid": "GPU-0b100000-0000-4000-8000-000000000000",
            "total": 0, "free": 0, "memory_error": 3, "addressing_mode": 2}]}"#,
        &["--listen", "127.0.0.1:0", "--min-interval", "1s"],
    );
    unified.env("HYPOMNESIS_PROCFS", &procfs);
    let u = Server::spawn(unified);
    let dcgm = dcgm_standin();
    let prometheus = Prometheus::start_nodes(
        &binary,
        &[
            (a.addr, "node-a"),
            (b.addr, "node-b"),
            (c.addr, "node-c"),
            (d.addr, "node-d"),
            (u.addr, "node-u"),
        ],
        &[(dcgm, "dcgm")],
    );
    let url = format!("http://{}", prometheus.addr);

    // Wait until Prometheus has every target's samples (and node-a's ghost).
    let until = Instant::now() + Duration::from_secs(90);
    let all = loop {
        let o = fits(&["1GiB", "--prometheus", &url, "--json"]);
        if o.status.code() == Some(0) {
            let j = json_of(&o);
            let nodes: std::collections::BTreeSet<String> = j["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["node"].as_str().unwrap().to_string())
                .collect();
            let ghosted = j["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["ghost_bytes"]["zombie"].as_u64() == Some(20 * GIB));
            if nodes.len() == 6 && ghosted {
                break j;
            }
        }
        assert!(
            Instant::now() < until,
            "Prometheus never knew the whole fleet: {}\n{}\nlog:\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let gpus = all["gpus"].as_array().unwrap();
    // node-a, node-b ×2, node-c's two MIG instances, node-d, node-e (dcgm-exporter's), node-u.
    assert_eq!(gpus.len(), 8, "{all:#}");
    // The unified node's figures are the host's pool, and it says so.
    let u = gpus.iter().find(|g| g["node"] == "node-u").unwrap();
    assert_eq!(u["memory_model"], "unified", "{u:#}");
    assert_eq!(u["total_bytes"].as_u64(), Some(128 * GIB), "{u:#}");
    assert_eq!(u["free_bytes"].as_u64(), Some(100 * GIB), "{u:#}");
    assert_eq!(all["queries"], 8);
    let e = gpus.iter().find(|g| g["node"] == "node-e").unwrap();
    assert_eq!(e["source"], "dcgm-exporter");
    assert_eq!(e["free_bytes"].as_u64(), Some(40_000 << 20));
    assert_eq!(
        e["total_bytes"].as_u64(),
        Some((40_000 + 40_500 + 537) << 20)
    );
    assert_eq!(e["pods"][0]["pod"], "bert-0");
    let migs: Vec<&serde_json::Value> = gpus.iter().filter(|g| g["node"] == "node-c").collect();
    assert_eq!(migs.len(), 2, "the MIG GPU is its instances");
    assert!(migs.iter().all(|g| g["mig"]["profile"] == "3g.71gb"));

    #[cfg(feature = "top")]
    fleet_top_shows_every_node_and_opens_one(&url, ghost);

    // 110 GiB: nowhere now; node-a once its zombie is freed (100 + 20 GiB). Exit 1.
    let o = fits(&["110GiB", "--prometheus", &url]);
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Fits once its ghosts are freed:")
            && text.contains("node-a GPU 0: 100.0 GiB free and a ghost (zombie) holding 20.0 GiB: run `hmn ghosts` on node-a"),
        "{text}"
    );
    assert!(
        text.contains("node-b GPU 1: 30.0 GiB free of 80.0 GiB (50.0 GiB in use"),
        "{text}"
    );
    assert!(text.contains("110.0 GiB requested"), "{text}");

    // Two GPUs on one node: node-b's 70 and 30 GiB take 25 GiB each; node-a has one GPU.
    let o = fits(&["25GiB", "--count", "2", "--prometheus", &url, "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let j = json_of(&o);
    assert_eq!(j["nodes"][0]["node"], "node-b", "{j:#}");
    assert_eq!(j["nodes"][0]["verdict"], "fits");
    let reasons: Vec<&str> = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["reason"].as_str())
        .collect();
    assert!(
        reasons.contains(&"node-a: 1 of its 1 GPUs has 25.0 GiB free, 2 asked"),
        "{reasons:?}"
    );

    // The selector keeps the H100s alone; a bad one says what is wrong (exit 2).
    let o = fits(&[
        "1GiB",
        "--prometheus",
        &url,
        "--json",
        "--selector",
        r#"model=~".*H100.*""#,
    ]);
    let j = json_of(&o);
    assert_eq!(j["gpus"].as_array().unwrap().len(), 2, "{j:#}");
    let o = fits(&["1GiB", "--prometheus", &url, "--selector", "model=H100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("quoted string"));

    // The gate: 90 GiB fits on node-a and node-d; with --settle 3 it answers after three
    // samples of figures that held.
    let t = Instant::now();
    let o = fits(&[
        "90GiB",
        "--prometheus",
        &url,
        "--settle",
        "3",
        "--every",
        "500ms",
        "--wait",
        "30s",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "three samples, two intervals"
    );
    // Never fits: the wait ends with exit 1 and says so.
    let o = fits(&[
        "900GiB",
        "--prometheus",
        &url,
        "--every",
        "500ms",
        "--wait",
        "2s",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not fit yet (the wait is over after"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // node-d stops: once its newest sample is older than the bound, it is named, not counted.
    let _ = d.child.kill();
    let _ = d.child.wait();
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let o = fits(&[
            "1GiB",
            "--prometheus",
            &url,
            "--json",
            "--stale-after",
            "3s",
        ]);
        let j = json_of(&o);
        let stale = j["stale"].as_array().unwrap();
        if stale.iter().any(|s| s["node"] == "node-d") {
            assert!(
                !j["gpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|g| g["node"] == "node-d")
            );
            break;
        }
        assert!(Instant::now() < until, "node-d never went stale: {j:#}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let o = fits(&["1GiB", "--prometheus", &url, "--stale-after", "3s"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("Not counted:") && text.contains("node-d:"),
        "{text}"
    );
    #[cfg(feature = "top")]
    {
        // `hmn top --prometheus` marks it with its age.
        let top = fleet_top(&url, &["--stale-after", "3s"]);
        top.wait_for("node-d marked stale", |s| {
            s.lines()
                .any(|l| l.contains("node-d") && (l.contains("stale ") || l.contains("gone")))
        });
    }

    // A Prometheus that is not there: exit 2, naming the query.
    let closed = serving::free_port();
    let o = fits(&[
        "1GiB",
        "--prometheus",
        &format!("http://{closed}"),
        "--prometheus-timeout",
        "2s",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Prometheus did not answer `"));
    let _ = ghost_parent.kill();
    let _ = ghost_parent.wait();
    let _ = std::fs::remove_dir_all(procfs);
}

/// `hmn top --prometheus URL` in tmux (200 x 30), refreshing every 300 ms.
#[cfg(feature = "top")]
fn fleet_top(url: &str, extra: &[&str]) -> crate::cli::top::Tmux {
    let mut command = format!(
        "{} top --prometheus {url} --interval 300ms",
        env!("CARGO_BIN_EXE_hmn")
    );
    for e in extra {
        command = format!("{command} {e}");
    }
    let command = format!("{command}; echo EXIT=$?; sleep 60");
    crate::cli::top::Tmux::start("fleet", 200, &[&command])
}

/// The live fleet view: a row per node (dcgm-exporter's too), the `/` filter, a node opened
/// for its GPUs and processes (node-a's ghost among them), Esc back, a sort, `q` and exit 0.
#[cfg(feature = "top")]
#[allow(clippy::many_single_char_names)]
fn fleet_top_shows_every_node_and_opens_one(url: &str, ghost: u32) {
    if !crate::cli::top::tmux_here() {
        return;
    }
    let top = fleet_top(url, &[]);
    let screen = top.wait_for("six nodes", |s| s.contains("6 nodes (0 stale)"));
    assert!(screen.contains("6 queries"), "{screen}");
    let row = |s: &str, node: &str| {
        s.lines()
            .find(|l| l.starts_with(node))
            .unwrap_or_else(|| panic!("no row for {node}:\n{s}"))
            .to_string()
    };
    // node-a: one H200 of 141 GiB, 41 GiB used, its zombie's 20 GiB a ghost.
    let a = row(&screen, "node-a");
    assert!(
        a.contains("41.0 GiB") && a.contains("141.0 GiB") && a.contains("20.0 GiB"),
        "{a}"
    );
    // node-b: two H100s, 60 of 160 GiB used.
    let b = row(&screen, "node-b");
    assert!(
        b.contains("   2 ") && b.contains("60.0 GiB") && b.contains("160.0 GiB"),
        "{b}"
    );
    // node-e is dcgm-exporter's: no ghost figure there, and its pod by name.
    let e = row(&screen, "node-e");
    assert!(e.contains("n/a") && e.contains("bert-0"), "{e}");
    // node-u: the host's 128 GiB, 28 GiB of it used.
    let u = row(&screen, "node-u");
    assert!(u.contains("28.0 GiB") && u.contains("128.0 GiB"), "{u}");
    // Sorted by USED, largest first: node-b (60 GiB) above node-a (41 GiB).
    let at = |s: &str, node: &str| s.lines().position(|l| l.starts_with(node)).unwrap();
    assert!(at(&screen, "node-b") < at(&screen, "node-a"), "{screen}");
    top.keys(&[">"]);
    top.wait_for("sorted by TOTAL", |s| s.contains("sort: TOTAL ↓"));
    top.keys(&["/"]);
    top.keys(&["node-a"]);
    top.keys(&["Enter"]);
    let screen = top.wait_for("node-a alone", |s| {
        s.contains("filter: /node-a") && !s.contains("node-b")
    });
    assert!(screen.lines().any(|l| l.starts_with("node-a")), "{screen}");
    top.keys(&["Enter"]);
    let pid = ghost.to_string();
    let screen = top.wait_for("node-a opened", |s| {
        s.contains("node node-a") && s.lines().any(|l| l.trim_start().starts_with(&pid))
    });
    assert!(screen.contains("NVIDIA H200"), "{screen}");
    let p = screen
        .lines()
        .find(|l| l.trim_start().starts_with(&pid))
        .unwrap();
    assert!(p.contains("20.0 GiB"), "{p}");
    top.keys(&["Escape"]);
    top.wait_for("back to the nodes", |s| s.contains("LARGEST POD"));
    top.keys(&["q"]);
    top.wait_for("exit 0", |s| s.contains("EXIT=0"));
}

/// `--settle` on this host: a free figure that moves is not counted until it has held over
/// the samples asked; `--wait` ends with exit 1 when it never fits.
#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn a_local_gate_waits_for_a_steady_free_figure() {
    let dir = std::env::temp_dir().join(format!("hmn-fits-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let free = dir.join("free");
    std::fs::write(&free, (10 * GIB).to_string()).unwrap();
    let scenario = support::write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {}, "free_file": "{}"}}]}}"#,
        141 * GIB,
        10 * GIB,
        free.display()
    ));
    let run = |args: &[&str]| {
        let mut c = crate::util::hmn::hmn();
        c.arg("fits")
            .args(args)
            .env(
                "HYPOMNESIS_NVML_LIBRARY",
                support::fake_nvml(FakeVariant::Modern),
            )
            .env("FAKE_NVML_SCENARIO", &scenario)
            .env("HYPOMNESIS_SYSFS", support::empty_dir())
            .env("PATH", support::empty_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    // A neighbour frees memory in steps (10 → 60 → 100 GiB), then it holds at 100 GiB.
    let child = run(&[
        "50GiB", "--settle", "4", "--every", "200ms", "--wait", "20s", "--json",
    ]);
    let t = Instant::now();
    for gib in [60, 100] {
        std::thread::sleep(Duration::from_millis(500));
        std::fs::write(&free, (gib * GIB).to_string()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // It could not settle before the last step (1 s in) and three more samples after it.
    assert!(
        t.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    let j = json_of(&o);
    assert_eq!(j["fits"], true);
    assert_eq!(j["settled"], true);
    assert_eq!(
        j["free_bytes"].as_u64(),
        Some(100 * GIB),
        "the least of the held samples"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("held over 4 samples"), "{err}");

    // 120 GiB never fits: exit 1 at the deadline, saying so.
    let o = run(&["120GiB", "--every", "200ms", "--wait", "1s"])
        .wait_with_output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("does not fit") && err.contains("the wait is over"),
        "{err}"
    );
    // Ctrl-C answers at once, as the deadline does: exit 1, saying it was stopped.
    let waiting = run(&["120GiB", "--every", "100ms", "--wait", "60s"]);
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    // SAFETY: kill(2) with a child's pid and a signal number; no memory is involved.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(i32::try_from(waiting.id()).unwrap(), libc::SIGINT);
    }
    let o = waiting.wait_with_output().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("(stopped after"), "{err}");
    // Without --wait, --settle answers once its samples are in.
    let o = run(&["50GiB", "--settle", "2", "--every", "100ms"])
        .wait_with_output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The backfilled fleet of `scripts/bench/fleet_scale.py`, small (50 nodes × 8 GPUs of every
/// series `hmn serve` exports, written with `promtool tsdb create-blocks-from openmetrics`,
/// served by a real Prometheus): `hmn fits --prometheus` ranks all 400 GPUs in 8 queries, the
/// same 8 as for the four nodes above; `hmn top --prometheus` shows the 50 nodes in 6 queries a
/// refresh, and opens one. The 1,000-node figures are in BENCHMARKS.md.
#[test]
fn a_backfilled_fleet_answers_in_eight_queries() {
    let (Some(_), Some(_)) = (external("prometheus"), external("promtool")) else {
        return;
    };
    let o = Command::new("python3")
        .arg(support::workspace().join("scripts/bench/fleet_scale.py"))
        .args(["50", "1"])
        .env("HMN", env!("CARGO_BIN_EXE_hmn"))
        .env("FLEET_SCALE_COMPARE", "0")
        .env("FLEET_SCALE_TOP", "2")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "50 nodes × 8 GPUs: 6400 series",
        "hmn fits 40GiB --prometheus: ",
        "; 8 queries, 400 GPUs ranked, verdict fits",
        "hmn fits 40GiB --count 4 --prometheus: ",
        "hmn top --prometheus, 50 nodes: CPU a refresh",
        "; 6 queries, the last took",
        "hmn top --prometheus, a node open: CPU a refresh",
    ] {
        assert!(out.contains(want), "{want:?} in:\n{out}");
    }
}
