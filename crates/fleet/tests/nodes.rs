//! The fleet node by node (`read_nodes`, for `hmn top --prometheus`) and one node's own
//! (`read_node`), from a stand-in Prometheus on loopback answering each query with canned
//! series: our nodes, dcgm-exporter's (one without `FB_TOTAL`), a node both export, an
//! impossible figure, a stale target and a gone one, and the queries each asks.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::too_many_lines,
    clippy::doc_markdown,
    clippy::many_single_char_names,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hypomnesis_fleet::{Client, Options, Read as How, Selector, Source};

mod common;
use common::{Handler, Standin};

const GIB: f64 = 1_073_741_824.0;
const AT: f64 = 1_800_000_000.0;

/// The shared stand-in answering each query with `answer`; the queries asked are kept.
fn standin(answer: fn(&str) -> String) -> (Standin, Arc<Mutex<Vec<String>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let handler: Arc<Handler> = Arc::new(move |q: &str| {
        seen.lock().unwrap().push(q.to_string());
        (200, answer(q), Duration::ZERO)
    });
    (Standin::start(handler), asked)
}

fn vector(series: &[(&[(&str, &str)], f64)]) -> String {
    let result: Vec<serde_json::Value> = series
        .iter()
        .map(|(labels, v)| {
            let metric: BTreeMap<&str, &str> = labels.iter().copied().collect();
            let v = if v.is_nan() {
                "NaN".to_string()
            } else {
                v.to_string()
            };
            serde_json::json!({"metric": metric, "value": [AT, v]})
        })
        .collect();
    serde_json::json!({"status": "success", "data": {"resultType": "vector", "result": result}})
        .to_string()
}

const A: &[(&str, &str)] = &[("job", "hmn"), ("instance", "a:9400"), ("node", "node-a")];
const M: &[(&str, &str)] = &[("job", "hmn"), ("instance", "m:9400"), ("node", "node-m")];
const MD: &[(&str, &str)] = &[
    ("job", "dcgm"),
    ("instance", "m:9401"),
    ("Hostname", "node-m"),
];
const X: &[(&str, &str)] = &[
    ("job", "dcgm"),
    ("instance", "x:9401"),
    ("Hostname", "node-x"),
];
const N: &[(&str, &str)] = &[("job", "hmn"), ("instance", "n:9400"), ("node", "node-n")];
const OLD: &[(&str, &str)] = &[("job", "hmn"), ("instance", "o:9400"), ("node", "node-old")];
const G: &[(&str, &str)] = &[("job", "hmn"), ("instance", "g:9400"), ("node", "node-g")];
const GD: &[(&str, &str)] = &[
    ("job", "dcgm"),
    ("instance", "gd:9401"),
    ("Hostname", "node-gd"),
];
const EQ: &[(&str, &str)] = &[("job", "hmn"), ("instance", "eq:9400"), ("node", "node-eq")];

fn with<'a>(t: &[(&'a str, &'a str)], more: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    t.iter().chain(more).copied().collect()
}

fn answer(q: &str) -> String {
    let name = |m: &'static str| [("__name__", m)];
    if q.starts_with("sum by (job, instance, node, Hostname, __name__)") {
        let ours = |t, total: f64, free: f64| {
            vec![
                (
                    with(t, &name("hypomnesis_gpu_memory_total_bytes")),
                    total * GIB,
                ),
                (
                    with(t, &name("hypomnesis_gpu_memory_free_bytes")),
                    free * GIB,
                ),
                (
                    with(t, &name("hypomnesis_gpu_memory_reserved_bytes")),
                    0.5 * GIB,
                ),
            ]
        };
        let mut s = ours(A, 141.0, 100.0);
        s.extend(ours(M, 80.0, 70.0));
        s.extend(ours(N, 80.0, f64::NAN));
        s.extend(ours(OLD, 80.0, 80.0));
        s.extend(ours(EQ, 80.0, 80.0));
        s.push((with(MD, &name("DCGM_FI_DEV_FB_FREE")), 70_000.0));
        s.push((with(MD, &name("DCGM_FI_DEV_FB_TOTAL")), 81_920.0));
        s.push((with(X, &name("DCGM_FI_DEV_FB_FREE")), 40_000.0));
        s.push((with(X, &name("DCGM_FI_DEV_FB_USED")), 40_500.0));
        s.push((with(X, &name("DCGM_FI_DEV_FB_RESERVED")), 537.0));
        let s: Vec<(&[(&str, &str)], f64)> = s.iter().map(|(l, v)| (l.as_slice(), *v)).collect();
        return vector(&s);
    }
    if q.starts_with("count by") {
        return vector(&[
            (A, 1.0),
            (M, 1.0),
            (MD, 1.0),
            (X, 2.0),
            (N, 1.0),
            (OLD, 1.0),
        ]);
    }
    if q.starts_with("sum by (job, instance, node, Hostname) (hypomnesis_gpu_ghost_bytes") {
        return vector(&[(A, 20.0 * GIB), (M, 0.0)]);
    }
    if q.starts_with("topk") {
        let a = with(A, &[("namespace", "serve"), ("pod", "vllm-0")]);
        let x = with(X, &[("namespace", "train"), ("pod", "bert-0")]);
        return vector(&[(&a, 80.0 * GIB), (&x, 40_500.0)]);
    }
    if q.starts_with("max by (job, instance, node, Hostname) (timestamp") {
        return vector(&[
            (A, AT - 5.0),
            (M, AT - 5.0),
            (MD, AT - 5.0),
            (X, AT - 5.0),
            (N, AT - 5.0),
            (OLD, AT - 600.0),
            // Exactly as old as the bound: still counted.
            (EQ, AT - 120.0),
        ]);
    }
    if q.starts_with("label_replace") {
        let g = with(G, &[("source", "hypomnesis")]);
        let a = with(A, &[("source", "hypomnesis")]);
        let gd = with(GD, &[("source", "dcgm")]);
        return vector(&[(&g, 1.0), (&a, 1.0), (&gd, 1.0)]);
    }
    if q.starts_with("max by (job, instance) (max_over_time") {
        return vector(&[(&[("job", "hmn"), ("instance", "g:9400")], AT - 300.0)]);
    }
    if q.starts_with("hypomnesis_gpu_process_memory_bytes{") {
        let p = with(A, &[("gpu", "0"), ("pid", "77"), ("process", "python3")]);
        return vector(&[(&p, 12.0 * GIB)]);
    }
    // read_node's own queries, of one target: nothing but the process list is canned.
    vector(&[])
}

