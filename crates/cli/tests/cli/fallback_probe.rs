//! `hmn serve` and the `nvidia-smi` fallback, with a counting `nvidia-smi` on `PATH`
//! (`util::smi`): while the fake NVML answers, fresh scrapes run it not at all (its health is
//! probed at start and every `--fallback-probe-interval`), a failing one is in
//! `up{source="nvidia-smi"}` and not in `scrape_success`; where NVML fails, each measurement
//! uses it, as before.
#![cfg(all(feature = "serve", target_os = "linux"))]

use std::time::{Duration, Instant};

use crate::util::serve::{Server, serve_command, value};
use crate::util::smi::{CountingSmi, Smi};
use support::FakeVariant;

const MIB: u64 = 1 << 20;

/// A fake NVML whose init fails every time (the library tries again each second).
const NVML_NEVER_STARTS: &str =
    r#"{"devices": [], "fail": [{"function": "nvmlInit_v2", "code": 9, "times": 1000000}]}"#;

/// One H200, no process.
fn h200() -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "GPU-5ca1e000-0000-4000-8000-000000000000",
            "total": {}, "reserved": {}, "free": {}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        100_000 * MIB
    )
}

/// `hmn serve --min-interval 1ms <args>` against the fake NVML answering `h200()`, with `smi`
/// the only thing on `PATH`.
fn serve(smi: &CountingSmi, args: &[&str]) -> Server {
    let mut all = vec!["--listen", "127.0.0.1:0", "--min-interval", "1ms"];
    all.extend_from_slice(args);
    let mut c = serve_command(FakeVariant::Modern, &h200(), &all);
    c.env("PATH", &smi.dir);
    Server::spawn(c)
}

