//! Which pod the kubelet allocated each GPU to, from the kubelet's pod-resources API (gRPC over
//! its Unix socket, by default [`DEFAULT_SOCKET`]).
//!
//! - `podresources`: the client, its messages and its errors ([`list`], [`list_blocking`]);
//! - `devices`: device ids as the NVIDIA device plugin writes them, read into [`DeviceRef`];
//! - `cdi`, `booked`, `place`: a DRA claim's devices placed on GPUs from the node's CDI specs,
//!   and what each claim books from the DRA driver's checkpoint, files read through
//!   `nodefile` (regular files only, never waited for, parsed once while unchanged), a YAML
//!   spec's nesting bounded first by `yaml_depth`;
//! - here: an [`Allocation`] per device a container holds, and [`assign`], which maps them onto
//!   this node's GPUs.
//!
//! The client needs a Unix socket; elsewhere (Windows) [`list`] says the API is not available.

pub mod booked;
pub mod cdi;
pub mod devices;
pub mod nodefile;
pub mod place;
pub mod podresources;
#[cfg(unix)]
pub mod raw_codec;
#[cfg(all(test, unix))]
pub(crate) mod tests;
pub mod yaml_depth;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

pub use devices::DeviceRef;
#[cfg(unix)]
pub use podresources::pods_blocking;
pub use podresources::{DEFAULT_SOCKET, list_blocking};

/// Resource names of this prefix are GPU allocations (`nvidia.com/gpu`, `nvidia.com/mig-1g.10gb`,
/// `nvidia.com/gpu.shared`); devices of other resources are left out.
pub const GPU_RESOURCE_PREFIX: &str = "nvidia.com/";

/// One device the kubelet allocated to a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The resource the device was allocated as (`nvidia.com/gpu`, …).
    pub resource: String,
    /// The device, its replica suffix taken off.
    pub device: DeviceRef,
    /// The time-slicing replica the id named (`::N`, `-N`), if any.
    pub replica: Option<u32>,
    /// The resource claim the device was allocated through (dynamic resource allocation);
    /// `None` for a device plugin's allocation.
    pub claim: Option<Claim>,
}

/// A resource claim, by its namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Claim {
    pub namespace: String,
    pub name: String,
}

/// The DRA drivers whose devices are GPUs this crate measures; a claim of another driver (a
/// NIC, an FPGA) is left out, as a device plugin's other resources are.
pub const GPU_DRA_DRIVERS: [&str; 1] = ["gpu.nvidia.com"];

impl Allocation {
    /// The container this allocation is to.
    pub fn holder(&self) -> Holder {
        Holder {
            namespace: self.namespace.clone(),
            pod: self.pod.clone(),
            container: self.container.clone(),
            claim: self.claim.clone(),
            mig: None,
        }
    }
}

/// A container, by its pod's namespace and name and its own name, and the claim it was
/// allocated the device through (DRA; `None` for a device plugin's).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub container: String,
    /// The resource claim, for a DRA allocation.
    pub claim: Option<Claim>,
    /// The MIG GPU instance id, when the device is a MIG device this node names.
    pub mig: Option<u32>,
}

/// This node's GPUs and MIG instances, as the measurement names them.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeDevices<'a> {
    /// Each GPU's index and UUID (`GPU-…`).
    pub gpus: &'a [(u32, String)],
    /// Each MIG instance's UUID (`MIG-…`), the index of the GPU it is on and its GPU instance
    /// id.
    pub migs: &'a [(String, u32, Option<u32>)],
    /// Where each CDI device name the node's CDI specs give a GPU's device node lands
    /// (`k8s.gpu.nvidia.com/claim=<uid>-gpu-0` → GPU 0), for DRA allocations; `None`: not read.
    pub dra: Option<&'a BTreeMap<String, cdi::Placed>>,
}

