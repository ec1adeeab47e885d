//! `hmn` with no subcommand: one line per GPU (and its MIG devices), or the JSON array, and
//! the sentences for hosts without a readable GPU.

use super::printable::printable;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use hypomnesis::{
    ErrorKind, Failure, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, MigInstance, MigState,
};
use serde::Serialize;

use super::{MIB, json};

/// The one-line summary of a device:
/// `GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01`.
/// MiB are rounded down; the name, the reserved part and the driver are left out when unknown.
pub fn summary_line(d: &GpuDeviceInfo) -> String {
    let mut s = format!("GPU {}", d.index);
    if let Some(name) = &d.name {
        let _ = write!(s, " [{}]", printable(name));
    }
    let _ = write!(
        s,
        ": free {} MiB / {} MiB",
        d.free_bytes / MIB,
        d.total_bytes / MIB
    );
    if let Some(r) = d.reserved_bytes {
        let _ = write!(s, " ({} MiB reserved)", r / MIB);
    }
    if let Some(v) = &d.driver_version {
        let _ = write!(s, ", driver {v}");
    }
    // Said only where it is not the usual kind (0.2.x's line is unchanged for a discrete GPU).
    match d.memory_model {
        Some(hypomnesis::MemoryModel::Unified) => {
            s.push_str("; unified memory: these are the host's RAM, shared with the CPU");
        }
        Some(hypomnesis::MemoryModel::Coherent) => {
            s.push_str("; coherent: its own memory, and the CPU's within its reach");
        }
        _ => {}
    }
    // A coherent GPU whose memory the kernel manages as a NUMA node: what the kernel placed
    // there, which the driver's figures above do not count.
    if let Some(n) = d.numa_node {
        match (d.numa_node_used_bytes, d.numa_node_total_bytes) {
            (Some(used), Some(total)) => {
                let _ = write!(
                    s,
                    "; NUMA node {n}: {} MiB / {} MiB placed there by the kernel",
                    used / MIB,
                    total / MIB
                );
            }
            _ => {
                let _ = write!(s, "; NUMA node {n} (its figures cannot be read here)");
            }
        }
    }
    s
}

/// What `hmn` shows for one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceView {
    /// The device-wide figures were read. `mig` is `Some` (possibly empty) when MIG is on.
    Read {
        device: GpuDeviceInfo,
        mig: Option<Vec<MigInstance>>,
    },
    /// MIG is on and the device-wide figures were refused, but the instances were read.
    MigOnly(MigState),
    /// Nothing could be read (said on stderr; in JSON, an entry with `error` and
    /// `error_kind`).
    Failed { index: u32, failure: Failure },
}

impl DeviceView {
    /// The GPU's index.
    pub fn index(&self) -> u32 {
        match self {
            Self::Read { device, .. } => device.index,
            Self::MigOnly(s) => s.index,
            Self::Failed { index, .. } => *index,
        }
    }
}

/// `  MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB`, with ` CI <n>` after the GPU instance when
/// `show_ci`, ` (<R> MiB reserved)` when the instance has a nonzero reservation (MIG devices
/// report 0, which would only repeat on every line), and `memory unknown (<why>)` when the
/// figures could not be read. Without a profile the MIG device is named by its slot
/// (`MIG device 3`). MiB are rounded down.
pub fn mig_line(m: &MigInstance, show_ci: bool) -> String {
    let mut s = match &m.profile {
        Some(p) => format!("  MIG {p}"),
        None => format!("  MIG device {}", m.slot),
    };
    if let Some(gi) = m.gpu_instance_id {
        let _ = write!(s, " GI {gi}");
    }
    if show_ci && let Some(ci) = m.compute_instance_id {
        let _ = write!(s, " CI {ci}");
    }
    match (m.free_bytes, m.total_bytes) {
        (Some(free), Some(total)) => {
            let _ = write!(s, ": free {} MiB / {} MiB", free / MIB, total / MIB);
            if let Some(r) = m.reserved_bytes.filter(|&r| r > 0) {
                let _ = write!(s, " ({} MiB reserved)", r / MIB);
            }
        }
        _ => {
            let _ = write!(
                s,
                ": memory unknown ({})",
                m.memory_error
                    .as_ref()
                    .map_or("not reported", |f| f.message.as_str())
            );
        }
    }
    s
}

