//! Who holds a GPU's device file. NVIDIA's driver registers its GPU device files under the
//! character major that `<procfs>/devices` names `nvidia-frontend` (or `nvidia`; 195 on every
//! driver so far), minor N for GPU N (254 and 255 are `nvidia-modeset` and `nvidiactl`, which
//! every client opens, so they name no GPU), and says each GPU's minor in
//! `<procfs>/driver/nvidia/gpus/<bus>/information` (`Device Minor:`). A process holds a GPU
//! while one of its descriptors is open on that device, told by the device number of the file
//! behind the descriptor ([`super::fdstat`]), never by the text of its link: in another mount
//! namespace `/dev/nvidia0` may be any file, and a GPU's node may have any name. Every CUDA
//! context also holds the unified-memory device (`nvidia-uvm`, a major of its own), which tells
//! a process with a context from a client that only asks the driver (persistenced, NVML
//! monitors).
//!
//! Finding the holders means looking at every process's descriptors, so a scan says how far it
//! got: whether it saw every process (its deadline, descriptors it could not read, a procfs that
//! shows one PID namespace or hides other users' processes). A scan that did not see everything
//! proves no absence.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// Minors from here up are the driver's control nodes, not a GPU.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const FIRST_CONTROL_MINOR: u32 = 254;

/// The character majors of NVIDIA's device files, from `<procfs>/devices`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Majors {
    /// The GPUs' device files (`nvidia-frontend`, or `nvidia`).
    pub gpu: Option<u32>,
    /// The unified-memory device every CUDA context holds (`nvidia-uvm`).
    pub uvm: Option<u32>,
}

impl Majors {
    /// The majors `<procfs>/devices` names, or why they cannot be read.
    pub(crate) fn read(procfs: &Path) -> Result<Self, String> {
        use crate::host::parse::devices::{char_major, nvidia_gpu_major};
        let path = procfs.join("devices");
        let text = crate::host::file::read_capped(&path, crate::host::file::STATUS)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Self {
            gpu: nvidia_gpu_major(&text),
            uvm: char_major(&text, "nvidia-uvm"),
        })
    }

    /// The GPU minor a character device `(major, minor)` is, if it is one.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // descriptors are read on Linux
    fn gpu_minor(self, (major, minor): (u32, u32)) -> Option<u32> {
        (Some(major) == self.gpu && minor < FIRST_CONTROL_MINOR).then_some(minor)
    }
}

/// One GPU as the driver's `information` file describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DriverGpu {
    pub uuid: Option<String>,
    /// `Bus Location:` as the file gives it (`0000:62:00.0`).
    pub bus: Option<String>,
    pub minor: u32,
}

/// A GPU from the text of its `information` file; `None` without a `Device Minor:` line.
pub(crate) fn parse_information(text: &str) -> Option<DriverGpu> {
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    let minor = value("Device Minor")?.parse().ok()?;
    Some(DriverGpu {
        uuid: value("GPU UUID").filter(|u| !u.is_empty()),
        bus: value("Bus Location").filter(|b| !b.is_empty()),
        minor,
    })
}

/// Every GPU the driver describes under `procfs`; empty where it has no such directory.
pub(crate) fn driver_gpus(procfs: &Path) -> Vec<DriverGpu> {
    let Ok(dir) = std::fs::read_dir(procfs.join("driver").join("nvidia").join("gpus")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let path = e.ok()?.path().join("information");
        let text = crate::host::file::read_capped(&path, crate::host::file::STAT).ok()?;
        parse_information(&text)
    })
    .collect()
}