/// The allocations laid onto this node's GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// Per GPU index of the node, every one of them: the containers allocated the GPU, a MIG
    /// instance of it or a replica of either, each once, in the order the kubelet listed them.
    pub by_gpu: BTreeMap<u32, Vec<Holder>>,
    /// The allocations naming a device this node does not have (or an id not understood),
    /// reported rather than dropped.
    pub unknown: Vec<Allocation>,
    /// Allocations whose namespace, pod or container name, or whose claim's namespace or name,
    /// is not one Kubernetes allows (a DNS-1123 label or subdomain, as the kubelet's log layout
    /// holds; an empty claim name, a claim name the kubelet sent as bytes that are not UTF-8):
    /// counted, never put in a label.
    pub invalid: usize,
    /// The pods (namespace, name: both valid) of allocations left out for their claim's name:
    /// they hold a device that is not shown, so their memory is not called outside their
    /// allocation.
    pub withheld: BTreeSet<(String, String)>,
    /// The DRA claims' devices placed on each GPU, each once however many pods share it.
    pub claimed: BTreeSet<(u32, booked::BookedDevice)>,
    /// The memory each claim books on each GPU (consumable capacity), where every device of
    /// the claim there books some and the node's DRA driver keeps the figure
    /// ([`booked::read`]); filled by [`place::place`].
    pub booked: BTreeMap<(u32, Claim), u64>,
    /// Why the bookings could not be read, when they could not.
    pub booked_error: Option<String>,
    /// Which CDI specs (or their directory) could not be read, and why: DRA devices they
    /// would have placed stay unknown.
    pub specs_error: Option<String>,
}

/// How an allocation is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// By Kubernetes names throughout.
    Valid,
    /// Its namespace, pod or container name is not one.
    BadPod,
    /// Its pod is, but its claim's namespace or name is not.
    BadClaim,
}

/// Whether the allocation's names are Kubernetes names: the namespace and the container a
/// DNS-1123 label, the pod a DNS-1123 subdomain; and its claim's, if it has one, as a pod's:
/// the namespace a label, the name a subdomain.
fn naming(a: &Allocation) -> Naming {
    use hypomnesis::{is_dns1123_label, is_dns1123_subdomain};
    if !(is_dns1123_label(&a.namespace)
        && is_dns1123_subdomain(&a.pod)
        && is_dns1123_label(&a.container))
    {
        Naming::BadPod
    } else if a
        .claim
        .as_ref()
        .is_some_and(|c| !(is_dns1123_label(&c.namespace) && is_dns1123_subdomain(&c.name)))
    {
        Naming::BadClaim
    } else {
        Naming::Valid
    }
}

/// Lays `allocations` onto the node's GPUs: a GPU by its UUID or index, a MIG instance by its
/// UUID (or, the older form, the GPU UUID within it) or its GPU's index. Linear in the
/// allocations: the node's UUIDs are looked up in maps, each GPU's holders kept in a set.
pub fn assign(allocations: &[Allocation], node: NodeDevices<'_>) -> Assignment {
    let mut out = Assignment {
        by_gpu: node.gpus.iter().map(|(i, _)| (*i, Vec::new())).collect(),
        ..Assignment::default()
    };
    let gpus: HashMap<String, u32> = node
        .gpus
        .iter()
        .map(|(i, u)| (u.to_ascii_lowercase(), *i))
        .collect();
    let migs: HashMap<String, (u32, Option<u32>)> = node
        .migs
        .iter()
        .map(|(u, i, gi)| (u.to_ascii_lowercase(), (*i, *gi)))
        .collect();
    let by_uuid = |uuid: &str| gpus.get(&uuid.to_ascii_lowercase()).copied();
    let mut seen: HashMap<u32, HashSet<Holder>> = HashMap::new();
    for allocation in allocations {
        match naming(allocation) {
            Naming::Valid => {}
            Naming::BadPod => {
                out.invalid += 1;
                continue;
            }
            Naming::BadClaim => {
                out.invalid += 1;
                out.withheld
                    .insert((allocation.namespace.clone(), allocation.pod.clone()));
                continue;
            }
        }
        let whole = |i: Option<u32>| i.map(|gpu| (gpu, None));
        let place = match &allocation.device {
            DeviceRef::Gpu { uuid } => whole(by_uuid(uuid)),
            DeviceRef::Mig { uuid } => {
                migs.get(&uuid.to_ascii_lowercase()).copied().or_else(|| {
                    let rest = uuid.get("MIG-".len()..)?;
                    whole(by_uuid(devices::legacy_mig_parent(rest)?))
                })
            }
            DeviceRef::Index(i) | DeviceRef::MigIndex { gpu: i, .. } => Some((*i, None)),
            DeviceRef::Dra { cdi, .. } => node
                .dra
                .and_then(|names| cdi.iter().find_map(|n| names.get(n)).copied())
                .map(|p| (p.gpu, p.mig)),
            DeviceRef::Other(_) => None,
        };
        match place.and_then(|(i, mig)| out.by_gpu.get_mut(&i).map(|h| (i, mig, h))) {
            Some((i, mig, holders)) => {
                let mut holder = allocation.holder();
                holder.mig = mig;
                if let (
                    DeviceRef::Dra {
                        driver,
                        pool,
                        device,
                        share,
                        ..
                    },
                    Some(claim),
                ) = (&allocation.device, &allocation.claim)
                {
                    out.claimed.insert((
                        i,
                        booked::BookedDevice {
                            claim: claim.clone(),
                            driver: driver.clone(),
                            pool: pool.clone(),
                            device: device.clone(),
                            share: share.clone(),
                        },
                    ));
                }
                if seen.entry(i).or_default().insert(holder.clone()) {
                    holders.push(holder);
                }
            }
            None => out.unknown.push(allocation.clone()),
        }
    }
    out
}

