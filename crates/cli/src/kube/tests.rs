//! The pod-resources client against a kubelet stand-in over a real Unix socket
//! (`tests/support/kubelet.rs`, shared with the end-to-end tests).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tonic::Code;

use super::podresources::{PodResourcesError, list};
use super::{Allocation, DeviceRef, Holder, NodeDevices, assign, list_blocking, pods_blocking};

const GPU0: &str = "GPU-8f2c1a3e-5b7d-4c9e-a1f0-2b3c4d5e6f70";
const GPU1: &str = "GPU-1b2c3d4e-5f60-4718-89a0-bcdef0123456";
const MIG: &str = "MIG-4c0ffee0-1234-5678-9abc-def012345678";
#[path = "../../tests/support/kubelet.rs"]
mod standin;
pub(crate) use standin::*;

mod dra;
mod node_files;

/// The DRA fixture node's GPUs (`fixtures/dra/proc/driver/nvidia/gpus`).
const DRA_GPUS: [&str; 3] = [
    "GPU-d4a00000-0000-4000-8000-000000000000",
    "GPU-d4a00000-0000-4000-8000-000000000001",
    "GPU-d4a00000-0000-4000-8000-000000000002",
];
const DEADLINE: Duration = Duration::from_secs(10);

fn allocation(
    namespace: &str,
    pod: &str,
    container: &str,
    resource: &str,
    device: DeviceRef,
    replica: Option<u32>,
) -> Allocation {
    Allocation {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.to_owned(),
        resource: resource.to_owned(),
        device,
        replica,
        claim: None,
    }
}

fn gpu(uuid: &str) -> DeviceRef {
    DeviceRef::Gpu {
        uuid: uuid.to_owned(),
    }
}

fn holder(namespace: &str, pod: &str, container: &str) -> Holder {
    Holder {
        namespace: namespace.to_owned(),
        pod: pod.to_owned(),
        container: container.to_owned(),
        claim: None,
        mig: None,
    }
}

#[test]
#[allow(clippy::too_many_lines)] // one answer and every allocation it lays out
fn two_pods_their_gpus_mig_instances_and_replicas() {
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![
        pod(
            "ml",
            "trainer-0",
            vec![
                container("train", vec![devices("nvidia.com/gpu", &[GPU0])]),
                container(
                    "eval",
                    vec![
                        devices("nvidia.com/mig-1g.10gb", &[MIG]),
                        devices("example.com/fpga", &["fpga0"]),
                    ],
                ),
            ],
        ),
        pod(
            "web",
            "infer-7",
            vec![container(
                "server",
                vec![
                    devices("intel.com/sriov", &["0000:3b:00.1"]),
                    devices(
                        "nvidia.com/gpu.shared",
                        &[&format!("{GPU1}::1"), &format!("{GPU1}-2")],
                    ),
                ],
            )],
        ),
        pod("kube-system", "no-devices", vec![container("c", vec![])]),
    ])));
    let got = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let shared = "nvidia.com/gpu.shared";
    assert_eq!(
        got,
        vec![
            allocation(
                "ml",
                "trainer-0",
                "train",
                "nvidia.com/gpu",
                gpu(GPU0),
                None
            ),
            allocation(
                "ml",
                "trainer-0",
                "eval",
                "nvidia.com/mig-1g.10gb",
                DeviceRef::Mig {
                    uuid: MIG.to_owned()
                },
                None
            ),
            allocation("web", "infer-7", "server", shared, gpu(GPU1), Some(1)),
            allocation("web", "infer-7", "server", shared, gpu(GPU1), Some(2)),
        ]
    );
    let gpus = [(0, GPU0.to_owned()), (1, GPU1.to_owned())];
    let migs = [(MIG.to_owned(), 1, None)];
    let node = NodeDevices {
        dra: None,
        gpus: &gpus,
        migs: &migs,
    };
    let assignment = assign(&got, node);
    assert_eq!(
        assignment.by_gpu,
        [
            (0, vec![holder("ml", "trainer-0", "train")]),
            (
                1,
                vec![
                    holder("ml", "trainer-0", "eval"),
                    holder("web", "infer-7", "server")
                ]
            ),
        ]
        .into()
    );
    assert!(assignment.unknown.is_empty());
}

