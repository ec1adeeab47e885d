//! The exposition's Kubernetes series: pods named and added up per GPU, the kubelet's
//! allocations, the memory outside them, and the pod-resources socket's health.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;

/// Kubernetes names: `namespace`, `pod` and `container` labels with the kubelet's names, and one
/// series per pod and GPU adding its processes up (two processes of a pod on one GPU, one on
/// another; a second pod whose names are unknown is its UID, never merged with another).
#[test]
fn pods_are_named_and_added_up_per_gpu() {
    let mut s = sample();
    let named = |user: &str, container: &str, pod_uid: &str, names: Option<(&str, &str, &str)>| {
        let mut c = ProcessContext::default();
        c.user = Some(user.into());
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{container}.scope\n",
            pod_uid.replace('-', "_")
        ));
        if let (Some(k), Some((ns, pod, name))) = (c.container.as_mut(), names) {
            k.namespace = Some(ns.into());
            k.pod = Some(pod.into());
            k.name = Some(name.into());
        }
        c
    };
    let other_pod = "7b3c6d4e-2f3a-4b6c-9d0e-1f2a3b4c5d6e";
    let other_container = CONTAINER.replace('9', "8");
    s.processes = vec![
        process(20, Some("python3"), 100 * MIB, 0),
        process(21, Some("python3"), 50 * MIB, 0),
        process(21, Some("python3"), 25 * MIB, 1),
        process(22, Some("python3"), 7 * MIB, 0),
        process(7, None, MIB, 0),
    ];
    s.contexts = [
        (
            20,
            named("alice", CONTAINER, POD, Some(("ml", "trainer-0", "worker"))),
        ),
        (
            21,
            named("alice", CONTAINER, POD, Some(("ml", "trainer-0", "worker"))),
        ),
        (22, named("bob", &other_container, other_pod, None)),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let text = render(s, Duration::from_millis(10), 1, None);
    for want in [
        format!(
            "hypomnesis_gpu_pod_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",namespace=\"ml\",pod=\"trainer-0\"}} {}\n",
            150 * MIB
        ),
        format!(
            "hypomnesis_gpu_pod_memory_bytes{{gpu=\"1\",namespace=\"ml\",pod=\"trainer-0\"}} {}\n",
            25 * MIB
        ),
        format!(
            "hypomnesis_gpu_pod_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pod=\"{other_pod}\"}} {}\n",
            7 * MIB
        ),
        format!(
            "hypomnesis_gpu_process_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pid=\"20\",process=\"python3\",user=\"alice\",namespace=\"ml\",pod=\"trainer-0\",container=\"worker\"}} {}\n",
            100 * MIB
        ),
        format!(
            "hypomnesis_gpu_process_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pid=\"22\",process=\"python3\",user=\"bob\",pod=\"{other_pod}\",container=\"{other_container}\"}} {}\n",
            7 * MIB
        ),
    ] {
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
    assert_eq!(
        text.matches("hypomnesis_gpu_pod_memory_bytes{").count(),
        3,
        "no pod series for a process in no pod: {text}"
    );
}

/// The kubelet's allocations: an info series per (GPU, container) it allocated, the memory of a
/// named pod on a GPU not allocated to it as its own series (not the allocated pod's, not a pod
/// whose names are unknown), whether the socket answered, and nothing of the kind when it did
/// not; at most `--max-allocation-series` info series.
#[test]
#[allow(clippy::too_many_lines)]
fn memory_outside_the_kubelets_allocation_is_its_own_series() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Assignment, Holder};
    let in_pod = |uid: &str, names: Option<(&str, &str)>| {
        let mut c = ProcessContext::default();
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER}.scope\n",
            uid.replace('-', "_")
        ));
        if let (Some(k), Some((ns, pod))) = (c.container.as_mut(), names) {
            k.namespace = Some(ns.into());
            k.pod = Some(pod.into());
        }
        c
    };
    let unnamed = "7b3c6d4e-2f3a-4b6c-9d0e-1f2a3b4c5d6e";
    let mut s = sample();
    s.processes = vec![
        process(20, Some("python3"), 100 * MIB, 0),
        process(21, Some("python3"), 30 * MIB, 0),
        process(22, Some("python3"), 5 * MIB, 0),
    ];
    s.contexts = [
        (20, in_pod(POD, Some(("ml", "trainer-0")))),
        (
            21,
            in_pod(
                "8c4d7e5f-3a4b-4c7d-8e1f-2a3b4c5d6e7f",
                Some(("ml", "notebook")),
            ),
        ),
        (22, in_pod(unnamed, None)),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let holder = Holder {
        namespace: "ml".into(),
        pod: "trainer-0".into(),
        container: "worker".into(),
        claim: None,
        mig: None,
    };
    s.kube = Some(KubeSample {
        answer: Ok(Assignment {
            by_gpu: [(0, vec![holder.clone()]), (1, Vec::new())]
                .into_iter()
                .collect(),
            invalid: 2,
            ..Assignment::default()
        }),
        age: Duration::from_millis(1500),
    });
    let text = render(s.clone(), Duration::from_millis(10), 1, None);
    for want in [
        "hypomnesis_gpu_allocation_info{gpu=\"0\",uuid=\"GPU-0\",namespace=\"ml\",pod=\"trainer-0\",container=\"worker\"} 1\n".to_string(),
        format!(
            "hypomnesis_gpu_pod_memory_outside_allocation_bytes{{gpu=\"0\",uuid=\"GPU-0\",namespace=\"ml\",pod=\"notebook\"}} {}\n",
            30 * MIB
        ),
        "hypomnesis_pod_resources_up 1\n".to_string(),
        "hypomnesis_gpu_allocation_unknown_devices 0\n".to_string(),
        "hypomnesis_gpu_allocation_invalid_names 2\n".to_string(),
        "hypomnesis_gpu_allocation_series_dropped 0\n".to_string(),
        "hypomnesis_pod_resources_age_seconds 1.5\n".to_string(),
    ] {
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
    assert_eq!(
        text.matches("hypomnesis_gpu_pod_memory_outside_allocation_bytes{")
            .count(),
        1,
        "not the allocated pod, not the unnamed one: {text}"
    );
    // At most --max-allocation-series of them, and how many were left out.
    let mut capped = s.clone();
    capped.max_allocation_series = Some(0);
    let text = render(capped, Duration::ZERO, 1, None);
    assert!(!text.contains("hypomnesis_gpu_allocation_info{"), "{text}");
    assert!(
        text.contains("hypomnesis_gpu_allocation_series_dropped 1\n"),
        "{text}"
    );
    s.kube = Some(KubeSample {
        answer: Err("no kubelet".into()),
        age: Duration::ZERO,
    });
    let text = render(s, Duration::from_millis(10), 1, None);
    assert!(text.contains("hypomnesis_pod_resources_up 0\n"), "{text}");
    assert!(!text.contains("hypomnesis_gpu_allocation_info{"), "{text}");
    assert!(!text.contains("outside_allocation_bytes{"), "{text}");
    assert!(!text.contains("allocation_unknown_devices "), "{text}");
}

/// A pod whose claim's device the node cannot place yet (a DRA allocation, before its CDI
/// spec is read) is not called outside its allocation: not known, no series; the other pods
/// keep theirs.
#[test]
fn a_pod_with_an_unplaced_claim_is_not_called_outside_its_allocation() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Allocation, Assignment, Claim, DeviceRef};
    let in_pod = |uid: &str, ns: &str, pod: &str| {
        let mut c = ProcessContext::default();
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER}.scope\n",
            uid.replace('-', "_")
        ));
        if let Some(k) = c.container.as_mut() {
            k.namespace = Some(ns.into());
            k.pod = Some(pod.into());
        }
        c
    };
    let mut s = sample();
    s.processes = vec![
        process(20, Some("python3"), 100 * MIB, 0),
        process(21, Some("python3"), 30 * MIB, 0),
    ];
    s.contexts = [
        (20, in_pod(POD, "ml", "trainer-0")),
        (
            21,
            in_pod("8c4d7e5f-3a4b-4c7d-8e1f-2a3b4c5d6e7f", "ml", "notebook"),
        ),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let claimed = Allocation {
        namespace: "ml".into(),
        pod: "trainer-0".into(),
        container: "worker".into(),
        resource: "gpu.nvidia.com".into(),
        device: DeviceRef::Dra {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            cdi: vec!["k8s.gpu.nvidia.com/claim=6f1c2b3a-gpu-0".into()],
            share: None,
        },
        replica: None,
        claim: Some(Claim {
            namespace: "ml".into(),
            name: "gpu-claim".into(),
        }),
    };
    s.kube = Some(KubeSample {
        answer: Ok(Assignment {
            by_gpu: [(0, Vec::new()), (1, Vec::new())].into_iter().collect(),
            unknown: vec![claimed],
            ..Assignment::default()
        }),
        age: Duration::ZERO,
    });
    let text = render(s, Duration::from_millis(10), 1, None);
    assert!(
        !text.contains(
            "outside_allocation_bytes{gpu=\"0\",uuid=\"GPU-0\",namespace=\"ml\",pod=\"trainer-0\"}"
        ),
        "{text}"
    );
    assert_eq!(
        text.matches("hypomnesis_gpu_pod_memory_outside_allocation_bytes{")
            .count(),
        1,
        "the notebook, which has no claim, is still outside: {text}"
    );
    assert!(text.contains("pod=\"notebook\"} 31457280"), "{text}");
    assert!(
        text.contains("hypomnesis_gpu_allocation_unknown_devices 1\n"),
        "{text}"
    );
}

