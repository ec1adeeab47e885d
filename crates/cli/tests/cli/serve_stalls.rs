//! `hmn serve` with a measurement stuck on one process: a FIFO as a process's `status` under
//! `--procfs`, and an NVML process-list call that does not return. The device figures do not
//! wait on either (they come from a measurement of the devices alone), and the exporter says
//! what it waits for, on stderr and in `measurement_waiting_info`.
#![cfg(all(feature = "serve", target_os = "linux"))]

use std::time::{Duration, Instant};

use support::FakeVariant;

use crate::util::serve::{Server, has_series, value};

const GIB: u64 = 1 << 30;

fn h200(extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "free": {},
            "compute_processes": [{{"pid": 4242, "used": {GIB}}}]}}]{extra}}}"#,
        143_771_u64 << 20,
        100 * GIB
    )
}

/// Scrapes of a stuck exporter: the first answers within the budget (5 s), the next at once
/// (the stalled measurement is not waited for again), with the device's figures, not a
/// success, naming `on` in its waiting series and on stderr.
fn stuck_scrape(server: &Server, on: &str) {
    let t = Instant::now();
    let first = server.get("/metrics").body;
    let took = t.elapsed();
    assert!(took < Duration::from_secs(8), "the scrape took {took:?}");
    assert_eq!(
        value(&first, "hypomnesis_scrape_success"),
        Some("0".into()),
        "{first}"
    );
    std::thread::sleep(Duration::from_millis(1100));
    let t = Instant::now();
    let body = server.get("/metrics").body;
    let again = t.elapsed();
    eprintln!("scrapes of a stuck measurement: the first {took:?}, the next {again:?}");
    assert!(
        again < Duration::from_secs(2),
        "the next scrape took {again:?}"
    );
    assert_eq!(
        value(&body, "hypomnesis_scrape_success"),
        Some("0".into()),
        "{body}"
    );
    assert!(
        has_series(&body, "hypomnesis_gpu_memory_total_bytes"),
        "the device's figures do not wait on a process: {body}"
    );
    assert_eq!(
        value(&body, "hypomnesis_gpu_devices"),
        Some("1".into()),
        "{body}"
    );
    let waiting: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("hypomnesis_measurement_waiting_info{"))
        .collect();
    assert!(
        waiting.iter().any(|l| l.contains(on)),
        "{on} in {waiting:?}\n{body}"
    );
    let err = server.stderr_with("a measurement has run", Duration::from_secs(5));
    assert!(
        err.contains("hmn serve: a measurement has run") && err.contains(on),
        "{err}"
    );
}

#[test]
fn a_fifo_as_a_process_status_holds_back_no_device_figure() {
    let root = std::env::temp_dir().join(format!("hmn-serve-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("4242")).unwrap();
    let fifo = root.join("4242/status");
    support::mkfifo(&fifo);
    let server = Server::start(
        FakeVariant::Modern,
        &h200(""),
        &["--procfs", root.to_str().unwrap()],
    );
    stuck_scrape(&server, &fifo.display().to_string());
    drop(server);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_process_list_call_that_does_not_return_holds_back_no_device_figure() {
    let slow = [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetComputeRunningProcesses",
    ]
    .map(|f| format!(r#"{{"function": "{f}", "ms": 600000}}"#))
    .join(", ");
    let server = Server::start(
        FakeVariant::Modern,
        &h200(&format!(r#", "slow": [{slow}]"#)),
        &[],
    );
    stuck_scrape(&server, "nvmlDeviceGetComputeRunningProcesses");
}

/// A kubelet that takes connections and never answers: the exporter asks it in the
/// background, so only a scrape before its first answer waits (the call's 2 s deadline); the
/// others answer at once with the last answer (here: down) and its age.
#[test]
fn a_hung_kubelet_stays_off_the_scrape_path() {
    use std::os::unix::net::UnixListener;
    let dir = std::env::temp_dir().join(format!("hmn-hung-kubelet-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("kubelet.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let server = Server::start(
        FakeVariant::Modern,
        &h200(""),
        &[
            "--pod-resources-socket",
            socket.to_str().unwrap(),
            "--min-interval",
            "100ms",
        ],
    );
    let first = server.get("/metrics").body;
    assert!(
        has_series(&first, "hypomnesis_gpu_memory_total_bytes"),
        "{first}"
    );
    let mut took = Vec::new();
    let mut body = String::new();
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        body = server.get("/metrics").body;
        took.push(t.elapsed());
    }
    eprintln!("scrapes with a hung kubelet, after the first: {took:?}");
    assert!(
        took.iter().all(|t| *t < Duration::from_millis(1500)),
        "a scrape waited on the kubelet: {took:?}"
    );
    assert_eq!(
        value(&body, "hypomnesis_pod_resources_up"),
        Some("0".into()),
        "{body}"
    );
    assert_eq!(
        value(&body, "hypomnesis_scrape_success"),
        Some("1".into()),
        "{body}"
    );
    assert!(
        value(&body, "hypomnesis_pod_resources_age_seconds").is_some(),
        "{body}"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(dir);
}