#[test]
fn the_async_call_from_a_runtime_and_the_blocking_one_within_it() {
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![pod(
        "ns",
        "p",
        vec![container("c", vec![devices("nvidia.com/gpu", &["0", "1"])])],
    )])));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let socket = kubelet.socket();
    let (from_async, from_blocking) = runtime.block_on(async {
        (
            list(&socket, DEADLINE).await,
            // Called where a runtime runs: the call moves to a thread of its own.
            list_blocking(&socket, DEADLINE),
        )
    });
    let want = vec![
        allocation("ns", "p", "c", "nvidia.com/gpu", DeviceRef::Index(0), None),
        allocation("ns", "p", "c", "nvidia.com/gpu", DeviceRef::Index(1), None),
    ];
    assert_eq!(from_async.unwrap(), want);
    assert_eq!(from_blocking.unwrap(), want);
}

#[test]
fn an_empty_node_answers_no_allocations() {
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![])));
    assert_eq!(list_blocking(&kubelet.socket(), DEADLINE).unwrap(), vec![]);
}

#[test]
fn gpus_this_node_does_not_have_are_reported() {
    let stranger = "GPU-00000000-0000-0000-0000-000000000000";
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![
        pod(
            "a",
            "here",
            vec![container("c", vec![devices("nvidia.com/gpu", &[GPU0])])],
        ),
        pod(
            "b",
            "elsewhere",
            vec![container(
                "c",
                vec![devices(
                    "nvidia.com/gpu",
                    &[&format!("{stranger}::3"), MIG, "5", "weird-id"],
                )],
            )],
        ),
    ])));
    let got = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let gpus = [(0, GPU0.to_owned())];
    let assignment = assign(
        &got,
        NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        },
    );
    assert_eq!(
        assignment.by_gpu,
        [(0, vec![holder("a", "here", "c")])].into()
    );
    let unknown: Vec<(&str, &DeviceRef, Option<u32>)> = assignment
        .unknown
        .iter()
        .map(|a| (a.pod.as_str(), &a.device, a.replica))
        .collect();
    assert_eq!(
        unknown,
        vec![
            ("elsewhere", &gpu(stranger), Some(3)),
            (
                "elsewhere",
                &DeviceRef::Mig {
                    uuid: MIG.to_owned()
                },
                None
            ),
            ("elsewhere", &DeviceRef::Index(5), None),
            ("elsewhere", &DeviceRef::Other("weird-id".to_owned()), None),
        ]
    );
}

#[test]
fn an_absent_socket_is_named() {
    let dir = Dir::new();
    for path in [dir.socket(), dir.0.join("no-such-dir/kubelet.sock")] {
        let e = list_blocking(&path, DEADLINE).unwrap_err();
        assert!(
            matches!(&e, PodResourcesError::SocketMissing { path: p } if *p == path),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("/var/lib/kubelet/pod-resources"), "{text}");
    }
}

#[test]
fn a_socket_nothing_listens_on_is_refused() {
    let dir = Dir::new();
    drop(std::os::unix::net::UnixListener::bind(dir.socket()).unwrap());
    let e = list_blocking(&dir.socket(), DEADLINE).unwrap_err();
    assert!(
        matches!(&e, PodResourcesError::Connect { source, .. }
            if source.kind() == std::io::ErrorKind::ConnectionRefused),
        "{e:?}"
    );
    assert!(e.to_string().contains("is the kubelet running?"), "{e}");
}

