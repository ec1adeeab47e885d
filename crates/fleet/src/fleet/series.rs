//! What `ours.rs` and `dcgm.rs` share to make GPUs of series: a series' target and node, byte
//! figures, targets' ages and staleness, a GPU from its parts, its labels, one GPU per UUID.

use std::collections::BTreeMap;

use super::gpu::{Fleet, Gpu, Mig, Source, Stale};
use crate::answer::{Series, shown};

/// A target: its own labels, in order.
pub(super) type Target = Vec<(String, String)>;

pub(super) fn target_of(s: &Series, own: &[&str]) -> Target {
    s.labels
        .iter()
        .filter(|(k, _)| !own.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How a target is named: its `node` label, else the host dcgm-exporter names (`Hostname`),
/// else its `instance`.
pub(super) fn node_name(target: &Target, s: &Series) -> String {
    let get = |name: &str| {
        target
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let name = get("node")
        .or_else(|| s.label("Hostname"))
        .or_else(|| get("instance"))
        .unwrap_or("(no node label)");
    shown(name).into_owned()
}

/// A byte figure: finite, not negative, not above 2^63.
pub(super) fn bytes(v: f64) -> Option<u64> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    (0.0..9.2e18).contains(&v).then(|| v.round() as u64)
}

/// Each target's age: now less its newest sample (from `seen`, exact), or, for a target no
/// longer in the instant queries, less the newest the subquery `named` found.
pub(super) fn ages(
    seen: &[Series],
    named: &[Series],
    own: &[&str],
    at: f64,
) -> BTreeMap<Target, (f64, bool)> {
    let mut out: BTreeMap<Target, (f64, bool)> = BTreeMap::new();
    for (list, live) in [(seen, true), (named, false)] {
        for s in list {
            if !s.value.is_finite() {
                continue;
            }
            let t = target_of(s, own);
            let age = (at - s.value).max(0.0);
            match out.get_mut(&t) {
                Some((a, l)) if *l == live => *a = a.min(age),
                Some(_) => {}
                None => {
                    out.insert(t, (age, live));
                }
            }
        }
    }
    out
}

/// How old `target`'s newest sample is, when it is stale: older than `bound`, or no longer in
/// the instant queries.
pub(super) fn is_stale(
    target: &Target,
    ages: &BTreeMap<Target, (f64, bool)>,
    bound: f64,
) -> Option<(f64, bool)> {
    match ages.get(target) {
        Some((age, true)) if *age <= bound => None,
        Some(&(age, live)) => Some((age, live)),
        None => None,
    }
}

/// A GPU's figures from several series, keyed by target and GPU (and MIG instance).
#[derive(Default)]
pub(super) struct Parts {
    pub(super) node: String,
    pub(super) uuid: Option<String>,
    pub(super) model: Option<String>,
    pub(super) total: Option<f64>,
    pub(super) free: Option<f64>,
    pub(super) reserved: Option<f64>,
    pub(super) not_visible: Option<f64>,
    pub(super) profile: Option<String>,
    pub(super) memory_model: Option<String>,
}

pub(super) type Key = (Target, String, Option<String>);

/// Each target's age and whether it is exact (see [`ages`]).
pub(super) type Ages = BTreeMap<Target, (f64, bool)>;

/// The stale targets: each one's node, age and whether the age is exact.
pub(super) type Stales = BTreeMap<Target, (String, (Option<f64>, bool))>;

/// One source's GPUs, closed: its targets that stopped answering (`gone`) named in `stale`,
/// each stale target pushed to `fleet` as `source`'s, and one GPU kept per UUID.
pub(super) fn finish(
    out: Vec<Gpu>,
    mut stale: Stales,
    (ages, gone, own): (&Ages, &[Series], &[&str]),
    source: Source,
    fleet: &mut Fleet,
) -> Vec<Gpu> {
    name_gone(ages, gone, own, &mut stale);
    for (node, (age, exact)) in stale.into_values() {
        fleet.stale.push(Stale {
            node,
            age,
            exact,
            source,
        });
    }
    dedupe(out, &mut fleet.notes)
}

/// Names each target of `gone` (its series left the instant queries: it stopped answering) in
/// `stale`, with its age where the subquery found one.
fn name_gone(
    ages: &BTreeMap<Target, (f64, bool)>,
    gone: &[Series],
    own: &[&str],
    stale: &mut BTreeMap<Target, (String, (Option<f64>, bool))>,
) {
    for s in gone {
        let t = target_of(s, own);
        if stale.contains_key(&t) || matches!(ages.get(&t), Some((_, true))) {
            continue;
        }
        let age = ages.get(&t).map(|(a, _)| *a);
        let node = node_name(&t, s);
        stale.insert(t, (node, (age, false)));
    }
}

/// A GPU from its parts, or `None` (with a note) when its total or free figure is missing or
/// impossible.
pub(super) fn complete(
    p: Parts,
    model: Option<String>,
    gpu: &str,
    mig: Option<String>,
    source: Source,
    notes: &mut Vec<String>,
) -> Option<Gpu> {
    let name = match &mig {
        Some(m) => format!("{} GPU {} MIG {}", p.node, shown(gpu), shown(m)),
        None => format!("{} GPU {}", p.node, shown(gpu)),
    };
    let (total, free) = match (p.total.map(bytes), p.free.map(bytes)) {
        (Some(Some(t)), Some(Some(f))) if f <= t => (t, f),
        (Some(Some(t)), Some(Some(f))) => {
            notes.push(format!(
                "{name}: free {f} bytes is more than its total {t}: not counted"
            ));
            return None;
        }
        (None, _) | (_, None) => {
            notes.push(format!(
                "{name}: no {} figure from {}: not counted",
                if p.total.is_none() { "total" } else { "free" },
                source.as_str()
            ));
            return None;
        }
        (t, _) => {
            let what = if t.flatten().is_none() {
                p.total
            } else {
                p.free
            };
            notes.push(format!(
                "{name}: a figure of {} is no byte count: not counted",
                what.unwrap_or(f64::NAN)
            ));
            return None;
        }
    };
    Some(Gpu {
        node: p.node,
        index: shown(gpu).into_owned(),
        uuid: p.uuid.map(|u| shown(&u).into_owned()),
        model,
        memory_model: p.memory_model.map(|m| shown(&m).into_owned()),
        mig: mig.map(|id| Mig {
            id: shown(&id).into_owned(),
            profile: p.profile.unwrap_or_default(),
        }),
        total,
        free,
        reserved: p.reserved.and_then(bytes),
        not_visible: p.not_visible.and_then(bytes),
        ghosts: BTreeMap::new(),
        pods: Vec::new(),
        source,
        age: None,
        labels: BTreeMap::new(),
    })
}

/// Fills `g`'s labels for the selector: its target's, `model`, and its pods' `namespace`s and
/// `pod`s.
pub(super) fn label(g: &mut Gpu, target: &Target) {
    for (k, v) in target {
        g.labels.entry(k.clone()).or_default().insert(v.clone());
    }
    if let Some(m) = &g.model {
        g.labels
            .entry("model".into())
            .or_default()
            .insert(m.clone());
    }
    if let Some(m) = &g.memory_model {
        g.labels
            .entry("memory_model".into())
            .or_default()
            .insert(m.clone());
    }
    for p in &g.pods {
        g.labels
            .entry("namespace".into())
            .or_default()
            .insert(p.namespace.clone());
        g.labels
            .entry("pod".into())
            .or_default()
            .insert(p.pod.clone());
    }
}

/// One GPU per UUID and MIG instance: a GPU two targets export (two jobs scraping one
/// exporter) is counted once, the others named.
pub(super) fn dedupe(gpus: Vec<Gpu>, notes: &mut Vec<String>) -> Vec<Gpu> {
    let mut seen: BTreeMap<(String, Option<String>), String> = BTreeMap::new();
    let mut out = Vec::with_capacity(gpus.len());
    for g in gpus {
        if let Some(u) = &g.uuid {
            let key = (u.clone(), g.mig.as_ref().map(|m| m.id.clone()));
            if let Some(first) = seen.get(&key) {
                notes.push(format!(
                    "{} GPU {} ({u}) is exported by another target too ({first}): counted once",
                    g.node, g.index
                ));
                continue;
            }
            seen.insert(key, g.node.clone());
        }
        out.push(g);
    }
    out
}
