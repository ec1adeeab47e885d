//! The fleet's GPUs as a Prometheus server knows them, read in a fixed number of queries
//! whatever the fleet's size: hypomnesis's series first (each GPU's total, free, reserved,
//! not-visible and ghost bytes, its model, its MIG instances and the pods holding memory on it),
//! dcgm-exporter's where a node exports those instead (`DCGM_FI_DEV_FB_*`, in MiB). A GPU both
//! export is read from hypomnesis's series alone, never the two added. A target whose newest
//! sample is older than the bound is not counted, and is named with its age.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::Duration;

use crate::answer::{Series, shown};
use crate::client::Client;
use crate::error::Error;
use crate::selector::Selector;

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
    labels: BTreeMap<String, BTreeSet<String>>,
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

/// Our labels that are no target's.
const OURS: &[&str] = &[
    "__name__",
    "gpu",
    "uuid",
    "model",
    "pci_bus_id",
    "driver",
    "vendor",
    "source",
    "class",
    "namespace",
    "pod",
    "claim",
    "mig",
    "mig_mode",
    "profile",
];

/// dcgm-exporter's labels that are no target's.
const DCGMS: &[&str] = &[
    "__name__",
    "gpu",
    "UUID",
    "device",
    "modelName",
    "Hostname",
    "pci_bus_id",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "pod",
    "namespace",
    "container",
    "DCGM_FI_DRIVER_VERSION",
    "err_code",
    "err_msg",
];

/// A target: its own labels, in order.
type Target = Vec<(String, String)>;

