//! Which pod the kubelet allocated each GPU to, asked in the background of the kubelet's
//! pod-resources socket (a measurement uses the latest answer, and says its age):
//! `--pod-resources-socket`, else `<rootfs>/var/lib/kubelet/pod-resources/kubelet.sock` when it
//! exists (a node without a kubelet has none, and no series about it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use hypomnesis::GpuDeviceInfo;

use crate::kube::{self, Allocation, Assignment};
use crate::view::printable::printable;

/// How long one `List` call may take (no measurement waits for one, but one before the first
/// answer).
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
    if CONFIG.set(config).is_ok()
        && let Some(config) = CONFIG.get()
        && (config.explicit || config.socket.exists())
    {
        // The first question is on its way before the first scrape.
        ask_in_background(
            &mut CACHE.lock().unwrap_or_else(PoisonError::into_inner),
            config,
        );
    }
}

/// What the kubelet said, as one measurement used it.
#[derive(Debug, Clone)]
pub struct KubeSample {
    /// The allocations laid onto this node's GPUs, or why they could not be read.
    pub answer: Result<Assignment, String>,
    /// How old the kubelet's answer was when the measurement used it.
    pub age: Duration,
}

/// The kubelet's latest answer: asked on a thread of its own, so that a measurement never
/// waits for the kubelet. The first question is sent when the exporter starts; only a
/// measurement before its answer waits (at most the call's deadline).
#[derive(Debug, Default)]
struct Cache {
    latest: Option<(Instant, Arc<Answer>)>,
    asking: bool,
}

type Answer = Result<Vec<Allocation>, String>;

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    latest: None,
    asking: false,
});

/// Told when a background question is answered.
static ANSWERED: Condvar = Condvar::new();

/// How old an answer may be before a measurement asks the kubelet again (in the background).
const REFRESH_AFTER: Duration = Duration::from_secs(1);

/// Where the kubelet is asked: the library's bounded worker (one thread, kept).
static ASKER: std::sync::LazyLock<hypomnesis::bounded::Worker> =
    std::sync::LazyLock::new(|| hypomnesis::bounded::Worker::new("pod-resources"));

/// Sends a question to the kubelet on the bounded worker, unless one is on its way; its
/// answer becomes the latest.
fn ask_in_background(cache: &mut Cache, config: &Config) {
    if cache.asking {
        return;
    }
    cache.asking = true;
    let config = config.clone();
    let started = ASKER.start(
        move || ask(&config),
        |answer| {
            let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
            if let Ok(answer) = answer {
                cache.latest = Some((Instant::now(), Arc::new(answer)));
            }
            cache.asking = false;
            ANSWERED.notify_all();
        },
    );
    if started.is_err() {
        cache.asking = false;
    }
}

/// The kubelet's answer to use now, and when it was given: the latest, with a new question sent
/// in the background when it is older than [`REFRESH_AFTER`]; before the first answer, that
/// answer, waited for (at most a little over the call's deadline).
fn latest(config: &Config) -> (Instant, Arc<Answer>) {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, answer)) = cache.latest.clone() {
        if at.elapsed() >= REFRESH_AFTER {
            ask_in_background(&mut cache, config);
        }
        return (at, answer);
    }
    ask_in_background(&mut cache, config);
    let (cache, _) = ANSWERED
        .wait_timeout_while(cache, DEADLINE + Duration::from_millis(500), |c| {
            c.latest.is_none()
        })
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(latest) = cache.latest.clone() {
        return latest;
    }
    // Not kept: the question on its way answers the next measurement.
    drop(cache);
    let why = format!(
        "{} has not answered the first question within {} s",
        printable(&config.socket.display().to_string()),
        DEADLINE.as_secs()
    );
    (Instant::now(), Arc::new(Err(why)))
}

/// One question to the kubelet, said on stderr when it starts or stops failing.
fn ask(config: &Config) -> Result<Vec<Allocation>, String> {
    let answer = kube::list_blocking(&config.socket, DEADLINE).map_err(|e| e.to_string());
    report(answer.as_ref().map(|_| ()).map_err(Clone::clone));
    answer
}

/// The last failure said on stderr, to say each once (and when it ends).
static LAST_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Says on stderr when the socket starts failing (and why), or answers again.
fn report(answer: Result<(), String>) {
    let mut last = LAST_FAILURE.lock().unwrap_or_else(PoisonError::into_inner);
    let now = answer.err();
    if *last == now {
        return;
    }
    match &now {
        Some(why) => eprintln!("hmn: pod-resources: {}", printable(why)),
        None => eprintln!("hmn: pod-resources: answering again"),
    }
    *last = now;
}

/// The kubelet's latest answer, when a socket is configured and (unless named) present, laid
/// onto the measured `devices`. The kubelet is asked in the background (see [`latest`]).
pub fn read(devices: &[GpuDeviceInfo]) -> Option<KubeSample> {
    let config = CONFIG.get()?;
    if !config.explicit && !config.socket.exists() {
        return None;
    }
    let (at, answer) = latest(config);
    Some(lay(&answer, devices, at.elapsed()))
}

/// Asks the kubelet now and lays its answer onto `devices` (what [`read`] does, waiting).
#[cfg(all(test, unix))]
fn read_with(config: &Config, devices: &[GpuDeviceInfo]) -> Option<KubeSample> {
    if !config.explicit && !config.socket.exists() {
        return None;
    }
    Some(lay(&ask(config), devices, Duration::ZERO))
}

/// The kubelet's `answer` laid onto the measured `devices` ([`kube::place::place`]).
fn lay(
    answer: &Result<Vec<Allocation>, String>,
    devices: &[GpuDeviceInfo],
    age: Duration,
) -> KubeSample {
    let answer = answer.as_ref().map_err(Clone::clone).map(|allocations| {
        let a = kube::place::place(allocations, devices);
        say_once(
            &LAST_SPECS_FAILURE,
            "the DRA claims' CDI specs",
            "not all read, so their devices are not placed",
            a.specs_error.as_deref(),
        );
        say_once(
            &LAST_BOOKING_FAILURE,
            "the DRA claims' memory bookings",
            "not known",
            a.booked_error.as_deref(),
        );
        a
    });
    KubeSample { answer, age }
}

/// The last reason the CDI specs could not all be read, and the DRA driver's bookings could
/// not, to say each once.
static LAST_SPECS_FAILURE: Mutex<Option<String>> = Mutex::new(None);
static LAST_BOOKING_FAILURE: Mutex<Option<String>> = Mutex::new(None);

/// Says on stderr when `what` starts failing to be read (`hmn: <what>: <failed>: <why>`), or
/// is read again; nothing while it stays as it was (`last`).
fn say_once(last: &Mutex<Option<String>>, what: &str, failed: &str, why: Option<&str>) {
    let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
    if last.as_deref() == why {
        return;
    }
    match why {
        Some(why) => eprintln!("hmn: {what}: {failed}: {}", printable(why)),
        None => eprintln!("hmn: {what}: read again"),
    }
    *last = why.map(str::to_owned);
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
