//! hypomnesis's series (`hmn serve`'s): each GPU's figures, its MIG instances, its ghosts by
//! class and the pods on it, by target.

use std::collections::{BTreeMap, BTreeSet};

use super::gpu::{Fleet, Gpu, Pod, Source};
use super::series::{
    Key, Parts, Target, ages, bytes, complete, finish, is_stale, label, node_name, target_of,
};
use crate::answer::{Series, shown};

/// Our labels that are no target's.
pub(super) const OURS: &[&str] = &[
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
    "memory_model",
    "numa_node",
    "profile",
];

/// hypomnesis's series, as queried.
pub(super) struct Ours {
    pub(super) devices: Vec<Series>,
    pub(super) ghosts: Vec<Series>,
    pub(super) pods: Vec<Series>,
    pub(super) seen: Vec<Series>,
    /// Series that left the instant queries.
    pub(super) gone: Vec<Series>,
    /// When the targets of `gone` last answered.
    pub(super) named: Vec<Series>,
}

impl Ours {
    pub(super) fn gpus(&self, at: f64, bound: f64, fleet: &mut Fleet) -> Vec<Gpu> {
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
        finish(
            out,
            stale,
            (&ages, &self.gone, OURS),
            Source::Hypomnesis,
            fleet,
        )
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
                "info" => {
                    p.model = s.label("model").map(|m| shown(m).into_owned());
                    p.memory_model = s.label("memory_model").map(str::to_string);
                }
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