/// A regular file, a directory or a FIFO at the socket's path is named for what it is, not a
/// socket nothing listens on (which it was called before).
#[test]
fn what_is_at_the_path_when_it_is_no_socket() {
    let dir = Dir::new();
    let at = dir.socket();
    std::fs::write(&at, b"not a socket").unwrap();
    let file = list_blocking(&at, DEADLINE).unwrap_err();
    std::fs::remove_file(&at).unwrap();
    std::fs::create_dir(&at).unwrap();
    let directory = list_blocking(&at, DEADLINE).unwrap_err();
    std::fs::remove_dir(&at).unwrap();
    hypomnesis_testkit::mkfifo(&at);
    let fifo = list_blocking(&at, DEADLINE).unwrap_err();
    for (e, what) in [
        (file, "a regular file"),
        (directory, "a directory"),
        (fifo, "a FIFO"),
    ] {
        assert!(
            matches!(&e, PodResourcesError::NotASocket { what: w, .. } if *w == what),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(text.contains(&format!("is {what}, not a socket")), "{text}");
        assert!(!text.contains("is the kubelet running?"), "{text}");
    }
}

/// Whether this process opens `socket` whatever its modes say (root, `CAP_DAC_OVERRIDE`).
fn modes_are_ignored(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

#[test]
fn permission_denied_is_named_with_its_remedy() {
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![])));
    let socket = kubelet.socket();
    let mode = |path: &Path, m: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap();
    };
    // The socket closed to all; then its directory not searchable.
    for (closed, open) in [(&socket, 0o777), (&kubelet.dir.0, 0o755)] {
        mode(closed, 0o000);
        let ignored = modes_are_ignored(&socket);
        let e = list_blocking(&socket, DEADLINE);
        mode(closed, open);
        if ignored {
            eprintln!(
                "permission_denied_is_named_with_its_remedy: this process opens {} whatever its \
                 mode (root): the denial is not tested here (connect_errors_are_told_apart is)",
                closed.display()
            );
            continue;
        }
        let e = e.unwrap_err();
        assert!(
            matches!(&e, PodResourcesError::PermissionDenied { path } if *path == socket),
            "{e:?}"
        );
        assert_permission_text(&e, &socket);
    }
    // Open again, it answers.
    assert_eq!(list_blocking(&socket, DEADLINE).unwrap(), vec![]);
}

fn assert_permission_text(e: &PodResourcesError, socket: &Path) {
    let text = e.to_string();
    assert!(text.contains("permission denied"), "{text}");
    assert!(text.contains(&socket.display().to_string()), "{text}");
    assert!(
        text.contains("/var/lib/kubelet/pod-resources mounted"),
        "{text}"
    );
    assert!(text.contains("root or with the socket's group"), "{text}");
}

#[test]
fn connect_errors_are_told_apart() {
    use super::podresources::connect_error;
    use std::io::{Error, ErrorKind};
    let socket = Path::new("/k/kubelet.sock");
    let e = connect_error(socket, Error::from(ErrorKind::PermissionDenied));
    assert!(
        matches!(&e, PodResourcesError::PermissionDenied { .. }),
        "{e:?}"
    );
    assert_permission_text(&e, socket);
    let e = connect_error(socket, Error::from(ErrorKind::NotFound));
    assert!(
        matches!(&e, PodResourcesError::SocketMissing { .. }),
        "{e:?}"
    );
    let e = connect_error(socket, Error::from(ErrorKind::ConnectionReset));
    assert!(matches!(&e, PodResourcesError::Connect { .. }), "{e:?}");
    assert!(std::error::Error::source(&e).is_some());
    assert!(!e.to_string().contains("is the kubelet running?"), "{e}");
}

#[test]
fn a_server_that_never_answers_is_left_at_the_deadline() {
    let kubelet = Kubelet::start(Reply::Silent);
    let deadline = Duration::from_millis(300);
    let start = Instant::now();
    let e = list_blocking(&kubelet.socket(), deadline).unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(&e, PodResourcesError::Timeout { deadline: d, .. } if *d == deadline),
        "{e:?}"
    );
    assert!(took >= deadline, "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let text = e.to_string();
    assert!(text.contains("did not answer within 300 ms"), "{text}");
    assert!(
        text.contains(&kubelet.socket().display().to_string()),
        "{text}"
    );
}

#[test]
fn a_grpc_error_status_is_passed_on() {
    let kubelet = Kubelet::start(Reply::Fail(Code::PermissionDenied, "not for you"));
    let e = list_blocking(&kubelet.socket(), DEADLINE).unwrap_err();
    assert!(
        matches!(&e, PodResourcesError::Status { code: 7, message, .. } if message == "not for you"),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("gRPC status PERMISSION_DENIED (7): not for you"),
        "{text}"
    );
}

#[test]
fn a_server_without_the_method_says_unimplemented() {
    let kubelet = Kubelet::start(Reply::NoMethod);
    let e = list_blocking(&kubelet.socket(), DEADLINE).unwrap_err();
    assert!(
        matches!(&e, PodResourcesError::Status { code: 12, message, .. } if message == LIST_METHOD),
        "{e:?}"
    );
    assert!(e.to_string().contains("UNIMPLEMENTED (12)"), "{e}");
}

