//! The Grafana dashboard of `deploy/grafana/`, checked the only way that means anything: every
//! query of every panel (and of the variables) runs against a real Prometheus scraping four
//! `hmn serve`, each fed by a different fake GPU node, and returns the figures those nodes have.
//!
//! Node A: an H200 (R510+ driver, reservation known) with two processes and memory that no
//! visible process accounts for. Node B: an H200 in MIG mode with two GPU instances and an L40S
//! with one process. Node C: a V100 behind a pre-R510 driver (no reservation figure). Node D: a
//! Kubernetes node, two H100s whose processes run in pods (the kubelet fixture's procfs and
//! rootfs: `crates/testkit/fixtures/kubelet`). Node E: a node whose GPUs are allocated through
//! DRA resource claims (three H200s; the DRA fixture node, `crates/testkit/fixtures/dra`, and a
//! kubelet stand-in answering its claims), which the allocation and claim panels show.
//!
//! Needs `prometheus` on PATH (skipped without it, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1`).
#![cfg(all(feature = "serve", target_os = "linux"))]

use crate::util::serve as serving;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serving::{Prometheus, Server, Sleepers};
use support::{FakeVariant, external};

use crate::cli::dra;
use crate::kubelet_standin::{Kubelet, Reply, dra_answer};

const MIB: f64 = 1_048_576.0;

const A_UUID: &str = "GPU-aaaaaaaa-0000-4000-8000-000000000000";
const B_MIG_UUID: &str = "GPU-bbbbbbbb-0000-4000-8000-000000000000";
const B_L40S_UUID: &str = "GPU-bbbbbbbb-1111-4000-8000-000000000001";
const C_UUID: &str = "GPU-cccccccc-0000-4000-8000-000000000000";
const D_UUIDS: [&str; 2] = [
    "GPU-dddddddd-0000-4000-8000-000000000000",
    "GPU-dddddddd-1111-4000-8000-000000000001",
];

fn mib(n: u64) -> u64 {
    n << 20
}

fn node_a(p1: u32, p2: u32) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "{A_UUID}", "pci_bus_id": "00000000:18:00.0",
            "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid": {p1}, "used": {}}}, {{"pid": {p2}, "used": {}}}]}}]}}"#,
        mib(143_771),
        mib(614),
        mib(110_796),
        mib(20_480),
        mib(8_192)
    )
}

fn node_b(p2: u32) -> String {
    format!(
        r#"{{"devices": [
            {{"name": "NVIDIA H200", "uuid": "{B_MIG_UUID}", "total": {}, "reserved": {}, "free": {},
              "mig_mode": 1, "mig_devices": [
                {{"slot": 0, "gpu_instance_id": 2, "name": "NVIDIA H200 MIG 3g.71gb",
                  "total": {}, "free": {}}},
                {{"slot": 1, "gpu_instance_id": 9, "name": "NVIDIA H200 MIG 1g.18gb",
                  "total": {}, "free": {}}}]}},
            {{"name": "NVIDIA L40S", "uuid": "{B_L40S_UUID}", "total": {}, "reserved": {}, "free": {},
              "compute_processes": [{{"pid": {p2}, "used": {}}}]}}]}}"#,
        mib(143_771),
        mib(614),
        mib(126_198),
        mib(71_424),
        mib(54_499),
        mib(16_384),
        mib(16_375),
        mib(46_068),
        mib(609),
        mib(44_225),
        mib(1_200)
    )
}

fn node_c(p3: u32) -> String {
    format!(
        r#"{{"devices": [{{"name": "Tesla V100-SXM2-32GB", "uuid": "{C_UUID}", "total": {}, "free": {},
            "compute_processes": [{{"pid": {p3}, "used": {}}}]}}]}}"#,
        mib(32_768),
        mib(30_000),
        mib(2_000)
    )
}

/// Node D's GPU processes, those of the kubelet fixture's procfs: (pid, GPU index, MiB).
const D_PROCESSES: [(u32, u32, u64); 9] = [
    (4242, 0, 30_720), // ml-team/trainer-0, container worker: on both GPUs
    (4242, 1, 30_720),
    (4250, 0, 512),    // ml-team/trainer-0, container log-shipper
    (4300, 1, 20_480), // inference/vllm-7d9f8b6c4-x2k9p
    (4400, 0, 6_144),  // ml-team/notebook-alice (its container not named)
    (4500, 0, 4_096),  // a pod whose log directory's names are not the kubelet's: its UID only
    (4600, 1, 3_072),  // a pod with no log directory: its UID only
    (4700, 0, 2_048),  // a docker container outside Kubernetes
    (4800, 1, 1_024),  // a host service, in no container
];

