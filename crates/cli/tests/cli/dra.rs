//! A node whose GPUs Kubernetes allocates through DRA resource claims, end to end: the fake
//! NVML's GPUs and processes, the DRA fixture node (`fixtures/dra`: its procfs, with the pods'
//! cgroups, the driver's GPU minors and MIG capability nodes; its rootfs, with the kubelet's log
//! layout, the claims' CDI specs and the NVIDIA DRA driver's checkpoint), and the kubelet
//! stand-in answering with `dynamic_resources` (`tests/support/kubelet.rs`). The first scrape of
//! `hmn serve` names every GPU process's namespace, pod, container and claim; and `hmn ps
//! --group-by claim` adds each claim up.
#![cfg(all(feature = "serve", target_os = "linux"))]

use std::path::PathBuf;

use crate::kubelet_standin::{Kubelet, Reply, dra_answer};
use crate::util::serve::{Server, serve_command, value};

const GIB: u64 = 1 << 30;

/// The fixture node's GPUs, as its driver's information files name them.
pub const GPUS: [&str; 3] = [
    "GPU-d4a00000-0000-4000-8000-000000000000",
    "GPU-d4a00000-0000-4000-8000-000000000001",
    "GPU-d4a00000-0000-4000-8000-000000000002",
];

/// The fixture node's GPU processes: (pid, GPU index, GiB), and their pods (`README.md` there).
pub const PROCESSES: [(u32, u32, u64); 7] = [
    (5100, 0, 30), // ml/trainer-0, container train: claim gpu-claim (GPU 0)
    (5400, 0, 2),  // web/infer-7, container server: a device plugin's GPU 0
    (5200, 1, 10), // ml/eval-a, container eval: claim shared (GPU 1)
    (5300, 1, 6),  // ml/eval-b, container eval: claim shared (GPU 1 and a MIG device of GPU 2)
    (5101, 1, 1),  // ml/trainer-0 again: on GPU 1, which its claim does not include
    (5301, 2, 4),  // ml/eval-b on the MIG device
    (5500, 2, 1),  // ml/lost-0: claim lost, whose device the node's CDI specs do not name
];

/// A GPU's total and reservation (an H200's, MiB).
pub const TOTAL_MIB: u64 = 143_771;
pub const RESERVED_MIB: u64 = 614;

pub fn node(part: &str) -> PathBuf {
    support::fixtures("dra").join(part)
}

