//! dcgm-exporter's series (`DCGM_FI_DEV_FB_*`, in MiB): each GPU's or MIG instance's figures
//! and the pods its labels name, by target.

use std::collections::BTreeMap;

use super::gpu::{Fleet, Gpu, Pod, Source};
use super::series::{
    Key, Parts, Target, ages, complete, finish, is_stale, label, node_name, target_of,
};
use crate::answer::{Series, shown};

/// dcgm-exporter's labels that are no target's.
pub(super) const DCGMS: &[&str] = &[
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

/// dcgm-exporter's series, as queried.
pub(super) struct Dcgm {
    pub(super) devices: Vec<Series>,
    pub(super) seen: Vec<Series>,
    /// Series that left the instant queries.
    pub(super) gone: Vec<Series>,
    /// When the targets of `gone` last answered.
    pub(super) named: Vec<Series>,
}

/// MiB, dcgm-exporter's unit.
pub(super) const MIB: f64 = 1_048_576.0;

impl Dcgm {
    pub(super) fn gpus(&self, at: f64, bound: f64, fleet: &mut Fleet) -> Vec<Gpu> {
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
        finish(out, stale, (&ages, &self.gone, DCGMS), Source::Dcgm, fleet)
    }
}
