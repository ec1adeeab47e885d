//! A kubelet stand-in for the pod-resources tests, over a real Unix socket: tonic's server side
//! speaking gRPC over HTTP/2, its `List` method answering what each test sets, and builders of
//! its answers (the API's messages, with fields the client does not read). Shared by `hmn`'s
//! unit tests (`src/kube/tests.rs`) and its end-to-end tests (`tests/cli/dra.rs`), which
//! include this file; the gRPC codec is the client's own (`src/kube/raw_codec.rs`).
#![allow(dead_code)]

use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use prost::Message as _;
use tokio::sync::oneshot;
use tonic::{Code, Status};

// In hmn's unit tests the codec is compiled twice (the client's and this), one source.
#[allow(clippy::duplicate_mod)]
#[path = "../../src/kube/raw_codec.rs"]
mod raw_codec;
use raw_codec::RawCodec;

/// The gRPC path of the List method.
pub const LIST_METHOD: &str = "/v1.PodResourcesLister/List";

/// The API's messages with fields the client does not read (CPU ids, memory, topology), to
/// show they are skipped.
pub mod wire {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Response {
        #[prost(message, repeated, tag = "1")]
        pub pod_resources: Vec<Pod>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Pod {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub namespace: String,
        #[prost(message, repeated, tag = "3")]
        pub containers: Vec<Container>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Container {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, repeated, tag = "2")]
        pub devices: Vec<Devices>,
        #[prost(int64, repeated, tag = "3")]
        pub cpu_ids: Vec<i64>,
        #[prost(message, repeated, tag = "4")]
        pub memory: Vec<Memory>,
        #[prost(message, repeated, tag = "5")]
        pub dynamic: Vec<Dynamic>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dynamic {
        #[prost(string, tag = "2")]
        pub claim_name: String,
        #[prost(string, tag = "3")]
        pub claim_namespace: String,
        #[prost(message, repeated, tag = "4")]
        pub resources: Vec<ClaimResource>,
        /// A field this client does not know (a later kubelet's): skipped.
        #[prost(string, tag = "9")]
        pub later: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClaimResource {
        #[prost(message, repeated, tag = "1")]
        pub cdi: Vec<Cdi>,
        #[prost(string, tag = "2")]
        pub driver: String,
        #[prost(string, tag = "3")]
        pub pool: String,
        #[prost(string, tag = "4")]
        pub device: String,
        #[prost(string, optional, tag = "5")]
        pub share: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Cdi {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Devices {
        #[prost(string, tag = "1")]
        pub resource_name: String,
        #[prost(string, repeated, tag = "2")]
        pub device_ids: Vec<String>,
        #[prost(message, optional, tag = "3")]
        pub topology: Option<Topology>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Topology {
        #[prost(message, repeated, tag = "1")]
        pub nodes: Vec<Numa>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Numa {
        #[prost(int64, tag = "1")]
        pub id: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Memory {
        #[prost(string, tag = "1")]
        pub memory_type: String,
        #[prost(uint64, tag = "2")]
        pub size: u64,
    }
}

pub fn devices(resource: &str, ids: &[&str]) -> wire::Devices {
    wire::Devices {
        resource_name: resource.to_owned(),
        device_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
        topology: Some(wire::Topology {
            nodes: vec![wire::Numa { id: 1 }],
        }),
    }
}

pub fn container(name: &str, devices: Vec<wire::Devices>) -> wire::Container {
    wire::Container {
        name: name.to_owned(),
        devices,
        cpu_ids: vec![2, 3],
        memory: vec![wire::Memory {
            memory_type: "memory".to_owned(),
            size: 1 << 30,
        }],
        dynamic: Vec::new(),
    }
}

pub fn pod(namespace: &str, name: &str, containers: Vec<wire::Container>) -> wire::Pod {
    wire::Pod {
        name: name.to_owned(),
        namespace: namespace.to_owned(),
        containers,
    }
}

pub fn answer(pods: Vec<wire::Pod>) -> Bytes {
    Bytes::from(
        wire::Response {
            pod_resources: pods,
        }
        .encode_to_vec(),
    )
}

/// A fresh directory, removed when dropped (modes put back first, for a test that took them).
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new() -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hmn-kube-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn socket(&self) -> PathBuf {
        self.0.join("kubelet.sock")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the stand-in does with a List call.
#[derive(Clone)]
pub enum Reply {
    /// Answers these message bytes.
    Answer(Bytes),
    /// Answers this status.
    Fail(Code, &'static str),
    /// Takes connections and never reads or writes on them.
    Silent,
    /// Serves gRPC without the List method (an older kubelet, another service).
    NoMethod,
}

/// A kubelet stand-in serving on a socket in a directory of its own, on a thread of its own,
/// stopped when dropped.
pub struct Kubelet {
    pub dir: Dir,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Kubelet {
    pub fn start(reply: Reply) -> Self {
        let dir = Dir::new();
        let listener = std::os::unix::net::UnixListener::bind(dir.socket()).unwrap();
        listener.set_nonblocking(true).unwrap();
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(serve(listener, reply, stopped));
        });
        Self {
            dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.socket()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    listener: std::os::unix::net::UnixListener,
    reply: Reply,
    stopped: oneshot::Receiver<()>,
) {
    let listener = tokio::net::UnixListener::from_std(listener).unwrap();
    if let Reply::Silent = reply {
        let mut held = Vec::new();
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                accepted = listener.accept() => held.push(accepted.unwrap().0),
                _ = &mut stopped => return,
            }
        }
    }
    let service = tower::service_fn(move |request: http::Request<tonic::body::Body>| {
        let reply = reply.clone();
        async move {
            if request.uri().path() != LIST_METHOD || matches!(reply, Reply::NoMethod) {
                return Ok::<_, Infallible>(
                    Status::unimplemented(request.uri().path()).into_http(),
                );
            }
            let list = tower::service_fn(move |_: tonic::Request<Bytes>| {
                let reply = reply.clone();
                async move {
                    match reply {
                        Reply::Answer(bytes) => Ok(tonic::Response::new(bytes)),
                        Reply::Fail(code, message) => Err(Status::new(code, message)),
                        Reply::Silent | Reply::NoMethod => Err(Status::internal("unreachable")),
                    }
                }
            });
            Ok(tonic::server::Grpc::new(RawCodec)
                .unary(list, request)
                .await)
        }
    });
    let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
    tonic::transport::Server::builder()
        .serve_with_incoming_shutdown(service, incoming, async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
}

/// One device of a DRA claim as the kubelet reports it, with the CDI name the NVIDIA driver
/// gives it (`k8s.gpu.nvidia.com/claim=<claim uid>-<device>`).
pub fn claimed(uid: &str, driver: &str, device: &str, share: Option<&str>) -> wire::ClaimResource {
    wire::ClaimResource {
        cdi: vec![wire::Cdi {
            name: format!("k8s.gpu.nvidia.com/claim={uid}-{device}"),
        }],
        driver: driver.to_owned(),
        pool: "node-a".to_owned(),
        device: device.to_owned(),
        share: share.map(str::to_owned),
    }
}

/// `c` with these claims (namespace, name, devices).
pub fn with_claims(
    mut c: wire::Container,
    claims: Vec<(&str, &str, Vec<wire::ClaimResource>)>,
) -> wire::Container {
    c.dynamic = claims
        .into_iter()
        .map(|(ns, name, resources)| wire::Dynamic {
            claim_name: name.to_owned(),
            claim_namespace: ns.to_owned(),
            resources,
            later: "ignored".to_owned(),
        })
        .collect();
    c
}

/// The claims' UIDs of the DRA fixture node (`fixtures/dra`): their CDI specs are named after
/// them; `LOST`'s is not there.
pub const GPU_CLAIM_UID: &str = "6f1c2b3a-0d4e-4f5a-9b8c-7d6e5f4a3b2c";
pub const SHARED_UID: &str = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d";
pub const LOST_UID: &str = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f";

/// The DRA fixture node's answer (`fixtures/dra/README.md`): a whole GPU's claim beside a NIC's
/// (left out), one claim shared by two pods (a share of GPU 1, and a MIG device of GPU 2), a
/// claim whose device the node's CDI specs do not name, and a device plugin's GPU (`plugin_gpu`,
/// a UUID) beside them.
pub fn dra_answer(plugin_gpu: &str) -> Bytes {
    let gpu = "gpu.nvidia.com";
    answer(vec![
        pod(
            "ml",
            "trainer-0",
            vec![with_claims(
                container("train", vec![]),
                vec![
                    (
                        "ml",
                        "gpu-claim",
                        vec![claimed(GPU_CLAIM_UID, gpu, "gpu-0", None)],
                    ),
                    (
                        "ml",
                        "nic-claim",
                        vec![claimed(GPU_CLAIM_UID, "sriov.k8s.io", "nic-3", None)],
                    ),
                ],
            )],
        ),
        pod(
            "ml",
            "eval-a",
            vec![with_claims(
                container("eval", vec![]),
                vec![(
                    "ml",
                    "shared",
                    vec![claimed(SHARED_UID, gpu, "gpu-1", Some("s-1"))],
                )],
            )],
        ),
        pod(
            "ml",
            "eval-b",
            vec![with_claims(
                container("eval", vec![]),
                vec![(
                    "ml",
                    "shared",
                    vec![
                        claimed(SHARED_UID, gpu, "gpu-1", Some("s-1")),
                        claimed(SHARED_UID, gpu, "gpu-2-mig-1g18gb-19-0", Some("share-7")),
                    ],
                )],
            )],
        ),
        pod(
            "ml",
            "lost-0",
            vec![with_claims(
                container("c", vec![]),
                vec![("ml", "lost", vec![claimed(LOST_UID, gpu, "gpu-3", None)])],
            )],
        ),
        pod(
            "web",
            "infer-7",
            vec![container(
                "server",
                vec![devices("nvidia.com/gpu", &[plugin_gpu])],
            )],
        ),
    ])
}
