//! The Kubernetes view of the process series: each pod's memory on each GPU (its processes
//! added up, each once), and the labels that name a process's pod and container as the
//! Kubernetes instrumentation guidelines ask (`namespace`, `pod`, `container`: names, not ids,
//! where the kubelet's logs give them).

use std::collections::BTreeMap;

use hypomnesis::Container;

use crate::kube::place::{claim_names, claims_of_containers};
use crate::kube::{Assignment, Claim};

use super::{Exposition, PresentLabels, gauge, known, label_value};

/// The `pod` label: the pod's name, else its UID; `None` outside a pod.
pub(super) fn pod_label(c: &Container) -> Option<String> {
    c.pod.clone().or_else(|| c.pod_uid.clone())
}

/// The `container` label: the container's name, else its id.
pub(super) fn container_label(c: &Container) -> String {
    c.name.clone().unwrap_or_else(|| c.id.clone())
}

/// One pod's memory on one GPU.
struct PodSum<'a> {
    gpu: u32,
    namespace: Option<&'a str>,
    /// The pod's name, when the kubelet's logs give it.
    name: Option<&'a str>,
    /// Its `pod` label: the name, else the UID.
    label: String,
    used: u64,
}

impl Exposition {
    /// Each pod's memory on each GPU, its processes added up, every process counted once
    /// whatever lists have it and whether or not its own series is capped; keyed by the pod
    /// UID, so two pods whose names are unknown are never merged.
    fn pod_sums(&self) -> Vec<PodSum<'_>> {
        let mut sums: BTreeMap<(u32, String), PodSum<'_>> = BTreeMap::new();
        for ((gpu, pid), held) in self.held() {
            let Some(c) = self
                .sample
                .contexts
                .get(&pid)
                .and_then(|ctx| ctx.container.as_ref())
            else {
                continue;
            };
            let (Some(uid), Some(label)) = (c.pod_uid.clone(), pod_label(c)) else {
                continue;
            };
            let e = sums.entry((gpu, uid)).or_insert(PodSum {
                gpu,
                namespace: c.namespace.as_deref(),
                name: c.pod.as_deref(),
                label,
                used: 0,
            });
            e.used = e.used.saturating_add(held.used);
        }
        sums.into_values().collect()
    }

    /// One series per (GPU, pod): the memory of the pod's processes on that GPU.
    pub(super) fn pods(&self) -> Vec<(PresentLabels, i64)> {
        self.pod_sums()
            .into_iter()
            .map(|p| (self.pod_labels(&p), gauge(p.used)))
            .collect()
    }

    /// One series per (GPU, pod): the memory of the pod's processes on that GPU, with the
    /// pod's claims there.
    fn pod_labels(&self, p: &PodSum<'_>) -> PresentLabels {
        let claims = match (self.assignment(), p.namespace, p.name) {
            (Some(a), Some(ns), Some(name)) => {
                let mut claims: Vec<&Claim> = a
                    .by_gpu
                    .get(&p.gpu)
                    .into_iter()
                    .flatten()
                    .filter(|h| h.namespace == ns && h.pod == name)
                    .filter_map(|h| h.claim.as_ref())
                    .collect();
                claims.sort();
                claims.dedup();
                label_value(&claim_names(&claims))
            }
            _ => String::new(),
        };
        known([
            ("gpu", p.gpu.to_string()),
            ("uuid", self.uuid_of(p.gpu)),
            ("namespace", label_value(p.namespace.unwrap_or_default())),
            ("pod", label_value(&p.label)),
            ("claim", claims),
        ])
    }

    /// The outside-allocation series' labels: a pod's, without claims (none is on that GPU).
    fn outside_labels(&self, p: &PodSum<'_>) -> PresentLabels {
        known([
            ("gpu", p.gpu.to_string()),
            ("uuid", self.uuid_of(p.gpu)),
            ("namespace", label_value(p.namespace.unwrap_or_default())),
            ("pod", label_value(&p.label)),
        ])
    }

    /// The `claim` label of a process in container `c` on GPU `gpu`: its container's DRA
    /// claims on that GPU, by the kubelet's names (empty: none, or not known).
    pub(super) fn claim_of(&self, gpu: u32, c: &Container) -> String {
        let (Some(a), Some(ns), Some(pod), Some(name)) =
            (self.assignment(), &c.namespace, &c.pod, &c.name)
        else {
            return String::new();
        };
        let mut claims: Vec<&Claim> = a
            .by_gpu
            .get(&gpu)
            .into_iter()
            .flatten()
            .filter(|h| h.namespace == *ns && h.pod == *pod && h.container == *name)
            .filter_map(|h| h.claim.as_ref())
            .collect();
        claims.sort();
        claims.dedup();
        label_value(&claim_names(&claims))
    }

    /// One series per (GPU, claim) that books memory there: what it books.
    pub(super) fn booked(&self) -> Vec<(PresentLabels, i64)> {
        let Some(a) = self.assignment() else {
            return Vec::new();
        };
        a.booked
            .iter()
            .map(|((gpu, claim), bytes)| {
                let labels = known([
                    ("gpu", gpu.to_string()),
                    ("uuid", self.uuid_of(*gpu)),
                    ("claim_namespace", label_value(&claim.namespace)),
                    ("claim", label_value(&claim.name)),
                ]);
                (labels, gauge(*bytes))
            })
            .collect()
    }

    /// The kubelet's answer, when it gave one.
    fn assignment(&self) -> Option<&Assignment> {
        self.sample.kube.as_ref()?.answer.as_ref().ok()
    }

    /// One series per (GPU, container) the kubelet allocated the GPU (or a MIG instance or a
    /// replica of it) to, always 1: at most `--max-allocation-series` of them, in GPU order
    /// and the kubelet's; how many were left out.
    pub(super) fn allocations(&self) -> (Vec<(PresentLabels, i64)>, usize) {
        let Some(a) = self.assignment() else {
            return (Vec::new(), 0);
        };
        let all: usize = a.by_gpu.values().map(Vec::len).sum();
        let keep = self.sample.max_allocation_series.unwrap_or(usize::MAX);
        let series = a
            .by_gpu
            .iter()
            .flat_map(|(&gpu, holders)| {
                holders.iter().map(move |h| {
                    let labels = known([
                        ("gpu", gpu.to_string()),
                        ("uuid", self.uuid_of(gpu)),
                        ("namespace", label_value(&h.namespace)),
                        ("pod", label_value(&h.pod)),
                        ("container", label_value(&h.container)),
                        (
                            "claim_namespace",
                            h.claim
                                .as_ref()
                                .map_or_else(String::new, |c| label_value(&c.namespace)),
                        ),
                        (
                            "claim",
                            h.claim
                                .as_ref()
                                .map_or_else(String::new, |c| label_value(&c.name)),
                        ),
                        ("mig", h.mig.map_or_else(String::new, |m| m.to_string())),
                    ]);
                    (labels, 1)
                })
            })
            .take(keep)
            .collect();
        (series, all.saturating_sub(keep))
    }

    /// One series per (GPU, pod) for memory a pod holds on a GPU the kubelet did not allocate
    /// to it (a container started with `NVIDIA_VISIBLE_DEVICES=all`, a privileged pod): pods
    /// the kubelet's logs name only (the kubelet's answer names pods, not UIDs), on GPUs the
    /// answer covers.
    pub(super) fn outside_allocation(&self) -> Vec<(PresentLabels, i64)> {
        let Some(a) = self.assignment() else {
            return Vec::new();
        };
        // Each GPU's allocated pods in a set: a lookup per pod, not a scan of the holders.
        let allocated: std::collections::HashMap<u32, std::collections::HashSet<(&str, &str)>> = a
            .by_gpu
            .iter()
            .map(|(&gpu, holders)| {
                let pods = holders
                    .iter()
                    .map(|h| (h.namespace.as_str(), h.pod.as_str()))
                    .collect();
                (gpu, pods)
            })
            .collect();
        // A pod with an allocation this node cannot place (a DRA claim's device, until the
        // node's CDI specs say which GPU it is; a device this node does not have) or does not
        // show (its claim's name is no Kubernetes name) may hold its own: whether it is
        // outside is not known, so it has no series.
        let unplaced: std::collections::HashSet<(&str, &str)> = a
            .unknown
            .iter()
            .map(|u| (u.namespace.as_str(), u.pod.as_str()))
            .chain(
                a.withheld
                    .iter()
                    .map(|(ns, pod)| (ns.as_str(), pod.as_str())),
            )
            .collect();
        self.pod_sums()
            .into_iter()
            .filter(|p| {
                let (Some(ns), Some(name)) = (p.namespace, p.name) else {
                    return false;
                };
                !unplaced.contains(&(ns, name))
                    && allocated
                        .get(&p.gpu)
                        .is_some_and(|pods| !pods.contains(&(ns, name)))
            })
            .map(|p| (self.outside_labels(&p), gauge(p.used)))
            .collect()
    }

    /// One series per (GPU, claims) for the DRA claims allocated a GPU: the memory of the
    /// processes of the containers that hold the claim there (a container, not its whole pod:
    /// two containers of a pod, each with its own claim, are each their own claim's), each
    /// process once. A container holding several claims on one GPU cannot say which of them
    /// its memory is under: it goes to one series for that set of claims, whose `claim`
    /// label lists them (`a,b`, as the process series' label does), never to each claim's
    /// own, so no memory is counted twice and no claim is credited with another's (no
    /// booking series has such a label: the over-booking alert does not judge it). A claim
    /// held only together with others has no series of its own.
    pub(super) fn claims(&self) -> Vec<(PresentLabels, i64)> {
        let Some(a) = self.assignment() else {
            return Vec::new();
        };
        let held_by = claims_of_containers(a);
        // Every set a container holds has a series, 0 when its processes hold nothing.
        let mut sums: BTreeMap<(u32, &[&Claim]), u64> = held_by
            .iter()
            .map(|(&(gpu, ..), claims)| ((gpu, claims.as_slice()), 0))
            .collect();
        for ((gpu, pid), held) in self.held() {
            let Some(c) = self
                .sample
                .contexts
                .get(&pid)
                .and_then(|ctx| ctx.container.as_ref())
            else {
                continue;
            };
            let (Some(ns), Some(pod), Some(name)) = (&c.namespace, &c.pod, &c.name) else {
                continue;
            };
            let Some(claims) = held_by.get(&(gpu, ns.as_str(), pod.as_str(), name.as_str())) else {
                continue;
            };
            if let Some(sum) = sums.get_mut(&(gpu, claims.as_slice())) {
                *sum = sum.saturating_add(held.used);
            }
        }
        sums.into_iter()
            .map(|((gpu, claims), used)| {
                // One namespace, the pod's, as Kubernetes has it; each named once if not.
                let mut namespaces: Vec<&str> =
                    claims.iter().map(|c| c.namespace.as_str()).collect();
                namespaces.dedup();
                let labels = known([
                    ("gpu", gpu.to_string()),
                    ("uuid", self.uuid_of(gpu)),
                    ("claim_namespace", label_value(&namespaces.join(","))),
                    ("claim", label_value(&claim_names(claims))),
                ]);
                (labels, gauge(used))
            })
            .collect()
    }

    /// Whether the pod-resources socket answered (absent where none is in use), how old its
    /// answer is, and, when it answered, how many allocated devices this node does not have
    /// and how many allocations name no valid pod.
    pub(super) fn pod_resources_status(&self) -> Option<PodResources> {
        let k = self.sample.kube.as_ref()?;
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        Some(match &k.answer {
            Ok(a) => PodResources {
                up: 1,
                age: k.age,
                unknown: Some(count(a.unknown.len())),
                invalid: Some(count(a.invalid)),
            },
            Err(_) => PodResources {
                up: 0,
                age: k.age,
                unknown: None,
                invalid: None,
            },
        })
    }
}

/// What the exposition says of the pod-resources socket.
pub(super) struct PodResources {
    pub(super) up: i64,
    pub(super) age: std::time::Duration,
    pub(super) unknown: Option<i64>,
    pub(super) invalid: Option<i64>,
}
