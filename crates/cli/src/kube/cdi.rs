//! The node's CDI specs (Container Device Interface), read to place a DRA claim's device on a
//! GPU: a spec (JSON or YAML, in `<rootfs>/var/run/cdi` or `<rootfs>/etc/cdi`) names devices
//! `kind=name` (`k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0`), each with the device nodes a
//! container gets (`/dev/nvidia0`; a MIG device also its capability nodes
//! `/dev/nvidia-caps/nvidia-cap<N>`). The GPU's node's minor says which GPU it is. See
//! `docs/dra.md` for the layout the NVIDIA DRA driver writes, and its sources.
//!
//! Bounded: at most [`MAX_SPECS`] files of at most [`MAX_SPEC_BYTES`] each, regular files only,
//! opened without waiting and kept parsed while unchanged ([`nodefile`]), a YAML one refused
//! before it is parsed when its flow collections nest too deep ([`yaml_depth`]); a file that
//! cannot be read or parsed is named in [`CdiDevices::unreadable`], and the others are still
//! read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use serde::Deserialize;

use super::{nodefile, yaml_depth};

/// The spec directories, under the rootfs, in CDI's order of precedence (later wins).
pub const SPEC_DIRS: [&str; 2] = ["etc/cdi", "var/run/cdi"];
/// The most spec files read (a node has one per claim and a few static ones).
pub const MAX_SPECS: usize = 1024;
/// The largest spec file read.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
struct Spec {
    kind: String,
    #[serde(default)]
    devices: Vec<Device>,
}

#[derive(Deserialize)]
struct Device {
    name: String,
    #[serde(default, rename = "containerEdits")]
    edits: Edits,
}

#[derive(Default, Deserialize)]
struct Edits {
    #[serde(default, rename = "deviceNodes")]
    device_nodes: Vec<Node>,
}

#[derive(Deserialize)]
struct Node {
    path: String,
}

/// The devices the specs define: each fully qualified name with its device nodes' paths.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CdiDevices {
    pub nodes: BTreeMap<String, Vec<String>>,
    /// Spec files that could not be read or parsed, with why.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// What one spec file defines: each device's fully qualified name with its device nodes'
/// paths.
pub type SpecDevices = Vec<(String, Vec<String>)>;

/// The specs read so far, parsed, by file (a node's few hundred are read at every measurement,
/// parsed only when changed).
static SPECS: Mutex<nodefile::Cache<SpecDevices>> = Mutex::new(nodefile::Cache::new());

/// The specs' devices under `rootfs`.
pub fn read(rootfs: &Path) -> CdiDevices {
    read_with(rootfs, &SPECS)
}

/// [`read`], keeping what the specs give in `cache`.
pub fn read_with(rootfs: &Path, cache: &Mutex<nodefile::Cache<SpecDevices>>) -> CdiDevices {
    let mut out = CdiDevices::default();
    let mut listed = BTreeSet::new();
    'dirs: for dir in SPEC_DIRS {
        let dir = rootfs.join(dir);
        let files = match spec_files(&dir) {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // A directory the driver made 0750 root's, read by a user who is not.
            Err(e) => {
                out.unreadable.push((dir, e.to_string()));
                continue;
            }
        };
        for path in files {
            if listed.len() >= MAX_SPECS {
                break 'dirs;
            }
            match nodefile::read(cache, &path, MAX_SPEC_BYTES, |text| parse(&path, text)) {
                Ok(devices) => {
                    for (name, paths) in devices.iter() {
                        out.nodes.insert(name.clone(), paths.clone());
                    }
                }
                Err(why) => out.unreadable.push((path.clone(), why.to_string())),
            }
            listed.insert(path);
        }
    }
    cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keep_only(&listed);
    out
}

/// The spec files of `dir` (`*.json`, `*.yaml`, `*.yml`), in order; the listing is in flight
/// while it lasts.
fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let _waiting = hypomnesis::in_flight_reading(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// What of the specs could not be read, in a line (the first file or directory and why, and
/// how many more); `None` when everything could.
pub fn problems(specs: &CdiDevices) -> Option<String> {
    let ((path, why), rest) = specs.unreadable.split_first()?;
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    Some(format!("{}: {why}{more}", path.display()))
}

/// The devices of the spec at `path` (JSON or YAML, by its name), whose text is `text`.
fn parse(path: &Path, text: &str) -> Result<SpecDevices, String> {
    let spec: Spec = if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(text).map_err(|e| e.to_string())?
    } else {
        yaml_depth::check(text, yaml_depth::MAX_FLOW_DEPTH)?;
        yaml_serde::from_str(text).map_err(|e| e.to_string())?
    };
    Ok(spec
        .devices
        .into_iter()
        .map(|d| {
            let paths = d.edits.device_nodes.into_iter().map(|n| n.path).collect();
            (format!("{}={}", spec.kind, d.name), paths)
        })
        .collect())
}