/// Which of the driver's GPUs a device is: by UUID, else by bus location (NVML writes the
/// domain with eight digits, the driver's file with four).
pub(crate) fn minor_of(gpus: &[DriverGpu], uuid: Option<&str>, bus: Option<&str>) -> Option<u32> {
    let same_bus = |a: &str, b: &str| {
        let norm = |s: &str| {
            let s = s.to_ascii_lowercase();
            match s.split_once(':') {
                Some((domain, rest)) => format!("{:0>8}:{rest}", domain.trim_start_matches('0')),
                None => s,
            }
        };
        norm(a) == norm(b)
    };
    gpus.iter()
        .find(|g| uuid.is_some() && g.uuid.as_deref() == uuid)
        .or_else(|| {
            let bus = bus?;
            gpus.iter()
                .find(|g| g.bus.as_deref().is_some_and(|b| same_bus(b, bus)))
        })
        .map(|g| g.minor)
}

/// How far a scan of descriptors got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HolderScan {
    /// Processes whose descriptors were listed.
    pub processes: u64,
    /// Descriptors looked at.
    pub descriptors: u64,
    /// Processes whose descriptors could not be listed (another user's, without the right).
    pub unreadable: u64,
    /// Whether every process the procfs lists was looked at before the deadline.
    pub complete: bool,
    /// Whether the procfs scanned shows every process of the host: the initial PID namespace,
    /// with nothing hidden by `hidepid` (`None`: not known).
    pub covers_host: Option<bool>,
    /// How long it took (`elapsed_seconds` in JSON).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "elapsed_seconds", serialize_with = "seconds")
    )]
    pub elapsed: Duration,
    /// How long before the look that used it the scan started (`age_seconds` in JSON): a
    /// caller that looks again and again scans in the background, and uses the latest.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "age_seconds", serialize_with = "seconds")
    )]
    pub age: Duration,
}

impl HolderScan {
    /// Whether the scan saw every process of the host and each one's descriptors: only then
    /// does finding no holder mean there is none.
    #[must_use]
    pub fn saw_everything(&self) -> bool {
        self.complete && self.unreadable == 0 && self.covers_host == Some(true)
    }

    /// What the scan did not see, one line each (empty when it saw everything).
    #[must_use]
    pub fn not_seen(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.complete {
            out.push(format!(
                "the scan of descriptors stopped at its deadline after {} processes",
                self.processes
            ));
        }
        if self.unreadable > 0 {
            out.push(format!(
                "the descriptors of {} processes could not be read (another user's)",
                self.unreadable
            ));
        }
        match self.covers_host {
            Some(true) => {}
            Some(false) => out.push(
                "the procfs scanned does not show every process of the host (another PID \
                 namespace's, or hidepid hides other users' processes)"
                    .into(),
            ),
            None => out.push(
                "whether the procfs scanned shows every process of the host is not known".into(),
            ),
        }
        out
    }
}

#[cfg(feature = "serde")]
fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What one scan found.
#[derive(Debug, Clone)]
pub(crate) struct Scanned {
    pub stats: HolderScan,
    /// When it started.
    pub started: Instant,
    /// The majors it matched descriptors against.
    pub majors: Majors,
    /// The processes holding each GPU minor.
    pub held: BTreeMap<u32, BTreeSet<u32>>,
    /// The processes holding the unified-memory device (a CUDA context each).
    pub uvm: BTreeSet<u32>,
    /// Each GPU holder's start time (`stat`'s, read after the scan), to tell it from a later
    /// process with its number.
    pub starts: BTreeMap<u32, u64>,
}

impl Scanned {
    /// The scan's figures, aged to `now`.
    pub(crate) fn stats_at(&self, now: Instant) -> HolderScan {
        HolderScan {
            age: now.saturating_duration_since(self.started),
            ..self.stats
        }
    }
}

/// This process's number in `procfs` (its `self` link), which a scan leaves out: hmn holds
/// the device files while it asks the driver, and is never a suspect.
fn own_number(procfs: &Path) -> Option<u32> {
    std::fs::read_link(procfs.join("self"))
        .ok()?
        .to_str()?
        .parse()
        .ok()
}

