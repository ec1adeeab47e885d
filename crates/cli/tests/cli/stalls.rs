//! A GPU driver call that does not return (an NVML stand-in whose `nvmlDeviceGetMemoryInfo`
//! blocks for ten minutes), and a file read that does not (a FIFO as a process's `cmdline`, as
//! a D-state process's is): `hmn` gives up at its deadline naming what did not return, and
//! `hmn serve` answers every scrape within its budget, saying the measurement is stalled.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

fn stuck() -> Command {
    let scenario = r#"{"devices": [{"name": "NVIDIA H200", "total": 150754820096}],
        "slow": [{"function": "nvmlDeviceGetMemoryInfo", "ms": 600000}]}"#;
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("PATH", support::empty_dir());
    c
}

#[test]
fn a_blocked_driver_call_ends_at_the_deadline_with_a_message() {
    for args in [
        &["--deadline", "1500ms"][..],
        &["ps", "--deadline", "1500ms"],
        &["--deadline", "1500ms", "ps"],
    ] {
        let t = Instant::now();
        let o = stuck().args(args).output().unwrap();
        let took = t.elapsed();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
            "hmn {args:?} took {took:?}: {err}"
        );
        assert_eq!(o.status.code(), Some(2), "hmn {args:?}: {err}");
        assert!(
            err.contains(
                "hmn: no answer within 1500ms: still waiting for the NVIDIA driver \
                 (nvmlDeviceGetMemoryInfo) after 1."
            ),
            "hmn {args:?}: {err}"
        );
    }
    let o = stuck()
        .args(["--deadline", "1s", "watch"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "--deadline is for the commands that measure once"
    );
}

/// A process's `cmdline` that blocks its reader (a FIFO; a D-state process holding its memory
/// map lock does the same to a real one): `hmn ps` names that file when it gives up, rather
/// than blaming a GPU driver call.
#[cfg(target_os = "linux")]
#[test]
fn a_blocked_file_read_is_named_at_the_deadline() {
    let root = super::impossible_figures::hostile_tree("fifo-ps");
    let fifo = root.join("proc/601/cmdline");
    support::mkfifo(&fifo);
    let (code, out, err, took) =
        super::impossible_figures::hmn(&root, &["ps", "--deadline", "1500ms"]);
    assert_eq!(code, 2, "{err}");
    assert!(took < Duration::from_secs(5), "took {took:?}: {err}");
    assert_eq!(out, "", "nothing half measured");
    assert!(
        err.contains(&format!(
            "hmn: no answer within 1500ms: still waiting for {} after 1.",
            fifo.display()
        )),
        "{err}"
    );
    assert!(!err.contains("driver"), "{err}");
    let _ = std::fs::remove_dir_all(root);
}

fn scrape(addr: &str) -> (Duration, String) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    (t.elapsed(), body)
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

#[test]
fn the_exporter_answers_within_its_budget_while_a_measurement_is_stalled() {
    let mut server = stuck()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(rest) = line.strip_prefix("hmn: serving metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    for round in 0..2 {
        let (took, body) = scrape(&addr);
        assert!(
            took < Duration::from_secs(7),
            "scrape {round} took {took:?}"
        );
        assert!(body.starts_with("HTTP/1.1 200"), "{body}");
        assert_eq!(
            value(&body, "hypomnesis_scrape_success"),
            Some(0.0),
            "{body}"
        );
        let stalled = value(&body, "hypomnesis_measurement_stalled_seconds").unwrap();
        assert!(
            stalled >= 4.0,
            "scrape {round}: stalled {stalled} s\n{body}"
        );
        assert!(
            !body.contains("hypomnesis_gpu_memory_total_bytes"),
            "no figures yet"
        );
        assert_eq!(
            value(&body, "hypomnesis_measurements_total"),
            Some(0.0),
            "the stalled measurement is not started again"
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let t = Instant::now();
    while server.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "hmn serve did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `hmn doctor` with a driver call that does not return: at its deadline it still says all
/// it knows (RAM, the roots, the kubelet's logs, the pod-resources socket: here a regular file
/// at its path) and which call the sources' reports wait for, and exits 2. Before, it printed
/// only the deadline's message, and never looked at the pod-resources socket.
#[test]
fn doctor_with_a_blocked_driver_call_says_the_rest() {
    let rootfs = std::env::temp_dir().join(format!("hmn-doctor-rootfs-{}", std::process::id()));
    let dir = rootfs.join("var/lib/kubelet/pod-resources");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("kubelet.sock"), b"").unwrap();
    let t = Instant::now();
    let o = stuck()
        .args(["doctor", "--deadline", "1500ms", "--rootfs"])
        .arg(&rootfs)
        .output()
        .unwrap();
    let took = t.elapsed();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(took < Duration::from_secs(6), "took {took:?}");
    for want in [
        "RAM: answered",
        "procfs: ",
        "rootfs: ",
        "is a regular file, not a socket",
    ] {
        assert!(out.contains(want), "{want} not in\n{out}");
    }
    assert!(
        out.contains("GPU sources: no answer within 1500ms: still waiting for the NVIDIA driver"),
        "{out}"
    );
    assert!(err.contains("hmn: no answer within 1500ms"), "{err}");
    let json = stuck()
        .args(["doctor", "--json", "--deadline", "1500ms", "--rootfs"])
        .arg(&rootfs)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        v["sources_error"]
            .as_str()
            .unwrap()
            .contains("still waiting"),
        "{v}"
    );
    assert!(
        v["pod_resources"]["error"]
            .as_str()
            .unwrap()
            .contains("regular file"),
        "{v}"
    );
    assert!(v["rss_bytes"].as_u64().is_some(), "{v}");
    let _ = std::fs::remove_dir_all(rootfs);
}