#[cfg(test)]
mod assign_tests {
    use super::*;

    const GPU0: &str = "GPU-00000000-1111-2222-3333-444444444444";
    const GPU1: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    const MIG: &str = "MIG-12345678-9abc-def0-1234-56789abcdef0";

    fn at(pod: &str, container: &str, id: &str) -> Allocation {
        let read = devices::parse(id);
        Allocation {
            namespace: "ns".to_owned(),
            pod: pod.to_owned(),
            container: container.to_owned(),
            resource: "nvidia.com/gpu".to_owned(),
            device: read.device,
            replica: read.replica,
            claim: None,
        }
    }

    fn holder(pod: &str, container: &str) -> Holder {
        at(pod, container, "0").holder()
    }

    #[test]
    fn each_form_lands_on_its_gpu_and_strangers_are_reported() {
        let gpus = [(0, GPU0.to_owned()), (1, GPU1.to_owned())];
        let migs = [(MIG.to_owned(), 1, Some(5))];
        let node = NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &migs,
        };
        let allocations = [
            at("a", "c", &GPU0.to_uppercase()),
            at("b", "c", &format!("{GPU1}::1")),
            at("b", "c", &format!("{GPU1}-2")), // the same container again: listed once
            at("m", "c", MIG),
            at("l", "c", &format!("MIG-{GPU0}/1/0")),
            at("i", "c", "1"),
            at("j", "c", "0:3"),
            at("x", "c", "GPU-99999999-1111-2222-3333-444444444444"),
            at("x", "c", "MIG-99999999-1111-2222-3333-444444444444"),
            at("x", "c", "7"),
            at("x", "c", "7:0"),
            at("x", "c", "what"),
        ];
        let got = assign(&allocations, node);
        assert_eq!(
            got.by_gpu,
            BTreeMap::from([
                (
                    0,
                    vec![holder("a", "c"), holder("l", "c"), holder("j", "c")]
                ),
                (
                    1,
                    vec![
                        holder("b", "c"),
                        Holder {
                            mig: Some(5),
                            ..holder("m", "c")
                        },
                        holder("i", "c")
                    ]
                ),
            ])
        );
        assert_eq!(got.unknown, allocations[7..].to_vec());
    }

    /// Names no Kubernetes object can have (a 100 KB namespace, a NUL in a container name, a
    /// capital in a pod name) are counted, never laid onto a GPU (they would become labels).
    #[test]
    fn invalid_names_are_counted_not_assigned() {
        let gpus = [(0, GPU0.to_owned())];
        let node = NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        };
        let mut long = at("a", "c", GPU0);
        long.namespace = "n".repeat(100_000);
        let mut nul = at("a", "c\0x", GPU0);
        nul.container = "c\0x".into();
        let capital = at("Trainer-0", "c", GPU0);
        let fine = at("trainer-0.v2", "c-1", GPU0);
        let got = assign(&[long, nul, capital, fine], node);
        assert_eq!(got.invalid, 3);
        assert_eq!(got.by_gpu[&0], vec![holder("trainer-0.v2", "c-1")]);
        assert!(got.unknown.is_empty());
    }

    /// A claim's namespace and name are checked as a pod's are: an empty name, ESC, NUL, a
    /// RIGHT-TO-LEFT OVERRIDE, a capital, the replacement character a name that was not UTF-8
    /// becomes: each such allocation counted and left out, its pod remembered as holding a
    /// device not shown; the valid claim beside them placed.
    #[test]
    fn claims_are_checked_as_pod_names_are() {
        let gpus = [(0, GPU0.to_owned())];
        let cdi = "k8s.gpu.nvidia.com/claim=6f1c2b3a-gpu-0";
        let names = BTreeMap::from([(cdi.to_owned(), cdi::Placed { gpu: 0, mig: None })]);
        let node = NodeDevices {
            dra: Some(&names),
            gpus: &gpus,
            migs: &[],
        };
        let claimed = |pod: &str, namespace: &str, name: &str| Allocation {
            resource: "gpu.nvidia.com".into(),
            device: DeviceRef::Dra {
                driver: "gpu.nvidia.com".into(),
                pool: "node-a".into(),
                device: "gpu-0".into(),
                cdi: vec![cdi.into()],
                share: None,
            },
            claim: Some(Claim {
                namespace: namespace.into(),
                name: name.into(),
            }),
            ..at(pod, "c", "0")
        };
        let got = assign(
            &[
                claimed("a", "ns", ""),
                claimed("b", "ns", "esc\u{1b}[31m"),
                claimed("c", "ns", "nul\u{0}"),
                claimed("d", "ns", "rlo\u{202e}"),
                claimed("e", "ns", "Capital"),
                claimed("f", "ns", "bytes\u{fffd}"),
                claimed("g", "n\u{1b}s", "fine"),
                claimed("ok", "ns", "gpu-claim.v2"),
            ],
            node,
        );
        assert_eq!(got.invalid, 7);
        let withheld: Vec<&str> = got.withheld.iter().map(|(_, p)| p.as_str()).collect();
        assert_eq!(withheld, ["a", "b", "c", "d", "e", "f", "g"]);
        let placed: Vec<(&str, Option<&str>)> = got.by_gpu[&0]
            .iter()
            .map(|h| (h.pod.as_str(), h.claim.as_ref().map(|c| c.name.as_str())))
            .collect();
        assert_eq!(placed, [("ok", Some("gpu-claim.v2"))]);
        assert_eq!(got.claimed.len(), 1, "{:?}", got.claimed);
        assert!(got.unknown.is_empty());
    }

    /// 100,000 allocations on a node of 8 GPUs: each container once per GPU, in the kubelet's
    /// order (the lookups are maps and sets: this was quadratic, minutes at this size).
    #[test]
    fn a_hundred_thousand_allocations_each_once() {
        let gpus: Vec<(u32, String)> = (0..8)
            .map(|i| (i, format!("GPU-{i:08x}-1111-2222-3333-444444444444")))
            .collect();
        let node = NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        };
        let allocations: Vec<Allocation> = (0..100_000_u32)
            .map(|k| {
                let gpu = &gpus[usize::try_from(k % 8).unwrap()].1;
                // Every container twice (a replica): 50,000 holders.
                at(&format!("p{}", k / 32), &format!("c{}", (k / 16) % 2), gpu)
            })
            .collect();
        let got = assign(&allocations, node);
        let holders: usize = got.by_gpu.values().map(Vec::len).sum();
        assert_eq!(holders, 100_000 / 2);
        assert_eq!(got.by_gpu[&3][0], holder("p0", "c0"));
        assert_eq!(got.by_gpu[&3][1], holder("p0", "c1"));
        assert_eq!(got.by_gpu[&3][2], holder("p1", "c0"));
    }

    #[test]
    fn a_node_without_gpus_reports_everything() {
        let allocations = [at("a", "c", GPU0), at("b", "c", "0")];
        let got = assign(&allocations, NodeDevices::default());
        assert!(got.by_gpu.is_empty());
        assert_eq!(got.unknown, allocations.to_vec());
    }

    #[test]
    fn gpus_nobody_holds_are_listed_empty() {
        let gpus = [(0, GPU0.to_owned()), (3, GPU1.to_owned())];
        let node = NodeDevices {
            dra: None,
            gpus: &gpus,
            migs: &[],
        };
        let got = assign(&[], node);
        assert_eq!(got.by_gpu, BTreeMap::from([(0, vec![]), (3, vec![])]));
        assert!(got.unknown.is_empty());
    }
}
