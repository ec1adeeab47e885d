//! The Kubernetes view of the process series: each pod's memory on each GPU (its processes
//! added up, each once), and the labels that name a process's pod and container as the
//! Kubernetes instrumentation guidelines ask (`namespace`, `pod`, `container`: names, not ids,
//! where the kubelet's logs give them).

use std::collections::BTreeMap;

use hypomnesis::Container;

use super::{Exposition, Known, gauge, known, label_value};

/// The `pod` label: the pod's name, else its UID; `None` outside a pod.
pub(super) fn pod_label(c: &Container) -> Option<String> {
    c.pod.clone().or_else(|| c.pod_uid.clone())
}

/// The `container` label: the container's name, else its id.
pub(super) fn container_label(c: &Container) -> String {
    c.name.clone().unwrap_or_else(|| c.id.clone())
}

impl Exposition {
    /// One series per (GPU, pod): the memory of the pod's processes on that GPU, every process
    /// counted once whatever lists have it and whether or not its own series is capped.
    pub(super) fn pods(&self) -> Vec<(Known, i64)> {
        // Keyed by the pod UID: two pods whose names are unknown are never merged.
        let mut sums: BTreeMap<(u32, String), (Option<&str>, String, u64)> = BTreeMap::new();
        for ((gpu, pid), held) in self.held() {
            let Some(c) = self
                .sample
                .contexts
                .get(&pid)
                .and_then(|ctx| ctx.container.as_ref())
            else {
                continue;
            };
            let (Some(uid), Some(pod)) = (c.pod_uid.clone(), pod_label(c)) else {
                continue;
            };
            let e = sums
                .entry((gpu, uid))
                .or_insert((c.namespace.as_deref(), pod, 0));
            e.2 = e.2.saturating_add(held.used);
        }
        sums.into_iter()
            .map(|((gpu, _), (namespace, pod, used))| {
                let labels = known([
                    ("gpu", gpu.to_string()),
                    ("uuid", self.uuid_of(gpu)),
                    ("namespace", label_value(namespace.unwrap_or_default())),
                    ("pod", label_value(&pod)),
                ]);
                (labels, gauge(used))
            })
            .collect()
    }
}