/// Node D's H100s: 81,559 MiB, 512 reserved, and all they hold held by the processes listed
/// (GPU 0: 43,520 MiB, GPU 1: 55,296), so nothing is "not visible".
fn node_d() -> String {
    let devices: Vec<String> = D_UUIDS
        .iter()
        .zip(0u32..)
        .map(|(uuid, gpu)| {
            let on_gpu = D_PROCESSES.iter().filter(|(_, g, _)| *g == gpu);
            let used: u64 = on_gpu.clone().map(|(_, _, m)| m).sum();
            let processes: Vec<String> = on_gpu
                .map(|(pid, _, m)| format!(r#"{{"pid": {pid}, "used": {}}}"#, mib(*m)))
                .collect();
            format!(
                r#"{{"name": "NVIDIA H100 80GB HBM3", "uuid": "{uuid}", "total": {}, "reserved": {},
                    "free": {}, "compute_processes": [{}]}}"#,
                mib(81_559),
                mib(512),
                mib(81_559 - 512 - used),
                processes.join(", ")
            )
        })
        .collect();
    format!(r#"{{"devices": [{}]}}"#, devices.join(", "))
}

/// One series of a query's answer.
#[derive(Debug, Clone)]
struct Series {
    labels: BTreeMap<String, String>,
    value: f64,
}

impl Series {
    fn label(&self, name: &str) -> &str {
        self.labels.get(name).map_or("", String::as_str)
    }
}

fn query(prometheus: &Prometheus, expr: &str) -> Vec<Series> {
    let answer = prometheus
        .api("query", Some(expr))
        .unwrap_or_else(|| panic!("Prometheus refused {expr}:\n{}", prometheus.log()));
    assert_eq!(answer["status"], "success", "{expr}: {answer}");
    assert_eq!(answer["data"]["resultType"], "vector", "{expr}: {answer}");
    answer["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Series {
            labels: s["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect(),
            value: s["value"][1].as_str().unwrap().parse().unwrap(),
        })
        .collect()
}

/// A panel query made concrete as Grafana would: the variables replaced by their values
/// (`$node`, `$gpu` and `$namespace` by regular expressions, as a multi-value variable is).
fn substitute(expr: &str, node: &str, gpu: &str, namespace: &str) -> String {
    expr.replace("$node", node)
        .replace("$gpu", gpu)
        .replace("$namespace", namespace)
}

/// The `label_values(selector, label)` of a Grafana variable, as a `PromQL` query: one series per value.
fn label_values(definition: &str) -> String {
    let inner = definition
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not a label_values query: {definition}"));
    let (selector, label) = inner.rsplit_once(',').unwrap();
    format!("group by ({}) ({})", label.trim(), selector.trim())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The series keyed by `instance` and `gpu` (and `mig`, `pid` where present).
fn by_key(series: &[Series]) -> BTreeMap<String, f64> {
    series
        .iter()
        .map(|s| {
            let mut key = s.label("instance").to_string();
            for l in ["gpu", "mig", "pid"] {
                if !s.label(l).is_empty() {
                    key.push('/');
                    key.push_str(s.label(l));
                }
            }
            (key, s.value)
        })
        .collect()
}

/// The series keyed by the values of `labels`, joined by `/` (an absent label is empty).
fn by_labels(series: &[Series], labels: &[&str]) -> BTreeMap<String, f64> {
    let keyed: BTreeMap<String, f64> = series
        .iter()
        .map(|s| {
            let values: Vec<&str> = labels.iter().map(|l| s.label(l)).collect();
            (values.join("/"), s.value)
        })
        .collect();
    assert_eq!(
        keyed.len(),
        series.len(),
        "two series of one key: {series:?}"
    );
    keyed
}

fn assert_values(what: &str, got: &[Series], want: &[(String, f64)]) {
    assert_keyed(what, &by_key(got), want);
}

/// As `assert_values`, the series keyed by the values of `labels` (see `by_labels`).
fn assert_labelled(what: &str, got: &[Series], labels: &[&str], want: &[(String, f64)]) {
    assert_keyed(what, &by_labels(got, labels), want);
}

fn assert_keyed(what: &str, got: &BTreeMap<String, f64>, want: &[(String, f64)]) {
    let want: BTreeMap<String, f64> = want.iter().cloned().collect();
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "{what}: got {got:?}"
    );
    for (k, v) in &want {
        assert!(close(got[k], *v), "{what}: {k} = {} (want {v})", got[k]);
    }
}

struct Fleet {
    a: String,
    b: String,
    c: String,
    d: String,
    e: String,
    pids: [u32; 3],
}

/// Node E's processes' memory, MiB, per GPU.
fn e_used(gpu: u32) -> f64 {
    let gib: u64 = dra::PROCESSES
        .iter()
        .filter(|(_, g, _)| *g == gpu)
        .map(|(_, _, gib)| gib)
        .sum();
    #[allow(clippy::cast_precision_loss)] // GiB counts far below 2^52
    let mib = (gib * 1024) as f64;
    mib * MIB
}

impl Fleet {
    /// The expected answer of each panel query (panel title, refId) with every node and GPU.
    #[allow(clippy::too_many_lines)] // one table of expectations
    #[allow(clippy::many_single_char_names)] // nodes a to d, as the module's doc names them
    fn check(&self, title: &str, ref_id: &str, got: &[Series]) {
        let (a, b, c, d, e) = (&self.a, &self.b, &self.c, &self.d, &self.e);
        let (e_total, e_reserved) = (143_771.0 * MIB, 614.0 * MIB);
        let e_all = e_used(0) + e_used(1) + e_used(2);
        let [p1, p2, p3] = self.pids;
        let k = |node: &str, rest: &str| format!("{node}/{rest}");
        let what = format!("{title} / {ref_id}");
        // Node A's H200: used 32,361 MiB of which the processes hold 28,672, so 3,689 MiB is
        // not visible. Node B's L40S: 1,234 used, 1,200 by its process, 34 within the driver's
        // overhead allowance (not "not visible"). Node B's MIG H200: no not-visible figure.
        // Node C's V100: no reservation figure, so neither. Node D's H100s: all their memory is
        // their processes', so 0 not visible.
        let (a_used, b_mig_used, b_l40s_used, c_used) =
            (32_361.0 * MIB, 16_959.0 * MIB, 1_234.0 * MIB, 2_768.0 * MIB);
        let (d0_used, d1_used) = (43_520.0 * MIB, 55_296.0 * MIB);
        let (d_total, d_reserved) = (81_559.0 * MIB, 512.0 * MIB);
        match (title, ref_id) {
            // Fleet-wide: node D is the fourth node, its two H100s the fifth and sixth GPUs.
            ("Nodes reporting", "A") => assert_values(&what, got, &[(String::new(), 5.0)]),
            ("GPUs seen", "A") => assert_values(&what, got, &[(String::new(), 9.0)]),
            ("GPU memory used by node, of total − reserved", "A") => assert_values(
                &what,
                got,
                &[
                    (a.clone(), a_used / ((143_771.0 - 614.0) * MIB)),
                    (
                        b.clone(),
                        (b_mig_used + b_l40s_used) / ((143_771.0 - 614.0 + 46_068.0 - 609.0) * MIB),
                    ),
                    (c.clone(), c_used / (32_768.0 * MIB)),
                    (
                        d.clone(),
                        (d0_used + d1_used) / (2.0 * (d_total - d_reserved)),
                    ),
                    (e.clone(), e_all / (3.0 * (e_total - e_reserved))),
                ],
            ),
            ("Exporter health", "A") => assert_values(
                &what,
                got,
                &[
                    (a.clone(), 1.0),
                    (b.clone(), 1.0),
                    (c.clone(), 1.0),
                    (d.clone(), 1.0),
                    (e.clone(), 1.0),
                ],
            ),
            ("Exporter health", "B") => {
                assert!(
                    got.iter().all(|s| s.label("source") == "nvml"),
                    "{what}: {got:?}"
                );
                assert_values(
                    &what,
                    got,
                    &[
                        (a.clone(), 1.0),
                        (b.clone(), 1.0),
                        (c.clone(), 1.0),
                        (d.clone(), 1.0),
                        (e.clone(), 1.0),
                    ],
                );
            }
            ("GPU memory by node", "A") => assert_values(
                &what,
                got,
                &[
                    (a.clone(), 143_771.0 * MIB),
                    (b.clone(), (143_771.0 + 46_068.0) * MIB),
                    (c.clone(), 32_768.0 * MIB),
                    (d.clone(), 2.0 * d_total),
                    (e.clone(), 3.0 * e_total),
                ],
            ),
            ("GPU memory by node", "B") => assert_values(
                &what,
                got,
                &[
                    (a.clone(), a_used),
                    (b.clone(), b_mig_used + b_l40s_used),
                    (c.clone(), c_used),
                    (d.clone(), d0_used + d1_used),
                    (e.clone(), e_all),
                ],
            ),
            ("GPU memory by node", "C") => assert_values(
                &what,
                got,
                &[
                    (a.clone(), 110_796.0 * MIB),
                    (b.clone(), (126_198.0 + 44_225.0) * MIB),
                    (c.clone(), 30_000.0 * MIB),
                    (
                        d.clone(),
                        2.0 * d_total - 2.0 * d_reserved - d0_used - d1_used,
                    ),
                    (e.clone(), 3.0 * (e_total - e_reserved) - e_all),
                ],
            ),
            ("GPU memory: reserved / used by processes / not visible / free", "A") => {
                assert_values(
                    &what,
                    got,
                    &[
                        (k(a, "0"), 614.0 * MIB),
                        (k(b, "0"), 614.0 * MIB),
                        (k(b, "1"), 609.0 * MIB),
                        (k(d, "0"), d_reserved),
                        (k(d, "1"), d_reserved),
                        (k(e, "0"), e_reserved),
                        (k(e, "1"), e_reserved),
                        (k(e, "2"), e_reserved),
                    ],
                );
            }
            ("GPU memory: reserved / used by processes / not visible / free", "B") => {
                assert_values(
                    &what,
                    got,
                    &[
                        (k(a, "0"), 28_672.0 * MIB),
                        (k(b, "0"), b_mig_used),
                        (k(b, "1"), b_l40s_used),
                        (k(c, "0"), c_used),
                        (k(d, "0"), d0_used),
                        (k(d, "1"), d1_used),
                        (k(e, "0"), e_used(0)),
                        (k(e, "1"), e_used(1)),
                        (k(e, "2"), e_used(2)),
                    ],
                );
            }
            ("GPU memory: reserved / used by processes / not visible / free", "C") => {
                assert_values(
                    &what,
                    got,
                    &[
                        (k(a, "0"), 3_689.0 * MIB),
                        (k(b, "1"), 0.0),
                        (k(d, "0"), 0.0),
                        (k(d, "1"), 0.0),
                        (k(e, "0"), 0.0),
                        (k(e, "1"), 0.0),
                        (k(e, "2"), 0.0),
                    ],
                );
            }
            ("GPU memory: reserved / used by processes / not visible / free", "D") => {
                assert_values(
                    &what,
                    got,
                    &[
                        (k(a, "0"), 110_796.0 * MIB),
                        (k(b, "0"), 126_198.0 * MIB),
                        (k(b, "1"), 44_225.0 * MIB),
                        (k(c, "0"), 30_000.0 * MIB),
                        (k(d, "0"), d_total - d_reserved - d0_used),
                        (k(d, "1"), d_total - d_reserved - d1_used),
                        (k(e, "0"), e_total - e_reserved - e_used(0)),
                        (k(e, "1"), e_total - e_reserved - e_used(1)),
                        (k(e, "2"), e_total - e_reserved - e_used(2)),
                    ],
                );
            }
            ("GPU memory used, of total − reserved", "A") => assert_values(
                &what,
                got,
                &[
                    (k(a, "0"), a_used / ((143_771.0 - 614.0) * MIB)),
                    (k(b, "0"), b_mig_used / ((143_771.0 - 614.0) * MIB)),
                    (k(b, "1"), b_l40s_used / ((46_068.0 - 609.0) * MIB)),
                    (k(c, "0"), c_used / (32_768.0 * MIB)),
                    (k(d, "0"), d0_used / (d_total - d_reserved)),
                    (k(d, "1"), d1_used / (d_total - d_reserved)),
                    (k(e, "0"), e_used(0) / (e_total - e_reserved)),
                    (k(e, "1"), e_used(1) / (e_total - e_reserved)),
                    (k(e, "2"), e_used(2) / (e_total - e_reserved)),
                ],
            ),
            ("GPUs", "A") => {
                assert_values(
                    &what,
                    got,
                    &[
                        (k(a, "0"), 1.0),
                        (k(b, "0"), 1.0),
                        (k(b, "1"), 1.0),
                        (k(c, "0"), 1.0),
                        (k(d, "0"), 1.0),
                        (k(d, "1"), 1.0),
                        (k(e, "0"), 1.0),
                        (k(e, "1"), 1.0),
                        (k(e, "2"), 1.0),
                    ],
                );
                let models: BTreeSet<(&str, &str, &str)> = got
                    .iter()
                    .map(|s| (s.label("uuid"), s.label("model"), s.label("mig_mode")))
                    .collect();
                assert!(
                    models.contains(&(A_UUID, "NVIDIA H200", "")),
                    "{what}: {models:?}"
                );
                assert!(
                    models.contains(&(B_MIG_UUID, "NVIDIA H200", "enabled")),
                    "{what}: {models:?}"
                );
                assert!(
                    models.contains(&(C_UUID, "Tesla V100-SXM2-32GB", "")),
                    "{what}: {models:?}"
                );
                for uuid in D_UUIDS {
                    assert!(
                        models.contains(&(uuid, "NVIDIA H100 80GB HBM3", "")),
                        "{what}: {models:?}"
                    );
                }
                assert!(
                    got.iter()
                        .any(|s| s.label("pci_bus_id") == "00000000:18:00.0"),
                    "{what}"
                );
            }
            ("Top processes by GPU memory", "A") => {
                let mut want = vec![
                    (k(a, &format!("0/{p1}")), 20_480.0 * MIB),
                    (k(a, &format!("0/{p2}")), 8_192.0 * MIB),
                    (k(b, &format!("1/{p2}")), 1_200.0 * MIB),
                    (k(c, &format!("0/{p3}")), 2_000.0 * MIB),
                ];
                for (pid, gpu, m) in D_PROCESSES {
                    #[allow(clippy::cast_precision_loss)] // MiB counts far below 2^52
                    want.push((k(d, &format!("{gpu}/{pid}")), m as f64 * MIB));
                }
                for (pid, gpu, gib) in dra::PROCESSES {
                    #[allow(clippy::cast_precision_loss)] // GiB counts far below 2^52
                    want.push((k(e, &format!("{gpu}/{pid}")), (gib * 1024) as f64 * MIB));
                }
                assert_values(&what, got, &want);
                for s in got {
                    assert!(!s.label("uuid").is_empty(), "{what}: {s:?}");
                    if s.label("instance") == e {
                        // Node E's: each in its pod, with its claim on that GPU where it has one.
                        let claim = match s.label("pid") {
                            "5100" => "gpu-claim",
                            "5200" | "5300" | "5301" => "shared",
                            _ => "",
                        };
                        assert_eq!(
                            (s.label("process"), s.label("claim")),
                            ("python3", claim),
                            "{what}: {s:?}"
                        );
                        continue;
                    }
                    if s.label("instance") != d {
                        assert_eq!(s.label("process"), "sleep", "{what}: {s:?}");
                        continue;
                    }
                    // Node D's: the fixture's names, and the pod of each as the kubelet names it.
                    let (process, namespace, pod) = match s.label("pid") {
                        "4242" => ("python3", "ml-team", "trainer-0"),
                        "4250" => ("vector", "ml-team", "trainer-0"),
                        "4300" => ("python3", "inference", "vllm-7d9f8b6c4-x2k9p"),
                        "4400" => ("python3", "ml-team", "notebook-alice"),
                        "4500" => ("python3", "", "2d3e4f5a-6b7c-4d8e-9fa0-b1c2d3e4f5a6"),
                        "4600" => ("python3", "", "3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7"),
                        "4700" => ("ffmpeg", "", ""),
                        "4800" => ("Xorg", "", ""),
                        pid => panic!("{what}: pid {pid} on node D"),
                    };
                    assert_eq!(
                        (s.label("process"), s.label("namespace"), s.label("pod")),
                        (process, namespace, pod),
                        "{what}: {s:?}"
                    );
                }
            }
            ("Processes per GPU", "A") => assert_values(
                &what,
                got,
                &[
                    (k(a, "0"), 2.0),
                    (k(b, "1"), 1.0),
                    (k(c, "0"), 1.0),
                    (k(d, "0"), 5.0),
                    (k(d, "1"), 4.0),
                    (k(e, "0"), 2.0),
                    (k(e, "1"), 3.0),
                    (k(e, "2"), 2.0),
                ],
            ),
            // Node D's pods: ml-team holds trainer-0 (GPU 0: 30,720 MiB of its worker and 512 of
            // its log shipper; GPU 1: 30,720 of the worker) and notebook-alice (6,144), inference
            // vllm-… (20,480); the two pods the kubelet's logs do not name, 4,096 and 3,072, are
            // `?`. The docker container and the host service are in no pod: not counted.
            ("GPU memory per namespace", "A") => assert_labelled(
                &what,
                got,
                &["namespace"],
                &[
                    ("ml-team".into(), 68_096.0 * MIB),
                    ("inference".into(), 20_480.0 * MIB),
                    ("?".into(), 7_168.0 * MIB),
                    // Node E's: ml's pods (52 GiB), web's infer-7 (2 GiB).
                    ("ml".into(), 52.0 * 1024.0 * MIB),
                    ("web".into(), 2.0 * 1024.0 * MIB),
                ],
            ),
            ("GPU memory per pod", "A") => {
                assert_labelled(
                    &what,
                    got,
                    &["instance", "gpu", "namespace", "pod"],
                    &[
                        (k(d, "0/ml-team/trainer-0"), 31_232.0 * MIB),
                        (k(d, "1/ml-team/trainer-0"), 30_720.0 * MIB),
                        (k(d, "1/inference/vllm-7d9f8b6c4-x2k9p"), 20_480.0 * MIB),
                        (k(d, "0/ml-team/notebook-alice"), 6_144.0 * MIB),
                        (
                            k(d, "0//2d3e4f5a-6b7c-4d8e-9fa0-b1c2d3e4f5a6"),
                            4_096.0 * MIB,
                        ),
                        (
                            k(d, "1//3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7"),
                            3_072.0 * MIB,
                        ),
                        (k(e, "0/ml/trainer-0"), 30.0 * 1024.0 * MIB),
                        (k(e, "0/web/infer-7"), 2.0 * 1024.0 * MIB),
                        (k(e, "1/ml/eval-a"), 10.0 * 1024.0 * MIB),
                        (k(e, "1/ml/eval-b"), 6.0 * 1024.0 * MIB),
                        (k(e, "1/ml/trainer-0"), 1024.0 * MIB),
                        (k(e, "2/ml/eval-b"), 4.0 * 1024.0 * MIB),
                        (k(e, "2/ml/lost-0"), 1024.0 * MIB),
                    ],
                );
                // Largest first, as the query answers (the table sorts by memory too).
                assert!(
                    got.windows(2).all(|w| w[0].value >= w[1].value),
                    "{what}: not largest first: {got:?}"
                );
                for s in got.iter().filter(|s| s.label("instance") == d) {
                    assert_eq!(
                        s.label("uuid"),
                        D_UUIDS[usize::from(s.label("gpu") == "1")],
                        "{what}"
                    );
                }
            }
            // Node E's allocations: each container once per GPU, the claim and the MIG GPU
            // instance where DRA gave them, the device plugin's beside them.
            ("GPU allocations", "A") => assert_labelled(
                &what,
                got,
                &["instance", "gpu", "pod", "container", "claim", "mig"],
                &[
                    (k(e, "0/trainer-0/train/gpu-claim/"), 1.0),
                    (k(e, "0/infer-7/server//"), 1.0),
                    (k(e, "1/eval-a/eval/shared/"), 1.0),
                    (k(e, "1/eval-b/eval/shared/"), 1.0),
                    (k(e, "2/eval-b/eval/shared/1"), 1.0),
                ],
            ),
            ("GPU memory outside the pod's allocation", "A") => assert_labelled(
                &what,
                got,
                &["instance", "gpu", "namespace", "pod"],
                &[(k(e, "1/ml/trainer-0"), 1024.0 * MIB)],
            ),
            ("DRA claims: memory held and booked", "A") => assert_labelled(
                &what,
                got,
                &["instance", "gpu", "claim"],
                &[
                    (k(e, "0/gpu-claim"), 30.0 * 1024.0 * MIB),
                    (k(e, "1/shared"), 16.0 * 1024.0 * MIB),
                    (k(e, "2/shared"), 4.0 * 1024.0 * MIB),
                ],
            ),
            ("DRA claims: memory held and booked", "B") => assert_labelled(
                &what,
                got,
                &["instance", "gpu", "claim"],
                &[
                    (k(e, "1/shared"), 20.0 * 1024.0 * MIB),
                    (k(e, "2/shared"), 2.0 * 1024.0 * MIB),
                ],
            ),
            ("MIG instances", ref_id) => {
                let (gi2, gi9) = match ref_id {
                    "A" => (71_424.0, 16_384.0),
                    "B" => (71_424.0 - 54_499.0, 16_384.0 - 16_375.0),
                    "C" => (54_499.0, 16_375.0),
                    _ => panic!("{what}: no expectation"),
                };
                assert_values(
                    &what,
                    got,
                    &[(k(b, "0/2"), gi2 * MIB), (k(b, "0/9"), gi9 * MIB)],
                );
                for s in got {
                    assert_eq!(s.label("uuid"), B_MIG_UUID, "{what}: {s:?}");
                }
            }
            _ => panic!("{what}: the dashboard has a query this test has no expectation for"),
        }
    }
}

/// Every (panel title, refId, expr) of the dashboard.
fn panel_queries(dashboard: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        let title = panel["title"].as_str().unwrap();
        let Some(targets) = panel["targets"].as_array() else {
            assert_eq!(panel["type"], "row", "{title} has no queries");
            continue;
        };
        assert!(!targets.is_empty(), "{title} has no queries");
        for t in targets {
            out.push((
                title.to_string(),
                t["refId"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// The layout Grafana draws: rows top to bottom, each followed by its panels, which lie between
/// it and the next row and overlap no other panel; each row starts where the panels above end.
#[test]
fn panels_lie_row_by_row_without_overlap() {
    let path = support::workspace().join("deploy/grafana/hypomnesis.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    let grid = |p: &serde_json::Value, k: &str| p["gridPos"][k].as_u64().unwrap();
    let ids: BTreeSet<u64> = panels.iter().map(|p| p["id"].as_u64().unwrap()).collect();
    assert_eq!(ids.len(), panels.len(), "panel ids repeat");
    assert_eq!(panels[0]["type"], "row", "the first panel is not a row");
    // Each panel's title, box (x, y, w, h), and whether it is a row.
    let boxes: Vec<(&str, [u64; 4], bool)> = panels
        .iter()
        .map(|p| {
            let b = [grid(p, "x"), grid(p, "y"), grid(p, "w"), grid(p, "h")];
            (p["title"].as_str().unwrap(), b, p["type"] == "row")
        })
        .collect();
    for (title, [x, _, w, h], row) in &boxes {
        assert!(*w > 0 && *h > 0 && x + w <= 24, "{title}: {x}, {w}, {h}");
        if *row {
            assert_eq!((*x, *w, *h), (0, 24, 1), "{title}: a row is the full width");
        }
    }
    for (i, (t1, [x1, y1, w1, h1], _)) in boxes.iter().enumerate() {
        for (t2, [x2, y2, w2, h2], _) in &boxes[i + 1..] {
            let apart = x1 + w1 <= *x2 || x2 + w2 <= *x1 || y1 + h1 <= *y2 || y2 + h2 <= *y1;
            assert!(apart, "{t1} and {t2} overlap");
        }
    }
    // Below each row, its panels; the next row where the lowest of them ends.
    let mut bottom = 0;
    let mut row_y = 0;
    for (title, [_, y, _, h], row) in &boxes {
        if *row {
            assert_eq!(
                *y, bottom,
                "{title}: the row does not start where the panels above end"
            );
            row_y = *y;
        } else {
            assert!(*y > row_y, "{title} lies above its row");
        }
        bottom = bottom.max(y + h);
    }
}

fn wait_for_all(prometheus: &Prometheus, n: usize) {
    let until = Instant::now() + Duration::from_secs(90);
    // Two scrapes of each target, so that no query sees a half-ingested node.
    let ready = format!(
        "count(count_over_time(hypomnesis_scrape_success[1m]) >= 2) == {n} \
         and count(count by (instance) (hypomnesis_gpu_info)) == {n}"
    );
    loop {
        if prometheus.api("query", Some(&ready)).is_some_and(|v| {
            v["data"]["result"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        }) {
            return;
        }
        assert!(
            Instant::now() < until,
            "Prometheus did not scrape the {n} exporters within 90 s:\n{}",
            prometheus.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[allow(clippy::many_single_char_names)] // nodes a to e, as the module's doc names them
fn every_panel_query_returns_the_nodes_figures() {
    let Some(binary) = external("prometheus") else {
        return;
    };
    let path = support::workspace().join("deploy/grafana/hypomnesis.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();

    let sleepers = Sleepers::spawn(3);
    let pids: [u32; 3] = sleepers.pids().try_into().unwrap();
    let a = Server::start(FakeVariant::Modern, &node_a(pids[0], pids[1]), &[]);
    let b = Server::start(FakeVariant::Modern, &node_b(pids[1]), &[]);
    let c = Server::start(FakeVariant::PreR510, &node_c(pids[2]), &[]);
    // Node D: the kubelet fixture's processes (its procfs) and log layout (its rootfs).
    let kubelet = support::fixtures("kubelet");
    let (procfs, rootfs) = (kubelet.join("proc"), kubelet.join("rootfs"));
    let d = Server::start(
        FakeVariant::Modern,
        &node_d(),
        &[
            "--procfs",
            procfs.to_str().unwrap(),
            "--rootfs",
            rootfs.to_str().unwrap(),
        ],
    );
    // Node E: the DRA fixture node, its kubelet's claims from the stand-in.
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(dra::GPUS[0])));
    let socket = kubelet.socket().display().to_string();
    let mut e_args = vec![
        "--no-ghosts".to_owned(),
        "--pod-resources-socket".to_owned(),
        socket,
    ];
    e_args.extend(dra::roots());
    let e_args: Vec<&str> = e_args.iter().map(String::as_str).collect();
    let e = Server::start(FakeVariant::Modern, &dra::scenario(), &e_args);
    let addrs: [SocketAddr; 5] = [a.addr, b.addr, c.addr, d.addr, e.addr];
    let prometheus = Prometheus::start(&binary, &addrs);
    wait_for_all(&prometheus, 5);
    // The sleepers run in this test's cgroup: were that a Kubernetes pod's, nodes A to C would
    // export their memory as that pod's, and the Kubernetes panels would not show node D's
    // pods alone, which their expectations below assume.
    let ambient = query(
        &prometheus,
        &format!(
            "hypomnesis_gpu_pod_memory_bytes{{instance!~\"{}|{}\"}}",
            d.addr, e.addr
        ),
    );
    assert!(
        ambient.is_empty(),
        "nodes A to C see this test's processes in a Kubernetes pod (the test runs in one), \
         so the Kubernetes panels would not show node D's pods alone: {ambient:?}"
    );
    let fleet = Fleet {
        a: a.addr.to_string(),
        b: b.addr.to_string(),
        c: c.addr.to_string(),
        d: d.addr.to_string(),
        e: e.addr.to_string(),
        pids,
    };

    check_variables(&dashboard, &prometheus, &fleet);
    let queries = panel_queries(&dashboard);
    check_panels(&queries, &prometheus, &fleet);
    check_stack(&queries, &prometheus);
    check_one_node_and_gpu(&queries, &prometheus, &fleet);
    check_namespaces_picked(&queries, &prometheus);
    drop(sleepers);
}

fn check_variables(dashboard: &serde_json::Value, prometheus: &Prometheus, fleet: &Fleet) {
    // The variables: every node, then the GPUs of the node picked.
    let vars = dashboard["templating"]["list"].as_array().unwrap();
    let definition = |name: &str| {
        vars.iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))["definition"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let nodes: BTreeSet<String> = query(prometheus, &label_values(&definition("node")))
        .iter()
        .map(|s| s.label("instance").to_string())
        .collect();
    assert_eq!(
        nodes,
        BTreeSet::from([
            fleet.a.clone(),
            fleet.b.clone(),
            fleet.c.clone(),
            fleet.d.clone(),
            fleet.e.clone()
        ])
    );
    let gpus_of_b: BTreeSet<String> = query(
        prometheus,
        &substitute(
            &label_values(&definition("gpu")),
            &regex_escape(&fleet.b),
            ".*",
            ".*",
        ),
    )
    .iter()
    .map(|s| s.label("uuid").to_string())
    .collect();
    assert_eq!(
        gpus_of_b,
        BTreeSet::from([B_MIG_UUID.into(), B_L40S_UUID.into()])
    );
    // The namespaces of the pods the kubelet's logs name: those of nodes D and E. (The pods they do not
    // name have no namespace label, which Grafana's `label_values` does not list.)
    let namespaces: BTreeSet<String> = query(prometheus, &label_values(&definition("namespace")))
        .iter()
        .map(|s| s.label("namespace").to_string())
        .filter(|n| !n.is_empty())
        .collect();
    assert_eq!(
        namespaces,
        BTreeSet::from([
            "inference".into(),
            "ml".into(),
            "ml-team".into(),
            "web".into()
        ])
    );
    for v in vars.iter().filter(|v| v["type"] == "query") {
        assert_eq!(
            v["allValue"], ".*",
            "{}: All must match GPUs without a uuid too",
            v["name"]
        );
    }
}

fn check_panels(queries: &[(String, String, String)], prometheus: &Prometheus, fleet: &Fleet) {
    // Every panel query: all nodes and GPUs, with the values each node has.
    assert!(queries.len() >= 15, "{} queries", queries.len());
    for (title, ref_id, expr) in queries {
        let got = query(prometheus, &substitute(expr, ".*", ".*", ".*"));
        assert!(
            !got.is_empty(),
            "{title} / {ref_id} returned no data: {expr}"
        );
        fleet.check(title, ref_id, &got);
        eprintln!("ok: {title} / {ref_id}: {} series", got.len());
    }
}

fn check_stack(queries: &[(String, String, String)], prometheus: &Prometheus) {
    // The stacked panel adds up to each GPU's total.
    let stacked = "GPU memory: reserved / used by processes / not visible / free";
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for (_, _, expr) in queries.iter().filter(|(t, _, _)| t == stacked) {
        for (key, v) in by_key(&query(prometheus, &substitute(expr, ".*", ".*", ".*"))) {
            *sums.entry(key).or_default() += v;
        }
    }
    let totals = by_key(&query(prometheus, "hypomnesis_gpu_memory_total_bytes"));
    assert_eq!(
        sums.keys().collect::<Vec<_>>(),
        totals.keys().collect::<Vec<_>>()
    );
    for (key, total) in &totals {
        assert!(
            close(sums[key], *total),
            "{key}: the layers sum to {} of {total}",
            sums[key]
        );
    }
}

fn check_one_node_and_gpu(
    queries: &[(String, String, String)],
    prometheus: &Prometheus,
    fleet: &Fleet,
) {
    // One node and one GPU picked: only theirs (node B's L40S, node D's second H100).
    for (picked, gpu) in [(&fleet.b, B_L40S_UUID), (&fleet.d, D_UUIDS[1])] {
        let node = regex_escape(picked);
        for (title, ref_id, expr) in queries {
            let got = query(prometheus, &substitute(expr, &node, gpu, ".*"));
            for s in &got {
                let instance = s.label("instance");
                assert!(
                    instance.is_empty() || instance == picked,
                    "{title} / {ref_id} with node {picked} picked: {s:?}"
                );
                let uuid = s.label("uuid");
                assert!(
                    uuid.is_empty() || uuid == gpu,
                    "{title} / {ref_id} with GPU {gpu} picked: {s:?}"
                );
            }
            // The pods of node D's second H100: trainer-0's worker, vllm-… and a pod not named.
            if gpu == D_UUIDS[1] && title == "GPU memory per namespace" {
                assert_labelled(
                    title,
                    &got,
                    &["namespace"],
                    &[
                        ("ml-team".into(), 30_720.0 * MIB),
                        ("inference".into(), 20_480.0 * MIB),
                        ("?".into(), 3_072.0 * MIB),
                    ],
                );
            }
            if gpu == D_UUIDS[1] && title == "GPU memory per pod" {
                assert_labelled(
                    title,
                    &got,
                    &["pod"],
                    &[
                        ("trainer-0".into(), 30_720.0 * MIB),
                        ("vllm-7d9f8b6c4-x2k9p".into(), 20_480.0 * MIB),
                        ("3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7".into(), 3_072.0 * MIB),
                    ],
                );
            }
        }
    }
}

fn check_namespaces_picked(queries: &[(String, String, String)], prometheus: &Prometheus) {
    // The panels of pods filter on the namespace variable: one namespace picked, or two (as
    // Grafana writes a multi-value regex), only theirs, not the pods of no known namespace.
    let of_pods: Vec<_> = queries
        .iter()
        .filter(|(_, _, expr)| expr.contains("hypomnesis_gpu_pod_memory_bytes"))
        .collect();
    assert_eq!(of_pods.len(), 2, "{of_pods:?}");
    for (title, ref_id, expr) in of_pods {
        assert!(
            expr.contains("namespace=~\"$namespace\""),
            "{title} / {ref_id} does not filter on $namespace: {expr}"
        );
        for (picked, want) in [
            ("ml-team", &["ml-team"][..]),
            ("(inference|ml-team)", &["inference", "ml-team"]),
        ] {
            let got = query(prometheus, &substitute(expr, ".*", ".*", picked));
            let namespaces: BTreeSet<&str> = got.iter().map(|s| s.label("namespace")).collect();
            assert_eq!(
                namespaces,
                want.iter().copied().collect(),
                "{title} / {ref_id} with {picked} picked: {got:?}"
            );
            // The figures stay each namespace's whole: ml-team's 68,096 MiB, inference's 20,480.
            if title == "GPU memory per namespace" {
                let want: Vec<(String, f64)> = want
                    .iter()
                    .map(|n| {
                        let mib = if *n == "ml-team" { 68_096.0 } else { 20_480.0 };
                        ((*n).to_string(), mib * MIB)
                    })
                    .collect();
                assert_labelled(title, &got, &["namespace"], &want);
            }
        }
    }
}

/// `text` as a regular expression matching itself (an address has dots).
fn regex_escape(text: &str) -> String {
    text.replace('.', "\\\\.")
}
