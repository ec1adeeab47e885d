//! The fleet's GPUs as a Prometheus server knows them, read in a fixed number of queries
//! whatever the fleet's size: hypomnesis's series first (each GPU's total, free, reserved,
//! not-visible and ghost bytes, its model, its MIG instances and the pods holding memory on it),
//! dcgm-exporter's where a node exports those instead (`DCGM_FI_DEV_FB_*`, in MiB). A GPU both
//! export is read from hypomnesis's series alone, never the two added. A target whose newest
//! sample is older than the bound is not counted, and is named with its age.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use crate::answer::Series;
use crate::client::Client;
use crate::error::Error;
use crate::selector::Selector;

mod dcgm;
mod gpu;
mod ours;
mod series;

pub use gpu::{Fleet, Gpu, Mig, Pod, Source, Stale};
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

/// How far back a target that stopped answering is still named.
pub const NAMED_FOR: &str = "15m";
/// The step of the subquery that finds when such a target last answered: it is asked of those
/// targets alone, so a fine step costs little (a coarse one misses a target that lived less than
/// a step).
pub const NAMED_STEP: &str = "1s";

/// The fleet as Prometheus knows it at `how.at`.
///
/// # Errors
///
/// A query Prometheus could not answer (each error names its query).
pub fn read(client: &Client, how: &Read) -> Result<Fleet, Error> {
    let before = client.queries();
    let mut fleet = Fleet::default();
    // The series that left the instant queries (their target stopped answering): cheap to
    // find, and only theirs are asked when they last answered (below).
    let gone = |name: &str| format!("last_over_time({name}[{NAMED_FOR}]) unless {name}");
    let queries = [
        "{__name__=~\"hypomnesis_gpu_memory_(free|total|reserved|not_visible)_bytes|hypomnesis_gpu_info|hypomnesis_gpu_mig_memory_(free|total|reserved)_bytes\"}".to_string(),
        "hypomnesis_gpu_ghost_bytes{class!=\"unaccounted\"} > 0".to_string(),
        "hypomnesis_gpu_pod_memory_bytes".to_string(),
        "timestamp(hypomnesis_gpu_memory_free_bytes)".to_string(),
        gone("hypomnesis_gpu_memory_free_bytes"),
        "{__name__=~\"DCGM_FI_DEV_FB_(FREE|USED|RESERVED|TOTAL)\"}".to_string(),
        "timestamp(DCGM_FI_DEV_FB_FREE)".to_string(),
        gone("DCGM_FI_DEV_FB_FREE"),
    ];
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

/// The answers to `queries`, asked at once: Prometheus answers them side by side, and the wait
/// is the slowest one's. Their warnings go to `fleet`.
fn ask_all(
    client: &Client,
    at: f64,
    queries: &[String],
    fleet: &mut Fleet,
) -> Result<Vec<Vec<Series>>, Error> {
    let answers: Vec<Result<crate::answer::Answer, Error>> = std::thread::scope(|scope| {
        let asked: Vec<_> = queries
            .iter()
            .map(|q| scope.spawn(move || client.query(q, at)))
            .collect();
        asked
            .into_iter()
            .zip(queries)
            .map(|(h, q)| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Transport {
                        query: q.clone(),
                        why: "the thread asking it panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut series = Vec::with_capacity(answers.len());
    for a in answers {
        let a = a?;
        fleet.warnings.extend(a.warnings);
        series.push(a.series);
    }
    Ok(series)
}

/// `text` as a PromQL string: in double quotes, `\`, `"` and control characters escaped.
fn promql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// When the targets of `gone` (series of `name` that left the instant queries) last answered:
/// the newest sample's time of each, known to [`NAMED_STEP`], asked of their jobs and instances
/// alone (none asked when none went).
fn last_answered(
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
    fn promql_strings_escape_quotes_backslashes_and_controls() {
        assert_eq!(promql_string("node\\-a"), r#""node\\-a""#);
        assert_eq!(promql_string("a\"b"), r#""a\"b""#);
        assert_eq!(
            promql_string("x\u{1}\u{1f} \u{7f}~"),
            r#""x\x01\x1f \x7f~""#
        );
    }
}
