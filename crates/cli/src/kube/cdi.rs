//! The node's CDI specs (Container Device Interface), read to place a DRA claim's device on a
//! GPU: a spec (JSON or YAML, in `<rootfs>/var/run/cdi` or `<rootfs>/etc/cdi`) names devices
//! `kind=name` (`k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0`), each with the device nodes a
//! container gets (`/dev/nvidia0`; a MIG device also its capability nodes
//! `/dev/nvidia-caps/nvidia-cap<N>`). The GPU's node's minor says which GPU it is. See
//! `docs/dra.md` for the layout the NVIDIA DRA driver writes, and its sources.
//!
//! Bounded: at most [`MAX_SPECS`] files of at most [`MAX_SPEC_BYTES`] each; a file that cannot
//! be read or parsed is named in [`CdiDevices::unreadable`], and the others are still read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

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

/// The specs' devices under `rootfs`.
pub fn read(rootfs: &Path) -> CdiDevices {
    let mut out = CdiDevices::default();
    let mut seen = 0;
    for dir in SPEC_DIRS {
        let Ok(entries) = std::fs::read_dir(rootfs.join(dir)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| Some(e.ok()?.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|e| e == "json" || e == "yaml" || e == "yml")
            })
            .collect();
        files.sort();
        for path in files {
            seen += 1;
            if seen > MAX_SPECS {
                return out;
            }
            match parse_file(&path) {
                Ok(spec) => {
                    for d in spec.devices {
                        let paths = d.edits.device_nodes.into_iter().map(|n| n.path).collect();
                        out.nodes.insert(format!("{}={}", spec.kind, d.name), paths);
                    }
                }
                Err(why) => out.unreadable.push((path, why)),
            }
        }
    }
    out
}

fn parse_file(path: &Path) -> Result<Spec, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if u64::try_from(text.len()).unwrap_or(u64::MAX) > MAX_SPEC_BYTES {
        return Err(format!("larger than {MAX_SPEC_BYTES} bytes"));
    }
    if path.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    } else {
        yaml_serde::from_str(&text).map_err(|e| e.to_string())
    }
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

/// Each CDI device name whose GPU node is one of this node's GPUs, with that GPU's index, given
/// each GPU's `(index, minor)`.
pub fn gpu_of_names(devices: &CdiDevices, minors: &[(u32, u32)]) -> BTreeMap<String, u32> {
    devices
        .nodes
        .iter()
        .filter_map(|(name, paths)| {
            let minor = gpu_minor(paths)?;
            let index = minors.iter().find(|(_, m)| *m == minor)?.0;
            Some((name.clone(), index))
        })
        .collect()
}
