//! The client of the kubelet's pod-resources API: `v1.PodResourcesLister/List`, one unary gRPC
//! call over the kubelet's Unix socket, its answer read into [`Allocation`]s.
//!
//! The messages are the API's, written out with prost's derive (the fields read here; prost
//! skips the others). The call sends and takes raw message bytes and prost decodes the answer
//! here, so that an answer that does not decode is told apart from a status the kubelet sent.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Allocation;

/// Where the kubelet serves the pod-resources API.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// The gRPC method listed, as its path.
pub const LIST_METHOD: &str = "/v1.PodResourcesLister/List";

/// The largest answer taken, as the kubelet's own client allows (16 MiB); tonic's default
/// (4 MiB) is short of a large node's pod list.
pub const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why the pod-resources API could not be read.
#[derive(Debug)]
pub enum PodResourcesError {
    /// No socket at the path (or no directory above it).
    SocketMissing {
        /// The socket's path.
        path: PathBuf,
    },
    /// The socket, or a directory above it, may not be opened by this process.
    PermissionDenied {
        /// The socket's path.
        path: PathBuf,
    },
    /// Something other than a socket is at the path (a regular file, a directory, a FIFO: a
    /// mount of the wrong host path, a socket replaced).
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What is there: `a regular file`, `a directory`, …
        what: &'static str,
    },
    /// The socket could not be connected to for another reason (nothing listens on it, …).
    Connect {
        /// The socket's path.
        path: PathBuf,
        /// What connecting said.
        source: std::io::Error,
    },
    /// The call was not answered within the deadline.
    Timeout {
        /// The socket's path.
        path: PathBuf,
        /// The deadline given.
        deadline: Duration,
    },
    /// The connection was made but HTTP/2 could not be set up on it.
    Transport {
        /// The socket's path.
        path: PathBuf,
        /// What broke.
        message: String,
    },
    /// The call ended in a gRPC status: one the kubelet answered, or one tonic made of a
    /// connection that broke during the call (`UNAVAILABLE`, `UNKNOWN`, with what broke as the
    /// message).
    Status {
        /// The socket's path.
        path: PathBuf,
        /// The gRPC status code (`7`: `PERMISSION_DENIED`, …).
        code: i32,
        /// The status message.
        message: String,
    },
    /// The answer is not a `ListPodResourcesResponse`.
    Malformed {
        /// The socket's path.
        path: PathBuf,
        /// What decoding it said.
        reason: String,
    },
    /// The call's runtime could not be started.
    Runtime(std::io::Error),
    /// The API is a Unix socket: this platform has none.
    #[cfg_attr(unix, allow(dead_code))]
    Unsupported,
}

impl fmt::Display for PodResourcesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SocketMissing { path } => write!(
                f,
                "no kubelet pod-resources socket at {}: not a Kubernetes node, or the pod does not \
                 mount the host's /var/lib/kubelet/pod-resources there",
                path.display()
            ),
            Self::PermissionDenied { path } => write!(
                f,
                "permission denied opening the kubelet pod-resources socket {}: the pod needs the \
                 host's /var/lib/kubelet/pod-resources mounted and to run as root or with the \
                 socket's group",
                path.display()
            ),
            Self::NotASocket { path, what } => write!(
                f,
                "{} is {what}, not a socket: the kubelet's pod-resources socket is \
                 /var/lib/kubelet/pod-resources/kubelet.sock on the host (is another path mounted \
                 there?)",
                path.display()
            ),
            Self::Connect { path, source } => {
                write!(f, "cannot connect to {}: {source}", path.display())?;
                if source.kind() == std::io::ErrorKind::ConnectionRefused {
                    f.write_str(
                        " (the socket is there but nothing listens: is the kubelet running?)",
                    )?;
                }
                Ok(())
            }
            Self::Timeout { path, deadline } => write!(
                f,
                "the kubelet pod-resources API at {} did not answer within {} ms",
                path.display(),
                deadline.as_millis()
            ),
            Self::Transport { path, message } => write!(
                f,
                "the connection to the kubelet pod-resources socket {} broke: {message}",
                path.display()
            ),
            Self::Status {
                path,
                code,
                message,
            } => write!(
                f,
                "the kubelet pod-resources List call at {} failed: gRPC status {} ({code}): {message}",
                path.display(),
                code_name(*code)
            ),
            Self::Malformed { path, reason } => write!(
                f,
                "the kubelet pod-resources answer at {} is malformed: {reason}",
                path.display()
            ),
            Self::Runtime(e) => write!(f, "cannot start the pod-resources call: {e}"),
            Self::Unsupported => f.write_str(
                "the kubelet pod-resources API is a Unix socket: not available on this platform",
            ),
        }
    }
}

