//! The kubelet's allocations laid onto the measured GPUs with what the node itself tells: MIG
//! instances by UUID (NVML), a DRA claim's devices through the node's CDI specs and the
//! driver's MIG capability nodes, and what each claim books from the DRA driver's checkpoint.
//! Used by `hmn serve` and `hmn ps --group-by claim` alike.

use std::collections::BTreeMap;
use std::path::PathBuf;

use hypomnesis::GpuDeviceInfo;

use super::{Allocation, Assignment, Claim, DeviceRef, NodeDevices, assign, booked, cdi};

/// Where the node's files are: its root filesystem (CDI specs, the DRA driver's checkpoint)
/// and its procfs (the driver's MIG capability nodes).
#[derive(Debug, Clone)]
pub struct NodeFiles {
    pub rootfs: PathBuf,
    pub procfs: PathBuf,
}

impl NodeFiles {
    /// The roots this process measures under (`--rootfs`, `--procfs`), else `/` and `/proc`.
    pub fn in_use() -> Self {
        hypomnesis::roots().map_or_else(
            |_| Self {
                rootfs: PathBuf::from("/"),
                procfs: PathBuf::from("/proc"),
            },
            |r| Self {
                rootfs: r.rootfs.path,
                procfs: r.procfs.path,
            },
        )
    }
}

/// `allocations` laid onto the measured `devices`, with the node's files under the roots in
/// use.
pub fn place(allocations: &[Allocation], devices: &[GpuDeviceInfo]) -> Assignment {
    let minors = if wants(allocations, |d| matches!(d, DeviceRef::Dra { .. })) {
        hypomnesis::nvidia_device_minors(devices)
    } else {
        Vec::new()
    };
    place_with(allocations, devices, &NodeFiles::in_use(), &minors)
}

fn wants(allocations: &[Allocation], is: impl Fn(&DeviceRef) -> bool) -> bool {
    allocations.iter().any(|a| is(&a.device))
}

/// [`place`] with the node's files under `files` and each GPU's `(index, device minor)`.
pub fn place_with(
    allocations: &[Allocation],
    devices: &[GpuDeviceInfo],
    files: &NodeFiles,
    minors: &[(u32, u32)],
) -> Assignment {
    let gpus: Vec<(u32, String)> = devices
        .iter()
        .filter_map(|d| Some((d.index, d.uuid.clone()?)))
        .collect();
    let migs = if wants(allocations, |d| matches!(d, DeviceRef::Mig { .. })) {
        mig_uuids(devices)
    } else {
        Vec::new()
    };
    let mut specs_error = None;
    let dra = wants(allocations, |d| matches!(d, DeviceRef::Dra { .. })).then(|| {
        let specs = cdi::read(&files.rootfs);
        specs_error = cdi::problems(&specs);
        let caps = cdi::mig_caps(&files.procfs);
        cdi::gpu_of_names(&specs, minors, &caps)
    });
    let mut out = assign(
        allocations,
        NodeDevices {
            dra: dra.as_ref(),
            gpus: &gpus,
            migs: &migs,
        },
    );
    out.specs_error = specs_error;
    if !out.claimed.is_empty() {
        match booked::read(&files.rootfs) {
            Ok(bookings) => out.booked = book(&out, &bookings),
            Err(why) => out.booked_error = Some(why),
        }
    }
    out
}

/// The memory each claim books on each GPU: the bookings of its devices placed there added
/// up, where every one of them has one (a claim of a whole GPU books no memory figure).
fn book(a: &Assignment, bookings: &booked::Bookings) -> BTreeMap<(u32, Claim), u64> {
    let mut sums: BTreeMap<(u32, Claim), Option<u64>> = BTreeMap::new();
    for (gpu, device) in &a.claimed {
        let slot = sums.entry((*gpu, device.claim.clone())).or_insert(Some(0));
        *slot = match (*slot, bookings.get(device)) {
            (Some(sum), Some(bytes)) => Some(sum.saturating_add(*bytes)),
            _ => None,
        };
    }
    sums.into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect()
}

/// Each MIG device's UUID, its GPU and its GPU instance id, for the GPUs in MIG mode.
fn mig_uuids(devices: &[GpuDeviceInfo]) -> Vec<(String, u32, Option<u32>)> {
    devices
        .iter()
        .filter(|d| d.mig_enabled == Some(true))
        .flat_map(|d| {
            hypomnesis::mig_instances(d.index)
                .unwrap_or_default()
                .into_iter()
                .filter_map(move |m| Some((m.uuid?, d.index, m.gpu_instance_id)))
        })
        .collect()
}

/// Each container's claims on each GPU, by `(gpu, namespace, pod, container)`: what names a
/// process's claim (its container's, on the GPU it uses).
pub fn claims_of_containers(a: &Assignment) -> BTreeMap<(u32, &str, &str, &str), Vec<&Claim>> {
    let mut out: BTreeMap<(u32, &str, &str, &str), Vec<&Claim>> = BTreeMap::new();
    for (&gpu, holders) in &a.by_gpu {
        for h in holders {
            if let Some(c) = &h.claim {
                let claims = out
                    .entry((
                        gpu,
                        h.namespace.as_str(),
                        h.pod.as_str(),
                        h.container.as_str(),
                    ))
                    .or_default();
                if !claims.contains(&c) {
                    claims.push(c);
                }
            }
        }
    }
    for claims in out.values_mut() {
        claims.sort();
    }
    out
}

/// The claims' names, joined by `,` in order (a container rarely holds two on one GPU).
pub fn claim_names(claims: &[&Claim]) -> String {
    claims
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The files of a fixture node laid out under `root` (`rootfs/`, `proc/`).
#[cfg(test)]
pub(crate) fn fixture_files(root: &std::path::Path) -> NodeFiles {
    NodeFiles {
        rootfs: root.join("rootfs"),
        procfs: root.join("proc"),
    }
}