/// A claim the kubelet names with an empty name (as with any name Kubernetes does not allow)
/// is counted as an invalid allocation and makes no series: none without a `claim` label, no
/// allocation of its pod's; its pod is not called outside its allocation; a valid claim on
/// the same GPU keeps its series.
#[test]
fn a_claim_with_an_empty_name_is_counted_and_makes_no_series() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Allocation, Claim, DeviceRef, NodeDevices, assign, cdi};
    let in_pod = |uid: &str, pod: &str| {
        let mut c = ProcessContext::default();
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER}.scope\n",
            uid.replace('-', "_")
        ));
        if let Some(k) = c.container.as_mut() {
            k.namespace = Some("ml".into());
            k.pod = Some(pod.into());
            k.name = Some("c".into());
        }
        c
    };
    let mut s = sample();
    s.processes = vec![
        process(20, Some("python3"), 100 * MIB, 0),
        process(21, Some("python3"), 30 * MIB, 0),
    ];
    s.contexts = [
        (20, in_pod(POD, "trainer-0")),
        (21, in_pod("8c4d7e5f-3a4b-4c7d-8e1f-2a3b4c5d6e7f", "eval")),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let cdi_name = "k8s.gpu.nvidia.com/claim=6f1c2b3a-gpu-0";
    let claimed = |pod: &str, claim: &str| Allocation {
        namespace: "ml".into(),
        pod: pod.into(),
        container: "c".into(),
        resource: "gpu.nvidia.com".into(),
        device: DeviceRef::Dra {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            device: "gpu-0".into(),
            cdi: vec![cdi_name.into()],
            share: None,
        },
        replica: None,
        claim: Some(Claim {
            namespace: "ml".into(),
            name: claim.into(),
        }),
    };
    let names = std::collections::BTreeMap::from([(
        cdi_name.to_owned(),
        cdi::Placed { gpu: 0, mig: None },
    )]);
    let gpus = [(0, "GPU-0".to_owned()), (1, "GPU-1".to_owned())];
    let a = assign(
        &[claimed("trainer-0", ""), claimed("eval", "shared")],
        NodeDevices {
            dra: Some(&names),
            gpus: &gpus,
            migs: &[],
        },
    );
    s.kube = Some(KubeSample {
        answer: Ok(a),
        age: Duration::ZERO,
    });
    let text = render(s, Duration::from_millis(10), 1, None);
    assert!(
        text.contains("hypomnesis_gpu_allocation_invalid_names 1\n"),
        "{text}"
    );
    for family in [
        "hypomnesis_gpu_claim_memory_bytes{",
        "hypomnesis_gpu_allocation_info{",
    ] {
        let series: Vec<&str> = text.lines().filter(|l| l.starts_with(family)).collect();
        assert_eq!(series.len(), 1, "{family}: {text}");
        assert!(series[0].contains(",claim=\"shared\""), "{series:?}");
    }
    assert!(
        !text.contains("hypomnesis_gpu_pod_memory_outside_allocation_bytes{"),
        "trainer-0 holds a device that is not shown: {text}"
    );
}

