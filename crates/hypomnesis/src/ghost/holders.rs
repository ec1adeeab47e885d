//! Who holds a GPU's device file. NVIDIA's driver gives each GPU a character device
//! `/dev/nvidia<minor>` (major 195; minors 254 and 255 are `nvidia-modeset` and `nvidiactl`,
//! which every client opens, so they name no GPU), and says each GPU's minor in
//! `<procfs>/driver/nvidia/gpus/<bus>/information` (`Device Minor:`). A process holds a GPU
//! while one of its descriptors is that file: its `fd/<n>` link reads `/dev/nvidia<minor>`,
//! or, for a node under another name, the file it opens is a character device `195:<minor>`.
//! Finding them means listing every process's descriptors, so a scan is bounded by a deadline
//! and says how far it got.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// The character major number of NVIDIA's GPU device nodes.
const NVIDIA_MAJOR: u32 = 195;
/// Minors from here up are the driver's control nodes, not a GPU.
const FIRST_CONTROL_MINOR: u32 = 254;

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
    /// Whether every process was looked at before the deadline.
    pub complete: bool,
    /// How long it took (`elapsed_seconds` in JSON).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "elapsed_seconds", serialize_with = "seconds")
    )]
    pub elapsed: Duration,
}

#[cfg(feature = "serde")]
fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// The GPU minor a descriptor's link `target` names, or, for another node under `/dev`, the
/// one the opened file is (`stat` of `fd_path` follows the link).
fn minor_of_descriptor(target: &Path, fd_path: &Path) -> Option<u32> {
    let text = target.to_str()?;
    if let Some(digits) = text.strip_prefix("/dev/nvidia")
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        return digits.parse().ok().filter(|&m| m < FIRST_CONTROL_MINOR);
    }
    let other_node = text.starts_with("/dev/")
        && !text.starts_with("/dev/nvidia")
        && !text.starts_with("/dev/pts/")
        && !matches!(
            text,
            "/dev/null" | "/dev/zero" | "/dev/urandom" | "/dev/random"
        );
    if !other_node {
        return None;
    }
    device_minor(fd_path)
}

#[cfg(target_os = "linux")]
fn device_minor(path: &Path) -> Option<u32> {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let m = std::fs::metadata(path).ok()?;
    if !m.file_type().is_char_device() {
        return None;
    }
    let rdev = m.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    (major == NVIDIA_MAJOR && minor < FIRST_CONTROL_MINOR).then_some(minor)
}

#[cfg(not(target_os = "linux"))]
fn device_minor(_path: &Path) -> Option<u32> {
    let _ = NVIDIA_MAJOR;
    None
}

/// The processes under `procfs` holding each GPU minor, by minor, looking until `deadline`.
pub(crate) fn scan(procfs: &Path, deadline: Instant) -> (BTreeMap<u32, BTreeSet<u32>>, HolderScan) {
    let started = Instant::now();
    let mut held: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut stats = HolderScan::default();
    let Ok(dir) = std::fs::read_dir(procfs) else {
        return (held, stats);
    };
    let pids = dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok());
    let mut complete = true;
    for pid in pids {
        if Instant::now() >= deadline {
            complete = false;
            break;
        }
        let fd_dir = procfs.join(pid.to_string()).join("fd");
        let Ok(fds) = std::fs::read_dir(&fd_dir) else {
            // Gone since the listing, or another user's.
            if fd_dir.parent().is_some_and(Path::exists) {
                stats.unreadable += 1;
            }
            continue;
        };
        stats.processes += 1;
        for fd in fds.filter_map(Result::ok) {
            stats.descriptors += 1;
            let path = fd.path();
            let Ok(target) = std::fs::read_link(&path) else {
                continue;
            };
            if let Some(minor) = minor_of_descriptor(&target, &path) {
                held.entry(minor).or_default().insert(pid);
            }
        }
    }
    stats.complete = complete;
    stats.elapsed = started.elapsed();
    (held, stats)
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
    fn descriptors_name_a_gpu_by_path_and_control_nodes_name_none() {
        let p = Path::new("/nonexistent");
        let m = |t: &str| minor_of_descriptor(Path::new(t), p);
        assert_eq!(m("/dev/nvidia3"), Some(3));
        assert_eq!(m("/dev/nvidiactl"), None);
        assert_eq!(m("/dev/nvidia-uvm"), None);
        assert_eq!(m("/dev/nvidia255"), None, "the control node's minor");
        assert_eq!(m("/dev/nvidia3 (deleted)"), None);
        assert_eq!(m("socket:[123]"), None);
        assert_eq!(m("/dev/dri/card0"), None, "not a 195 node (and not there)");
    }

    /// A crafted procfs: descriptors are links, as in the kernel's, to device paths.
    #[test]
    fn a_scan_finds_the_holders_of_each_gpu_and_counts_what_it_saw() {
        let root = std::env::temp_dir().join(format!("hmn-holders-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let fd = |pid: u32, n: u32, target: &str| {
            let d = root.join(pid.to_string()).join("fd");
            std::fs::create_dir_all(&d).unwrap();
            std::os::unix::fs::symlink(target, d.join(n.to_string())).unwrap();
        };
        fd(4411, 3, "/dev/nvidiactl");
        fd(4411, 4, "/dev/nvidia0");
        fd(4412, 7, "/dev/nvidia0");
        fd(4412, 8, "/dev/nvidia1");
        fd(4413, 0, "/dev/null");
        std::fs::create_dir_all(root.join("self")).unwrap();
        let (held, stats) = scan(&root, Instant::now() + Duration::from_secs(5));
        assert_eq!(held[&0], BTreeSet::from([4411, 4412]));
        assert_eq!(held[&1], BTreeSet::from([4412]));
        assert_eq!(held.len(), 2);
        assert_eq!((stats.processes, stats.descriptors), (3, 5));
        assert!(stats.complete);
        // A deadline already past: nothing looked at, and said so.
        let (held, stats) = scan(&root, Instant::now());
        assert!(held.is_empty() && !stats.complete && stats.processes == 0);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
