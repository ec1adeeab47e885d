//! Dynamic resource allocation: claims read from the kubelet's answer, and their devices
//! placed on this node's GPUs through its CDI specs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use super::*;

#[test]
fn dynamic_resources_of_gpu_drivers_are_read_with_their_claims() {
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(GPU0)));
    let got = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let seen: Vec<(&str, Option<&str>, String)> = got
        .iter()
        .map(|a| {
            let device = match &a.device {
                DeviceRef::Dra {
                    device, cdi, share, ..
                } => {
                    assert_eq!(cdi.len(), 1, "{a:?}");
                    assert!(cdi[0].ends_with(device.as_str()), "{a:?}");
                    format!(
                        "{device}{}",
                        share
                            .as_deref()
                            .map_or(String::new(), |s| format!(" ({s})"))
                    )
                }
                other => format!("{other:?}"),
            };
            (
                a.pod.as_str(),
                a.claim.as_ref().map(|c| c.name.as_str()),
                device,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("trainer-0", Some("gpu-claim"), "gpu-0".to_owned()),
            ("eval-a", Some("shared"), "gpu-1 (s-1)".to_owned()),
            ("eval-b", Some("shared"), "gpu-1 (s-1)".to_owned()),
            (
                "eval-b",
                Some("shared"),
                "gpu-2-mig-1g18gb-19-0 (share-7)".to_owned()
            ),
            ("lost-0", Some("lost"), "gpu-3".to_owned()),
            ("infer-7", None, format!("{:?}", gpu(GPU0))),
        ]
    );
    assert_eq!(got[0].resource, "gpu.nvidia.com");
    assert_eq!(got[0].claim.as_ref().unwrap().namespace, "ml");
    // Not yet placed on a GPU (that takes the node's CDI specs): reported, not guessed.
    let gpus = [(0, GPU0.to_owned())];
    let a = assign(
        &got,
        NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        },
    );
    assert_eq!(a.unknown.len(), 5);
    assert_eq!(
        a.by_gpu[&0].len(),
        1,
        "the device plugin's allocation is placed"
    );
}

/// The DRA fixture node (`fixtures/dra`, the NVIDIA driver's layout): the stand-in's claims
/// placed on GPUs through its CDI specs, the driver's GPU minors and MIG capability nodes: a
/// whole GPU, one claim shared by two pods, a MIG device on its GPU as its GPU instance; a
/// device the specs do not name stays unknown; the NIC's claim is not read at all; each
/// claim's booking read from the DRA driver's checkpoint where it books memory.
#[test]
fn dra_devices_are_placed_through_the_nodes_cdi_specs() {
    let kubelet = Kubelet::start(Reply::Answer(dra_answer(DRA_GPUS[0])));
    let got = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let node = hypomnesis_testkit::fixtures("dra");
    let specs = crate::kube::cdi::read(&node.join("rootfs"));
    assert_eq!(
        specs.unreadable.len(),
        1,
        "the broken spec is named: {specs:?}"
    );
    let said = crate::kube::cdi::problems(&specs).unwrap();
    assert!(said.contains("etc/cdi/broken.yaml: "), "{said}");
    assert!(
        specs.nodes.contains_key("example.com/nic=nic-3"),
        "JSON is read"
    );
    let devices: Vec<hypomnesis::GpuDeviceInfo> = DRA_GPUS
        .iter()
        .zip(0..)
        .map(|(uuid, i)| {
            hypomnesis::GpuDeviceInfo::builder()
                .index(i)
                .uuid(Some((*uuid).to_owned()))
                .build()
        })
        .collect();
    let a = crate::kube::place::place_with(
        &got,
        &devices,
        &crate::kube::place::fixture_files(&node),
        &[(0, 0), (1, 1), (2, 2)],
    );
    let pods_on = |gpu: u32| {
        a.by_gpu[&gpu]
            .iter()
            .map(|h| (h.pod.as_str(), h.mig))
            .collect::<Vec<_>>()
    };
    assert_eq!(pods_on(0), vec![("trainer-0", None), ("infer-7", None)]);
    assert_eq!(pods_on(1), vec![("eval-a", None), ("eval-b", None)]);
    assert_eq!(
        pods_on(2),
        vec![("eval-b", Some(1))],
        "the MIG device, as gi1"
    );
    assert_eq!(a.unknown.len(), 1);
    assert_eq!(a.unknown[0].pod, "lost-0");
    assert_eq!(a.unknown[0].claim.as_ref().unwrap().name, "lost");
    let shared = crate::kube::Claim {
        namespace: "ml".into(),
        name: "shared".into(),
    };
    assert_eq!(
        a.booked,
        std::collections::BTreeMap::from([((1, shared.clone()), 20 << 30), ((2, shared), 2 << 30)]),
        "a whole GPU's claim books no memory figure"
    );
    assert_eq!(a.booked_error, None);
}