impl std::error::Error for PodResourcesError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Connect { source, .. } | Self::Runtime(source) => Some(source),
            _ => None,
        }
    }
}

/// The name of a gRPC status code, as the gRPC specification spells it.
pub fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "unrecognised",
    }
}

/// What connecting to `path` failing with `e` means. A refusal is looked into: a path that
/// is no socket (a regular file, a directory, a FIFO) is said to be one, not a socket nothing
/// listens on.
pub fn connect_error(path: &Path, e: std::io::Error) -> PodResourcesError {
    match e.kind() {
        std::io::ErrorKind::NotFound => PodResourcesError::SocketMissing {
            path: path.to_path_buf(),
        },
        std::io::ErrorKind::PermissionDenied => PodResourcesError::PermissionDenied {
            path: path.to_path_buf(),
        },
        _ => match not_a_socket(path) {
            Some(what) => PodResourcesError::NotASocket {
                path: path.to_path_buf(),
                what,
            },
            None => PodResourcesError::Connect {
                path: path.to_path_buf(),
                source: e,
            },
        },
    }
}

/// What is at `path` when it is not a socket (`None`: a socket, or it cannot be told).
fn not_a_socket(path: &Path) -> Option<&'static str> {
    let kind = std::fs::metadata(path).ok()?.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_socket() {
            return None;
        }
        if kind.is_fifo() {
            return Some("a FIFO");
        }
        if kind.is_char_device() || kind.is_block_device() {
            return Some("a device file");
        }
    }
    if kind.is_dir() {
        Some("a directory")
    } else if kind.is_file() {
        Some("a regular file")
    } else {
        None
    }
}

/// The GPU devices the kubelet allocated, one [`Allocation`] per device id of a resource named
/// `nvidia.com/…`, in the kubelet's order. Ends within `deadline`, answered or not. Needs a
/// tokio runtime with its I/O and time drivers.
#[cfg(unix)]
pub async fn list(socket: &Path, deadline: Duration) -> Result<Vec<Allocation>, PodResourcesError> {
    ask(socket, deadline, messages::allocations).await
}

/// Every pod the kubelet lists, by namespace and name, whatever its resources.
#[cfg(unix)]
pub async fn pods(socket: &Path, deadline: Duration) -> Result<Pods, PodResourcesError> {
    ask(socket, deadline, messages::pods).await
}

/// Pods by namespace and name.
pub type Pods = std::collections::BTreeSet<(String, String)>;

/// One `List` call, its answer decoded by `decode`, within `deadline`.
#[cfg(unix)]
async fn ask<T>(
    socket: &Path,
    deadline: Duration,
    decode: impl FnOnce(&[u8]) -> Result<T, prost::DecodeError>,
) -> Result<T, PodResourcesError> {
    let answer = match tokio::time::timeout(deadline, client::call(socket)).await {
        Ok(answer) => answer?,
        Err(_) => {
            return Err(PodResourcesError::Timeout {
                path: socket.to_path_buf(),
                deadline,
            });
        }
    };
    decode(&answer).map_err(|e| PodResourcesError::Malformed {
        path: socket.to_path_buf(),
        reason: e.to_string(),
    })
}

/// [`list`], for code without a runtime: runs the call on a runtime of its own (on a thread of
/// its own when called from within a tokio runtime, which may not block).
#[cfg(unix)]
pub fn list_blocking(
    socket: &Path,
    deadline: Duration,
) -> Result<Vec<Allocation>, PodResourcesError> {
    blocking(list(socket, deadline))
}

/// [`pods`], for code without a runtime (as [`list_blocking`]).
#[cfg(unix)]
pub fn pods_blocking(socket: &Path, deadline: Duration) -> Result<Pods, PodResourcesError> {
    blocking(pods(socket, deadline))
}

/// Runs `call` on a runtime of its own (on a thread of its own when called from within a tokio
/// runtime, which may not block).
#[cfg(unix)]
fn blocking<T: Send>(
    call: impl std::future::Future<Output = Result<T, PodResourcesError>> + Send,
) -> Result<T, PodResourcesError> {
    let run = move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(PodResourcesError::Runtime)?
            .block_on(call)
    };
    if tokio::runtime::Handle::try_current().is_err() {
        return run();
    }
    std::thread::scope(|s| s.spawn(run).join()).unwrap_or_else(|_| {
        Err(PodResourcesError::Runtime(std::io::Error::other(
            "the pod-resources call's thread panicked",
        )))
    })
}

/// Not available without Unix sockets: says so.
#[cfg(not(unix))]
#[allow(clippy::unused_async)] // the same signature as on Unix
pub async fn list(
    _socket: &Path,
    _deadline: Duration,
) -> Result<Vec<Allocation>, PodResourcesError> {
    Err(PodResourcesError::Unsupported)
}

