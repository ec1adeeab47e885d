//! Which pod the kubelet allocated each GPU to, read at each measurement from the kubelet's
//! pod-resources socket: `--pod-resources-socket`, else `<rootfs>/var/lib/kubelet/pod-resources/
//! kubelet.sock` when it exists (a node without a kubelet has none, and no series about it).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use hypomnesis::GpuDeviceInfo;

use crate::kube::{self, Assignment, NodeDevices};
use crate::view::printable::printable;

/// How long one `List` call may take: the measurement waits for it.
const DEADLINE: Duration = Duration::from_secs(2);

/// Where the socket is, and whether the user named it (then its absence is an error too).
#[derive(Debug, Clone)]
struct Config {
    socket: PathBuf,
    explicit: bool,
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// Sets where the socket is for this process's measurements: `explicit`, else the default
/// under the rootfs in use. The first call wins.
pub fn configure(explicit: Option<&Path>) {
    let config = match explicit {
        Some(p) => Config {
            socket: p.to_path_buf(),
            explicit: true,
        },
        None => Config {
            socket: hypomnesis::roots().map_or_else(
                |_| PathBuf::from(kube::DEFAULT_SOCKET),
                |r| {
                    r.rootfs
                        .path
                        .join(kube::DEFAULT_SOCKET.trim_start_matches('/'))
                },
            ),
            explicit: false,
        },
    };
    let _ = CONFIG.set(config);
}

/// What the kubelet said at one measurement.
#[derive(Debug, Clone)]
pub struct KubeSample {
    /// The allocations laid onto this node's GPUs, or why they could not be read.
    pub answer: Result<Assignment, String>,
}

/// The last failure said on stderr, to say each once (and when it ends).
static LAST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Says on stderr when the socket starts failing (and why), or answers again.
fn report(answer: &Result<Assignment, String>) {
    let mut last = LAST_FAILURE.lock().unwrap_or_else(PoisonError::into_inner);
    let now = answer.as_ref().err().cloned();
    if *last == now {
        return;
    }
    match &now {
        Some(why) => eprintln!("hmn: pod-resources: {}", printable(why)),
        None => eprintln!("hmn: pod-resources: answering again"),
    }
    *last = now;
}

/// Asks the kubelet, when a socket is configured and (unless named) present, and lays its
/// answer onto the measured `devices`.
pub fn read(devices: &[GpuDeviceInfo]) -> Option<KubeSample> {
    read_with(CONFIG.get()?, devices)
}

fn read_with(config: &Config, devices: &[GpuDeviceInfo]) -> Option<KubeSample> {
    if !config.explicit && !config.socket.exists() {
        return None;
    }
    let answer = kube::list_blocking(&config.socket, DEADLINE)
        .map(|allocations| {
            let gpus: Vec<(u32, String)> = devices
                .iter()
                .filter_map(|d| Some((d.index, d.uuid.clone()?)))
                .collect();
            let wants_migs = allocations
                .iter()
                .any(|a| matches!(a.device, kube::DeviceRef::Mig { .. }));
            let migs = if wants_migs {
                mig_uuids(devices)
            } else {
                Vec::new()
            };
            kube::assign(
                &allocations,
                NodeDevices {
                    gpus: &gpus,
                    migs: &migs,
                },
            )
        })
        .map_err(|e| e.to_string());
    report(&answer);
    Some(KubeSample { answer })
}

/// Each MIG device's UUID and its GPU, for the GPUs in MIG mode.
fn mig_uuids(devices: &[GpuDeviceInfo]) -> Vec<(String, u32)> {
    devices
        .iter()
        .filter(|d| d.mig_enabled == Some(true))
        .flat_map(|d| {
            hypomnesis::mig_instances(d.index)
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |m| Some((m.uuid?, d.index)))
        })
        .collect()
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::kube::tests::{Kubelet, Reply, answer, container, devices, pod};

    const GPU0: &str = "GPU-8f2c1a3e-5b7d-4c9e-a1f0-2b3c4d5e6f70";

    fn node() -> Vec<GpuDeviceInfo> {
        vec![
            GpuDeviceInfo::builder()
                .index(0)
                .uuid(Some(GPU0.into()))
                .build(),
        ]
    }

    /// Through a real socket: the kubelet's answer laid onto the measurement's GPUs by UUID.
    #[test]
    fn the_kubelets_answer_is_laid_onto_the_measured_gpus() {
        let kubelet = Kubelet::start(Reply::Answer(answer(vec![pod(
            "ml",
            "trainer-0",
            vec![container(
                "worker",
                vec![devices(
                    "nvidia.com/gpu",
                    &[GPU0, "GPU-00000000-0000-4000-8000-000000000000"],
                )],
            )],
        )])));
        let config = Config {
            socket: kubelet.socket(),
            explicit: false,
        };
        let k = read_with(&config, &node()).unwrap();
        let a = k.answer.unwrap();
        assert_eq!(a.by_gpu[&0].len(), 1);
        assert_eq!(a.by_gpu[&0][0].pod, "trainer-0");
        assert_eq!(a.unknown.len(), 1, "a GPU this node does not have");
    }

    /// No socket: not a kubelet node (nothing said) unless the user named it (an error).
    #[test]
    fn an_absent_socket_is_nothing_unless_named() {
        let socket = std::env::temp_dir().join("hmn-no-such-dir/kubelet.sock");
        let default = Config {
            socket: socket.clone(),
            explicit: false,
        };
        assert!(read_with(&default, &node()).is_none());
        let named = Config {
            socket,
            explicit: true,
        };
        let why = read_with(&named, &node()).unwrap().answer.unwrap_err();
        assert!(why.contains("hmn-no-such-dir"), "{why}");
    }
}
