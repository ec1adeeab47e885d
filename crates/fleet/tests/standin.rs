//! The fleet read from a stand-in Prometheus on loopback: canned answers per query (our series,
//! dcgm-exporter's, a mixed node, stale and gone targets, impossible figures, a GPU exported
//! twice, hostile label values), and the hostile servers of the client's bounds (an error, a
//! slow one, a huge answer, too many series, an HTML error page, a closed port).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::many_single_char_names,
    clippy::too_many_lines,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::doc_markdown
)]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hypomnesis_fleet::{Client, Error, Options, Read as How, Selector, Source, Verdict};

mod common;
use common::{Handler, Standin};

const GIB: f64 = 1_073_741_824.0;
const AT: f64 = 1_800_000_000.0;

/// A vector answer of `series` (labels, value).
fn vector(series: &[(Vec<(&str, String)>, String)]) -> String {
    let result: Vec<serde_json::Value> = series
        .iter()
        .map(|(labels, v)| {
            let metric: BTreeMap<&str, &str> =
                labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
            serde_json::json!({"metric": metric, "value": [AT, v]})
        })
        .collect();
    serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": result}})
        .to_string()
}

/// Our series for one GPU of a target.
struct Ours {
    node: &'static str,
    job: &'static str,
    gpu: &'static str,
    uuid: String,
    model: &'static str,
    total: f64,
    free: f64,
}

fn target(node: &str, job: &str) -> Vec<(&'static str, String)> {
    vec![
        ("node", node.to_string()),
        ("instance", format!("{node}:9400")),
        ("job", job.to_string()),
    ]
}