#[test]
fn each_node_in_six_queries_stale_and_gone_ones_marked() {
    let (server, asked) = standin(answer);
    let client = Client::new(&server.url(), &Options::default()).unwrap();
    let nodes = hypomnesis_fleet::read_nodes(&client, Duration::from_secs(120), AT).unwrap();
    // Six, and a seventh for when the gone target last answered, asked of it alone.
    assert_eq!(nodes.queries, 7);
    let asked = asked.lock().unwrap().clone();
    let last = asked.iter().find(|q| q.contains("max_over_time")).unwrap();
    assert!(
        last.contains("g:9400") && !last.contains("a:9400"),
        "{last}"
    );
    let by: BTreeMap<&str, &hypomnesis_fleet::Node> =
        nodes.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let names: Vec<&str> = by.keys().copied().collect();
    assert_eq!(
        names,
        [
            "node-a", "node-eq", "node-g", "node-gd", "node-m", "node-n", "node-old", "node-x"
        ]
    );
    // As old as the bound: counted; a gone target of dcgm-exporter's is said to be its.
    assert!(!by["node-eq"].stale, "{:?}", by["node-eq"]);
    let gd = by["node-gd"];
    assert!(
        gd.stale && gd.source == Source::Dcgm && gd.age.is_none(),
        "{gd:?}"
    );
    // Each read counts its own queries.
    let again = hypomnesis_fleet::read_nodes(&client, Duration::from_secs(120), AT).unwrap();
    assert_eq!(again.queries, 7);
    let a = by["node-a"];
    assert_eq!(a.source, Source::Hypomnesis);
    assert_eq!((a.gpus, a.used()), (Some(1), Some((41.0 * GIB) as u64)));
    assert_eq!(a.ghosts, Some((20.0 * GIB) as u64));
    let pod = a.largest_pod.as_ref().unwrap();
    assert_eq!(
        (pod.pod.as_str(), pod.bytes),
        ("vllm-0", Some((80.0 * GIB) as u64))
    );
    assert!(!a.stale && a.age == Some(5.0));
    // node-m is exported by both: hypomnesis's figures alone, and a note.
    let m = by["node-m"];
    assert_eq!(
        (m.source, m.total),
        (Source::Hypomnesis, Some((80.0 * GIB) as u64))
    );
    assert!(
        nodes
            .notes
            .iter()
            .any(|n| n.starts_with("node-m: dcgm-exporter's figures left out"))
    );
    // dcgm-exporter without FB_TOTAL: free + used + reserved, MiB; no ghost figure; the pod
    // named, with no figure of its own.
    let x = by["node-x"];
    assert_eq!(x.source, Source::Dcgm);
    assert_eq!(x.total, Some((40_000 + 40_500 + 537) << 20));
    assert_eq!(x.used(), Some((40_500 + 537) << 20));
    assert_eq!(x.ghosts, None);
    assert_eq!(x.largest_pod.as_ref().unwrap().bytes, None);
    // A NaN free figure is unknown, and so is what is used.
    let n = by["node-n"];
    assert_eq!((n.free, n.used()), (None, None));
    // Older than the bound: stale with its exact age; gone: stale, its age to the step.
    let old = by["node-old"];
    assert!(old.stale && old.exact && old.age == Some(600.0));
    let g = by["node-g"];
    assert!(g.stale && !g.exact && g.age == Some(300.0) && g.total.is_none());
}

#[test]
fn one_node_is_asked_of_its_target_alone() {
    let (server, asked) = standin(answer);
    let client = Client::new(&server.url(), &Options::default()).unwrap();
    let nodes = hypomnesis_fleet::read_nodes(&client, Duration::from_secs(120), AT).unwrap();
    asked.lock().unwrap().clear();
    let a = nodes.nodes.iter().find(|n| n.name == "node-a").unwrap();
    let how = How {
        stale_after: Duration::from_secs(120),
        selector: Selector::default(),
        at: AT,
    };
    let (_, processes) = hypomnesis_fleet::read_node(&client, &how, a).unwrap();
    assert_eq!(processes.len(), 1);
    assert_eq!(
        (processes[0].pid.as_str(), processes[0].bytes),
        ("77", (12.0 * GIB) as u64)
    );
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 9, "{asked:#?}");
    for q in &asked {
        assert!(
            q.contains(r#"job="hmn",instance="a:9400""#),
            "a query not narrowed to the node: {q}"
        );
    }
}