/// Three H200s holding the fixture's processes, all their memory accounted for.
pub fn scenario() -> String {
    let devices: Vec<String> = GPUS
        .iter()
        .zip(0..)
        .map(|(uuid, i)| {
            let on: Vec<_> = PROCESSES.iter().filter(|(_, g, _)| *g == i).collect();
            let used: u64 = on.iter().map(|(_, _, gib)| gib * GIB).sum();
            let procs: Vec<String> = on
                .iter()
                .map(|(pid, _, gib)| format!(r#"{{"pid": {pid}, "used": {}}}"#, gib * GIB))
                .collect();
            format!(
                r#"{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
                    "uuid": "{uuid}", "pci_bus_id": "00000000:0{}:00.0",
                    "compute_processes": [{}]}}"#,
                TOTAL_MIB << 20,
                RESERVED_MIB << 20,
                ((TOTAL_MIB - RESERVED_MIB) << 20) - used,
                i + 1,
                procs.join(", ")
            )
        })
        .collect();
    format!(r#"{{"devices": [{}]}}"#, devices.join(", "))
}

/// `--procfs` and `--rootfs` of the fixture node.
pub fn roots() -> Vec<String> {
    vec![
        "--procfs".into(),
        node("proc").display().to_string(),
        "--rootfs".into(),
        node("rootfs").display().to_string(),
    ]
}

/// The first scrape: every process labelled with its pod and claim, the shared claim counted
/// once per pod, outside-allocation only for the pod on a GPU its claim does not include, the
/// unresolved device counted and its pod not called outside, the booking beside the use.
#[test]
#[allow(clippy::too_many_lines)] // one node, every series of it in turn
fn the_first_scrape_names_every_process_with_its_claim() {
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(GPUS[0])));
    let socket = kubelet.socket().display().to_string();
    let mut args = vec![
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--no-ghosts".to_owned(),
        "--pod-resources-socket".to_owned(),
        socket,
    ];
    args.extend(roots());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::spawn(serve_command(
        support::FakeVariant::Modern,
        &scenario(),
        &args,
    ));
    let r = server.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    let t = &r.body;
    let gpu = |i: usize| format!("gpu=\"{i}\",uuid=\"{}\"", GPUS[i]);
    let process = |g: usize, pid: u32, ns: &str, pod: &str, container: &str, claim: &str| {
        let claim = if claim.is_empty() {
            String::new()
        } else {
            format!(",claim=\"{claim}\"")
        };
        format!(
            "hypomnesis_gpu_process_memory_bytes{{{},pid=\"{pid}\",process=\"python3\",namespace=\"{ns}\",pod=\"{pod}\",container=\"{container}\"{claim},type=\"C\"}}",
            gpu(g)
        )
    };
    let procs = [
        (0, 5100, "ml", "trainer-0", "train", "gpu-claim", 30),
        (0, 5400, "web", "infer-7", "server", "", 2),
        (1, 5200, "ml", "eval-a", "eval", "shared", 10),
        (1, 5300, "ml", "eval-b", "eval", "shared", 6),
        (1, 5101, "ml", "trainer-0", "train", "", 1),
        (2, 5301, "ml", "eval-b", "eval", "shared", 4),
        (2, 5500, "ml", "lost-0", "c", "", 1),
    ];
    // The owner is the fixture files' (whoever checked them out): left out of the comparison.
    let unowned: String = t
        .lines()
        .map(|l| match l.split_once(",user=\"") {
            Some((head, rest)) => {
                let tail = rest.split_once('"').map_or("", |(_, tail)| tail);
                format!("{head}{tail}\n")
            }
            None => format!("{l}\n"),
        })
        .collect();
    for (g, pid, ns, pod, container, claim, gib) in procs {
        let series = process(g, pid, ns, pod, container, claim);
        assert_eq!(
            value(&unowned, &series),
            Some((gib * GIB).to_string()),
            "{series}\n{t}"
        );
    }
    let lines = |name: &str| -> Vec<&str> {
        t.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .collect()
    };
    assert_eq!(
        lines("hypomnesis_gpu_process_memory_bytes").len(),
        PROCESSES.len()
    );
    // The README's label budget: a process series has at most 11 labels of its own (here at
    // most 10: no MPS server, so no role).
    let counts: Vec<usize> = lines("hypomnesis_gpu_process_memory_bytes")
        .iter()
        .map(|l| {
            l.split_once('{')
                .and_then(|(_, rest)| rest.rsplit_once('}'))
                .map_or(0, |(labels, _)| labels.matches("=\"").count())
        })
        .collect();
    assert_eq!(counts.iter().max(), Some(&10), "{counts:?}\n{t}");
    // The shared claim: both pods, each once; a whole GPU's claim; the MIG device's.
    for (g, claim, gib) in [(0, "gpu-claim", 30), (1, "shared", 16), (2, "shared", 4)] {
        let series = format!(
            "hypomnesis_gpu_claim_memory_bytes{{{},claim_namespace=\"ml\",claim=\"{claim}\"}}",
            gpu(g)
        );
        assert_eq!(value(t, &series), Some((gib * GIB).to_string()), "{t}");
    }
    // Outside: trainer-0 on GPU 1 only; lost-0's device is not placed, so not said.
    let outside = lines("hypomnesis_gpu_pod_memory_outside_allocation_bytes");
    assert_eq!(
        outside,
        vec![format!(
            "hypomnesis_gpu_pod_memory_outside_allocation_bytes{{{},namespace=\"ml\",pod=\"trainer-0\"}} {}",
            gpu(1),
            GIB
        )],
        "{t}"
    );
    assert_eq!(
        value(t, "hypomnesis_gpu_allocation_unknown_devices"),
        Some("1".into())
    );
    // The MIG device's GPU instance, from the capability nodes; the device plugin's GPU.
    for want in [
        format!(
            "hypomnesis_gpu_allocation_info{{{},namespace=\"ml\",pod=\"eval-b\",container=\"eval\",claim_namespace=\"ml\",claim=\"shared\",mig=\"1\"}} 1",
            gpu(2)
        ),
        format!(
            "hypomnesis_gpu_allocation_info{{{},namespace=\"web\",pod=\"infer-7\",container=\"server\"}} 1",
            gpu(0)
        ),
    ] {
        assert!(t.lines().any(|l| l == want), "{want}\n{t}");
    }
    assert_eq!(lines("hypomnesis_gpu_allocation_info").len(), 5, "{t}");
    // The bookings the DRA driver keeps: 20 GiB of GPU 1, 2 GiB of the MIG device (over it).
    for (g, gib) in [(1, 20), (2, 2)] {
        let series = format!(
            "hypomnesis_gpu_claim_memory_booked_bytes{{{},claim_namespace=\"ml\",claim=\"shared\"}}",
            gpu(g)
        );
        assert_eq!(value(t, &series), Some((gib * GIB).to_string()), "{t}");
    }
    assert_eq!(lines("hypomnesis_gpu_claim_memory_booked_bytes").len(), 2);
    // The per-pod series carry the pod's claims on that GPU.
    assert_eq!(
        value(
            t,
            &format!(
                "hypomnesis_gpu_pod_memory_bytes{{{},namespace=\"ml\",pod=\"eval-b\",claim=\"shared\"}}",
                gpu(1)
            )
        ),
        Some((6 * GIB).to_string()),
        "{t}"
    );
}