#[test]
fn an_answer_that_does_not_decode_is_malformed() {
    // Field 1, length-delimited, claiming 100 bytes where 2 follow.
    let kubelet = Kubelet::start(Reply::Answer(Bytes::from_static(&[0x0a, 100, 1, 2])));
    let e = list_blocking(&kubelet.socket(), DEADLINE).unwrap_err();
    assert!(matches!(&e, PodResourcesError::Malformed { .. }), "{e:?}");
    assert!(e.to_string().contains("is malformed"), "{e}");
}

/// 100,000 allocations through the stand-in's socket, one pod with a 100 KB namespace and
/// one with a NUL in a container's name among them: all decoded and laid onto the GPUs, each
/// container once per GPU, the two invalid ones counted and left out (no label gets them).
#[test]
fn a_hundred_thousand_allocations_with_hostile_names() {
    let gpus: Vec<(u32, String)> = (0..8)
        .map(|i| (i, format!("GPU-{i:08x}-1111-2222-3333-444444444444")))
        .collect();
    let mut pods: Vec<wire::Pod> = (0..100_000_usize)
        .map(|k| {
            let gpu = gpus[k % 8].1.as_str();
            pod(
                "ml",
                &format!("job-{k}"),
                vec![container("worker", vec![devices("nvidia.com/gpu", &[gpu])])],
            )
        })
        .collect();
    let g0 = gpus[0].1.as_str();
    pods.push(pod(
        &"n".repeat(100_000),
        "long",
        vec![container("worker", vec![devices("nvidia.com/gpu", &[g0])])],
    ));
    pods.push(pod(
        "ml",
        "nul",
        vec![container(
            "work\0er",
            vec![devices("nvidia.com/gpu", &[g0])],
        )],
    ));
    let kubelet = Kubelet::start(Reply::Answer(answer(pods)));
    let allocations = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    assert_eq!(allocations.len(), 100_002);
    let got = assign(
        &allocations,
        NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        },
    );
    assert_eq!(got.invalid, 2);
    assert!(got.unknown.is_empty());
    let held: usize = got.by_gpu.values().map(Vec::len).sum();
    assert_eq!(held, 100_000);
    assert_eq!(got.by_gpu[&0][0], holder("ml", "job-0", "worker"));
    assert!(
        got.by_gpu
            .values()
            .flatten()
            .all(|h| h.namespace == "ml" && !h.container.contains('\0'))
    );
}

/// The kubelet's part of a measurement at 5,000, 30,000 and 100,000 allocations on 8 GPUs,
/// through the stand-in's socket: the `List` call and its decoding, [`super::assign`], and,
/// beside it in the same run, the same assignment with the holder lists searched linearly (as
/// before: `Vec::contains` per allocation). Figures, not assertions:
/// `scripts/bench/allocations.sh` runs it.
#[test]
#[ignore = "a benchmark: scripts/bench/allocations.sh runs it and prints the figures"]
fn bench_allocations_at_scale() {
    use super::{Allocation, Holder, NodeDevices, assign};

    /// The former assignment: each GPU's holders searched one by one.
    fn searched(allocations: &[Allocation], gpus: &[(u32, String)]) -> usize {
        let mut by_gpu: Vec<Vec<Holder>> = vec![Vec::new(); gpus.len()];
        for a in allocations {
            let super::DeviceRef::Gpu { uuid } = &a.device else {
                continue;
            };
            if let Some(i) = gpus.iter().position(|(_, u)| u.eq_ignore_ascii_case(uuid)) {
                let h = a.holder();
                if !by_gpu[i].contains(&h) {
                    by_gpu[i].push(h);
                }
            }
        }
        by_gpu.iter().map(Vec::len).sum()
    }

    let gpus: Vec<(u32, String)> = (0..8)
        .map(|i| (i, format!("GPU-{i:08x}-1111-2222-3333-444444444444")))
        .collect();
    let node = NodeDevices {
        dra: None,
        gpus: &gpus,
        migs: &[],
    };
    for n in [5_000_usize, 30_000, 100_000] {
        let pods: Vec<wire::Pod> = (0..n)
            .map(|k| {
                let gpu = gpus[k % 8].1.as_str();
                pod(
                    "ml",
                    &format!("job-{k}"),
                    vec![container("worker", vec![devices("nvidia.com/gpu", &[gpu])])],
                )
            })
            .collect();
        let kubelet = Kubelet::start(Reply::Answer(answer(pods)));
        let t = Instant::now();
        let allocations = super::list_blocking(&kubelet.socket(), Duration::from_secs(30)).unwrap();
        let listed = t.elapsed();
        let t = Instant::now();
        let a = assign(&allocations, node);
        let now = t.elapsed();
        let t = Instant::now();
        let before = searched(&allocations, &gpus);
        let searched_took = t.elapsed();
        let held: usize = a.by_gpu.values().map(Vec::len).sum();
        assert_eq!((held, before), (n, n));
        println!(
            "{n:>7} allocations: List and decode {listed:>10.2?}; assign {now:>10.2?} (searched \
             holders, as before: {searched_took:>10.2?}, {:.0}x)",
            searched_took.as_secs_f64() / now.as_secs_f64().max(1e-9)
        );
    }
}