/// Not available without Unix sockets: says so.
#[cfg(not(unix))]
pub fn pods_blocking(_socket: &Path, _deadline: Duration) -> Result<Pods, PodResourcesError> {
    Err(PodResourcesError::Unsupported)
}

/// Not available without Unix sockets: says so.
#[cfg(not(unix))]
pub fn list_blocking(
    _socket: &Path,
    _deadline: Duration,
) -> Result<Vec<Allocation>, PodResourcesError> {
    Err(PodResourcesError::Unsupported)
}

/// The API's messages, as far as they are read.
#[cfg(unix)]
pub mod messages {
    use prost::Message as _;

    use super::super::devices;
    use super::super::{Allocation, Claim, DeviceRef, GPU_DRA_DRIVERS, GPU_RESOURCE_PREFIX};

    /// `v1.ListPodResourcesRequest`: no fields.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListPodResourcesRequest {}

    /// `v1.ListPodResourcesResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ListPodResourcesResponse {
        /// Every pod of the node.
        #[prost(message, repeated, tag = "1")]
        pub pod_resources: Vec<PodResources>,
    }

    /// `v1.PodResources`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PodResources {
        /// The pod's name.
        #[prost(bytes = "vec", tag = "1")]
        pub name: Vec<u8>,
        /// The pod's namespace.
        #[prost(bytes = "vec", tag = "2")]
        pub namespace: Vec<u8>,
        /// Its containers.
        #[prost(message, repeated, tag = "3")]
        pub containers: Vec<ContainerResources>,
    }

    /// `v1.ContainerResources` (its CPU ids and memory are skipped).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ContainerResources {
        /// The container's name.
        #[prost(bytes = "vec", tag = "1")]
        pub name: Vec<u8>,
        /// The devices allocated to it.
        #[prost(message, repeated, tag = "2")]
        pub devices: Vec<ContainerDevices>,
        /// The devices dynamic resource allocation gave it, claim by claim (kubelets since
        /// 1.27 behind a feature gate, by default since 1.34; older ones send none).
        #[prost(message, repeated, tag = "5")]
        pub dynamic_resources: Vec<DynamicResource>,
    }

    /// `v1.DynamicResource` (field 1, the claim's class, was removed in 1.31).
    #[allow(clippy::struct_field_names)] // the proto's names
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct DynamicResource {
        #[prost(bytes = "vec", tag = "2")]
        pub claim_name: Vec<u8>,
        #[prost(bytes = "vec", tag = "3")]
        pub claim_namespace: Vec<u8>,
        #[prost(message, repeated, tag = "4")]
        pub claim_resources: Vec<ClaimResource>,
    }

    /// `v1.ClaimResource`: one allocated device, named by its driver, pool and name.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClaimResource {
        #[prost(message, repeated, tag = "1")]
        pub cdi_devices: Vec<CdiDevice>,
        #[prost(bytes = "vec", tag = "2")]
        pub driver_name: Vec<u8>,
        #[prost(bytes = "vec", tag = "3")]
        pub pool_name: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub device_name: Vec<u8>,
        /// The share of a consumable-capacity device (1.34 and later).
        #[prost(bytes = "vec", optional, tag = "5")]
        pub share_id: Option<Vec<u8>>,
    }

    /// `v1.CDIDevice`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct CdiDevice {
        /// The fully qualified CDI device name (`vendor.com/class=name`).
        #[prost(bytes = "vec", tag = "1")]
        pub name: Vec<u8>,
    }

    /// `v1.ContainerDevices` (its topology is skipped).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ContainerDevices {
        /// The resource the devices were allocated as (`nvidia.com/gpu`).
        #[prost(bytes = "vec", tag = "1")]
        pub resource_name: Vec<u8>,
        /// The devices, as the device plugin names them.
        #[prost(bytes = "vec", repeated, tag = "2")]
        pub device_ids: Vec<Vec<u8>>,
    }

    /// The request, encoded.
    pub fn request() -> Vec<u8> {
        ListPodResourcesRequest {}.encode_to_vec()
    }

    /// A name of the answer as text: bytes that are not UTF-8 each become U+FFFD, which no
    /// Kubernetes name holds, so that the name is counted invalid where it is checked
    /// ([`super::super::assign`]) and the rest of the answer is still read. (Declared `string`
    /// by the API, these fields are read as `bytes`, the same on the wire: prost refuses the
    /// whole answer for one string that is not UTF-8.)
    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    /// An answer decoded into the pods it lists, by namespace and name.
    pub fn pods(answer: &[u8]) -> Result<super::Pods, prost::DecodeError> {
        let answer = ListPodResourcesResponse::decode(answer)?;
        Ok(answer
            .pod_resources
            .into_iter()
            .map(|p| (text(&p.namespace), text(&p.name)))
            .collect())
    }

    /// An answer decoded into the GPU allocations it lists: a device plugin's devices of a
    /// `nvidia.com/…` resource, and the devices of GPU drivers' claims
    /// ([`GPU_DRA_DRIVERS`]), each with its claim.
    pub fn allocations(answer: &[u8]) -> Result<Vec<Allocation>, prost::DecodeError> {
        let answer = ListPodResourcesResponse::decode(answer)?;
        let mut out = Vec::new();
        for pod in answer.pod_resources {
            let (namespace, name) = (text(&pod.namespace), text(&pod.name));
            for container in pod.containers {
                let container_name = text(&container.name);
                let at = |resource: String, device, replica, claim| Allocation {
                    namespace: namespace.clone(),
                    pod: name.clone(),
                    container: container_name.clone(),
                    resource,
                    device,
                    replica,
                    claim,
                };
                let gpu = container
                    .devices
                    .iter()
                    .map(|d| (text(&d.resource_name), &d.device_ids))
                    .filter(|(resource, _)| resource.starts_with(GPU_RESOURCE_PREFIX));
                for (resource, ids) in gpu {
                    for id in ids {
                        let read = devices::parse(&text(id));
                        out.push(at(resource.clone(), read.device, read.replica, None));
                    }
                }
                for dynamic in &container.dynamic_resources {
                    let claim = Claim {
                        namespace: text(&dynamic.claim_namespace),
                        name: text(&dynamic.claim_name),
                    };
                    let gpu = dynamic
                        .claim_resources
                        .iter()
                        .map(|r| (text(&r.driver_name), r))
                        .filter(|(driver, _)| GPU_DRA_DRIVERS.contains(&driver.as_str()));
                    for (driver, r) in gpu {
                        let device = DeviceRef::Dra {
                            driver: driver.clone(),
                            pool: text(&r.pool_name),
                            device: text(&r.device_name),
                            cdi: r.cdi_devices.iter().map(|c| text(&c.name)).collect(),
                            share: r.share_id.as_deref().map(text),
                        };
                        out.push(at(driver, device, None, Some(claim.clone())));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The call: a connection over the socket, tonic's HTTP/2 channel on it, one unary request.
#[cfg(unix)]
pub mod client {
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    use bytes::Bytes;
    use hyper_util::rt::TokioIo;
    use tokio::net::UnixStream;
    use tonic::transport::{Endpoint, Uri};

    pub use super::super::raw_codec::RawCodec;
    use super::{LIST_METHOD, MAX_ANSWER_BYTES, PodResourcesError, connect_error, messages};

    /// Sends the List request and returns the answer's message bytes.
    pub async fn call(socket: &Path) -> Result<Bytes, PodResourcesError> {
        let path = socket.to_path_buf();
        // Connected here, not in the channel's connector, to tell a missing socket and a
        // refused one from the rest by their `io::Error`.
        let first = UnixStream::connect(socket)
            .await
            .map_err(|e| connect_error(socket, e))?;
        let first = Arc::new(Mutex::new(Some(first)));
        let connector = tower::service_fn(move |_: Uri| {
            let first = first.lock().ok().and_then(|mut s| s.take());
            let path = path.clone();
            async move {
                let stream = match first {
                    Some(stream) => stream,
                    None => UnixStream::connect(&path).await?,
                };
                Ok::<_, std::io::Error>(TokioIo::new(stream))
            }
        });
        let broken = |e: &tonic::transport::Error| PodResourcesError::Transport {
            path: socket.to_path_buf(),
            message: error_chain(e),
        };
        // The authority is what the kubelet's own clients send over the socket.
        let channel = Endpoint::from_static("http://localhost")
            .connect_with_connector(connector)
            .await
            .map_err(|e| broken(&e))?;
        let mut grpc =
            tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_ANSWER_BYTES);
        grpc.ready().await.map_err(|e| broken(&e))?;
        let request = tonic::Request::new(Bytes::from(messages::request()));
        let path = http::uri::PathAndQuery::from_static(LIST_METHOD);
        match grpc.unary(request, path, RawCodec).await {
            Ok(answer) => Ok(answer.into_inner()),
            Err(status) => Err(PodResourcesError::Status {
                path: socket.to_path_buf(),
                code: status.code() as i32,
                message: status.message().to_owned(),
            }),
        }
    }

    /// An error and its sources, `: `-separated (tonic's transport error says little alone).
    fn error_chain(e: &dyn std::error::Error) -> String {
        let mut out = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            out.push_str(": ");
            out.push_str(&s.to_string());
            source = s.source();
        }
        out
    }
}
