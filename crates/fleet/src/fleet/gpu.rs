//! The fleet's public types: a GPU or MIG instance, its pods, a stale target, the fleet.

use std::collections::{BTreeMap, BTreeSet};

/// Where a GPU's figures come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `hmn serve`'s series.
    Hypomnesis,
    /// dcgm-exporter's.
    Dcgm,
}

impl Source {
    /// Its name in the output.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hypomnesis => "hypomnesis",
            Self::Dcgm => "dcgm-exporter",
        }
    }
}

/// A MIG instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mig {
    /// Its GPU instance id.
    pub id: String,
    /// Its profile (`3g.71gb`).
    pub profile: String,
}

/// A pod holding memory on a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Its namespace.
    pub namespace: String,
    /// Its name (its UID where the kubelet's logs do not name it).
    pub pod: String,
    /// What it holds there; `None` where the source does not say (dcgm-exporter).
    pub bytes: Option<u64>,
}

/// One GPU or MIG instance of the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    /// The node, as its target names it (`node` label, else `Hostname`, else `instance`).
    pub node: String,
    /// Its index on the node.
    pub index: String,
    /// Its UUID.
    pub uuid: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// Where its memory is (`unified`: the host's memory, its figures the host's pool;
    /// `coherent`; `discrete`), as its exporter says; `None` where it does not.
    pub memory_model: Option<String>,
    /// The MIG instance this is, on the GPU `index`.
    pub mig: Option<Mig>,
    /// Its memory, bytes.
    pub total: u64,
    /// Its free memory, bytes.
    pub free: u64,
    /// The driver's reservation, where known.
    pub reserved: Option<u64>,
    /// Memory no visible process accounts for, where known.
    pub not_visible: Option<u64>,
    /// Ghosts' bytes by class (exited, zombie, stuck, …), those above 0.
    pub ghosts: BTreeMap<String, u64>,
    /// The pods holding memory on it, largest first.
    pub pods: Vec<Pod>,
    /// Where its figures come from.
    pub source: Source,
    /// Seconds since its target's newest sample.
    pub age: Option<f64>,
    /// Its labels for `--selector`: its target's, its model's, its pods' namespaces and names.
    pub(super) labels: BTreeMap<String, BTreeSet<String>>,
}

impl Gpu {
    /// Used memory: total less free.
    #[must_use]
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }

    /// The ghosts' bytes, all classes.
    #[must_use]
    pub fn ghost_bytes(&self) -> u64 {
        self.ghosts.values().sum()
    }

    /// The values of label `name` on it (for a selector).
    #[must_use]
    pub fn label_values(&self, name: &str) -> Vec<&str> {
        self.labels
            .get(name)
            .map(|v| v.iter().map(String::as_str).collect())
            .unwrap_or_default()
    }
}

/// A target not counted: its newest sample is older than the bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Stale {
    /// The node, as its target names it.
    pub node: String,
    /// Seconds since its newest sample; `None` for a target that stopped answering and whose
    /// last answer the subquery did not find (it lived less than [`NAMED_STEP`]).
    pub age: Option<f64>,
    /// Whether `age` is exact: `false` for a target that left the instant queries (it stopped
    /// answering), whose age is known to [`NAMED_STEP`] (at most that much too old).
    pub exact: bool,
    /// Where its figures came from.
    pub source: Source,
}

/// The fleet, as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fleet {
    /// Every GPU and MIG instance counted, in no particular order.
    pub gpus: Vec<Gpu>,
    /// Targets not counted.
    pub stale: Vec<Stale>,
    /// What was left out and why (a NaN figure, a GPU exported twice).
    pub notes: Vec<String>,
    /// Prometheus's warnings.
    pub warnings: Vec<String>,
    /// How many queries it took.
    pub queries: usize,
}