/// The canned fleet: a handler answering each of the fleet's queries.
fn fleet_handler(ours: Vec<Ours>) -> Arc<Handler> {
    Arc::new(move |q: &str| {
        let mut out: Vec<(Vec<(&str, String)>, String)> = Vec::new();
        let gpu_labels = |o: &Ours| {
            let mut l = target(o.node, o.job);
            l.push(("gpu", o.gpu.to_string()));
            l.push(("uuid", o.uuid.clone()));
            l
        };
        if q.starts_with("{__name__=~\"hypomnesis_gpu_memory") {
            for o in &ours {
                for (name, v) in [
                    ("hypomnesis_gpu_memory_total_bytes", o.total),
                    ("hypomnesis_gpu_memory_free_bytes", o.free),
                    ("hypomnesis_gpu_memory_reserved_bytes", 0.6 * GIB),
                    ("hypomnesis_gpu_memory_not_visible_bytes", GIB),
                ] {
                    let mut l = gpu_labels(o);
                    l.push(("__name__", name.to_string()));
                    let v = if v.is_nan() {
                        "NaN".to_string()
                    } else {
                        v.to_string()
                    };
                    out.push((l, v));
                }
                let mut l = gpu_labels(o);
                l.push(("__name__", "hypomnesis_gpu_info".into()));
                l.push(("model", o.model.into()));
                l.push(("mig_mode", "disabled".into()));
                out.push((l, "1".into()));
            }
            // node-c's GPU in MIG mode: its instances.
            let mut base = target("node-c", "hmn");
            base.push(("gpu", "0".into()));
            base.push(("uuid", "GPU-c".into()));
            let mut info = base.clone();
            info.push(("__name__", "hypomnesis_gpu_info".into()));
            info.push(("model", "NVIDIA H200".into()));
            info.push(("mig_mode", "enabled".into()));
            out.push((info, "1".into()));
            let mut free = base.clone();
            free.push(("__name__", "hypomnesis_gpu_memory_free_bytes".into()));
            out.push((free, (120.0 * GIB).to_string()));
            for (mig, total, f) in [("1", 71.0, 60.0), ("2", 70.0, 10.0)] {
                for (name, v) in [
                    ("hypomnesis_gpu_mig_memory_total_bytes", total),
                    ("hypomnesis_gpu_mig_memory_free_bytes", f),
                ] {
                    let mut l = base.clone();
                    l.push(("__name__", name.into()));
                    l.push(("mig", mig.into()));
                    l.push(("profile", "3g.71gb".into()));
                    out.push((l, (v * GIB).to_string()));
                }
            }
        } else if q.starts_with("hypomnesis_gpu_ghost_bytes") {
            let mut l = target("node-a", "hmn");
            l.push(("gpu", "0".into()));
            l.push(("uuid", "GPU-a0".into()));
            l.push(("class", "zombie".into()));
            out.push((l.clone(), (20.0 * GIB).to_string()));
            l.pop();
            l.push(("class", "unaccounted".into()));
            out.push((l, (5.0 * GIB).to_string()));
        } else if q == "hypomnesis_gpu_pod_memory_bytes" {
            let mut l = target("node-a", "hmn");
            l.push(("gpu", "0".into()));
            l.push(("uuid", "GPU-a0".into()));
            l.push(("namespace", "serve".into()));
            l.push(("pod", "vllm-a".into()));
            out.push((l, (30.0 * GIB).to_string()));
        } else if q == "timestamp(hypomnesis_gpu_memory_free_bytes)" {
            // node-b's second GPU's sample is older (and comes first): the target's age is its
            // newest.
            let mut older = target("node-b", "hmn");
            older.push(("gpu", "1".into()));
            out.push((older, (AT - 50.0).to_string()));
            for node in ["node-a", "node-b", "node-c", "node-h", "node-m"] {
                out.push((target(node, "hmn"), (AT - 1.0).to_string()));
            }
            out.push((target("node-a", "hmn2"), (AT - 1.0).to_string()));
            // node-d answers, but its newest sample is ten minutes old.
            out.push((target("node-d", "hmn"), (AT - 600.0).to_string()));
        } else if q.starts_with("last_over_time(hypomnesis_gpu_memory_free_bytes[") {
            // node-g's and node-k's series left the instant queries; node-k lived too short
            // for the subquery to see when it last answered.
            out.push((target("node-g", "hmn"), "1".to_string()));
            out.push((target("node-k", "hmn"), "1".to_string()));
            // A GPU of node-a fell off the bus: its target still answers, it is not stale.
            let mut fell = target("node-a", "hmn");
            fell.push(("gpu", "3".into()));
            out.push((fell, "1".to_string()));
        } else if q.starts_with("last_over_time(DCGM") {
            // None of dcgm-exporter's did.
        } else if q.starts_with("max_over_time(timestamp(hypomnesis") {
            assert!(
                q.contains(r#"instance=~"node\\-g:9400|node\\-k:9400""#)
                    && q.contains(r#"job=~"hmn""#),
                "only the targets that went are asked when: {q}"
            );
            for node in ["node-a", "node-b", "node-c", "node-d", "node-h"] {
                out.push((target(node, "hmn"), (AT - 1.0).to_string()));
            }
            // node-g stopped answering 95 s ago: only the subquery still sees it.
            out.push((target("node-g", "hmn"), (AT - 95.0).to_string()));
        } else if q.starts_with("{__name__=~\"DCGM") {
            for (uuid, gpu, free, total) in [
                ("GPU-e0", "0", 40_000.0, None),
                ("GPU-a0", "7", 1.0, None),
                ("GPU-e1", "1", 1_000.0, Some(81_920.0)),
            ] {
                let mut figures = vec![
                    ("DCGM_FI_DEV_FB_FREE", free),
                    ("DCGM_FI_DEV_FB_USED", 30_000.0),
                    ("DCGM_FI_DEV_FB_RESERVED", 500.0),
                ];
                figures.extend(total.map(|t| ("DCGM_FI_DEV_FB_TOTAL", t)));
                for (name, v) in figures {
                    let mut l = vec![
                        ("__name__", name.to_string()),
                        ("instance", "node-e:9400".to_string()),
                        ("job", "dcgm".to_string()),
                        ("Hostname", "node-e".to_string()),
                        ("gpu", gpu.to_string()),
                        ("UUID", uuid.to_string()),
                        ("modelName", "NVIDIA A100-SXM4-80GB".to_string()),
                    ];
                    if gpu == "0" {
                        // Two pods of one namespace share it: a series each.
                        let mut other = l.clone();
                        other.push(("namespace", "train".into()));
                        other.push(("pod", "bert-1".into()));
                        out.push((other, v.to_string()));
                        l.push(("namespace", "train".into()));
                        l.push(("pod", "bert-0".into()));
                    }
                    out.push((l, v.to_string()));
                }
            }
        } else if q == "timestamp(DCGM_FI_DEV_FB_FREE)" {
            out.push((
                vec![
                    ("instance", "node-e:9400".to_string()),
                    ("job", "dcgm".to_string()),
                ],
                (AT - 2.0).to_string(),
            ));
        } else {
            return (
                400,
                format!(
                    r#"{{"status":"error","errorType":"bad_data","error":"unknown query {q}"}}"#
                ),
                Duration::ZERO,
            );
        }
        (200, vector(&out), Duration::ZERO)
    })
}

fn fleet_of(extra: usize) -> Vec<Ours> {
    let mut ours = vec![
        Ours {
            node: "node-a",
            job: "hmn",
            gpu: "0",
            uuid: "GPU-a0".into(),
            model: "NVIDIA H200",
            total: 141.0 * GIB,
            free: 100.0 * GIB,
        },
        // node-a scraped by a second job too: the same GPU, counted once.
        Ours {
            node: "node-a",
            job: "hmn2",
            gpu: "0",
            uuid: "GPU-a0".into(),
            model: "NVIDIA H200",
            total: 141.0 * GIB,
            free: 100.0 * GIB,
        },
        Ours {
            node: "node-b",
            job: "hmn",
            gpu: "0",
            uuid: "GPU-b0".into(),
            model: "NVIDIA H100 80GB HBM3",
            total: 80.0 * GIB,
            free: 70.0 * GIB,
        },
        Ours {
            node: "node-b",
            job: "hmn",
            gpu: "1",
            uuid: "GPU-b1".into(),
            model: "NVIDIA H100 80GB HBM3",
            total: 80.0 * GIB,
            free: 30.0 * GIB,
        },
        Ours {
            node: "node-d",
            job: "hmn",
            gpu: "0",
            uuid: "GPU-d0".into(),
            model: "NVIDIA H200",
            total: 141.0 * GIB,
            free: 141.0 * GIB,
        },
        Ours {
            node: "node-h",
            job: "hmn",
            gpu: "0",
            uuid: "GPU-h0".into(),
            model: "NVIDIA H200",
            total: 141.0 * GIB,
            free: f64::NAN,
        },
        // Free memory above its total: impossible, not counted.
        Ours {
            node: "node-m",
            job: "hmn",
            gpu: "0",
            uuid: "GPU-m0".into(),
            model: "NVIDIA H200",
            total: 10.0 * GIB,
            free: 20.0 * GIB,
        },
    ];
    for i in 0..extra {
        ours.push(Ours {
            node: "node-b",
            job: "hmn",
            gpu: Box::leak(format!("{}", i + 2).into_boxed_str()),
            uuid: format!("GPU-b{}", i + 2),
            model: "NVIDIA H100 80GB HBM3",
            total: 80.0 * GIB,
            free: GIB,
        });
    }
    ours
}

fn how(selector: &str) -> How {
    How {
        stale_after: Duration::from_secs(120),
        selector: Selector::parse(selector).unwrap(),
        at: AT,
    }
}

#[test]
fn the_fleet_from_our_series_and_dcgm_exporters() {
    let s = Standin::start(fleet_handler(fleet_of(0)));
    let client = Client::new(&s.url(), &Options::default()).unwrap();
    let fleet = hypomnesis_fleet::read(&client, &how("")).unwrap();
    let names: Vec<String> = fleet
        .gpus
        .iter()
        .map(|g| {
            format!(
                "{} {} {}",
                g.node,
                g.index,
                g.mig.as_ref().map_or("-", |m| m.id.as_str())
            )
        })
        .collect();
    assert_eq!(names.len(), 7, "{names:?}\n{:#?}", fleet.notes);
    let a = fleet.gpus.iter().find(|g| g.node == "node-a").unwrap();
    assert_eq!(a.ghosts.get("zombie").copied(), Some((20.0 * GIB) as u64));
    assert!(
        !a.ghosts.contains_key("unaccounted"),
        "memory nobody accounts for is no ghost"
    );
    assert_eq!(a.pods[0].pod, "vllm-a");
    assert_eq!(a.model.as_deref(), Some("NVIDIA H200"));
    assert_eq!(a.source, Source::Hypomnesis);
    assert_eq!(a.source.as_str(), "hypomnesis");
    assert_eq!(a.reserved, Some((0.6 * GIB) as u64));
    assert_eq!(a.not_visible, Some(GIB as u64));
    assert_eq!(a.used(), (41.0 * GIB) as u64);
    let b_age = fleet.gpus.iter().find(|g| g.node == "node-b").unwrap().age;
    assert!(
        b_age.is_some_and(|a| (a - 1.0).abs() < 0.01),
        "the newest sample: {b_age:?}"
    );
    // node-c is its MIG instances, not its whole GPU, each with the GPU's model.
    let c: Vec<_> = fleet.gpus.iter().filter(|g| g.node == "node-c").collect();
    assert_eq!(c.len(), 2);
    assert!(
        c.iter()
            .all(|g| g.mig.as_ref().is_some_and(|m| m.profile == "3g.71gb"))
    );
    assert!(c.iter().all(|g| g.model.as_deref() == Some("NVIDIA H200")));
    // dcgm-exporter's node: MiB made bytes, total from free + used + reserved; its copy of
    // node-a's GPU left out.
    let e = fleet
        .gpus
        .iter()
        .find(|g| g.node == "node-e" && g.index == "0")
        .unwrap();
    assert_eq!(e.source, Source::Dcgm);
    assert_eq!(e.source.as_str(), "dcgm-exporter");
    assert_eq!(e.total, (40_000 + 30_000 + 500) << 20);
    assert_eq!(e.free, 40_000 << 20);
    let pods: Vec<&str> = e.pods.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(
        pods,
        ["bert-1", "bert-0"],
        "each pod once, from its three series"
    );
    let e1 = fleet
        .gpus
        .iter()
        .find(|g| g.node == "node-e" && g.index == "1")
        .unwrap();
    assert_eq!(e1.total, 81_920 << 20, "FB_TOTAL where it is exported");
    let notes = fleet.notes.join("\n");
    assert!(
        notes.contains("node-e GPU 7: dcgm-exporter's figures left out"),
        "{notes}"
    );
    assert!(notes.contains("exported by another target too"), "{notes}");
    assert!(
        notes.contains("node-h GPU 0: a figure of NaN is no byte count"),
        "{notes}"
    );
    // node-d's newest sample is 600 s old, exact; node-g stopped answering, about 95 s ago.
    let stale: Vec<_> = fleet
        .stale
        .iter()
        .map(|t| (t.node.as_str(), t.age.map(|a| a.round() as u64), t.exact))
        .collect();
    assert!(stale.contains(&("node-d", Some(600), true)), "{stale:?}");
    assert!(stale.contains(&("node-g", Some(95), false)), "{stale:?}");
    assert!(stale.contains(&("node-k", None, false)), "{stale:?}");
    assert!(
        !stale.iter().any(|s| s.0 == "node-a"),
        "a live target's lost GPU: {stale:?}"
    );
    assert!(
        notes.contains("node-m GPU 0: free 21474836480 bytes is more than its total"),
        "{notes}"
    );
    assert!(!fleet.gpus.iter().any(|g| g.node == "node-d"));

    // Ranked: 100 GiB fits on node-a and (once its zombie is freed) 110 GiB does.
    let p = hypomnesis_fleet::place(&fleet, (90.0 * GIB) as u64, 1);
    assert_eq!(p.verdict(), Verdict::Fits);
    assert!(p.nodes.is_empty(), "one GPU: no node ranking");
    assert_eq!(p.ranked[0].0.node, "node-a");
    let p = hypomnesis_fleet::place(&fleet, (110.0 * GIB) as u64, 1);
    assert_eq!(p.verdict(), Verdict::OnceGhostsFreed);
    let p = hypomnesis_fleet::place(&fleet, (200.0 * GIB) as u64, 1);
    assert_eq!(p.verdict(), Verdict::No);
    // Two GPUs on one node: node-b's two (70 and 30 GiB free) take 25 GiB each, not 50.
    let p = hypomnesis_fleet::place(&fleet, (25.0 * GIB) as u64, 2);
    assert_eq!(p.verdict(), Verdict::Fits);
    assert_eq!(p.nodes[0].node, "node-b");
    assert_eq!(
        hypomnesis_fleet::place(&fleet, (50.0 * GIB) as u64, 2).verdict(),
        Verdict::No
    );

    // The selector: by model, by a pod's namespace, by a target label.
    let sel = |s: &str| hypomnesis_fleet::read(&client, &how(s)).unwrap().gpus.len();
    assert_eq!(sel(r#"model=~".*H100.*""#), 2);
    assert_eq!(sel(r#"namespace="train""#), 1);
    assert_eq!(sel(r#"job="dcgm""#), 2);
    assert_eq!(sel(r#"node!~"node-[ab]""#), 4);
}

#[test]
fn the_queries_do_not_grow_with_the_fleet() {
    let small = Standin::start(fleet_handler(fleet_of(0)));
    let large = Standin::start(fleet_handler(fleet_of(500)));
    let count = |s: &Standin| {
        let client = Client::new(&s.url(), &Options::default()).unwrap();
        let fleet = hypomnesis_fleet::read(&client, &how("")).unwrap();
        let again = hypomnesis_fleet::read(&client, &how("")).unwrap();
        assert_eq!(again.queries, fleet.queries, "each read counts its own");
        assert_eq!(client.queries(), 2 * fleet.queries);
        (fleet.queries, fleet.gpus.len())
    };
    let (q1, g1) = count(&small);
    let (q2, g2) = count(&large);
    assert_eq!(q1, q2);
    assert_eq!(g2, g1 + 500);
    // Eight, and one more for when the targets that stopped answering last answered.
    assert_eq!(q1, 9);
}

fn client_for(handler: Arc<Handler>, options: &Options) -> (Standin, Client) {
    let s = Standin::start(handler);
    let c = Client::new(&s.url(), options).unwrap();
    (s, c)
}

#[test]
fn hostile_servers_get_a_clear_error_naming_the_query() {
    let quick = Options {
        timeout: Duration::from_millis(500),
        max_answer_bytes: 1 << 20,
        max_series: 1000,
        ..Options::default()
    };
    // Prometheus's own error.
    let (_s, c) = client_for(
        Arc::new(|_: &str| {
            (
                422,
                r#"{"status":"error","errorType":"execution","error":"query timed out"}"#.into(),
                Duration::ZERO,
            )
        }),
        &quick,
    );
    let e = c.query("up", AT).unwrap_err();
    assert!(matches!(e, Error::Prometheus { .. }), "{e}");
    assert!(e.to_string().contains("`up`") && e.to_string().contains("query timed out"));
    // A slow server: the timeout, not a hang.
    let (_s, c) = client_for(
        Arc::new(|_: &str| (200, vector(&[]), Duration::from_secs(5))),
        &quick,
    );
    let t = Instant::now();
    let e = c.query("up", AT).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(3), "{e}");
    assert!(matches!(e, Error::Transport { .. }), "{e}");
    // A huge answer: refused at the bound.
    let (_s, c) = client_for(
        Arc::new(|_: &str| {
            (
                200,
                format!("{{\"pad\":\"{}\"}}", "x".repeat(2 << 20)),
                Duration::ZERO,
            )
        }),
        &quick,
    );
    let e = c.query("up", AT).unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
    // Too many series.
    let (_s, c) = client_for(
        Arc::new(|_: &str| {
            let many: Vec<(Vec<(&str, String)>, String)> = (0..1001)
                .map(|i| (vec![("i", i.to_string())], "1".to_string()))
                .collect();
            (200, vector(&many), Duration::ZERO)
        }),
        &quick,
    );
    let e = c.query("up", AT).unwrap_err().to_string();
    assert!(e.contains("1001 series"), "{e}");
    // An HTML error page, with a terminal escape in it.
    let (_s, c) = client_for(
        Arc::new(|_: &str| {
            (
                502,
                "<html>\u{1b}]0;owned\u{7}bad gateway</html>".into(),
                Duration::ZERO,
            )
        }),
        &quick,
    );
    let e = c.query("up", AT).unwrap_err().to_string();
    assert!(e.contains("HTTP 502") && !e.contains('\u{1b}'), "{e}");
    // Nobody listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let c = Client::new(&format!("http://{port}"), &quick).unwrap();
    assert!(matches!(
        c.query("up", AT).unwrap_err(),
        Error::Transport { .. }
    ));
}

#[test]
fn hostile_label_values_are_shown_escaped_and_bounded() {
    let (_s, c) = client_for(
        Arc::new(|q: &str| {
            let node = format!("evil\u{1b}[2J{}", "n".repeat(100_000));
            let l = |name: &str| {
                vec![
                    ("__name__", name.to_string()),
                    ("node", node.clone()),
                    ("gpu", "0".to_string()),
                    ("uuid", "GPU-x".to_string()),
                ]
            };
            let series = if q.starts_with("{__name__=~\"hypomnesis_gpu_memory") {
                vec![
                    (l("hypomnesis_gpu_memory_total_bytes"), "100".to_string()),
                    (l("hypomnesis_gpu_memory_free_bytes"), "-5".to_string()),
                ]
            } else {
                vec![]
            };
            (200, vector(&series), Duration::ZERO)
        }),
        &Options::default(),
    );
    let fleet = hypomnesis_fleet::read(&c, &how("")).unwrap();
    assert!(fleet.gpus.is_empty());
    let note = &fleet.notes[0];
    assert!(
        note.contains("evil\\u{1b}[2J") && note.len() < 400,
        "{note}"
    );
    assert!(note.contains("no byte count"), "{note}");
}

#[test]
fn the_bearer_token_is_sent_and_never_shown() {
    let dir = std::env::temp_dir().join(format!("hmn-fleet-standin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("token");
    std::fs::write(&token, "sekrit-token\n").unwrap();
    let options = Options {
        bearer_token_file: Some(token),
        ..Options::default()
    };
    let (s, c) = client_for(
        Arc::new(|_: &str| (401, "unauthorized".into(), Duration::ZERO)),
        &options,
    );
    let e = c.query("up", AT).unwrap_err().to_string();
    assert!(e.contains("HTTP 401") && !e.contains("sekrit"), "{e}");
    assert!(!format!("{c:?}").contains("sekrit"));
    assert_eq!(s.auth.lock().unwrap().as_slice(), ["Bearer sekrit-token"]);
    let _ = std::fs::remove_dir_all(dir);
}
