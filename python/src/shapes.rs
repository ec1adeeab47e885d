//! What the native functions answer, as serde shapes: the library's own types, serialized as
//! they are, plus the few figures their methods compute, which the Python objects show as
//! fields. No field of a library type is named here.
//!
//! The extension module (`lib.rs`) and the field generator (`bin/fields`) both include this
//! file, so the generated Python field lists are exactly what the module answers.

use hypomnesis::{ErrorKind, GpuDeviceInfo, GpuProcessEntry, MigInstance, MigState, Snapshot};
use serde::Serialize;

pub use hypomnesis::ProcessContext;

/// A GPU's figures, with the allocated and allocatable memory its methods derive.
#[derive(Debug, Serialize)]
pub struct Device<'a> {
    #[serde(flatten)]
    info: &'a GpuDeviceInfo,
    allocated_bytes: Option<u64>,
    allocatable_bytes: Option<u64>,
}

impl<'a> Device<'a> {
    pub fn new(info: &'a GpuDeviceInfo) -> Self {
        Self {
            info,
            allocated_bytes: info.allocated_bytes(),
            allocatable_bytes: info.allocatable_bytes(),
        }
    }
}

/// One process holding GPU memory, with its context where it could be read.
#[derive(Debug, Serialize)]
pub struct ProcessRow<'a> {
    #[serde(flatten)]
    entry: &'a GpuProcessEntry,
    process_context: Option<&'a ProcessContext>,
}

impl<'a> ProcessRow<'a> {
    pub fn new(entry: &'a GpuProcessEntry, process_context: Option<&'a ProcessContext>) -> Self {
        Self {
            entry,
            process_context,
        }
    }
}

/// A MIG device, with its GPU-instance profile and the kind of its memory error.
#[derive(Debug, Serialize)]
pub struct Mig<'a> {
    #[serde(flatten)]
    instance: &'a MigInstance,
    gpu_instance_profile: Option<&'a str>,
    memory_error_kind: Option<ErrorKind>,
}

impl<'a> Mig<'a> {
    pub fn new(instance: &'a MigInstance) -> Self {
        Self {
            instance,
            gpu_instance_profile: instance.gpu_instance_profile(),
            memory_error_kind: instance.memory_error_kind(),
        }
    }
}

/// A GPU's MIG view, each instance as a [`Mig`], with the kind of its device memory error.
///
/// `instances` follows the flattened state's own `instances` and so replaces it: a map (a
/// Python dict) keeps a key's first position and its last value.
#[derive(Debug, Serialize)]
pub struct MigView<'a> {
    #[serde(flatten)]
    state: &'a MigState,
    instances: Vec<Mig<'a>>,
    device_memory_error_kind: Option<ErrorKind>,
}

impl<'a> MigView<'a> {
    pub fn new(state: &'a MigState) -> Self {
        Self {
            state,
            instances: state.instances.iter().map(Mig::new).collect(),
            device_memory_error_kind: state.device_memory_error_kind(),
        }
    }
}

/// A snapshot, its device's figures as a [`Device`] (replacing the flattened `gpu_device` as
/// [`MigView`]'s `instances` does).
#[derive(Debug, Serialize)]
pub struct SnapshotView<'a> {
    #[serde(flatten)]
    snapshot: &'a Snapshot,
    gpu_device: Option<Device<'a>>,
}

impl<'a> SnapshotView<'a> {
    pub fn new(snapshot: &'a Snapshot) -> Self {
        Self {
            snapshot,
            gpu_device: snapshot.gpu_device.as_ref().map(Device::new),
        }
    }
}

/// A ghost, flat: its remedy as what to do (`kill`, `reap`, `gpu_reset`, `unknown`), with the
/// pids to kill or the parent to reap, and the remedy in words.
#[derive(Debug, Serialize)]
pub struct GhostView<'a> {
    /// The class (`class` is a keyword in Python).
    ghost_class: &'static str,
    device_index: u32,
    pid: Option<u32>,
    name: Option<&'a str>,
    bytes: u64,
    holders: &'a [u32],
    evidence: &'a [String],
    remedy: &'static str,
    kill: Vec<u32>,
    reap_parent: Option<u32>,
    remedy_text: String,
}

impl<'a> GhostView<'a> {
    pub fn new(g: &'a hypomnesis::Ghost) -> Self {
        use hypomnesis::Remedy;
        let (remedy, kill, reap_parent) = match &g.remedy {
            Remedy::Kill { pids } => ("kill", pids.clone(), None),
            Remedy::Reap { parent } => ("reap", Vec::new(), Some(*parent)),
            Remedy::GpuReset => ("gpu_reset", Vec::new(), None),
            _ => ("unknown", Vec::new(), None),
        };
        Self {
            ghost_class: g.class.as_str(),
            device_index: g.device_index,
            pid: g.pid,
            name: g.name.as_deref(),
            bytes: g.bytes,
            holders: &g.holders,
            evidence: &g.evidence,
            remedy,
            kill,
            reap_parent,
            remedy_text: g.remedy.to_string(),
        }
    }

    /// The view with both remedy fields holding a value: the field generator's sample, in which
    /// every field must hold one.
    #[allow(dead_code)] // used by the field generator only
    pub fn filled(mut self) -> Self {
        if self.kill.is_empty() {
            self.kill = vec![0];
        }
        self.reap_parent = self.reap_parent.or(Some(0));
        self
    }
}

/// A fact about a listed process that is no proof of a ghost (an orphan at work), flat.
#[derive(Debug, Serialize)]
pub struct GhostFactView<'a> {
    /// The class it would be, were it idle (`class` is a keyword in Python).
    ghost_class: &'static str,
    device_index: u32,
    pid: u32,
    evidence: &'a [String],
}

impl<'a> GhostFactView<'a> {
    pub fn new(f: &'a hypomnesis::GhostFact) -> Self {
        Self {
            ghost_class: f.class.as_str(),
            device_index: f.device_index,
            pid: f.pid,
            evidence: &f.evidence,
        }
    }
}

/// Every ghost found, the facts that are no ghosts, what could not be seen, and how the scan
/// of descriptors went.
#[derive(Debug, Serialize)]
pub struct GhostReportView<'a> {
    ghosts: Vec<GhostView<'a>>,
    facts: Vec<GhostFactView<'a>>,
    complete: bool,
    unseen: Vec<&'a str>,
    scanned_processes: Option<u64>,
    scan_complete: Option<bool>,
}

impl<'a> GhostReportView<'a> {
    pub fn new(r: &'a hypomnesis::GhostReport) -> Self {
        Self {
            ghosts: r.ghosts.iter().map(GhostView::new).collect(),
            facts: r.facts.iter().map(GhostFactView::new).collect(),
            complete: r.complete,
            unseen: r.unseen.iter().map(|u| u.message.as_str()).collect(),
            scanned_processes: r.holder_scan.map(|s| s.processes),
            scan_complete: r.holder_scan.map(|s| s.saw_everything()),
        }
    }

    /// The view with each ghost [`GhostView::filled`] (the field generator's sample).
    #[allow(dead_code)] // used by the field generator only
    pub fn filled(mut self) -> Self {
        self.ghosts = self.ghosts.into_iter().map(GhostView::filled).collect();
        self
    }
}
