//! The fleet node by node, for a live view: each node's GPUs, used and total memory, the
//! driver's reservation, ghost bytes and its largest pod, added up by Prometheus (six queries,
//! each answering a series or two per node, whatever the fleet's size; a seventh only when a
//! target stopped answering). A node's own GPUs, pods and processes are asked of its target
//! alone ([`super::read_node`]).
//!
//! A node is a target (its `job` and `instance`), named by its `node` label, else the host
//! dcgm-exporter names (`Hostname`), else its `instance`. A node exported by both hypomnesis and
//! dcgm-exporter is shown from hypomnesis's series alone, never the two added.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::ask::{NAMED_FOR, NAMED_STEP, ask_all, promql_string};
use super::dcgm::MIB;
use super::gpu::{Fleet, Pod, Source};
use super::series::{bytes, node_name, target_of};
use crate::answer::{Series, shown};
use crate::client::Client;
use crate::error::Error;

/// One node of the fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Its target's `job` and `instance`.
    pub target: Vec<(String, String)>,
    /// Where its figures come from.
    pub source: Source,
    /// How many GPUs it exports (MIG instances not counted apart).
    pub gpus: Option<u64>,
    /// Its GPUs' memory, bytes.
    pub total: Option<u64>,
    /// Their free memory, bytes.
    pub free: Option<u64>,
    /// The driver's reservation on them, where known.
    pub reserved: Option<u64>,
    /// Ghosts' bytes on them; `None` where the source does not say (dcgm-exporter).
    pub ghosts: Option<u64>,
    /// The pod holding most memory on it (dcgm-exporter names the pod a GPU is given to, but
    /// not what it holds: `bytes` is `None` there).
    pub largest_pod: Option<Pod>,
    /// Seconds since its newest sample, where known.
    pub age: Option<f64>,
    /// Whether its newest sample is older than the bound, or it stopped answering.
    pub stale: bool,
    /// Whether `age` is exact (`false` for a target that stopped answering: known to
    /// [`NAMED_STEP`]).
    pub exact: bool,
}

impl Node {
    /// Its used memory: total less free.
    #[must_use]
    pub fn used(&self) -> Option<u64> {
        Some(self.total?.saturating_sub(self.free?))
    }
}

/// The fleet's nodes, as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Nodes {
    /// Every node, fresh and stale, by name.
    pub nodes: Vec<Node>,
    /// What was left out and why.
    pub notes: Vec<String>,
    /// Prometheus's warnings.
    pub warnings: Vec<String>,
    /// How many queries it took.
    pub queries: usize,
}

/// The labels a node's figures are added up by.
const BY: &str = "job, instance, node, Hostname";
/// The series of each source that say a target answers.
const FREE: &str = "hypomnesis_gpu_memory_free_bytes|DCGM_FI_DEV_FB_FREE";

type Key = (String, String);

fn key_of(s: &Series) -> Key {
    let get = |n: &str| s.label(n).unwrap_or_default().to_string();
    (get("job"), get("instance"))
}

fn name_of(s: &Series) -> String {
    node_name(&target_of(s, &[]), s)
}

/// The queries of one read, in the order [`read_nodes`] takes their answers.
fn queries() -> [String; 6] {
    let gone = |name: &str, source: &str| {
        format!(
            "label_replace(count by ({BY}) (last_over_time({name}[{NAMED_FOR}]) unless {name}), \
             \"source\", \"{source}\", \"job\", \".*\")"
        )
    };
    [
        format!(
            "sum by ({BY}, __name__) ({{__name__=~\"hypomnesis_gpu_memory_(free|total|reserved)_bytes|DCGM_FI_DEV_FB_(FREE|USED|RESERVED|TOTAL)\"}})"
        ),
        format!("count by ({BY}, __name__) ({{__name__=~\"{FREE}\"}})"),
        format!("sum by ({BY}) (hypomnesis_gpu_ghost_bytes{{class!=\"unaccounted\"}})"),
        format!(
            "topk by ({BY}) (1, sum by ({BY}, namespace, pod, __name__) ({{__name__=~\"hypomnesis_gpu_pod_memory_bytes|DCGM_FI_DEV_FB_USED\",pod!=\"\"}}))"
        ),
        format!("max by ({BY}) (timestamp({{__name__=~\"{FREE}\"}}))"),
        format!(
            "{} or {}",
            gone("hypomnesis_gpu_memory_free_bytes", "hypomnesis"),
            gone("DCGM_FI_DEV_FB_FREE", "dcgm")
        ),
    ]
}

