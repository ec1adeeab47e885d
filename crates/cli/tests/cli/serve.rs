//! `hmn serve` end to end: the built `hmn` against the fake NVML, spoken to over plain TCP
//! (HTTP/1.1 by hand): the series and their values, caching across concurrent scrapes, stalled
//! clients, bad requests, the loopback rule, SIGTERM/SIGINT, `promtool check metrics`, and a
//! real Prometheus scraping two exporters.
//!
//! `promtool` and `prometheus` are used when on PATH; without them those tests print
//! `skipped: …` and pass, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1`, which makes them fail.
#![cfg(all(feature = "serve", target_os = "linux"))]

use crate::util::serve as serving;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
#[cfg(feature = "debug-output")]
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serving::{Prometheus, Reply, Server, exchange, get, has_series, serve_command, value};
use support::{FakeVariant, external};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const GHOST: u32 = 4_194_400;

fn h200(extra: &str) -> String {
    format!(
        r#"{{"name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "total": {}, "reserved": {}, "free": {} {extra}}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB
    )
}

const H200_LABELS: &str = r#"gpu="0",uuid="GPU-11111111-2222-3333-4444-555555555555""#;
const H200_UUID: &str = "GPU-11111111-2222-3333-4444-555555555555";

/// The value of the one `name{…}` series whose labels begin with `head` (the labels after it,
/// such as a process's container, depend on where the tests run).
fn value_starting(text: &str, name: &str, head: &str) -> Option<String> {
    let prefix = format!("{name}{{{head}");
    let mut found = text.lines().filter(|l| l.starts_with(&prefix));
    let line = found.next()?;
    assert!(found.next().is_none(), "more than one {prefix}…:\n{text}");
    line.rsplit(' ').next().map(String::from)
}

/// Processes with chosen names (copies of `sleep`, whose file name becomes their `comm`),
/// killed when dropped.
struct Named {
    children: Vec<Child>,
    dir: PathBuf,
}

impl Named {
    fn spawn(names: &[&str]) -> Self {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hmn-serve-named-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .expect("sleep");
        let children = names
            .iter()
            .map(|name| {
                let exe = dir.join(name);
                std::fs::copy(sleep, &exe).unwrap();
                Command::new(&exe).arg("600").spawn().unwrap()
            })
            .collect();
        // Let exec finish, so that /proc/<pid>/comm has the new name.
        std::thread::sleep(Duration::from_millis(200));
        Self { children, dir }
    }

    fn pid(&self, i: usize) -> u32 {
        self.children[i].id()
    }
}

