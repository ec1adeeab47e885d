#![allow(dead_code)]
//! `hmn serve` for integration tests: start it against the fake NVML, speak HTTP to it by hand,
//! read series out of its text, and run a real Prometheus scraping it.
//!
//! The serve, fleet and deploy-kit modules use it as `crate::util::serve`.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

/// `hmn serve <args>` against the fake NVML `variant` answering `scenario`, nothing else: no
/// nvidia-smi (empty PATH), no DRM (a sysfs that does not exist).
pub fn serve_command(variant: FakeVariant, scenario: &str, args: &[&str]) -> Command {
    let mut c = crate::util::hmn::hmn();
    c.arg("serve")
        .args(args)
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("PATH", empty_dir())
        .env("LD_LIBRARY_PATH", empty_dir())
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(variant))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

/// A running `hmn serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    /// Where it listens (as printed; 0.0.0.0 is rewritten to 127.0.0.1).
    pub addr: SocketAddr,
    /// Its stderr so far.
    pub stderr: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(variant: FakeVariant, scenario: &str, args: &[&str]) -> Self {
        let mut all = vec!["--listen", "127.0.0.1:0"];
        if !args.contains(&"--min-interval") {
            all.extend(["--min-interval", "1s"]);
        }
        all.extend_from_slice(args);
        Self::spawn(serve_command(variant, scenario, &all))
    }

    pub fn spawn(mut command: Command) -> Self {
        let mut child = command.spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                {
                    let mut s = sink.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
                // After recording it, so that `stderr()` has the line once `start` returns.
                if let Some(rest) = line.strip_prefix("hmn: serving metrics on http://") {
                    let _ = tx.send(rest.trim_end_matches("/metrics").to_string());
                }
            }
        });
        let Ok(printed) = rx.recv_timeout(Duration::from_secs(60)) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "hmn serve did not say where it listens; stderr:\n{}",
                stderr.lock().unwrap()
            );
        };
        let mut addr: SocketAddr = printed.parse().unwrap();
        if addr.ip().is_unspecified() {
            addr.set_ip([127, 0, 0, 1].into());
        }
        Self {
            child,
            addr,
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Stderr once it contains `text`, or as it is after `limit` (its reader is a thread of its
    /// own, a moment behind the server).
    pub fn stderr_with(&self, text: &str, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            let s = self.stderr();
            if s.contains(text) || started.elapsed() > limit {
                return s;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        get(self.addr, path, &[])
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response, as read off the wire.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// The header block, lower-cased.
    pub headers: String,
    /// The body as text (invalid UTF-8 replaced).
    pub body: String,
    /// The body as sent.
    pub bytes: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.lines().find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.trim() == name)
                .map(|(_, v)| v.trim())
        })
    }
}

/// Sends `request` on a new connection and reads the reply until the server closes.
pub fn exchange(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8(raw[..end].to_vec()).unwrap();
    let bytes = raw[end + 4..].to_vec();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    Reply {
        status,
        headers: head.to_ascii_lowercase(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
    }
}

pub fn get(addr: SocketAddr, path: &str, headers: &[&str]) -> Reply {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    exchange(addr, req.as_bytes())
}

/// The value of the series `series` (name and labels exactly as exposed), if present.
pub fn value(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|v| v.strip_prefix(' '))
            .map(String::from)
    })
}

pub fn has_series(text: &str, name: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
}

/// A running Prometheus and its data directory, both gone when dropped.
pub struct Prometheus {
    pub child: Child,
    pub dir: PathBuf,
    pub addr: SocketAddr,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

impl Prometheus {
    pub fn start(binary: &Path, targets: &[SocketAddr]) -> Self {
        Self::start_every(binary, targets, "1s")
    }

    /// Prometheus scraping `targets` every `interval` (a Prometheus duration such as `1s`).
    pub fn start_every(binary: &Path, targets: &[SocketAddr], interval: &str) -> Self {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n\
             scrape_configs:\n  - job_name: hmn\n    static_configs:\n      - targets: [{}]\n",
            targets.join(", "),
        );
        Self::start_with(binary, &config)
    }

    /// Prometheus scraping every second: each of `nodes` (an exporter and the `node` label its
    /// series get) in job `hmn`, and `others` (a target and its job) without a label.
    pub fn start_nodes(
        binary: &Path,
        nodes: &[(SocketAddr, &str)],
        others: &[(SocketAddr, &str)],
    ) -> Self {
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  \
             - job_name: hmn\n    static_configs:\n",
        );
        for (addr, node) in nodes {
            let _ = writeln!(
                config,
                "      - targets: ['{addr}']\n        labels: {{node: '{node}'}}"
            );
        }
        for (addr, job) in others {
            let _ = writeln!(
                config,
                "  - job_name: {job}\n    static_configs:\n      - targets: ['{addr}']"
            );
        }
        Self::start_with(binary, &config)
    }

    /// Prometheus with `config` as its configuration file.
    pub fn start_with(binary: &Path, config: &str) -> Self {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hmn-prometheus-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let addr = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        Self { child, dir, addr }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// The JSON answer of `/api/v1/<endpoint>`, or `None` while Prometheus is not up.
    pub fn api(&self, endpoint: &str, query: Option<&str>) -> Option<serde_json::Value> {
        TcpStream::connect(self.addr).ok()?;
        let mut target = format!("/api/v1/{endpoint}");
        if let Some(q) = query {
            target.push_str("?query=");
            for b in q.bytes() {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    target.push(char::from(b));
                } else {
                    let _ = write!(target, "%{b:02X}");
                }
            }
        }
        // HTTP/1.0: the answer comes whole, never chunked.
        let r = exchange(
            self.addr,
            format!("GET {target} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes(),
        );
        if r.status != 200 {
            return None;
        }
        serde_json::from_str(&r.body).ok()
    }
}

/// Real processes (`sleep 600`) for a fake GPU to list, killed when dropped.
pub struct Sleepers(Vec<Child>);

impl Sleepers {
    pub fn spawn(n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| {
                    Command::new("sleep")
                        .arg("600")
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }

    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Child::id).collect()
    }
}

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
        }
        for c in &mut self.0 {
            let _ = c.wait();
        }
    }
}