/// Each node of the fleet at `at` (Unix seconds); a node whose newest sample is older than
/// `stale_after`, or that stopped answering in the last [`NAMED_FOR`], is marked stale.
///
/// # Errors
///
/// A query Prometheus could not answer (each error names its query).
pub fn read_nodes(client: &Client, stale_after: Duration, at: f64) -> Result<Nodes, Error> {
    let before = client.queries();
    let mut fleet = Fleet::default();
    let answers = ask_all(client, at, &queries(), &mut fleet)?;
    let mut next = answers.into_iter();
    let mut take = || next.next().unwrap_or_default();
    let (sums, counts, ghosts, pods, seen, gone) = (take(), take(), take(), take(), take(), take());
    let mut nodes = figures(&sums);
    annotate(&mut nodes, &counts, &ghosts, &pods);
    let bound = stale_after.as_secs_f64();
    let live: BTreeSet<Key> = seen.iter().map(key_of).collect();
    for s in &seen {
        if let Some(node) = nodes.get_mut(&key_of(s))
            && s.value.is_finite()
        {
            let age = (at - s.value).max(0.0);
            node.age = Some(age);
            node.stale = age > bound;
        }
    }
    let gone: Vec<&Series> = gone.iter().filter(|s| !live.contains(&key_of(s))).collect();
    let last = last_answered(client, at, &gone, &mut fleet)?;
    for s in gone {
        let source = match s.label("source") {
            Some("dcgm") => Source::Dcgm,
            _ => Source::Hypomnesis,
        };
        let key = key_of(s);
        let age = last.get(&key).map(|t| (at - t).max(0.0));
        let node = entry(&mut nodes, s, source);
        (node.stale, node.exact, node.age) = (true, false, age);
    }
    let mut nodes: Vec<Node> = nodes.into_values().collect();
    let ours: BTreeSet<String> = nodes
        .iter()
        .filter(|n| n.source == Source::Hypomnesis)
        .map(|n| n.name.clone())
        .collect();
    nodes.retain(|n| {
        let twice = n.source == Source::Dcgm && ours.contains(&n.name);
        if twice {
            fleet.notes.push(format!(
                "{}: dcgm-exporter's figures left out, hypomnesis's used",
                n.name
            ));
        }
        !twice
    });
    nodes.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.target.cmp(&b.target)));
    fleet.warnings.sort();
    fleet.warnings.dedup();
    Ok(Nodes {
        nodes,
        notes: fleet.notes,
        warnings: fleet.warnings,
        queries: client.queries() - before,
    })
}