impl Drop for Named {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two GPUs: an H200 with three processes (`python3`, one named `say "hi"`, and one in another
/// PID namespace), and one whose memory cannot be read.
fn scenario(named: &Named) -> String {
    format!(
        r#"{{"devices": [{}, {{"name": "Broken", "memory_error": 999}}]}}"#,
        h200(&format!(
            r#", "compute_processes": [{{"pid": {}, "used": {}}}, {{"pid": {}, "used": {}}},
                                        {{"pid": {GHOST}, "used": {}}}]"#,
            named.pid(0),
            2 * GIB,
            named.pid(1),
            512 * MIB,
            GIB
        ))
    )
}

/// A scenario for the tests that do not look at processes.
fn plain() -> String {
    format!(
        r#"{{"devices": [{}]}}"#,
        h200(&format!(
            r#", "compute_processes": [{{"pid": {GHOST}, "used": {GIB}}}]"#
        ))
    )
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn metrics_carry_the_scenario() {
    let named = Named::spawn(&["python3", r#"say "hi""#]);
    let server = Server::start(FakeVariant::Modern, &scenario(&named), &[]);
    let r = server.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let t = &r.body;
    assert!(t.ends_with("\n# EOF\n"), "{t}");
    let device = |name: &str| {
        value(
            t,
            &format!("hypomnesis_gpu_memory_{name}_bytes{{{H200_LABELS}}}"),
        )
    };
    let total = 143_771 * MIB;
    let free = 110_796 * MIB;
    assert_eq!(device("total"), Some(total.to_string()), "{t}");
    assert_eq!(device("free"), Some(free.to_string()), "{t}");
    // Used excludes the reservation, as DCGM and nvidia-smi count it: the four add up.
    assert_eq!(
        device("used"),
        Some((total - 614 * MIB - free).to_string()),
        "{t}"
    );
    assert_eq!(device("reserved"), Some((614 * MIB).to_string()), "{t}");
    // The unreadable GPU has no memory series, and is counted and named.
    assert!(!t.contains(r#"_bytes{gpu="1""#), "{t}");
    assert!(
        t.contains(r#"hypomnesis_gpu_unreadable{gpu="1",kind="#),
        "{t}"
    );
    assert_eq!(
        value(t, "hypomnesis_gpu_read_errors"),
        Some("1".into()),
        "{t}"
    );
    assert_eq!(value(t, "hypomnesis_gpu_devices"), Some("2".into()), "{t}");
    assert_eq!(
        value(t, "hypomnesis_scrape_success"),
        Some("0".into()),
        "{t}"
    );
    // Process series: the GPU's index and uuid, the pid, the process's name as `process` and
    // its owner as `user` (then its container where the tests run in one).
    let process = |pid: u32, rest: &str| {
        value_starting(
            t,
            "hypomnesis_gpu_process_memory_bytes",
            &format!(r#"gpu="0",uuid="{H200_UUID}",pid="{pid}"{rest}"#),
        )
    };
    let me = hypomnesis::process_context(std::process::id())
        .user
        .unwrap();
    assert_eq!(
        process(named.pid(0), &format!(r#",process="python3",user="{me}""#)),
        Some((2 * GIB).to_string()),
        "{t}"
    );
    assert_eq!(
        process(
            named.pid(1),
            &format!(r#",process="say \"hi\"",user="{me}""#)
        ),
        Some((512 * MIB).to_string()),
        "{t}"
    );
    // Outside this PID namespace: no name, no owner, and no empty labels for them; the type
    // of its context, as every row's.
    assert_eq!(
        value(
            t,
            &format!(
                r#"hypomnesis_gpu_process_memory_bytes{{gpu="0",uuid="{H200_UUID}",pid="{GHOST}",type="C"}}"#
            )
        ),
        Some(GIB.to_string()),
        "{t}"
    );
    assert!(!t.contains(r#"="""#), "no empty label values: {t}");
    assert_eq!(
        value(
            t,
            &format!(
                r#"hypomnesis_gpu_info{{gpu="0",uuid="{H200_UUID}",model="NVIDIA H200",pci_bus_id="00000000:01:00.0",driver="590.48.01",vendor="nvidia",source="nvml"}}"#
            )
        ),
        Some("1".into()),
        "{t}"
    );
    assert_eq!(
        value(t, r#"hypomnesis_up{source="nvml"}"#),
        Some("1".into()),
        "{t}"
    );
    // Sources this host does not have (no nvidia-smi on PATH, no AMD/Intel card): no series,
    // so `up == 0` alerts only on a source that is there and fails.
    assert_eq!(
        value(t, r#"hypomnesis_up{source="nvidia-smi"}"#),
        None,
        "{t}"
    );
    assert_eq!(value(t, r#"hypomnesis_up{source="drm"}"#), None, "{t}");
    assert!(
        value(t, "hypomnesis_scrape_duration_seconds").is_some(),
        "{t}"
    );
    assert_eq!(
        value(t, "hypomnesis_measurements_total"),
        Some("1".into()),
        "{t}"
    );

    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}

#[test]
fn measurements_are_cached_for_the_min_interval() {
    let server = Server::start(FakeVariant::Modern, &plain(), &["--min-interval", "2s"]);
    let first = server.get("/metrics");
    assert_eq!(
        value(&first.body, "hypomnesis_measurements_total"),
        Some("1".into())
    );
    // Within --min-interval the same measurement is served; after it, a new one.
    let again = server.get("/metrics");
    assert_eq!(
        value(&again.body, "hypomnesis_measurements_total"),
        Some("1".into())
    );
    std::thread::sleep(Duration::from_millis(2300));
    let later = server.get("/metrics");
    assert_eq!(
        value(&later.body, "hypomnesis_measurements_total"),
        Some("2".into())
    );
}

#[test]
fn head_gets_the_headers_only() {
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    let head = exchange(
        server.addr,
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(head.status, 200);
    assert_eq!(head.body, "");
}

/// `--max-process-series`: the largest holders only, and how many were left out.
#[test]
fn gzip_when_the_scraper_asks_for_it() {
    let server = Server::start(FakeVariant::Modern, &plain(), &["--min-interval", "1h"]);
    let plain_reply = server.get("/metrics");
    assert_eq!(plain_reply.header("content-encoding"), None);
    assert_eq!(plain_reply.header("vary"), Some("accept, accept-encoding"));
    // Prometheus's own header, and a list where gzip is one of several.
    for asked in [
        "Accept-Encoding: gzip",
        "Accept-Encoding: br;q=1.0, gzip;q=0.8, *;q=0.1",
        "Accept-Encoding: *",
    ] {
        let r = get(server.addr, "/metrics", &[asked]);
        assert_eq!(r.status, 200, "{asked}");
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{asked}");
        let mut text = String::new();
        flate2::read::GzDecoder::new(r.bytes.as_slice())
            .read_to_string(&mut text)
            .unwrap();
        // The same measurement (one hour's cache): the same text, byte for byte.
        assert_eq!(text, plain_reply.body, "{asked}");
        assert!(
            r.bytes.len() < text.len() / 2,
            "{} of {}",
            r.bytes.len(),
            text.len()
        );
    }
    // Refused or not offered: plain text.
    for asked in [
        "Accept-Encoding: gzip;q=0",
        "Accept-Encoding: br",
        "Accept-Encoding: identity",
    ] {
        let r = get(server.addr, "/metrics", &[asked]);
        assert_eq!(r.header("content-encoding"), None, "{asked}");
        assert_eq!(r.body, plain_reply.body, "{asked}");
    }
    // The classic text format, compressed too.
    let r = get(
        server.addr,
        "/metrics",
        &["Accept: text/plain; version=0.0.4", "Accept-Encoding: gzip"],
    );
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(r.bytes.as_slice())
        .read_to_string(&mut text)
        .unwrap();
    assert!(
        text.contains("hypomnesis_gpu_memory_total_bytes{"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
}

#[test]
fn check_says_whether_a_server_answers() {
    let check = |listen: &str| {
        let out = crate::util::hmn::hmn()
            .args(["serve", "--check", "--listen", listen])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    let port = server.addr.port();
    assert_eq!(
        check(&format!("127.0.0.1:{port}")),
        (Some(0), String::new())
    );
    // What a container listening on every address checks.
    assert_eq!(check(&format!("0.0.0.0:{port}")), (Some(0), String::new()));
    // Nothing listening there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (code, said) = check(&closed.to_string());
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.starts_with(&format!("hmn: no server answering on {closed}: ")),
        "{said}"
    );
    // Something that is not an HTTP server.
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = other.local_addr().unwrap();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = other.accept() {
            // Read the request first: closing with it unread would reset the connection.
            let _ = s.read(&mut [0; 512]);
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        }
    });
    let (code, said) = check(&addr.to_string());
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(
        said,
        format!("hmn: what answered on {addr} is not an HTTP server\n")
    );
    drop(server);
    assert_eq!(check(&format!("127.0.0.1:{port}")).0, Some(1));
}

#[test]
fn process_series_are_capped() {
    let scenario = format!(
        r#"{{"devices": [{}]}}"#,
        h200(&format!(
            r#", "compute_processes": [{{"pid": {GHOST}, "used": {GIB}}}, {{"pid": {}, "used": {MIB}}}]"#,
            GHOST + 1
        ))
    );
    let server = Server::start(
        FakeVariant::Modern,
        &scenario,
        &["--max-process-series", "1"],
    );
    let t = server.get("/metrics").body;
    let series: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_process_memory_bytes{"))
        .collect();
    assert_eq!(series.len(), 1, "{t}");
    assert!(
        series[0].contains(&format!(r#"pid="{GHOST}""#)),
        "the 1 GiB holder: {t}"
    );
    assert_eq!(
        value(&t, "hypomnesis_gpu_process_series_dropped"),
        Some("1".into()),
        "{t}"
    );
    let off = Server::start(
        FakeVariant::Modern,
        &scenario,
        &["--max-process-series", "0"],
    );
    let t = off.get("/metrics").body;
    assert!(
        !has_series(&t, "hypomnesis_gpu_process_memory_bytes"),
        "{t}"
    );
    assert_eq!(
        value(&t, "hypomnesis_gpu_process_series_dropped"),
        Some("2".into()),
        "{t}"
    );
}

/// A node whose driver fails entirely (NVML present, its init refused) is not healthy: the
/// source's `up` is 0 and the scrape is not a success, though no GPU could be counted.
#[test]
fn a_node_whose_driver_fails_is_not_a_successful_scrape() {
    let server = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}], "fail": [{{"function": "nvmlInit_v2", "code": 9}}]}}"#,
            h200("")
        ),
        &[],
    );
    let t = server.get("/metrics").body;
    assert_eq!(
        value(&t, r#"hypomnesis_up{source="nvml"}"#),
        Some("0".into()),
        "{t}"
    );
    assert_eq!(
        value(&t, "hypomnesis_scrape_success"),
        Some("0".into()),
        "{t}"
    );
    assert!(!has_series(&t, "hypomnesis_gpu_memory_total_bytes"), "{t}");
    // A driver that is not loaded counts no GPU (0.2.x's "no GPU"), while up and
    // scrape_success say the source failed.
    assert_eq!(value(&t, "hypomnesis_gpu_devices"), Some("0".into()), "{t}");
    // A library that cannot start (a version mismatch): the GPUs could not be counted, so no
    // count series (an alert on its absence fires too).
    let server = Server::start(
        FakeVariant::Modern,
        &format!(
            r#"{{"devices": [{}], "fail": [{{"function": "nvmlInit_v2", "code": 18}}]}}"#,
            h200("")
        ),
        &[],
    );
    let t = server.get("/metrics").body;
    assert_eq!(
        value(&t, "hypomnesis_scrape_success"),
        Some("0".into()),
        "{t}"
    );
    assert_eq!(value(&t, "hypomnesis_gpu_devices"), None, "{t}");
}

#[test]
fn pre_r510_driver_has_no_reserved_series() {
    let server = Server::start(
        FakeVariant::PreR510,
        &format!(r#"{{"devices": [{}]}}"#, h200("")),
        &[],
    );
    let t = server.get("/metrics").body;
    assert!(
        !has_series(&t, "hypomnesis_gpu_memory_reserved_bytes"),
        "{t}"
    );
    assert_eq!(
        value(
            &t,
            &format!("hypomnesis_gpu_memory_total_bytes{{{H200_LABELS}}}")
        ),
        Some((143_771 * MIB).to_string()),
        "{t}"
    );
    assert!(has_series(&t, "hypomnesis_gpu_memory_used_bytes"), "{t}");
    assert_eq!(
        value(&t, "hypomnesis_scrape_success"),
        Some("1".into()),
        "{t}"
    );
    assert_eq!(
        value(&t, "hypomnesis_gpu_read_errors"),
        Some("0".into()),
        "{t}"
    );
    assert!(
        !has_series(&t, "hypomnesis_gpu_process_memory_bytes"),
        "{t}"
    );
}

#[test]
fn other_paths_and_bad_requests() {
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    let r = server.get("/nope");
    assert_eq!(r.status, 404, "{r:?}");
    let r = server.get("/metrics/extra");
    assert_eq!(r.status, 404, "{r:?}");
    let r = server.get("/");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains("/metrics"), "{r:?}");
    let r = exchange(server.addr, b"\x00\x01 garbage \xff\r\n\r\n");
    assert_eq!(r.status, 400, "{r:?}");
    let r = exchange(server.addr, b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n");
    assert_eq!(r.status, 400, "{r:?}");
    let r = exchange(
        server.addr,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 405, "{r:?}");
    // The server is still fine.
    assert_eq!(server.get("/metrics").status, 200);
}

#[test]
fn concurrent_scrapes_share_one_measurement() {
    // A long interval, so that all 64 scrapes surely fall in one, even on a slow machine.
    let server = Server::start(FakeVariant::Modern, &plain(), &["--min-interval", "30s"]);
    let addr = server.addr;
    let barrier = Arc::new(Barrier::new(64));
    let scrapes: Vec<_> = (0..64)
        .map(|_| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                get(addr, "/metrics", &[])
            })
        })
        .collect();
    let replies: Vec<Reply> = scrapes.into_iter().map(|h| h.join().unwrap()).collect();
    for r in &replies {
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            value(&r.body, "hypomnesis_measurements_total"),
            Some("1".into()),
            "{}",
            r.body
        );
        assert_eq!(r.body, replies[0].body);
    }
}

#[test]
fn a_stalled_client_does_not_block_others() {
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    // One connects and says nothing; another sends half a request and stops.
    let _silent = TcpStream::connect(server.addr).unwrap();
    let mut half = TcpStream::connect(server.addr).unwrap();
    half.write_all(b"GET /metr").unwrap();
    let started = Instant::now();
    let r = server.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(r.body.contains("hypomnesis_up"), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "a scrape took {:?} behind stalled clients",
        started.elapsed()
    );
}

/// A scrape with its own deadline: the status code, or `None` when no answer came within
/// `limit`.
fn scrape_within(addr: SocketAddr, limit: Duration) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.set_write_timeout(Some(limit)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut head = [0_u8; 12];
    s.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// Slowloris: 260 clients (more than the 256 connections served at once) each send part of a
/// request and then a byte a second. Scrapes are still answered at once, and every trickling
/// client is cut off at its head deadline (5 s) instead of being held open by its bytes.
#[test]
fn slow_clients_cannot_starve_a_scrape() {
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    let mut slow: Vec<TcpStream> = (0..260)
        .map(|_| {
            let mut s = TcpStream::connect(server.addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nX-Slow: ").unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    let mut answers = Vec::new();
    while started.elapsed() < Duration::from_secs(7) {
        for s in &mut slow {
            let _ = s.write_all(b"x");
        }
        let t = Instant::now();
        let status = scrape_within(server.addr, Duration::from_secs(1));
        answers.push((status, t.elapsed()));
        std::thread::sleep(Duration::from_millis(900));
    }
    eprintln!("scrapes behind 260 slow clients: {answers:?}");
    for (status, took) in &answers {
        assert_eq!(
            *status,
            Some(200),
            "a scrape behind 260 slow clients: {answers:?}"
        );
        assert!(*took < Duration::from_secs(1), "{answers:?}");
    }
    // By now (7 s) every trickler has been closed: a read ends (EOF or reset) at once.
    let mut still_open = 0;
    for s in &mut slow {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut b = [0_u8; 64];
        if let Err(e) = s.read(&mut b)
            && matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
        {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "trickling clients still open after 7 s");
}

/// A client that shuts its sending side after the request (HTTP/1.0 tools do) is answered.
#[test]
fn a_half_closed_request_is_answered() {
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    for request in [
        &b"GET /metrics HTTP/1.0\r\n\r\n"[..],
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(request).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("HTTP/1."), "{text:?}");
        assert!(text.contains(" 200 OK"), "{text:?}");
        assert!(text.contains("hypomnesis_up"), "{text:?}");
    }
}

/// The nvidia-smi fallback with GPU 2 of four fallen off the bus: the others' series, the lost
/// one named, and the scrape marked unsuccessful.
#[test]
fn a_lost_gpu_of_the_nvidia_smi_fallback_shows() {
    let mut c = crate::util::hmn::hmn();
    c.args(["serve", "--listen", "127.0.0.1:0"])
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .env("HYPOMNESIS_NVIDIA_SMI", support::fake_smi())
        .env(
            "FAKE_SMI_CAPTURE",
            support::capture("linux-x86_64__nvidia-l40s__595.80.txt"),
        )
        .env("FAKE_SMI_MODE", "lost-gpu")
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let server = Server::spawn(c);
    let r = server.get("/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(
        value(&r.body, "hypomnesis_gpu_devices").as_deref(),
        Some("4")
    );
    assert_eq!(
        value(
            &r.body,
            r#"hypomnesis_gpu_unreadable{gpu="2",kind="gpu_lost"}"#
        )
        .as_deref(),
        Some("1"),
        "{}",
        r.body
    );
    assert_eq!(
        value(&r.body, "hypomnesis_scrape_success").as_deref(),
        Some("0")
    );
    for gpu in ["0", "1", "3"] {
        assert!(
            r.body
                .contains(&format!("hypomnesis_gpu_memory_total_bytes{{gpu=\"{gpu}\"")),
            "{}",
            r.body
        );
    }
    assert!(
        !r.body
            .contains("hypomnesis_gpu_memory_total_bytes{gpu=\"2\"")
    );
}

/// A stop while a measurement waits on a hung nvidia-smi: hmn stops, and the nvidia-smi it
/// started does not outlive it.
#[cfg(target_os = "linux")]
#[test]
fn stopping_in_the_middle_of_a_hung_nvidia_smi_leaves_none_running() {
    let pids = std::env::temp_dir().join(format!("hmn-serve-smi-pids-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&pids);
    std::fs::create_dir_all(&pids).unwrap();
    let mut c = crate::util::hmn::hmn();
    c.args(["serve", "--listen", "127.0.0.1:0"])
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .env("HYPOMNESIS_NVIDIA_SMI", support::fake_smi())
        .env("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "60s")
        .env(
            "FAKE_SMI_CAPTURE",
            support::capture("linux-x86_64__nvidia-l40s__595.80.txt"),
        )
        .env("FAKE_SMI_MODE", "hang")
        .env("FAKE_SMI_PID_DIR", &pids)
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut server = Server::spawn(c);
    let addr = server.addr;
    std::thread::spawn(move || {
        let _ = scrape_within(addr, Duration::from_secs(60));
    });
    let started = Instant::now();
    let running = || support::pids_in(&pids);
    while running().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "nvidia-smi never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (took, _) = stop(&mut server, "TERM", Duration::from_secs(20));
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    for pid in running() {
        assert!(
            !support::still_running_after(pid, Duration::from_secs(2)),
            "nvidia-smi {pid} outlived hmn serve (all: {:?})",
            running()
        );
    }
    let _ = std::fs::remove_dir_all(&pids);
}

#[test]
fn non_loopback_listen_needs_allow_remote() {
    let mut c = serve_command(FakeVariant::Modern, &plain(), &["--listen", "0.0.0.0:0"]);
    let out = c.output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not a loopback address"), "{err}");
    assert!(err.contains("--allow-remote"), "{err}");

    let server = Server::spawn(serve_command(
        FakeVariant::Modern,
        &plain(),
        &["--listen", "0.0.0.0:0", "--allow-remote"],
    ));
    let err = server.stderr();
    assert!(
        err.starts_with("hmn: warning: serving on 0.0.0.0:0"),
        "{err}"
    );
    assert!(
        err.contains("hmn: serving metrics on http://0.0.0.0:"),
        "{err}"
    );
    assert_eq!(server.get("/metrics").status, 200);
}

/// The library's `debug-output` lines are written from the measuring thread: stderr must not
/// be held locked by the main thread meanwhile, or the scrape (and every later one) hangs.
#[cfg(feature = "debug-output")]
#[test]
fn library_debug_output_does_not_hang_a_scrape() {
    // NVML says "uninitialised" once: the library re-initialises and logs it.
    let scenario = format!(
        r#"{{"devices": [{}],
            "fail": [{{"function": "nvmlDeviceGetCount_v2", "code": 1, "times": 1}}]}}"#,
        h200("")
    );
    let server = Server::start(FakeVariant::Modern, &scenario, &[]);
    let addr = server.addr;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(get(addr, "/metrics", &[]));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("the scrape hung; stderr:\n{}", server.stderr()));
    assert_eq!(r.status, 200);
    assert_eq!(
        value(&r.body, "hypomnesis_scrape_success"),
        Some("1".into()),
        "{}",
        r.body
    );
    // The line was written before the scrape answered (the re-initialisation it tells of came
    // first): what is waited for here is only the test's reader of the pipe, which a loaded
    // machine may leave unscheduled for seconds. The wait ends with the line, so its limit
    // only bounds a failure (once 5 s, which a full `cargo test` beside other work outlasted).
    let said = server.stderr_with("[hypomnesis] NVML:", Duration::from_secs(120));
    assert!(said.contains("[hypomnesis] NVML:"), "{said}");
}

/// Sends `signal` and waits for the exit: status 0 within `limit`, and the last stderr line.
fn stop(server: &mut Server, signal: &str, limit: Duration) -> (Duration, String) {
    let started = Instant::now();
    server.signal(signal);
    let status = server
        .wait_exit(limit)
        .unwrap_or_else(|| panic!("hmn serve did not stop on SIG{signal}: {}", server.stderr()));
    let took = started.elapsed();
    // The one rule of every hmn command: a stop signal's 128 + n (issue 24, point 6).
    let n = match signal {
        "INT" => 2,
        "HUP" => 1,
        _ => 15,
    };
    assert_eq!(status.code(), Some(128 + n), "{}", server.stderr());
    // The reader thread may still be draining the pipe.
    let until = Instant::now() + Duration::from_secs(5);
    while !server.stderr().contains(": stopped") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = server.stderr();
    (took, err.lines().last().unwrap_or_default().to_string())
}

#[test]
fn sigterm_and_sigint_stop_it_promptly() {
    for (signal, name) in [("TERM", "SIGTERM"), ("INT", "SIGINT")] {
        let mut server = Server::start(FakeVariant::Modern, &plain(), &[]);
        // An idle connection, and one kept alive after a scrape, do not hold the stop up.
        let _idle = TcpStream::connect(server.addr).unwrap();
        let mut kept = TcpStream::connect(server.addr).unwrap();
        kept.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut first = [0_u8; 12];
        kept.read_exact(&mut first).unwrap();
        assert_eq!(&first, b"HTTP/1.1 200");
        let (took, last) = stop(&mut server, signal, Duration::from_secs(10));
        assert!(
            took < Duration::from_secs(3),
            "stopping on {name} took {took:?}"
        );
        assert_eq!(last, format!("hmn: {name}: stopped"));
    }
}

#[test]
fn a_half_sent_request_holds_the_stop_only_until_its_head_deadline() {
    let mut server = Server::start(FakeVariant::Modern, &plain(), &[]);
    let mut half = TcpStream::connect(server.addr).unwrap();
    half.write_all(b"GET /metr").unwrap();
    // The head has 5 s from the connection; the stop comes 1 s in, with 5 s of grace.
    std::thread::sleep(Duration::from_secs(1));
    let (took, last) = stop(&mut server, "TERM", Duration::from_secs(15));
    assert!(
        took < Duration::from_millis(4900),
        "the request's own deadline ended it before the grace did: {took:?}"
    );
    assert_eq!(last, "hmn: SIGTERM: stopped");
}

#[test]
fn promtool_accepts_the_metrics() {
    let Some(promtool) = external("promtool") else {
        return;
    };
    let server = Server::start(FakeVariant::Modern, &plain(), &[]);
    // promtool reads the Prometheus text format, which hmn serves to clients asking for it.
    let r = get(
        server.addr,
        "/metrics",
        &["Accept: text/plain; version=0.0.4"],
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(!r.body.contains("# EOF"), "{}", r.body);
    assert_eq!(
        value(&r.body, "hypomnesis_measurements_total"),
        Some("1".into())
    );
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(r.body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed ({}):\n{}{}\n--- input ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        r.body
    );
}

#[test]
fn prometheus_scrapes_two_exporters() {
    let Some(binary) = external("prometheus") else {
        return;
    };
    // 10 GiB used on one host, 20 GiB on the other.
    let host = |used_gib: u64| {
        format!(
            r#"{{"devices": [{{"name": "NVIDIA L40S", "total": {}, "free": {}}}]}}"#,
            48 * GIB,
            (48 - used_gib) * GIB
        )
    };
    let a = Server::start(FakeVariant::Modern, &host(10), &[]);
    let b = Server::start(FakeVariant::Modern, &host(20), &[]);
    let prometheus = Prometheus::start(&binary, &[a.addr, b.addr]);

    let query = "sum(hypomnesis_gpu_memory_used_bytes)";
    let expected = (30 * GIB).to_string();
    let until = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    loop {
        if let Some(v) = prometheus.api("query", Some(query)) {
            last = v["data"]["result"][0]["value"][1]
                .as_str()
                .map(String::from);
            if last.as_deref() == Some(expected.as_str()) {
                break;
            }
        }
        assert!(
            Instant::now() < until,
            "Prometheus did not return {expected} for {query} within 60 s (last: {last:?});\n\
             log:\n{}",
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!("Prometheus: {query} = {expected}");

    // Both targets healthy: the OpenMetrics text parsed without errors.
    let targets = prometheus.api("targets", None).unwrap();
    let active = targets["data"]["activeTargets"].as_array().unwrap();
    assert_eq!(active.len(), 2, "{targets}");
    for t in active {
        assert_eq!(t["health"], "up", "{targets}");
        assert_eq!(t["lastError"], "", "{targets}");
    }
    let up = prometheus
        .api("query", Some(r#"count(hypomnesis_up{source="nvml"} == 1)"#))
        .unwrap();
    assert_eq!(up["data"]["result"][0]["value"][1], "2", "{up}");
}

/// The kubelet's pod-resources socket: named and absent, a scrape says it is down (and the
/// exporter says why on stderr, once); not named and absent where the rootfs has none (not a
/// kubelet node), nothing is said of it.
#[test]
fn the_pod_resources_socket_is_reported_only_where_it_is_in_use() {
    let missing = std::env::temp_dir().join(format!(
        "hmn-no-kubelet-{}/kubelet.sock",
        std::process::id()
    ));
    let server = Server::start(
        FakeVariant::Modern,
        &plain(),
        &["--pod-resources-socket", missing.to_str().unwrap()],
    );
    let r = server.get("/metrics");
    assert_eq!(
        value(&r.body, "hypomnesis_pod_resources_up"),
        Some("0".into()),
        "{}",
        r.body
    );
    assert!(
        !r.body.contains("hypomnesis_gpu_allocation_info{"),
        "{}",
        r.body
    );
    let said = server.stderr_with("hmn: pod-resources:", Duration::from_secs(5));
    assert!(
        said.contains("hmn: pod-resources:") && said.contains(missing.to_str().unwrap()),
        "{said}"
    );
    let plain_server = Server::start(
        FakeVariant::Modern,
        &plain(),
        &["--rootfs", support::empty_dir().to_str().unwrap()],
    );
    let r = plain_server.get("/metrics");
    assert!(r.body.contains("hypomnesis_gpu_devices"), "{}", r.body);
    assert!(!r.body.contains("pod_resources"), "{}", r.body);
}