/// Scans the descriptors of every process under `procfs` (this one left out), looking until
/// `deadline`.
pub(crate) fn scan(procfs: &Path, majors: Majors, deadline: Instant) -> Scanned {
    let started = Instant::now();
    let mut out = Scanned {
        stats: HolderScan::default(),
        started,
        majors,
        held: BTreeMap::new(),
        uvm: BTreeSet::new(),
        starts: BTreeMap::new(),
    };
    let Ok(dir) = std::fs::read_dir(procfs) else {
        return out;
    };
    let me = own_number(procfs);
    let mut complete = true;
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if Some(pid) == me {
            continue;
        }
        if Instant::now() >= deadline {
            complete = false;
            break;
        }
        match descriptors(procfs, pid, majors) {
            Ok(seen) => {
                out.stats.processes += 1;
                out.stats.descriptors += seen.descriptors;
                for minor in seen.gpus {
                    out.held.entry(minor).or_default().insert(pid);
                }
                if seen.uvm {
                    out.uvm.insert(pid);
                }
            }
            // Gone since the listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(_) => out.stats.unreadable += 1,
        }
    }
    let holders: BTreeSet<u32> = out.held.values().flatten().copied().collect();
    out.starts = holders
        .into_iter()
        .filter_map(|pid| Some((pid, super::look::stat(procfs, pid)?.1)))
        .collect();
    out.stats.complete = complete;
    out.stats.covers_host = covers_host(procfs);
    out.stats.elapsed = started.elapsed();
    out
}

/// Whether `procfs` shows every process of the host (see [`HolderScan::covers_host`]).
fn covers_host(procfs: &Path) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        use crate::host::process::visibility::{facts, shows_initial_namespace};
        let initial = shows_initial_namespace(procfs)?;
        Some(initial && !facts(procfs).hiding())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = procfs;
        None
    }
}

/// What one process's descriptors hold.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Held {
    pub descriptors: u64,
    /// The GPU minors it holds.
    pub gpus: BTreeSet<u32>,
    /// Whether it holds the unified-memory device.
    pub uvm: bool,
}