/// The lines of a GPU's MIG devices, in the order given. ` CI <n>` is shown for the compute
/// instances of a GPU instance that has several (they share its memory, so the figures repeat).
pub fn mig_lines(instances: &[MigInstance]) -> Vec<String> {
    if instances.is_empty() {
        return vec!["  MIG on: no MIG devices".to_string()];
    }
    instances
        .iter()
        .map(|m| {
            let shared = m.gpu_instance_id.is_some_and(|gi| {
                instances
                    .iter()
                    .filter(|o| o.parent_index == m.parent_index && o.gpu_instance_id == Some(gi))
                    .count()
                    > 1
            });
            mig_line(m, shared)
        })
        .collect()
}

/// `GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (NVML_ERROR_NO_PERMISSION)`
/// ("unavailable" instead of "refused" when the reason is not a permission one).
pub fn refused_line(s: &MigState) -> String {
    let mut line = format!("GPU {}", s.index);
    if let Some(name) = &s.name {
        let _ = write!(line, " [{}]", printable(name));
    }
    let why = s
        .device_memory_error
        .as_ref()
        .map_or("reason unknown", |f| f.message.as_str());
    let verb = if s.device_memory_error_kind() == Some(ErrorKind::NoPermission) {
        "refused"
    } else {
        "unavailable"
    };
    let _ = write!(line, ": MIG on; device-wide memory {verb} ({why})");
    line
}

/// One block per GPU: its line, then its MIG devices' lines.
pub fn devices(out: &mut impl Write, views: &[DeviceView]) -> io::Result<()> {
    for v in views {
        let (head, mig) = match v {
            DeviceView::Read { device, mig } => (summary_line(device), mig.as_deref()),
            DeviceView::MigOnly(s) => (refused_line(s), Some(s.instances.as_slice())),
            DeviceView::Failed { .. } => continue,
        };
        writeln!(out, "{head}")?;
        for line in mig.map(mig_lines).unwrap_or_default() {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct ReadJson<'a> {
    #[serde(flatten)]
    device: &'a GpuDeviceInfo,
    allocated_bytes: Option<u64>,
    unattributed_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mig_instances: Option<&'a [MigInstance]>,
}

#[derive(Serialize)]
struct MigOnlyJson<'a> {
    index: u32,
    name: Option<&'a str>,
    uuid: Option<&'a str>,
    total_bytes: Option<u64>,
    free_bytes: Option<u64>,
    used_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    source: GpuQuerySource,
    mig_enabled: Option<bool>,
    memory_error: Option<&'a str>,
    mig_instances: &'a [MigInstance],
}

#[derive(Serialize)]
struct FailedJson<'a> {
    index: u32,
    name: Option<&'a str>,
    total_bytes: Option<u64>,
    free_bytes: Option<u64>,
    used_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    driver_version: Option<&'a str>,
    error: &'a str,
    error_kind: ErrorKind,
}