/// The minor of the GPU device node among `paths` (`/dev/nvidia3` → 3; not `/dev/nvidiactl`,
/// `/dev/nvidia-uvm` or a capability node).
pub fn gpu_minor(paths: &[String]) -> Option<u32> {
    paths.iter().find_map(|p| {
        let digits = p.strip_prefix("/dev/nvidia")?;
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    })
}

/// Where a CDI device lands: a GPU, by its index, and the MIG GPU instance on it when the
/// device's capability nodes name one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub gpu: u32,
    /// The MIG GPU instance id (`gi<N>`); `None` for a whole GPU, or a MIG device whose
    /// capability nodes this node's driver no longer lists.
    pub mig: Option<u32>,
}

/// What a MIG capability node's minor stands for: a GPU instance, or a compute instance in one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// The parent GPU's device minor.
    pub gpu_minor: u32,
    /// The GPU instance id.
    pub gi: u32,
    /// The compute instance id, for a compute instance's node.
    pub ci: Option<u32>,
}

/// The driver's capability directory under the procfs root.
pub const CAPS_DIR: &str = "driver/nvidia/capabilities";
/// The most capability files read (a GPU has at most 7 GPU instances of at most 8 compute
/// instances each; a node at most a few dozen GPUs).
pub const MAX_CAPS: usize = 8192;

/// The MIG capability nodes the driver lists under `procfs`: each
/// `driver/nvidia/capabilities/gpu<M>/mig/gi<G>/access` and `…/gi<G>/ci<C>/access` file's
/// `DeviceFileMinor: <N>`, by that minor (the node is `/dev/nvidia-caps/nvidia-cap<N>`).
/// Files that cannot be read are skipped: a device whose node is not here is not told apart.
pub fn mig_caps(procfs: &Path) -> BTreeMap<u32, Cap> {
    let mut out = BTreeMap::new();
    let mut read = 0_usize;
    let numbered = |p: &Path, prefix: &str| -> Option<u32> {
        p.file_name()?.to_str()?.strip_prefix(prefix)?.parse().ok()
    };
    let dirs = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|e| e.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    for gpu in dirs(&procfs.join(CAPS_DIR)) {
        let Some(gpu_minor) = numbered(&gpu, "gpu") else {
            continue;
        };
        for gi_dir in dirs(&gpu.join("mig")) {
            let Some(gi) = numbered(&gi_dir, "gi") else {
                continue;
            };
            let mut files = vec![(gi_dir.join("access"), None)];
            for ci_dir in dirs(&gi_dir) {
                if let Some(ci) = numbered(&ci_dir, "ci") {
                    files.push((ci_dir.join("access"), Some(ci)));
                }
            }
            for (file, ci) in files {
                read += 1;
                if read > MAX_CAPS {
                    return out;
                }
                if let Some(minor) = access_minor(&file) {
                    out.insert(minor, Cap { gpu_minor, gi, ci });
                }
            }
        }
    }
    out
}

/// The `DeviceFileMinor:` of a capability `access` file (a few short lines).
fn access_minor(file: &Path) -> Option<u32> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(file)
        .ok()?
        .take(4096)
        .read_to_string(&mut text)
        .ok()?;
    text.lines().find_map(|l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == "DeviceFileMinor")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// The minors of the capability nodes among `paths` (`/dev/nvidia-caps/nvidia-cap21` → 21).
fn cap_minors(paths: &[String]) -> impl Iterator<Item = u32> + '_ {
    paths.iter().filter_map(|p| {
        let digits = p.strip_prefix("/dev/nvidia-caps/nvidia-cap")?;
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    })
}

/// Each CDI device name whose GPU node is one of this node's GPUs, with where it lands, given
/// each GPU's `(index, minor)` and the driver's MIG capability nodes ([`mig_caps`]): a device
/// with a GPU instance's capability node of that GPU is that MIG device.
pub fn gpu_of_names(
    devices: &CdiDevices,
    minors: &[(u32, u32)],
    caps: &BTreeMap<u32, Cap>,
) -> BTreeMap<String, Placed> {
    devices
        .nodes
        .iter()
        .filter_map(|(name, paths)| {
            let minor = gpu_minor(paths)?;
            let gpu = minors.iter().find(|(_, m)| *m == minor)?.0;
            let mig = cap_minors(paths)
                .filter_map(|c| caps.get(&c))
                .find(|c| c.gpu_minor == minor)
                .map(|c| c.gi);
            Some((name.clone(), Placed { gpu, mig }))
        })
        .collect()
}