/// Claims the kubelet names with ESC, NUL and a RIGHT-TO-LEFT OVERRIDE, beside the fixture
/// node's: `/metrics` holds no control character in any byte; the three are counted as
/// invalid allocations, and the node's own claims keep their series.
#[test]
#[allow(clippy::too_many_lines)] // the answer, the server, then every byte of its scrape
fn hostile_claim_names_never_reach_metrics() {
    use crate::kubelet_standin::{answer, claimed, container, pod, with_claims};
    let gpu = "gpu.nvidia.com";
    let hostile = |name: &str| {
        pod(
            "ml",
            &format!("odd-{}", name.len()),
            vec![with_claims(
                container("c", vec![]),
                vec![(
                    "ml",
                    name,
                    vec![claimed(
                        crate::kubelet_standin::GPU_CLAIM_UID,
                        gpu,
                        "gpu-0",
                        None,
                    )],
                )],
            )],
        )
    };
    let standin = Kubelet::start(Reply::Answer(answer(vec![
        hostile("esc\u{1b}]0;pwned\u{7}"),
        hostile("nul\u{0}x"),
        hostile("rlo\u{202e}abc"),
        pod(
            "ml",
            "eval-a",
            vec![with_claims(
                container("eval", vec![]),
                vec![(
                    "ml",
                    "shared",
                    vec![claimed(
                        crate::kubelet_standin::SHARED_UID,
                        gpu,
                        "gpu-1",
                        Some("s-1"),
                    )],
                )],
            )],
        ),
    ])));
    let socket = standin.socket().display().to_string();
    let mut args = vec![
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--no-ghosts".to_owned(),
        "--pod-resources-socket".to_owned(),
        socket,
    ];
    args.extend(roots());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::spawn(serve_command(
        support::FakeVariant::Modern,
        &scenario(),
        &args,
    ));
    let r = server.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    let raw: Vec<(usize, char)> = r
        .body
        .char_indices()
        .filter(|(_, c)| {
            (c.is_control() && *c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
        })
        .collect();
    assert!(raw.is_empty(), "{raw:?}\n{}", r.body);
    assert!(
        r.bytes
            .iter()
            .all(|&b| b == b'\n' || (0x20..0x7f).contains(&b) || b >= 0x80),
        "{}",
        r.body
    );
    assert_eq!(
        value(&r.body, "hypomnesis_gpu_allocation_invalid_names"),
        Some("3".into()),
        "{}",
        r.body
    );
    assert!(
        r.body.lines().any(|l| l.starts_with(&format!(
            "hypomnesis_gpu_claim_memory_bytes{{gpu=\"1\",uuid=\"{}\",claim_namespace=\"ml\",claim=\"shared\"}} ",
            GPUS[1]
        ))),
        "{}",
        r.body
    );
}

/// A FIFO named `x.yaml` among the node's CDI specs, no writer ever coming: the first scrape
/// answers fresh (the measurement waited on the FIFO for ever before, and every scrape after it
/// got stale figures), the claims' devices placed from the other specs, and stderr names the
/// FIFO for what it is.
#[test]
fn a_fifo_among_the_specs_does_not_stall_the_exporter() {
    let root = std::env::temp_dir().join(format!("hmn-dra-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(node("rootfs"))
        .arg(root.join("rootfs"))
        .status()
        .unwrap();
    assert!(copied.success());
    // The fixture's broken spec would be named first: the FIFO alone is.
    std::fs::remove_file(root.join("rootfs/etc/cdi/broken.yaml")).unwrap();
    let fifo = root.join("rootfs/var/run/cdi/x.yaml");
    support::mkfifo(&fifo);
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(GPUS[0])));
    let args = [
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--no-ghosts".to_owned(),
        "--pod-resources-socket".to_owned(),
        kubelet.socket().display().to_string(),
        "--procfs".to_owned(),
        node("proc").display().to_string(),
        "--rootfs".to_owned(),
        root.join("rootfs").display().to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::spawn(serve_command(
        support::FakeVariant::Modern,
        &scenario(),
        &args,
    ));
    let r = server.get("/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        value(&r.body, "hypomnesis_measurement_stalled_seconds"),
        Some("0.0".into()),
        "{}",
        r.body
    );
    let series = format!(
        "hypomnesis_gpu_claim_memory_bytes{{gpu=\"0\",uuid=\"{}\",claim_namespace=\"ml\",claim=\"gpu-claim\"}}",
        GPUS[0]
    );
    assert_eq!(
        value(&r.body, &series),
        Some((30 * GIB).to_string()),
        "{}",
        r.body
    );
    let said = format!("{}: a FIFO, not a regular file", fifo.display());
    let stderr = server.stderr_with(&said, std::time::Duration::from_secs(5));
    assert!(stderr.contains(&said), "{stderr}");
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}

/// `hmn ps --group-by claim`: each claim's memory per GPU, the shared claim's two pods added
/// up, a pod's container without a claim on that GPU as `(no claim)`, the unplaced claim's
/// process too (its device is no GPU this node names).
#[test]
fn ps_groups_by_claim() {
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(GPUS[0])));
    let mut c = crate::util::hmn::hmn();
    c.env(
        "HYPOMNESIS_NVML_LIBRARY",
        support::fake_nvml(support::FakeVariant::Modern),
    )
    .env("FAKE_NVML_SCENARIO", support::write_scenario(&scenario()))
    .env("HYPOMNESIS_SYSFS", support::empty_dir())
    .env("PATH", support::empty_dir())
    .args([
        "ps",
        "--group-by",
        "claim",
        "--json",
        "--pod-resources-socket",
    ])
    .arg(kubelet.socket())
    .args(roots());
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The fixture's broken spec is named, not skipped in silence.
    assert!(
        stderr.contains("the DRA claims' CDI specs: not all read")
            && stderr.contains("etc/cdi/broken.yaml"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups: Vec<(u64, Option<&str>, &str, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["device_index"].as_u64().unwrap(),
                g["group"].as_str(),
                g["kind"].as_str().unwrap(),
                g["used_bytes"].as_u64().unwrap() / GIB,
            )
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            (0, Some("ml/gpu-claim"), "named", 30),
            (0, None, "none", 2),
            (1, Some("ml/shared"), "named", 16),
            (1, None, "none", 1),
            (2, Some("ml/shared"), "named", 4),
            (2, None, "none", 1),
        ],
        "{stderr}"
    );
    // Without an answer, claims are not known, and it is said.
    let mut c = crate::util::hmn::hmn();
    c.env(
        "HYPOMNESIS_NVML_LIBRARY",
        support::fake_nvml(support::FakeVariant::Modern),
    )
    .env("FAKE_NVML_SCENARIO", support::write_scenario(&scenario()))
    .env("HYPOMNESIS_SYSFS", support::empty_dir())
    .env("PATH", support::empty_dir())
    .args([
        "ps",
        "--group-by",
        "claim",
        "--pod-resources-socket",
        "/nonexistent/kubelet.sock",
    ])
    .args(roots());
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("pod-resources") && stderr.contains("claims are not known"),
        "{stderr}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("GPU  CLAIM"), "{table}");
    assert!(table.contains('?'), "{table}");
}