/// A DRA node: pods allocated GPUs through claims (one claim shared by two pods) carry the
/// claim on their allocation series, the claim's memory counts each pod once, and only a pod
/// on a GPU its claims do not include is outside its allocation.
#[test]
#[allow(clippy::too_many_lines)] // one node's pods, claims and every series they give
fn claims_label_allocations_sum_their_pods_and_leave_their_pods_inside() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Assignment, Claim, Holder};
    let in_pod = |uid: &str, pod: &str| {
        let mut c = ProcessContext::default();
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER}.scope\n",
            uid.replace('-', "_")
        ));
        if let Some(k) = c.container.as_mut() {
            k.namespace = Some("ml".into());
            k.pod = Some(pod.into());
            k.name = Some("c".into());
        }
        c
    };
    let mut s = sample();
    s.processes = vec![
        process(20, Some("python3"), 100 * MIB, 0),
        process(21, Some("python3"), 30 * MIB, 1),
        process(22, Some("python3"), 20 * MIB, 1),
        process(23, Some("python3"), 7 * MIB, 1),
    ];
    s.contexts = [
        (20, in_pod(POD, "trainer-0")),
        (21, in_pod("8c4d7e5f-3a4b-4c7d-8e1f-2a3b4c5d6e7f", "eval-a")),
        (22, in_pod("9d5e8f6a-4b5c-4d8e-9f2a-3b4c5d6e7f8a", "eval-b")),
        // trainer-0's claim is GPU 0's: this process of it on GPU 1 is outside.
        (23, in_pod(POD, "trainer-0")),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let held = |pod: &str, claim: &str| Holder {
        namespace: "ml".into(),
        pod: pod.into(),
        container: "c".into(),
        claim: Some(Claim {
            namespace: "ml".into(),
            name: claim.into(),
        }),
        mig: None,
    };
    s.kube = Some(KubeSample {
        answer: Ok(Assignment {
            by_gpu: [
                (
                    0,
                    vec![Holder {
                        mig: Some(2),
                        ..held("trainer-0", "gpu-claim")
                    }],
                ),
                (1, vec![held("eval-a", "shared"), held("eval-b", "shared")]),
            ]
            .into_iter()
            .collect(),
            booked: [(
                (
                    1,
                    Claim {
                        namespace: "ml".into(),
                        name: "shared".into(),
                    },
                ),
                40 * MIB,
            )]
            .into_iter()
            .collect(),
            ..Assignment::default()
        }),
        age: Duration::ZERO,
    });
    let text = render(s, Duration::from_millis(10), 1, None);
    assert!(
        text.contains("hypomnesis_gpu_allocation_info{gpu=\"1\",namespace=\"ml\",pod=\"eval-b\",container=\"c\",claim_namespace=\"ml\",claim=\"shared\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "hypomnesis_gpu_claim_memory_bytes{{gpu=\"1\",claim_namespace=\"ml\",claim=\"shared\"}} {}\n",
            50 * MIB
        )),
        "both pods of the shared claim, each once: {text}"
    );
    assert!(
        text.contains(&format!(
            "hypomnesis_gpu_claim_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",claim_namespace=\"ml\",claim=\"gpu-claim\"}} {}\n",
            100 * MIB
        )),
        "{text}"
    );
    let outside: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_pod_memory_outside_allocation_bytes{"))
        .collect();
    assert_eq!(outside.len(), 1, "{text}");
    assert!(
        outside[0].contains("gpu=\"1\"")
            && outside[0].contains("pod=\"trainer-0\"")
            && outside[0].ends_with(&format!(" {}", 7 * MIB)),
        "{outside:?}"
    );
    // Each process and pod carries its claim on that GPU; trainer-0's process on GPU 1 has none
    // there; the MIG device's GPU instance is on the allocation; the booking beside the use.
    for want in [
        "hypomnesis_gpu_process_memory_bytes{gpu=\"1\",pid=\"21\",process=\"python3\",namespace=\"ml\",pod=\"eval-a\",container=\"c\",claim=\"shared\"}".to_owned(),
        "hypomnesis_gpu_process_memory_bytes{gpu=\"1\",pid=\"23\",process=\"python3\",namespace=\"ml\",pod=\"trainer-0\",container=\"c\"}".to_owned(),
        "hypomnesis_gpu_process_memory_bytes{gpu=\"0\",uuid=\"GPU-0\",pid=\"20\",process=\"python3\",namespace=\"ml\",pod=\"trainer-0\",container=\"c\",claim=\"gpu-claim\"}".to_owned(),
        format!("hypomnesis_gpu_pod_memory_bytes{{gpu=\"1\",namespace=\"ml\",pod=\"eval-b\",claim=\"shared\"}} {}\n", 20 * MIB),
        "hypomnesis_gpu_allocation_info{gpu=\"0\",uuid=\"GPU-0\",namespace=\"ml\",pod=\"trainer-0\",container=\"c\",claim_namespace=\"ml\",claim=\"gpu-claim\",mig=\"2\"} 1\n".to_owned(),
        format!("hypomnesis_gpu_claim_memory_booked_bytes{{gpu=\"1\",claim_namespace=\"ml\",claim=\"shared\"}} {}\n", 40 * MIB),
    ] {
        assert!(text.contains(&want), "{want}\n{text}");
    }
    assert_eq!(
        text.matches("hypomnesis_gpu_claim_memory_booked_bytes{")
            .count(),
        1,
        "a whole GPU's claim books no figure: {text}"
    );
}

/// The series of one family in `text`, each as its labels (name, value) and its value.
fn series_of(text: &str, family: &str) -> Vec<(Vec<(String, String)>, f64)> {
    let prefix = format!("{family}{{");
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|rest| {
            let mut labels = Vec::new();
            let mut chars = rest.chars();
            loop {
                let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                assert_eq!(chars.next(), Some('"'), "{rest}");
                let mut value = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.push((key, value));
                if chars.next() == Some('}') {
                    break;
                }
            }
            let value = chars.as_str().trim().parse().unwrap();
            (labels, value)
        })
        .collect()
}

/// What `HypomnesisGpuClaimOverBooking`'s expression
/// (`hypomnesis_gpu_claim_memory_bytes > on (gpu, uuid, claim_namespace, claim)
/// hypomnesis_gpu_claim_memory_booked_bytes`, the rules' `job` and `instance` being one
/// target's) gives over an exposition: the claims it fires for.
fn over_booked(text: &str) -> Vec<String> {
    let on = |labels: &[(String, String)]| -> Vec<(String, String)> {
        let mut key: Vec<(String, String)> = labels
            .iter()
            .filter(|(k, _)| ["gpu", "uuid", "claim_namespace", "claim"].contains(&k.as_str()))
            .cloned()
            .collect();
        key.sort();
        key
    };
    let booked = series_of(text, "hypomnesis_gpu_claim_memory_booked_bytes");
    let mut fired: Vec<String> = series_of(text, "hypomnesis_gpu_claim_memory_bytes")
        .into_iter()
        .filter(|(labels, held)| {
            booked
                .iter()
                .any(|(b, bytes)| on(b) == on(labels) && held > bytes)
        })
        .map(|(labels, _)| {
            labels
                .into_iter()
                .find(|(k, _)| k == "claim")
                .map(|(_, v)| v)
                .unwrap_or_default()
        })
        .collect();
    fired.sort();
    fired
}

/// A claim's memory is its own containers' processes', not its whole pod's: two containers of
/// one pod, each with its own claim on the same GPU and each holding 3 GiB, give each claim
/// 3 GiB (each was credited the pod's 6 GiB, and its 4 GiB booking alerted). A container
/// holding two claims on one GPU is one series for the pair, never 3 GiB for each; the
/// family adds up to what the processes hold. Over these series the over-booking alert fires
/// for the one claim whose container holds more than it books, and for no other.
#[test]
#[allow(clippy::too_many_lines)] // three pods, their claims, bookings and every claim series
fn a_claims_memory_is_its_containers_and_never_counted_twice() {
    use crate::cmd::serve::allocation::KubeSample;
    use crate::kube::{Assignment, Claim, Holder};
    let in_container = |uid: &str, id: char, pod: &str, name: &str| {
        let mut c = ProcessContext::default();
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope\n",
            uid.replace('-', "_"),
            CONTAINER.replace('9', &id.to_string())
        ));
        if let Some(k) = c.container.as_mut() {
            k.namespace = Some("ml".into());
            k.pod = Some(pod.into());
            k.name = Some(name.into());
        }
        c
    };
    let other = "8c4d7e5f-3a4b-4c7d-8e1f-2a3b4c5d6e7f";
    let third = "9d5e8f6a-4b5c-4d8e-9f2a-3b4c5d6e7f8a";
    let mut s = sample();
    s.processes = vec![
        process(20, Some("python3"), 3 * GIB, 0),
        process(21, Some("python3"), 3 * GIB, 0),
        process(22, Some("python3"), 3 * GIB, 1),
        process(23, Some("python3"), 3 * GIB, 1),
    ];
    s.contexts = [
        (20, in_container(POD, '1', "train-0", "a")),
        (21, in_container(POD, '2', "train-0", "b")),
        (22, in_container(other, '3', "multi-0", "m")),
        (23, in_container(third, '4', "greedy-0", "g")),
    ]
    .into_iter()
    .map(|(pid, ctx)| (pid, ctx.into()))
    .collect();
    let claim = |name: &str| Claim {
        namespace: "ml".into(),
        name: name.into(),
    };
    let held = |pod: &str, container: &str, name: &str| Holder {
        namespace: "ml".into(),
        pod: pod.into(),
        container: container.into(),
        claim: Some(claim(name)),
        mig: None,
    };
    s.kube = Some(KubeSample {
        answer: Ok(Assignment {
            by_gpu: [
                (
                    0,
                    vec![held("train-0", "a", "ca"), held("train-0", "b", "cb")],
                ),
                (
                    1,
                    vec![
                        held("multi-0", "m", "x"),
                        held("multi-0", "m", "y"),
                        held("greedy-0", "g", "small"),
                    ],
                ),
            ]
            .into_iter()
            .collect(),
            booked: [
                ((0, claim("ca")), 4 * GIB),
                ((0, claim("cb")), 4 * GIB),
                ((1, claim("x")), 2 * GIB),
                ((1, claim("y")), 2 * GIB),
                ((1, claim("small")), GIB),
            ]
            .into_iter()
            .collect(),
            ..Assignment::default()
        }),
        age: Duration::ZERO,
    });
    let text = render(s, Duration::from_millis(10), 1, None);
    let held_by: Vec<(String, f64)> = series_of(&text, "hypomnesis_gpu_claim_memory_bytes")
        .into_iter()
        .map(|(labels, v)| {
            let get = |k: &str| {
                labels
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            (
                format!("{}/{}/{}", get("gpu"), get("claim_namespace"), get("claim")),
                v / f64::from(1_u32 << 30),
            )
        })
        .collect();
    assert_eq!(
        held_by,
        [
            ("0/ml/ca".to_owned(), 3.0),
            ("0/ml/cb".to_owned(), 3.0),
            ("1/ml/small".to_owned(), 3.0),
            ("1/ml/x,y".to_owned(), 3.0),
        ],
        "{text}"
    );
    let total: f64 = held_by.iter().map(|(_, v)| v).sum();
    assert!(
        (total - 12.0).abs() < f64::EPSILON,
        "each process once: {total}"
    );
    assert_eq!(over_booked(&text), ["small"], "{text}");
}
