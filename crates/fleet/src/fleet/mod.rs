//! The fleet's GPUs as a Prometheus server knows them, read in a fixed number of queries
//! whatever the fleet's size: hypomnesis's series first (each GPU's total, free, reserved,
//! not-visible and ghost bytes, its model, its MIG instances and the pods holding memory on it),
//! dcgm-exporter's where a node exports those instead (`DCGM_FI_DEV_FB_*`, in MiB). A GPU both
//! export is read from hypomnesis's series alone, never the two added. A target whose newest
//! sample is older than the bound is not counted, and is named with its age.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::answer::Series;
use crate::client::Client;
use crate::error::Error;
use crate::selector::Selector;

mod ask;
mod dcgm;
mod gpu;
mod nodes;
mod ours;
mod processes;
mod series;

pub use ask::{NAMED_FOR, NAMED_STEP};
use ask::{ask_all, promql_string};
pub use gpu::{Fleet, Gpu, Mig, Pod, Source, Stale};
pub use nodes::{Node, Nodes, read_nodes};
pub use processes::Process;
use series::{Target, target_of};

use dcgm::{DCGMS, Dcgm};
use ours::{OURS, Ours};

/// How to read the fleet.
#[derive(Debug, Clone)]
pub struct Read {
    /// A target whose newest sample is older is not counted.
    pub stale_after: Duration,
    /// Which GPUs count.
    pub selector: Selector,
    /// When (Unix seconds): every query is evaluated then.
    pub at: f64,
}

/// The fleet as Prometheus knows it at `how.at`.
///
/// # Errors
///
/// A query Prometheus could not answer (each error names its query).
pub fn read(client: &Client, how: &Read) -> Result<Fleet, Error> {
    read_within(client, how, &[])
}

/// One node's GPUs, as [`read`] gives them, and the processes holding memory on them, asked
/// of its target alone (`node.target`: its `job` and `instance`).
///
/// # Errors
///
/// A query Prometheus could not answer (each error names its query).
pub fn read_node(client: &Client, how: &Read, node: &Node) -> Result<(Fleet, Vec<Process>), Error> {
    let within: Vec<String> = node
        .target
        .iter()
        .filter(|(k, _)| k == "job" || k == "instance")
        .map(|(k, v)| format!("{k}={}", promql_string(v)))
        .collect();
    let before = client.queries();
    let mut fleet = read_within(client, how, &within)?;
    let processes = if node.source == Source::Hypomnesis {
        let a = client.query(
            &select("hypomnesis_gpu_process_memory_bytes", &within),
            how.at,
        )?;
        fleet.warnings.extend(a.warnings);
        processes::of(&a.series)
    } else {
        Vec::new()
    };
    fleet.queries = client.queries() - before;
    Ok((fleet, processes))
}

/// `selector`'s series (a metric name, or `{matchers}`) with the matchers of `within` added.
fn select(selector: &str, within: &[String]) -> String {
    if within.is_empty() {
        return selector.to_string();
    }
    let extra = within.join(",");
    match selector.strip_suffix('}') {
        Some(open) if open.ends_with('{') => format!("{open}{extra}}}"),
        Some(open) => format!("{open},{extra}}}"),
        None => format!("{selector}{{{extra}}}"),
    }
}

/// The queries of one read, each narrowed by the matchers of `within`.
fn queries(within: &[String]) -> [String; 8] {
    let sel = |selector: &str| select(selector, within);
    // The series that left the instant queries (their target stopped answering): cheap to
    // find, and only theirs are asked when they last answered (below).
    let gone = |name: &str| {
        let s = sel(name);
        format!("last_over_time({s}[{NAMED_FOR}]) unless {s}")
    };
    [
        sel(
            "{__name__=~\"hypomnesis_gpu_memory_(free|total|reserved|not_visible)_bytes|hypomnesis_gpu_info|hypomnesis_gpu_mig_memory_(free|total|reserved)_bytes\"}",
        ),
        format!(
            "{} > 0",
            sel("hypomnesis_gpu_ghost_bytes{class!=\"unaccounted\"}")
        ),
        sel("hypomnesis_gpu_pod_memory_bytes"),
        format!("timestamp({})", sel("hypomnesis_gpu_memory_free_bytes")),
        gone("hypomnesis_gpu_memory_free_bytes"),
        sel("{__name__=~\"DCGM_FI_DEV_FB_(FREE|USED|RESERVED|TOTAL)\"}"),
        format!("timestamp({})", sel("DCGM_FI_DEV_FB_FREE")),
        gone("DCGM_FI_DEV_FB_FREE"),
    ]
}