/// Each node's memory figures, from the sums by node (dcgm-exporter's MiB made bytes, its
/// total from free + used + reserved where it exports no `FB_TOTAL`).
fn figures(sums: &[Series]) -> BTreeMap<Key, Node> {
    let mut nodes: BTreeMap<Key, Node> = BTreeMap::new();
    let mut dcgm: BTreeMap<Key, [Option<f64>; 4]> = BTreeMap::new();
    for s in sums {
        let Some(metric) = s.label("__name__") else {
            continue;
        };
        let source = if metric.starts_with("DCGM_") {
            Source::Dcgm
        } else {
            Source::Hypomnesis
        };
        let node = entry(&mut nodes, s, source);
        match metric {
            "hypomnesis_gpu_memory_total_bytes" => node.total = bytes(s.value),
            "hypomnesis_gpu_memory_free_bytes" => node.free = bytes(s.value),
            "hypomnesis_gpu_memory_reserved_bytes" => node.reserved = bytes(s.value),
            _ => {
                let at = [
                    "DCGM_FI_DEV_FB_FREE",
                    "DCGM_FI_DEV_FB_USED",
                    "DCGM_FI_DEV_FB_RESERVED",
                ]
                .iter()
                .position(|m| *m == metric)
                .unwrap_or(3);
                if let Some(slot) = dcgm.entry(key_of(s)).or_default().get_mut(at) {
                    *slot = Some(s.value * MIB);
                }
            }
        }
    }
    for (key, [free, used, reserved, total]) in dcgm {
        if let Some(node) = nodes.get_mut(&key) {
            let total = total.or_else(|| Some(free? + used? + reserved.unwrap_or(0.0)));
            node.free = free.and_then(bytes);
            node.reserved = reserved.and_then(bytes);
            node.total = total.and_then(bytes);
        }
    }
    nodes
}

/// Each node's GPU count, ghost bytes and largest pod.
fn annotate(
    nodes: &mut BTreeMap<Key, Node>,
    counts: &[Series],
    ghosts: &[Series],
    pods: &[Series],
) {
    for s in counts {
        if let Some(node) = nodes.get_mut(&key_of(s)) {
            node.gpus = bytes(s.value);
        }
    }
    for s in ghosts {
        if let Some(node) = nodes.get_mut(&key_of(s))
            && node.source == Source::Hypomnesis
        {
            node.ghosts = bytes(s.value);
        }
    }
    for s in pods {
        if let Some(node) = nodes.get_mut(&key_of(s)) {
            node.largest_pod = Some(Pod {
                namespace: shown(s.label("namespace").unwrap_or_default()).into_owned(),
                pod: shown(s.label("pod").unwrap_or_default()).into_owned(),
                bytes: (node.source == Source::Hypomnesis)
                    .then(|| bytes(s.value))
                    .flatten(),
            });
        }
    }
}

/// The node of `s`'s target, made at its first series.
fn entry<'a>(nodes: &'a mut BTreeMap<Key, Node>, s: &Series, source: Source) -> &'a mut Node {
    let (job, instance) = key_of(s);
    nodes
        .entry((job.clone(), instance.clone()))
        .or_insert_with(|| Node {
            name: name_of(s),
            target: vec![("job".into(), job), ("instance".into(), instance)],
            source,
            gpus: None,
            total: None,
            free: None,
            reserved: None,
            ghosts: None,
            largest_pod: None,
            age: None,
            stale: false,
            exact: true,
        })
}

/// When each target of `gone` last answered (Unix seconds, known to [`NAMED_STEP`]), asked of
/// their jobs and instances alone; nothing asked when none went.
fn last_answered(
    client: &Client,
    at: f64,
    gone: &[&Series],
    fleet: &mut Fleet,
) -> Result<BTreeMap<Key, f64>, Error> {
    if gone.is_empty() {
        return Ok(BTreeMap::new());
    }
    let any_of = |label: &str| {
        let values: BTreeSet<String> = gone
            .iter()
            .map(|s| regex::escape(s.label(label).unwrap_or_default()))
            .collect();
        let joined: Vec<String> = values.into_iter().collect();
        format!("{label}=~{}", promql_string(&joined.join("|")))
    };
    let query = format!(
        "max by (job, instance) (max_over_time(timestamp({{__name__=~\"{FREE}\",{},{}}})[{NAMED_FOR}:{NAMED_STEP}]))",
        any_of("job"),
        any_of("instance")
    );
    let a = client.query(&query, at)?;
    fleet.warnings.extend(a.warnings);
    Ok(a.series
        .iter()
        .filter(|s| s.value.is_finite())
        .map(|s| (key_of(s), s.value))
        .collect())
}