#[test]
fn every_pod_is_listed_for_ghosts_whatever_its_resources() {
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![
        pod(
            "ml",
            "trainer-0",
            vec![container("train", vec![devices("nvidia.com/gpu", &[GPU0])])],
        ),
        pod("kube-system", "no-devices", vec![container("c", vec![])]),
    ])));
    let got = pods_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let want: std::collections::BTreeSet<(String, String)> = [
        ("kube-system".to_owned(), "no-devices".to_owned()),
        ("ml".to_owned(), "trainer-0".to_owned()),
    ]
    .into();
    assert_eq!(got, want);
    let silent = Kubelet::start(Reply::Fail(Code::Unavailable, "restarting"));
    let e = pods_blocking(&silent.socket(), DEADLINE).unwrap_err();
    assert!(e.to_string().contains("restarting"), "{e}");
}

/// End to end but for the socket's discovery: the stand-in kubelet lists one pod; a GPU
/// process of the kubelet fixture's procfs is in pod `ml-team/trainer-0`, whose log directory
/// is still there, and which the list no longer has: a gone pod, said with the list's size.
#[cfg(target_os = "linux")]
#[test]
fn a_pod_the_kubelets_list_no_longer_has_is_a_gone_pod() {
    use hypomnesis::{GhostClass, GhostOptions, GhostWatch, GpuDeviceInfo, GpuProcessEntry};
    let kubelet = Kubelet::start(Reply::Answer(answer(vec![pod(
        "inference",
        "vllm-7d9f8b6c4-x2k9p",
        vec![container(
            "server",
            vec![devices("nvidia.com/gpu", &[GPU0])],
        )],
    )])));
    let live = crate::cmd::ghosts::live_pods_at(&kubelet.socket()).unwrap();
    let fixture = hypomnesis_testkit::fixtures("kubelet");
    let device = GpuDeviceInfo::builder()
        .total_bytes(80 << 30)
        .free_bytes(40 << 30)
        .used_bytes(40 << 30)
        .build();
    let row = |pid: u32| {
        GpuProcessEntry::builder()
            .pid(pid)
            .used_bytes(20 << 30)
            .build()
    };
    let look = |live: Option<std::collections::BTreeSet<(String, String)>>| {
        let mut watch = GhostWatch::new(GhostOptions::default())
            .with_roots(fixture.join("proc"), fixture.join("rootfs"));
        watch.set_live_pods(live);
        watch
            .look_at_rows(&[(device.clone(), vec![row(4242), row(4300)])])
            .unwrap()
    };
    let report = look(Some(live));
    let gone: Vec<_> = report
        .ghosts
        .iter()
        .filter(|g| g.class == GhostClass::GonePod)
        .collect();
    assert_eq!(gone.len(), 1, "{report:#?}");
    assert_eq!(
        gone[0].pid,
        Some(4242),
        "vllm (4300) is listed: {report:#?}"
    );
    assert!(
        gone[0].evidence[1].contains(
            "live list (1 pods, from its pod-resources socket) does not have ml-team/trainer-0"
        ),
        "{:?}",
        gone[0].evidence
    );
    // Without the list, a pod whose log directory is there is not called gone.
    assert!(
        !look(None)
            .ghosts
            .iter()
            .any(|g| g.class == GhostClass::GonePod)
    );
}