#[derive(Serialize)]
#[serde(untagged)]
enum DeviceJson<'a> {
    Read(ReadJson<'a>),
    MigOnly(MigOnlyJson<'a>),
    Failed(FailedJson<'a>),
}

/// `hmn --json`: the devices as an array; a GPU in MIG mode has its MIG devices under
/// `mig_instances`. A GPU whose device-wide figures were refused has them `null`, with
/// `memory_error` saying why; a GPU that could not be read at all (a lost one) has them `null`
/// with `error` and `error_kind`. `allocated_bytes` leaves the reservation out;
/// `unattributed_bytes` is what the device's process rows in `lists` do not account for (`null`
/// when its list is not there).
pub fn devices_json(
    out: &mut impl Write,
    views: &[DeviceView],
    lists: &BTreeMap<u32, Vec<GpuProcessEntry>>,
) -> io::Result<()> {
    let v: Vec<DeviceJson<'_>> = views
        .iter()
        .map(|v| match v {
            DeviceView::Read { device, mig } => DeviceJson::Read(ReadJson {
                device,
                allocated_bytes: device.allocated_bytes(),
                unattributed_bytes: lists
                    .get(&device.index)
                    .and_then(|rows| device.unattributed_bytes(rows)),
                mig_instances: mig.as_deref(),
            }),
            DeviceView::MigOnly(s) => DeviceJson::MigOnly(MigOnlyJson {
                index: s.index,
                name: s.name.as_deref(),
                uuid: s.uuid.as_deref(),
                total_bytes: None,
                free_bytes: None,
                used_bytes: None,
                reserved_bytes: None,
                source: s.source,
                mig_enabled: s.enabled,
                memory_error: s.device_memory_error.as_ref().map(|f| f.message.as_str()),
                mig_instances: &s.instances,
            }),
            DeviceView::Failed { index, failure } => DeviceJson::Failed(FailedJson {
                index: *index,
                name: None,
                total_bytes: None,
                free_bytes: None,
                used_bytes: None,
                reserved_bytes: None,
                driver_version: None,
                error: &failure.message,
                error_kind: failure.kind,
            }),
        })
        .collect();
    json(out, &v)
}

/// Where a newcomer without a GPU goes next; the reasons themselves are `hmn doctor`'s.
const NO_GPU_NEXT: &str =
    "`hmn doctor` says why; `scripts/demo/demo.sh` in the source tree runs hmn on a simulated GPU";

/// The sentence for a host with no GPU source at all.
pub fn no_gpu_sentence() -> String {
    format!("No GPU found ({NO_GPU_NEXT}).")
}

/// The sentence for a host whose GPU source says there is no GPU to measure (the driver is not
/// loaded, none is found), with what it said.
pub fn no_gpu_because(reason: &str) -> String {
    format!("No GPU found: {reason} (`hmn doctor` says more).")
}

/// The sentence for a source that answered but counts no device.
pub fn zero_gpus_sentence() -> String {
    format!("No GPU found: the GPU sources report no device ({NO_GPU_NEXT}).")
}

/// The sentence for devices that were enumerated but none of which could be read.
pub fn none_readable_sentence(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!(
        "hmn: {n} GPU{s} found, but none could be read (reasons above; `hmn doctor` has details)."
    )
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::GpuVendor;

    use super::*;

    use crate::view::MIB;

    use crate::view::text;

    fn h200() -> GpuDeviceInfo {
        let mut d = GpuDeviceInfo::builder()
            .index(0)
            .name(Some("NVIDIA H200".into()))
            .total_bytes(143_771 * MIB + 5)
            .free_bytes(110_796 * MIB + 1023)
            .reserved_bytes(Some(614 * MIB + 77))
            .driver_version(Some("590.48.01".into()))
            .vendor(Some(GpuVendor::Nvidia))
            .build();
        d.used_bytes = d.total_bytes - d.free_bytes;
        d
    }

    #[test]
    fn summary_lines() {
        let d = h200();
        assert_eq!(
            summary_line(&d),
            "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01"
        );
        let mut bare = d.clone();
        bare.name = None;
        bare.reserved_bytes = None;
        bare.driver_version = None;
        bare.index = 3;
        assert_eq!(summary_line(&bare), "GPU 3: free 110796 MiB / 143771 MiB");
        let mut zero = d;
        zero.reserved_bytes = Some(0);
        assert!(
            summary_line(&zero).contains("(0 MiB reserved)"),
            "a real zero is shown"
        );
        let mut gb10 = bare.clone();
        gb10.memory_model = Some(hypomnesis::MemoryModel::Unified);
        assert_eq!(
            summary_line(&gb10),
            "GPU 3: free 110796 MiB / 143771 MiB; unified memory: these are the host's RAM, shared with the CPU"
        );
        let mut discrete = bare.clone();
        discrete.memory_model = Some(hypomnesis::MemoryModel::Discrete);
        assert_eq!(summary_line(&discrete), summary_line(&bare), "0.2.x's line");
        let mut gh200 = bare.clone();
        gh200.memory_model = Some(hypomnesis::MemoryModel::Coherent);
        gh200.numa_node = Some(1);
        gh200.numa_node_total_bytes = Some(96_256 * MIB);
        gh200.numa_node_used_bytes = Some(16_384 * MIB + 5);
        assert_eq!(
            summary_line(&gh200),
            "GPU 3: free 110796 MiB / 143771 MiB; coherent: its own memory, and the CPU's within \
             its reach; NUMA node 1: 16384 MiB / 96256 MiB placed there by the kernel"
        );
        gh200.numa_node_used_bytes = None;
        assert!(
            summary_line(&gh200).ends_with("; NUMA node 1 (its figures cannot be read here)"),
            "unknown, not 0"
        );
        assert_eq!(
            text(|w| devices(
                w,
                &[
                    DeviceView::Read {
                        device: h200(),
                        mig: None
                    },
                    DeviceView::Read {
                        device: bare.clone(),
                        mig: None
                    }
                ]
            )),
            "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\nGPU 3: free 110796 MiB / 143771 MiB\n"
        );
    }

    #[test]
    fn json_gives_allocated_and_what_the_rows_leave_unattributed() {
        let d = h200();
        let allocated = d.total_bytes - d.free_bytes - d.reserved_bytes.unwrap();
        let mut other = h200();
        other.index = 1;
        other.reserved_bytes = None;
        let views = [
            DeviceView::Read {
                device: d,
                mig: None,
            },
            DeviceView::Read {
                device: other,
                mig: None,
            },
        ];
        let row = GpuProcessEntry::builder()
            .pid(7)
            .device_index(0)
            .used_bytes(1 << 30)
            .build();
        let lists = BTreeMap::from([(0, vec![row])]);
        let s = text(|w| devices_json(w, &views, &lists));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0]["allocated_bytes"], allocated);
        assert_eq!(v[0]["unattributed_bytes"], allocated - (1 << 30));
        assert_eq!(v[0]["used_bytes"], allocated + 614 * MIB + 77);
        assert!(v[1]["allocated_bytes"].is_null(), "no reservation: unknown");
        assert!(v[1]["unattributed_bytes"].is_null());
    }

    #[test]
    fn json_keys_and_nulls() {
        let mut d = h200();
        d.uuid = None;
        let s = text(|w| json(w, &[d]));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let o = v[0].as_object().unwrap();
        for k in [
            "index",
            "name",
            "total_bytes",
            "free_bytes",
            "used_bytes",
            "reserved_bytes",
            "driver_version",
            "uuid",
            "pci_bus_id",
            "vendor",
            "source",
        ] {
            assert!(o.contains_key(k), "{k} missing in {s}");
        }
        assert!(o["uuid"].is_null() && o["pci_bus_id"].is_null());
        assert_eq!(o["reserved_bytes"], 614 * MIB + 77);
        assert_eq!(o["vendor"], "nvidia");
        assert_eq!(o["source"], "nvml");
        assert!(s.ends_with("]\n"));
    }

    #[test]
    fn sentences() {
        assert_eq!(
            no_gpu_sentence(),
            "No GPU found (`hmn doctor` says why; `scripts/demo/demo.sh` in the source tree runs hmn on a simulated GPU)."
        );
        assert!(no_gpu_sentence().len() < 120, "one short sentence");
        assert_eq!(
            no_gpu_because("NVML: nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)"),
            "No GPU found: NVML: nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9) (`hmn doctor` says more)."
        );
        assert_eq!(
            none_readable_sentence(2),
            "hmn: 2 GPUs found, but none could be read (reasons above; `hmn doctor` has details)."
        );
        assert!(zero_gpus_sentence().starts_with("No GPU found: the GPU sources report no device"));
    }

    /// The H200 of the MIG issue: GI 2 split into CI 0 and CI 1 (same figures), 2g, 1g, 1g.
    fn h200_mig() -> Vec<MigInstance> {
        let m = |slot: u32, gi: u32, ci: u32, profile: &str, total: u64, used: u64| {
            MigInstance::builder()
                .slot(slot)
                .uuid(Some(format!("MIG-{slot}")))
                .profile(Some(profile.into()))
                .gpu_instance_id(Some(gi))
                .compute_instance_id(Some(ci))
                .total_bytes(Some(total * MIB))
                .free_bytes(Some((total - used) * MIB + 7))
                .used_bytes(Some(used * MIB - 7))
                .reserved_bytes(Some(0))
                .build()
        };
        vec![
            m(0, 2, 0, "1c.3g.71gb", 71424, 16925),
            m(1, 2, 1, "2c.3g.71gb", 71424, 16925),
            m(2, 3, 0, "2g.35gb", 33280, 16),
            m(3, 9, 0, "1g.18gb", 16384, 9),
            m(4, 10, 0, "1g.18gb", 16384, 9),
        ]
    }

    const H200_MIG_LINES: &str = concat!(
        "  MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB\n",
        "  MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB\n",
        "  MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB\n",
        "  MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB\n",
        "  MIG 1g.18gb GI 10: free 16375 MiB / 16384 MiB\n",
    );

    #[test]
    fn mig_lines_under_their_parent() {
        let mut d = h200();
        d.mig_enabled = Some(true);
        let views = [
            DeviceView::Read {
                device: d,
                mig: Some(h200_mig()),
            },
            DeviceView::Read {
                device: h200(),
                mig: None,
            },
        ];
        assert_eq!(
            text(|w| devices(w, &views)),
            format!(
                "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n{H200_MIG_LINES}GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n"
            )
        );
        // MIG on without instances, an unnamed instance, unknown memory, a nonzero reservation.
        let mut odd = h200_mig();
        odd[0].profile = None;
        odd[0].gpu_instance_id = None;
        odd[1].total_bytes = None;
        odd[1].free_bytes = None;
        odd[1].used_bytes = None;
        odd[1].memory_error = Some(Failure::new(ErrorKind::Other, "NVML_ERROR_UNKNOWN"));
        odd[2].reserved_bytes = Some(12 * MIB + 1);
        odd[3].memory_error = Some(Failure::new(ErrorKind::Other, "x"));
        odd[3].free_bytes = None;
        assert_eq!(
            mig_lines(&odd[..4]),
            vec![
                "  MIG device 0: free 54499 MiB / 71424 MiB",
                "  MIG 2c.3g.71gb GI 2: memory unknown (NVML_ERROR_UNKNOWN)",
                "  MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB (12 MiB reserved)",
                "  MIG 1g.18gb GI 9: memory unknown (x)",
            ]
        );
        assert_eq!(mig_lines(&[]), vec!["  MIG on: no MIG devices"]);
        let mut unknown = h200_mig()[3].clone();
        unknown.total_bytes = None;
        assert_eq!(
            mig_line(&unknown, true),
            "  MIG 1g.18gb GI 9 CI 0: memory unknown (not reported)"
        );
    }

    fn refused() -> MigState {
        MigState::builder()
            .index(0)
            .name(Some("NVIDIA H200".into()))
            .uuid(Some("GPU-1".into()))
            .enabled(Some(true))
            .pending(Some(true))
            .instances(h200_mig())
            .device_memory_error(Some(Failure::new(
                ErrorKind::NoPermission,
                "NVML_ERROR_NO_PERMISSION",
            )))
            .build()
    }

    #[test]
    fn refused_parent_line_then_instances() {
        assert_eq!(
            text(|w| devices(w, &[DeviceView::MigOnly(refused())])),
            format!(
                "GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (NVML_ERROR_NO_PERMISSION)\n{H200_MIG_LINES}"
            )
        );
        let mut s = refused();
        s.name = None;
        s.index = 2;
        s.device_memory_error = Some(Failure::new(
            ErrorKind::NoPermission,
            "Insufficient Permissions",
        ));
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory refused (Insufficient Permissions)"
        );
        s.device_memory_error = Some(Failure::new(ErrorKind::GpuLost, "NVML_ERROR_GPU_IS_LOST"));
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory unavailable (NVML_ERROR_GPU_IS_LOST)"
        );
        s.device_memory_error = None;
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory unavailable (reason unknown)"
        );
    }

    #[test]
    fn json_nests_instances_under_their_device() {
        let mut d = h200();
        d.mig_enabled = Some(true);
        let mut off = h200();
        off.index = 1;
        off.mig_enabled = Some(false);
        let mut third = refused();
        third.index = 2;
        third.instances = h200_mig()[4..].to_vec();
        let views = [
            DeviceView::Read {
                device: d,
                mig: Some(h200_mig()[3..4].to_vec()),
            },
            DeviceView::Read {
                device: off,
                mig: None,
            },
            DeviceView::MigOnly(third),
        ];
        let s = text(|w| devices_json(w, &views, &BTreeMap::new()));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0]["mig_enabled"], true);
        assert_eq!(v[0]["total_bytes"], 143_771 * MIB + 5);
        assert_eq!(
            v[0]["mig_instances"],
            serde_json::json!([{
                "parent_index": 0, "slot": 3, "uuid": "MIG-3", "name": null,
                "profile": "1g.18gb", "gpu_instance_id": 9, "compute_instance_id": 0,
                "total_bytes": 16384 * MIB, "free_bytes": 16375 * MIB + 7,
                "used_bytes": 9 * MIB - 7, "reserved_bytes": 0, "memory_error": null,
                "source": "nvml"
            }])
        );
        assert_eq!(v[1]["mig_enabled"], false);
        assert!(
            v[1].get("mig_instances").is_none(),
            "absent when MIG is off"
        );
        let refused = v[2].as_object().unwrap();
        let mut keys = refused.keys().cloned().collect::<Vec<_>>();
        keys.sort();
        let mut want = [
            "index",
            "name",
            "uuid",
            "total_bytes",
            "free_bytes",
            "used_bytes",
            "reserved_bytes",
            "source",
            "mig_enabled",
            "memory_error",
            "mig_instances",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        for k in ["total_bytes", "free_bytes", "used_bytes", "reserved_bytes"] {
            assert!(refused[k].is_null(), "{k} is null, not 0");
        }
        assert_eq!(refused["memory_error"], "NVML_ERROR_NO_PERMISSION");
        assert_eq!(refused["mig_instances"][0]["gpu_instance_id"], 10);
        assert_eq!(text(|w| devices_json(w, &[], &BTreeMap::new())), "[]\n");
    }
}