/// The fleet at `how.at`, each query's series narrowed by the matchers of `within`.
fn read_within(client: &Client, how: &Read, within: &[String]) -> Result<Fleet, Error> {
    let before = client.queries();
    let mut fleet = Fleet::default();
    let queries = queries(within);
    let series = ask_all(client, how.at, &queries, &mut fleet)?;
    let mut next = series.into_iter();
    let mut take = || next.next().unwrap_or_default();
    let mut ours = Ours {
        devices: take(),
        ghosts: take(),
        pods: take(),
        seen: take(),
        gone: take(),
        named: Vec::new(),
    };
    let mut dcgm = Dcgm {
        devices: take(),
        seen: take(),
        gone: take(),
        named: Vec::new(),
    };
    let free = "hypomnesis_gpu_memory_free_bytes";
    ours.named = last_answered(
        client,
        how.at,
        (free, OURS),
        (&ours.gone, &ours.seen),
        &mut fleet,
    )?;
    dcgm.named = last_answered(
        client,
        how.at,
        ("DCGM_FI_DEV_FB_FREE", DCGMS),
        (&dcgm.gone, &dcgm.seen),
        &mut fleet,
    )?;
    let bound = how.stale_after.as_secs_f64();
    let mut gpus = ours.gpus(how.at, bound, &mut fleet);
    let mut uuids: BTreeMap<String, String> = gpus
        .iter()
        .filter_map(|g| Some((g.uuid.clone()?, g.node.clone())))
        .collect();
    for g in dcgm.gpus(how.at, bound, &mut fleet) {
        if let Some(u) = &g.uuid
            && let Some(node) = uuids.get(u)
        {
            fleet.notes.push(format!(
                "{} GPU {}: dcgm-exporter's figures left out, hypomnesis's from {node} used",
                g.node, g.index
            ));
            continue;
        }
        if let Some(u) = &g.uuid {
            uuids.insert(u.clone(), g.node.clone());
        }
        gpus.push(g);
    }
    gpus.retain(|g| how.selector.holds(|l| g.label_values(l)));
    fleet.gpus = gpus;
    fleet.warnings.sort();
    fleet.warnings.dedup();
    fleet.queries = client.queries() - before;
    Ok(fleet)
}

/// When the targets of `gone` (series of `name` that left the instant queries) last answered:
/// the newest sample's time of each, known to [`NAMED_STEP`], asked of their jobs and instances
/// alone (none asked when none went).
pub(super) fn last_answered(
    client: &Client,
    at: f64,
    (name, own): (&str, &[&str]),
    (gone, seen): (&[Series], &[Series]),
    fleet: &mut Fleet,
) -> Result<Vec<Series>, Error> {
    // A series of a target that still answers (a GPU that fell off the bus) says nothing of
    // when its target last answered.
    let live: BTreeSet<Target> = seen.iter().map(|s| target_of(s, own)).collect();
    let gone: Vec<&Series> = gone
        .iter()
        .filter(|s| !live.contains(&target_of(s, own)))
        .collect();
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    let any_of = |label: &str| -> Option<String> {
        let values: BTreeSet<String> = gone
            .iter()
            .map(|s| s.label(label).map(regex::escape))
            .collect::<Option<_>>()?;
        let joined: Vec<String> = values.into_iter().collect();
        Some(format!("{label}=~{}", promql_string(&joined.join("|"))))
    };
    let matchers: Vec<String> = ["job", "instance"].into_iter().filter_map(any_of).collect();
    let query = format!(
        "max_over_time(timestamp({name}{{{}}})[{NAMED_FOR}:{NAMED_STEP}])",
        matchers.join(",")
    );
    let a = client.query(&query, at)?;
    fleet.warnings.extend(a.warnings);
    Ok(a.series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_narrowed_by_the_matchers_given() {
        let w = vec!["job=\"hmn\"".to_string(), "instance=\"a:1\"".to_string()];
        assert_eq!(select("up", &[]), "up");
        assert_eq!(select("up", &w), "up{job=\"hmn\",instance=\"a:1\"}");
        assert_eq!(select("up{}", &w), "up{job=\"hmn\",instance=\"a:1\"}");
        assert_eq!(
            select("{__name__=~\"x|y\"}", &w),
            "{__name__=~\"x|y\",job=\"hmn\",instance=\"a:1\"}"
        );
    }
}
