//! `hmn serve` at fleet scale (issue 17, point 6), as CI can afford it: one exporter with 8 GPUs
//! listing 1,000 real processes each (capped series, gzip), and 50 exporters on loopback ports
//! scraped by one real Prometheus for a bounded minute, whose fleet queries must answer across
//! every node. The figures (latency, sizes, memory) come from `scripts/bench/serve_scale.py` and are in
//! BENCHMARKS.md; these tests check behaviour, not time.
#![cfg(all(feature = "serve", target_os = "linux"))]

use crate::util::serve as serving;

use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serving::{Prometheus, Server, Sleepers, get, value};
use support::{FakeVariant, external};

const MIB: u64 = 1 << 20;
/// The exporters of the fleet test.
const NODES: u32 = 50;

/// `gpus` H200s, each listing every pid of `pids` (pid i holding `1 + i % 97` MiB), with
/// `tag` in their UUIDs.
fn node(gpus: usize, pids: &[u32], tag: u32) -> String {
    let rows: Vec<String> = pids
        .iter()
        .enumerate()
        .map(|(i, p)| format!(r#"{{"pid": {p}, "used": {}}}"#, MIB * (1 + i as u64 % 97)))
        .collect();
    let held: u64 = (0..pids.len() as u64).map(|i| MIB * (1 + i % 97)).sum();
    let devices: Vec<String> = (0..gpus)
        .map(|g| {
            format!(
                r#"{{"name": "NVIDIA H200", "uuid": "GPU-f1ee7000-{tag:04x}-4000-8000-{g:012x}",
                    "total": {}, "reserved": {}, "free": {}, "compute_processes": [{}]}}"#,
                143_771 * MIB,
                614 * MIB,
                (143_771 - 614) * MIB - held,
                rows.join(",")
            )
        })
        .collect();
    format!(r#"{{"devices": [{}]}}"#, devices.join(","))
}

fn gunzip(bytes: &[u8]) -> String {
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn eight_gpus_with_a_thousand_processes_each() {
    let sleepers = Sleepers::spawn(1000);
    let pids = sleepers.pids();
    let server = Server::start(FakeVariant::Modern, &node(8, &pids, 0), &[]);
    let r = get(server.addr, "/metrics", &["Accept-Encoding: gzip"]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let text = gunzip(&r.bytes);
    assert!(text.ends_with("# EOF\n"), "a whole body");
    let rows = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_process_memory_bytes{"))
        .count();
    // The default cap keeps the 1,000 largest of the 8,000 rows and counts the rest.
    assert_eq!(rows, 1000);
    assert_eq!(
        value(&text, "hypomnesis_gpu_process_series_dropped"),
        Some("7000".into())
    );
    assert_eq!(value(&text, "hypomnesis_gpu_devices"), Some("8".into()));
    // The largest holders were kept: every kept row holds at least what a dropped one could.
    let smallest_kept = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_process_memory_bytes{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .min()
        .unwrap();
    // (Values 1–97 MiB, ten or eleven pids each, on 8 GPUs: the 1,000 largest rows reach 85 MiB.)
    assert!(smallest_kept >= 85 * MIB, "{smallest_kept}");
    assert!(
        r.bytes.len() * 5 < text.len(),
        "gzip: {} of {}",
        r.bytes.len(),
        text.len()
    );
    eprintln!(
        "8 GPUs x 1,000 processes: {} bytes, {} gzipped",
        text.len(),
        r.bytes.len()
    );

    // Every row, when asked for.
    let all = Server::start(
        FakeVariant::Modern,
        &node(8, &pids, 0),
        &["--max-process-series", "8000"],
    );
    let text = gunzip(&get(all.addr, "/metrics", &["Accept-Encoding: gzip"]).bytes);
    let rows = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_process_memory_bytes{"))
        .count();
    assert_eq!(rows, 8000);
    assert_eq!(
        value(&text, "hypomnesis_gpu_process_series_dropped"),
        Some("0".into())
    );
}

/// The one value of an instant query's answer, if it has exactly one series.
fn scalar(prometheus: &Prometheus, query: &str) -> Option<f64> {
    let answer = prometheus.api("query", Some(query))?;
    let result = answer["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn fifty_exporters_scraped_by_one_prometheus_for_a_minute() {
    let Some(binary) = external("prometheus") else {
        return;
    };
    let sleepers = Sleepers::spawn(100);
    let pids = sleepers.pids();
    // Node i: two GPUs, two of the processes (so pid sets overlap between nodes, as pids do).
    let servers: Vec<Server> = (0..NODES)
        .map(|i| {
            let mine = [
                pids[(2 * i as usize) % 100],
                pids[(2 * i as usize + 1) % 100],
            ];
            Server::start(FakeVariant::Modern, &node(2, &mine, i), &[])
        })
        .collect();
    let targets: Vec<SocketAddr> = servers.iter().map(|s| s.addr).collect();
    let prometheus = Prometheus::start_every(&binary, &targets, "5s");

    // Up and scraping, then a minute of scrapes.
    let until = Instant::now() + Duration::from_secs(60);
    while scalar(&prometheus, r#"count(up{job="hmn"} == 1)"#) != Some(f64::from(NODES)) {
        assert!(
            Instant::now() < until,
            "not all {NODES} targets up within 60 s:\n{}",
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(60));

    let n = f64::from(NODES);
    let fleet = [
        ("count(count by (instance) (hypomnesis_gpu_info))", n),
        ("sum(hypomnesis_gpu_devices)", 2.0 * n),
        ("count(hypomnesis_scrape_success == 1)", n),
        (r#"count(hypomnesis_up{source="nvml"} == 1)"#, n),
        (
            "count(sum by (instance) (hypomnesis_gpu_memory_used_bytes))",
            n,
        ),
        // Every scrape of the minute succeeded: no target missed one (5 s apart: 12 or 13).
        (r#"count(min_over_time(up{job="hmn"}[1m]) == 1)"#, n),
        (r#"count(count_over_time(up{job="hmn"}[1m]) >= 11)"#, n),
        // Two processes on each of two GPUs a node: 4 series a node.
        ("count(hypomnesis_gpu_process_memory_bytes)", 4.0 * n),
        // used + reserved + free = total on every GPU of the fleet.
        (
            "count(hypomnesis_gpu_memory_used_bytes + hypomnesis_gpu_memory_reserved_bytes \
             + hypomnesis_gpu_memory_free_bytes == hypomnesis_gpu_memory_total_bytes)",
            2.0 * n,
        ),
    ];
    for (query, want) in fleet {
        assert_eq!(
            scalar(&prometheus, query),
            Some(want),
            "{query}\n{}",
            prometheus.log()
        );
    }
    // The largest process across the fleet: a node's second process, 2 MiB, on both its GPUs.
    let top = prometheus
        .api(
            "query",
            Some("topk(1, hypomnesis_gpu_process_memory_bytes)"),
        )
        .unwrap();
    assert_eq!(
        top["data"]["result"][0]["value"][1],
        (2 * MIB).to_string(),
        "{top}"
    );
    let slowest = scalar(
        &prometheus,
        "max(max_over_time(scrape_duration_seconds[1m]))",
    )
    .unwrap();
    eprintln!("50 exporters: the slowest scrape of the minute took {slowest:.3} s");
    assert!(slowest < 5.0, "a scrape reached the 5 s timeout");
    drop(servers);
}