fn target_of(s: &Series, own: &[&str]) -> Target {
    s.labels
        .iter()
        .filter(|(k, _)| !own.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How a target is named: its `node` label, else the host dcgm-exporter names (`Hostname`),
/// else its `instance`.
fn node_name(target: &Target, s: &Series) -> String {
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
fn bytes(v: f64) -> Option<u64> {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    (0.0..9.2e18).contains(&v).then(|| v.round() as u64)
}

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

/// Each target's age: now less its newest sample (from `seen`, exact), or, for a target no
/// longer in the instant queries, less the newest the subquery `named` found.
fn ages(seen: &[Series], named: &[Series], own: &[&str], at: f64) -> BTreeMap<Target, (f64, bool)> {
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
fn is_stale(
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

/// hypomnesis's series, as queried.
struct Ours {
    devices: Vec<Series>,
    ghosts: Vec<Series>,
    pods: Vec<Series>,
    seen: Vec<Series>,
    /// Series that left the instant queries.
    gone: Vec<Series>,
    /// When the targets of `gone` last answered.
    named: Vec<Series>,
}

/// A GPU's figures from several series, keyed by target and GPU (and MIG instance).
#[derive(Default)]
struct Parts {
    node: String,
    uuid: Option<String>,
    model: Option<String>,
    total: Option<f64>,
    free: Option<f64>,
    reserved: Option<f64>,
    not_visible: Option<f64>,
    profile: Option<String>,
}

type Key = (Target, String, Option<String>);

impl Ours {
    fn gpus(&self, at: f64, bound: f64, fleet: &mut Fleet) -> Vec<Gpu> {
        let ages = ages(&self.seen, &self.named, OURS, at);
        let parts = self.parts();
        // A GPU in MIG mode is its instances: its whole-device free memory is no one's to take.
        let with_mig: BTreeSet<(Target, String)> = parts
            .keys()
            .filter(|(_, _, m)| m.is_some())
            .map(|(t, g, _)| (t.clone(), g.clone()))
            .collect();
        let models: BTreeMap<(Target, String), Option<String>> = parts
            .iter()
            .filter(|((_, _, m), _)| m.is_none())
            .map(|((t, g, _), p)| ((t.clone(), g.clone()), p.model.clone()))
            .collect();
        let mut ghosts = self.ghosts();
        let pods = self.pods();
        let mut stale: BTreeMap<Target, (String, (Option<f64>, bool))> = BTreeMap::new();
        let mut out = Vec::new();
        for ((target, gpu, mig), p) in parts {
            if mig.is_none() && with_mig.contains(&(target.clone(), gpu.clone())) {
                continue;
            }
            if let Some(age) = is_stale(&target, &ages, bound) {
                stale.insert(target, (p.node, (Some(age.0), age.1)));
                continue;
            }
            let key = (target.clone(), gpu.clone());
            let model = p
                .model
                .clone()
                .or_else(|| models.get(&key).cloned().flatten());
            let Some(mut g) = complete(p, model, &gpu, mig, Source::Hypomnesis, &mut fleet.notes)
            else {
                continue;
            };
            g.age = ages.get(&target).map(|(a, _)| *a);
            if g.mig.is_none() {
                g.ghosts = ghosts.remove(&key).unwrap_or_default();
            }
            let mut held = pods.get(&key).cloned().unwrap_or_default();
            held.sort_by_key(|p| std::cmp::Reverse(p.bytes));
            g.pods = held;
            label(&mut g, &target);
            out.push(g);
        }
        name_gone(&ages, &self.gone, OURS, &mut stale);
        for (node, (age, exact)) in stale.into_values() {
            fleet.stale.push(Stale {
                node,
                age,
                exact,
                source: Source::Hypomnesis,
            });
        }
        dedupe(out, &mut fleet.notes)
    }

    /// Each GPU's and MIG instance's figures, by target, GPU and instance.
    fn parts(&self) -> BTreeMap<Key, Parts> {
        let mut parts: BTreeMap<Key, Parts> = BTreeMap::new();
        for s in &self.devices {
            let Some(name) = s.label("__name__") else {
                continue;
            };
            let target = target_of(s, OURS);
            let gpu = s.label("gpu").unwrap_or_default().to_string();
            let mig = name
                .starts_with("hypomnesis_gpu_mig_")
                .then(|| s.label("mig").unwrap_or_default().to_string());
            let p = parts.entry((target.clone(), gpu, mig)).or_default();
            if p.node.is_empty() {
                p.node = node_name(&target, s);
            }
            if p.uuid.is_none() {
                p.uuid = s.label("uuid").map(str::to_string);
            }
            match name.trim_start_matches("hypomnesis_gpu_") {
                "info" => p.model = s.label("model").map(|m| shown(m).into_owned()),
                "memory_total_bytes" | "mig_memory_total_bytes" => p.total = Some(s.value),
                "memory_free_bytes" | "mig_memory_free_bytes" => p.free = Some(s.value),
                "memory_reserved_bytes" | "mig_memory_reserved_bytes" => {
                    p.reserved = Some(s.value);
                }
                "memory_not_visible_bytes" => p.not_visible = Some(s.value),
                _ => {}
            }
            if let Some(profile) = s.label("profile") {
                p.profile = Some(shown(profile).into_owned());
            }
        }
        parts
    }

    /// The ghosts' bytes of each GPU by class (the `unaccounted` class is not a ghost one can
    /// free: it is the memory no visible process accounts for, shown as such).
    fn ghosts(&self) -> BTreeMap<(Target, String), BTreeMap<String, u64>> {
        let mut ghosts: BTreeMap<(Target, String), BTreeMap<String, u64>> = BTreeMap::new();
        for s in &self.ghosts {
            let (Some(class), Some(b)) = (s.label("class"), bytes(s.value)) else {
                continue;
            };
            if class == "unaccounted" || b == 0 {
                continue;
            }
            let key = (
                target_of(s, OURS),
                s.label("gpu").unwrap_or_default().to_string(),
            );
            *ghosts
                .entry(key)
                .or_default()
                .entry(shown(class).into_owned())
                .or_default() += b;
        }
        ghosts
    }

    /// The pods holding memory on each GPU.
    fn pods(&self) -> BTreeMap<(Target, String), Vec<Pod>> {
        let mut pods: BTreeMap<(Target, String), Vec<Pod>> = BTreeMap::new();
        for s in &self.pods {
            let key = (
                target_of(s, OURS),
                s.label("gpu").unwrap_or_default().to_string(),
            );
            pods.entry(key).or_default().push(Pod {
                namespace: shown(s.label("namespace").unwrap_or_default()).into_owned(),
                pod: shown(s.label("pod").unwrap_or_default()).into_owned(),
                bytes: bytes(s.value),
            });
        }
        pods
    }
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

/// dcgm-exporter's series, as queried.
struct Dcgm {
    devices: Vec<Series>,
    seen: Vec<Series>,
    /// Series that left the instant queries.
    gone: Vec<Series>,
    /// When the targets of `gone` last answered.
    named: Vec<Series>,
}

/// MiB, dcgm-exporter's unit.
const MIB: f64 = 1_048_576.0;

impl Dcgm {
    fn gpus(&self, at: f64, bound: f64, fleet: &mut Fleet) -> Vec<Gpu> {
        let ages = ages(&self.seen, &self.named, DCGMS, at);
        let mut parts: BTreeMap<Key, (Parts, Option<f64>, Vec<Pod>)> = BTreeMap::new();
        for s in &self.devices {
            let Some(name) = s.label("__name__") else {
                continue;
            };
            let target = target_of(s, DCGMS);
            let gpu = s.label("gpu").unwrap_or_default().to_string();
            let mig = s.label("GPU_I_ID").map(str::to_string);
            let (p, used, pods) = parts.entry((target.clone(), gpu, mig)).or_default();
            if p.node.is_empty() {
                p.node = node_name(&target, s);
            }
            p.uuid = p
                .uuid
                .take()
                .or_else(|| s.label("UUID").map(str::to_string));
            p.model = p
                .model
                .take()
                .or_else(|| s.label("modelName").map(|m| shown(m).into_owned()));
            if let Some(profile) = s.label("GPU_I_PROFILE") {
                p.profile = Some(shown(profile).into_owned());
            }
            let v = s.value * MIB;
            match name {
                "DCGM_FI_DEV_FB_TOTAL" => p.total = Some(v),
                "DCGM_FI_DEV_FB_FREE" => p.free = Some(v),
                "DCGM_FI_DEV_FB_RESERVED" => p.reserved = Some(v),
                "DCGM_FI_DEV_FB_USED" => *used = Some(v),
                _ => {}
            }
            if let (Some(ns), Some(pod)) = (s.label("namespace"), s.label("pod"))
                && !pod.is_empty()
                && !pods.iter().any(|x: &Pod| x.namespace == ns && x.pod == pod)
            {
                pods.push(Pod {
                    namespace: shown(ns).into_owned(),
                    pod: shown(pod).into_owned(),
                    bytes: None,
                });
            }
        }
        let mut stale: BTreeMap<Target, (String, (Option<f64>, bool))> = BTreeMap::new();
        let mut out = Vec::new();
        for ((target, gpu, mig), (mut p, used, pods)) in parts {
            if let Some(age) = is_stale(&target, &ages, bound) {
                stale.insert(target, (p.node, (Some(age.0), age.1)));
                continue;
            }
            // No total exported: free, used and reserved make it (used leaves out reserved).
            if p.total.is_none()
                && let (Some(f), Some(u)) = (p.free, used)
            {
                p.total = Some(f + u + p.reserved.unwrap_or(0.0));
            }
            let model = p.model.clone();
            let Some(mut g) = complete(p, model, &gpu, mig, Source::Dcgm, &mut fleet.notes) else {
                continue;
            };
            g.age = ages.get(&target).map(|(a, _)| *a);
            g.pods = pods;
            label(&mut g, &target);
            out.push(g);
        }
        name_gone(&ages, &self.gone, DCGMS, &mut stale);
        for (node, (age, exact)) in stale.into_values() {
            fleet.stale.push(Stale {
                node,
                age,
                exact,
                source: Source::Dcgm,
            });
        }
        dedupe(out, &mut fleet.notes)
    }
}

/// A GPU from its parts, or `None` (with a note) when its total or free figure is missing or
/// impossible.
fn complete(
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
fn label(g: &mut Gpu, target: &Target) {
    for (k, v) in target {
        g.labels.entry(k.clone()).or_default().insert(v.clone());
    }
    if let Some(m) = &g.model {
        g.labels
            .entry("model".into())
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
fn dedupe(gpus: Vec<Gpu>, notes: &mut Vec<String>) -> Vec<Gpu> {
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