/// The body of one scrape.
fn scrape(server: &Server) -> String {
    let r = server.get("/metrics");
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// A scrape once the fallback's probe has answered (its `up` series is there), within 20 s.
fn scrape_once_probed(server: &Server) -> String {
    let started = Instant::now();
    loop {
        let body = scrape(server);
        if value(&body, r#"hypomnesis_up{source="nvidia-smi"}"#).is_some() {
            return body;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no probe of nvidia-smi within 20 s:\n{body}\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn measurements(body: &str) -> u64 {
    value(body, "hypomnesis_measurements_total")
        .unwrap()
        .parse()
        .unwrap()
}

fn probe_age(body: &str) -> f64 {
    value(
        body,
        r#"hypomnesis_source_probe_age_seconds{source="nvidia-smi"}"#,
    )
    .unwrap_or_else(|| panic!("no probe age:\n{body}"))
    .parse()
    .unwrap()
}

/// `n` scrapes, each a fresh measurement (the last one is more than `--min-interval` old);
/// the body of the last.
fn fresh_scrapes(server: &Server, n: u64) -> String {
    let before = measurements(&scrape(server));
    let mut body = String::new();
    for _ in 0..n {
        std::thread::sleep(Duration::from_millis(2));
        body = scrape(server);
    }
    assert_eq!(measurements(&body), before + n, "each scrape measured");
    body
}

#[test]
fn a_hundred_fresh_scrapes_run_nvidia_smi_at_most_once() {
    let smi = CountingSmi::new("hundred", Smi::Answers);
    let server = serve(&smi, &[]);
    let first = scrape_once_probed(&server);
    assert_eq!(
        value(&first, r#"hypomnesis_up{source="nvidia-smi"}"#).as_deref(),
        Some("1"),
        "{first}"
    );
    let body = fresh_scrapes(&server, 100);
    let runs = smi.runs();
    assert_eq!(
        runs.len(),
        1,
        "one probe at start, nothing per scrape: {runs:?}"
    );
    assert!(runs[0].starts_with("--query-gpu="), "{runs:?}");
    assert_eq!(
        value(&body, "hypomnesis_scrape_success").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvml"}"#).as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvidia-smi"}"#).as_deref(),
        Some("1")
    );
    // The figures are NVML's; the probe's age grows with time, not with the scrapes.
    assert!(body.contains(r#"source="nvml""#), "{body}");
    let age = probe_age(&body);
    assert!((0.0..60.0).contains(&age), "{age}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(probe_age(&scrape(&server)) >= age + 0.3, "the age grows");
}

#[test]
fn a_failing_nvidia_smi_while_nvml_answers_is_in_its_up_alone() {
    let smi = CountingSmi::new("fails", Smi::Fails);
    let server = serve(&smi, &[]);
    scrape_once_probed(&server);
    let body = fresh_scrapes(&server, 20);
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvidia-smi"}"#).as_deref(),
        Some("0"),
        "{body}"
    );
    assert_eq!(
        value(&body, "hypomnesis_scrape_success").as_deref(),
        Some("1"),
        "{body}"
    );
    assert_eq!(smi.runs().len(), 1, "{:?}", smi.runs());
}

#[test]
fn the_fallback_is_probed_again_at_its_interval() {
    let smi = CountingSmi::new("interval", Smi::Answers);
    let server = serve(&smi, &["--fallback-probe-interval", "200ms"]);
    scrape_once_probed(&server);
    // No scrape meanwhile: the probes keep their own time.
    std::thread::sleep(Duration::from_millis(1100));
    let runs = smi.runs().len();
    assert!((3..=8).contains(&runs), "{runs} probes in about 1.1 s");
    let age = probe_age(&scrape(&server));
    assert!(
        age < 1.0,
        "a probe at most an interval (and a run) old: {age}"
    );
}

/// NVML fails (its library refuses to start, however often tried): each measurement takes the
/// figures from nvidia-smi, and its health with them.
#[test]
fn where_nvml_fails_the_fallback_measures_each_time() {
    let smi = CountingSmi::new("nvml-fails", Smi::Answers);
    let mut c = serve_command(
        FakeVariant::Modern,
        NVML_NEVER_STARTS,
        &["--listen", "127.0.0.1:0", "--min-interval", "1ms"],
    );
    c.env("PATH", &smi.dir);
    let server = Server::spawn(c);
    let first = scrape(&server);
    let runs_before = smi.runs().len();
    let body = fresh_scrapes(&server, 5);
    let measured = measurements(&body) - measurements(&first);
    let runs = smi.runs().len() - runs_before;
    assert!(
        runs >= usize::try_from(measured).unwrap(),
        "{runs} runs for {measured} measurements"
    );
    let gpu_info = body
        .lines()
        .find(|l| l.starts_with("hypomnesis_gpu_info{"))
        .unwrap_or_else(|| panic!("no GPU:\n{body}"));
    assert!(gpu_info.contains(r#"source="nvidia-smi""#), "{gpu_info}");
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvml"}"#).as_deref(),
        Some("0")
    );
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvidia-smi"}"#).as_deref(),
        Some("1"),
        "{body}"
    );
    // Probed by the measurement itself: a moment old.
    assert!(probe_age(&body) < 5.0, "{body}");
}

/// NVML and nvidia-smi both fail: the fallback, needed, fails the scrape.
#[test]
fn where_nvml_fails_a_failing_fallback_fails_the_scrape() {
    let smi = CountingSmi::new("both-fail", Smi::Fails);
    let mut c = serve_command(
        FakeVariant::Modern,
        NVML_NEVER_STARTS,
        &["--listen", "127.0.0.1:0", "--min-interval", "1ms"],
    );
    c.env("PATH", &smi.dir);
    let server = Server::spawn(c);
    let body = fresh_scrapes(&server, 3);
    assert_eq!(
        value(&body, r#"hypomnesis_up{source="nvidia-smi"}"#).as_deref(),
        Some("0"),
        "{body}"
    );
    assert_eq!(
        value(&body, "hypomnesis_scrape_success").as_deref(),
        Some("0"),
        "{body}"
    );
}

/// With NVML down and an `nvidia-smi` that takes 200 ms a run, the probe thread and the
/// measurements never run it at the same moment (the stand-in logs a run that starts while
/// another is under way); before, the probe at start, the first measurement and the devices'
/// own measurement ran it together, and the probe thread's runs fell among the measurements'.
#[test]
fn nvidia_smi_runs_one_at_a_time_where_nvml_is_down() {
    assert_one_run_at_a_time(200, Duration::from_secs(8));
}

/// The same with runs of 1.5 s: the first measurement (several runs) is still under way when
/// the scrape's half budget has passed and the devices are measured alone. That measurement
/// ran `nvidia-smi` beside the first one's; the library now runs it one at a time for the
/// whole process.
#[test]
fn a_slow_first_measurement_and_the_devices_alone_never_run_it_together() {
    assert_one_run_at_a_time(1500, Duration::from_secs(9));
}

fn assert_one_run_at_a_time(run_ms: u32, scraping: Duration) {
    let smi = CountingSmi::new("alone", Smi::SleepsAlone(run_ms));
    let mut c = serve_command(
        FakeVariant::Modern,
        NVML_NEVER_STARTS,
        &[
            "--listen",
            "127.0.0.1:0",
            "--min-interval",
            "1ms",
            "--fallback-probe-interval",
            "2s",
        ],
    );
    c.env("PATH", &smi.dir);
    let server = Server::spawn(c);
    let started = Instant::now();
    while started.elapsed() < scraping {
        let _ = server.get("/metrics");
        std::thread::sleep(Duration::from_millis(100));
    }
    let runs = smi.runs();
    assert!(runs.len() >= 3, "{runs:?}");
    assert!(
        !runs.iter().any(|r| r.starts_with("OVERLAP")),
        "nvidia-smi ran twice at once: {runs:?}"
    );
}