/// The driver's GPU minors need not be the GPUs' indices: the minor in the spec's node is what
/// places the device; a MIG capability node of another GPU does not make it a MIG device.
#[test]
fn cdi_devices_are_placed_by_minor_not_index() {
    let mut specs = crate::kube::cdi::CdiDevices::default();
    specs
        .nodes
        .insert("k/c=a".into(), vec!["/dev/nvidia7".into()]);
    specs.nodes.insert(
        "k/c=b".into(),
        vec!["/dev/nvidia3".into(), "/dev/nvidia-caps/nvidia-cap9".into()],
    );
    specs
        .nodes
        .insert("k/c=c".into(), vec!["/dev/nvidia5".into()]);
    let caps = std::collections::BTreeMap::from([(
        9,
        crate::kube::cdi::Cap {
            gpu_minor: 7,
            gi: 2,
            ci: None,
        },
    )]);
    let got = crate::kube::cdi::gpu_of_names(&specs, &[(0, 7), (1, 3)], &caps);
    let placed = |gpu, mig| crate::kube::cdi::Placed { gpu, mig };
    assert_eq!(
        got,
        std::collections::BTreeMap::from([
            ("k/c=a".to_owned(), placed(0, None)),
            ("k/c=b".to_owned(), placed(1, None)),
        ]),
        "minor 5 is no GPU of this node"
    );
    let caps = crate::kube::cdi::mig_caps(&hypomnesis_testkit::fixtures("dra").join("proc"));
    assert_eq!(
        caps.into_iter().collect::<Vec<_>>(),
        vec![
            (
                21,
                crate::kube::cdi::Cap {
                    gpu_minor: 2,
                    gi: 1,
                    ci: None
                }
            ),
            (
                22,
                crate::kube::cdi::Cap {
                    gpu_minor: 2,
                    gi: 1,
                    ci: Some(0)
                }
            ),
        ]
    );
}

#[test]
fn a_gpu_node_is_told_from_the_control_and_capability_nodes() {
    let paths = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        crate::kube::cdi::gpu_minor(&paths(&[
            "/dev/nvidiactl",
            "/dev/nvidia-caps/nvidia-cap21",
            "/dev/nvidia12"
        ])),
        Some(12)
    );
    assert_eq!(
        crate::kube::cdi::gpu_minor(&paths(&["/dev/nvidia-uvm", "/dev/nvidia"])),
        None
    );
}

/// A spec directory that cannot be listed (here a file where it should be; on a node, one the
/// DRA driver made 0750 root's) is said, with the other directory still read; a missing one is
/// not a problem.
#[test]
fn an_unlistable_spec_directory_is_said() {
    let root = std::env::temp_dir().join(format!("hmn-cdi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    assert_eq!(
        crate::kube::cdi::problems(&crate::kube::cdi::read(&root)),
        None
    );
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/cdi"), "not a directory").unwrap();
    let fixture = hypomnesis_testkit::fixtures("dra").join("rootfs/var/run/cdi");
    std::fs::create_dir_all(root.join("var/run/cdi")).unwrap();
    for f in std::fs::read_dir(&fixture).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, root.join("var/run/cdi").join(f.file_name().unwrap())).unwrap();
    }
    let specs = crate::kube::cdi::read(&root);
    let said = crate::kube::cdi::problems(&specs).unwrap();
    assert!(
        said.contains("etc/cdi: ") && !said.contains("more"),
        "{said}"
    );
    assert!(
        specs
            .nodes
            .keys()
            .any(|k| k.starts_with("k8s.gpu.nvidia.com/claim=")),
        "{specs:?}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A claim name the kubelet sends as bytes that are not UTF-8, in an otherwise good answer:
/// the answer is read (it was "malformed" as a whole before), every other pod and claim is
/// there and placed, and that claim alone is counted invalid.
#[test]
fn a_claim_name_that_is_not_utf8_invalidates_that_claim_alone() {
    let gpu = "gpu.nvidia.com";
    let good = answer(vec![
        pod(
            "ml",
            "eval-a",
            vec![with_claims(
                container("eval", vec![]),
                vec![(
                    "ml",
                    "shared",
                    vec![claimed(SHARED_UID, gpu, "gpu-1", Some("s-1"))],
                )],
            )],
        ),
        pod(
            "ml",
            "odd-0",
            vec![with_claims(
                container("c", vec![]),
                vec![(
                    "ml",
                    "bad-claim-zz",
                    vec![claimed(GPU_CLAIM_UID, gpu, "gpu-0", None)],
                )],
            )],
        ),
        pod(
            "web",
            "infer-7",
            vec![container(
                "server",
                vec![devices("nvidia.com/gpu", &[DRA_GPUS[2]])],
            )],
        ),
    ]);
    // The same length: every length prefix of the message stays right.
    let at = good.windows(12).position(|w| w == b"bad-claim-zz").unwrap();
    let mut bytes = good.to_vec();
    bytes[at + 10..at + 12].copy_from_slice(&[0xff, 0xfe]);
    let kubelet = Kubelet::start(Reply::Answer(bytes::Bytes::from(bytes)));
    let got = list_blocking(&kubelet.socket(), DEADLINE).unwrap();
    let seen: Vec<(&str, Option<&str>)> = got
        .iter()
        .map(|a| (a.pod.as_str(), a.claim.as_ref().map(|c| c.name.as_str())))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("eval-a", Some("shared")),
            ("odd-0", Some("bad-claim-\u{fffd}\u{fffd}")),
            ("infer-7", None),
        ]
    );
    let node = hypomnesis_testkit::fixtures("dra");
    let devices: Vec<hypomnesis::GpuDeviceInfo> = DRA_GPUS
        .iter()
        .zip(0..)
        .map(|(uuid, i)| {
            hypomnesis::GpuDeviceInfo::builder()
                .index(i)
                .uuid(Some((*uuid).to_owned()))
                .build()
        })
        .collect();
    let a = crate::kube::place::place_with(
        &got,
        &devices,
        &crate::kube::place::fixture_files(&node),
        &[(0, 0), (1, 1), (2, 2)],
    );
    assert_eq!(a.invalid, 1);
    assert!(a.by_gpu[&0].is_empty(), "{:?}", a.by_gpu);
    assert_eq!(a.by_gpu[&1][0].pod, "eval-a");
    assert_eq!(a.by_gpu[&2][0].pod, "infer-7");
    assert!(a.unknown.is_empty(), "{:?}", a.unknown);
}