/// What `pid`'s descriptors under `procfs` hold; an error when they cannot be listed
/// (`NotFound`: the process is gone).
pub(crate) fn descriptors(procfs: &Path, pid: u32, majors: Majors) -> std::io::Result<Held> {
    #[cfg(target_os = "linux")]
    {
        let path = procfs.join(pid.to_string()).join("fd");
        // A descriptor on a filesystem that does not answer would hold the scan: named.
        let _waiting = crate::inflight::reading(&path);
        let dir = super::fdstat::FdDir::open(&path)?;
        let mut held = Held::default();
        for entry in std::fs::read_dir(&path)? {
            let Ok(entry) = entry else { continue };
            held.descriptors += 1;
            let Ok(name) = std::ffi::CString::new(entry.file_name().into_encoded_bytes()) else {
                continue;
            };
            let Some(dev) = dir.char_device(&name) else {
                continue;
            };
            if let Some(minor) = majors.gpu_minor(dev) {
                held.gpus.insert(minor);
            } else if Some(dev.0) == majors.uvm {
                held.uvm = true;
            }
        }
        Ok(held)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (procfs, pid, majors);
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    const H100: &str = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ: \t\t 10\nGPU UUID: \t GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:62:00.0\nDevice Minor: \t 5\nGPU Firmware: \t 535.129.03\nGPU Excluded:\t No\n";

    #[test]
    fn the_information_file_gives_minor_uuid_and_bus() {
        let g = parse_information(H100).unwrap();
        assert_eq!(g.minor, 5);
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b")
        );
        assert_eq!(g.bus.as_deref(), Some("0000:62:00.0"));
        assert_eq!(parse_information("Model: x\n"), None, "no minor, no GPU");
        assert_eq!(parse_information("Device Minor: five\n"), None);
        let gpus = [g];
        assert_eq!(
            minor_of(
                &gpus,
                Some("GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b"),
                None
            ),
            Some(5)
        );
        assert_eq!(
            minor_of(&gpus, Some("GPU-other"), Some("00000000:62:00.0")),
            Some(5),
            "by bus"
        );
        assert_eq!(
            minor_of(&gpus, Some("GPU-other"), Some("00000000:63:00.0")),
            None
        );
        assert_eq!(minor_of(&gpus, None, None), None);
    }

    #[test]
    fn a_device_number_names_a_gpu_and_control_nodes_name_none() {
        let m = Majors {
            gpu: Some(195),
            uvm: Some(508),
        };
        assert_eq!(m.gpu_minor((195, 3)), Some(3));
        assert_eq!(m.gpu_minor((195, 255)), None, "nvidiactl");
        assert_eq!(m.gpu_minor((195, 254)), None, "nvidia-modeset");
        assert_eq!(m.gpu_minor((1, 3)), None, "/dev/null");
        assert_eq!(
            Majors::default().gpu_minor((195, 0)),
            None,
            "no major known"
        );
    }

    /// This process's own descriptors, with `/dev/null`'s major (1) standing for NVIDIA's and
    /// `/dev/full` (1:7) for a GPU: found by number, whatever the path, and a regular file
    /// named like a device is nothing. (No other test of this process opens `/dev/full`.)
    #[test]
    fn a_process_holds_a_gpu_by_the_number_of_its_file() {
        let dir = std::env::temp_dir().join(format!("hmn-holders-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("nvidia7");
        std::fs::write(&fake, "a regular file named like a GPU").unwrap();
        let _named = std::fs::File::open(&fake).unwrap();
        let majors = Majors {
            gpu: Some(1),
            uvm: None,
        };
        let me = std::process::id();
        let before = descriptors(Path::new("/proc"), me, majors).unwrap();
        assert!(!before.gpus.contains(&7), "{before:?}");
        let full = std::fs::File::open("/dev/full").unwrap();
        let after = descriptors(Path::new("/proc"), me, majors).unwrap();
        assert!(after.gpus.contains(&7), "{after:?}");
        assert!(after.descriptors >= 2);
        drop(full);
        std::fs::remove_dir_all(&dir).unwrap();
        let e = descriptors(Path::new("/proc"), u32::MAX, majors).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    /// A whole scan of this host's processes: a child holding `/dev/zero` (as the GPU of minor
    /// 5 here) is found; this process, holding it too, is left out.
    #[test]
    fn a_scan_finds_a_child_and_leaves_this_process_out() {
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::fs::File::open("/dev/zero").unwrap())
            .spawn()
            .unwrap();
        let majors = Majors {
            gpu: Some(1),
            uvm: Some(1 << 20),
        };
        let s = scan(
            Path::new("/proc"),
            majors,
            Instant::now() + Duration::from_secs(60),
        );
        child.kill().unwrap();
        child.wait().unwrap();
        drop(zero);
        assert!(s.stats.complete, "{:?}", s.stats);
        assert!(s.held[&5].contains(&child.id()), "{:?}", s.held);
        assert!(!s.held[&5].contains(&std::process::id()));
        assert!(s.stats.processes > 1 && s.stats.descriptors > 1);
        // A deadline already past: nothing looked at, and said so.
        let s = scan(Path::new("/proc"), majors, Instant::now());
        assert!(s.held.is_empty() && !s.stats.complete && s.stats.processes == 0);
        assert!(!s.stats.saw_everything());
        assert!(s.stats.not_seen()[0].contains("deadline"), "{:?}", s.stats);
    }

    #[test]
    fn majors_from_a_crafted_procfs() {
        let root = std::env::temp_dir().join(format!("hmn-majors-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        assert!(Majors::read(&root).unwrap_err().contains("devices"));
        std::fs::write(
            root.join("devices"),
            "Character devices:\n195 nvidia-frontend\n508 nvidia-uvm\n",
        )
        .unwrap();
        assert_eq!(
            Majors::read(&root).unwrap(),
            Majors {
                gpu: Some(195),
                uvm: Some(508)
            }
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
