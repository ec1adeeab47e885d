//! Pure MIG helpers shared by the backends and the public API: ordering, profiles, and memory
//! per GPU instance (compiled and tested on every OS).
// A build without NVIDIA backends uses only the public grouping function.
#![cfg_attr(
    not(any(feature = "nvml", feature = "nvidia-smi-fallback")),
    allow(dead_code)
)]

use crate::{types::MigGpuInstance, types::MigInstance};

/// Sorts MIG devices by GPU instance id, then compute instance id, then slot (unknown ids last).
pub(crate) fn sort_instances(list: &mut [MigInstance]) {
    list.sort_by_key(|m| {
        (
            m.parent_index,
            m.gpu_instance_id.is_none(),
            m.gpu_instance_id,
            m.compute_instance_id.is_none(),
            m.compute_instance_id,
            m.slot,
        )
    });
}

/// The profile in a MIG device name: `NVIDIA H200 MIG 1c.3g.71gb` → `1c.3g.71gb`.
#[cfg_attr(not(feature = "nvml"), allow(dead_code))] // NVML names carry the profile
pub(crate) fn profile_from_name(name: &str) -> Option<String> {
    let (_, rest) = name.rsplit_once("MIG ")?;
    let p = rest.trim();
    (!p.is_empty() && !p.contains(char::is_whitespace)).then(|| p.to_string())
}

/// The GPU instances behind a list of MIG devices, each once, with its memory counted once
/// however many compute instances share it (they all report the GPU instance's figures).
///
/// Groups are keyed by (GPU index, GPU instance id) and ordered by GPU index, then GPU instance
/// id; MIG devices without a GPU instance id form a group each. Add up these figures, not the
/// [`MigInstance`] ones, for a total over a GPU's instances.
#[must_use]
pub fn mig_gpu_instances(instances: &[MigInstance]) -> Vec<MigGpuInstance> {
    let mut out: Vec<MigGpuInstance> = Vec::new();
    for m in instances {
        let found = m.gpu_instance_id.and_then(|gi| {
            out.iter()
                .position(|g| g.parent_index == m.parent_index && g.gpu_instance_id == Some(gi))
        });
        let at = found.unwrap_or_else(|| {
            out.push(MigGpuInstance {
                parent_index: m.parent_index,
                gpu_instance_id: m.gpu_instance_id,
                profile: None,
                slots: Vec::new(),
                compute_instance_ids: Vec::new(),
                total_bytes: None,
                free_bytes: None,
                used_bytes: None,
                reserved_bytes: None,
            });
            out.len() - 1
        });
        let Some(g) = out.get_mut(at) else { continue };
        g.slots.push(m.slot);
        g.compute_instance_ids.extend(m.compute_instance_id);
        if g.profile.is_none() {
            g.profile = m.gpu_instance_profile().map(str::to_string);
        }
        // The first compute instance with figures gives them (they share the GPU instance's).
        if g.total_bytes.is_none() {
            g.total_bytes = m.total_bytes;
            g.free_bytes = m.free_bytes;
            g.used_bytes = m.used_bytes;
            g.reserved_bytes = m.reserved_bytes;
        }
    }
    out.sort_by_key(|g| {
        (
            g.parent_index,
            g.gpu_instance_id.is_none(),
            g.gpu_instance_id,
            g.slots.first().copied(),
        )
    });
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::types::GpuQuerySource;

    use crate::types::MIB;

    fn inst(
        slot: u32,
        gi: Option<u32>,
        ci: Option<u32>,
        profile: &str,
        total: u64,
        used: u64,
    ) -> MigInstance {
        let mut m = MigInstance::blank(0, slot, GpuQuerySource::Nvml);
        m.gpu_instance_id = gi;
        m.compute_instance_id = ci;
        m.profile = Some(profile.to_string());
        m.total_bytes = Some(total * MIB);
        m.used_bytes = Some(used * MIB);
        m.free_bytes = Some((total - used) * MIB);
        m
    }

    /// The H200 of the issue: GI 2 split into CI 0 and CI 1 (same figures), then 2g, 1g, 1g.
    fn h200() -> Vec<MigInstance> {
        vec![
            inst(4, Some(10), Some(0), "1g.18gb", 16384, 9),
            inst(1, Some(2), Some(1), "2c.3g.71gb", 71424, 16925),
            inst(2, Some(3), Some(0), "2g.35gb", 33280, 17),
            inst(0, Some(2), Some(0), "1c.3g.71gb", 71424, 16925),
            inst(3, Some(9), Some(0), "1g.18gb", 16384, 9),
        ]
    }

    #[test]
    fn shared_gpu_instance_memory_is_counted_once() {
        let groups = mig_gpu_instances(&h200());
        let ids: Vec<_> = groups.iter().map(|g| g.gpu_instance_id).collect();
        assert_eq!(ids, vec![Some(2), Some(3), Some(9), Some(10)]);
        assert_eq!(groups[0].slots, vec![1, 0]);
        assert_eq!(groups[0].compute_instance_ids, vec![1, 0]);
        assert_eq!(groups[0].profile.as_deref(), Some("3g.71gb"));
        assert_eq!(groups[0].total_bytes, Some(71424 * MIB));
        let total: u64 = groups.iter().filter_map(|g| g.total_bytes).sum();
        assert_eq!(total, (71424 + 33280 + 16384 + 16384) * MIB);
        let used: u64 = groups.iter().filter_map(|g| g.used_bytes).sum();
        assert_eq!(used, (16925 + 17 + 9 + 9) * MIB);
    }

    #[test]
    fn unknown_ids_and_memory() {
        let mut a = inst(0, None, None, "1g.10gb", 9984, 9);
        let b = inst(1, None, None, "1g.10gb", 9984, 9);
        let groups = mig_gpu_instances(&[a.clone(), b]);
        assert_eq!(groups.len(), 2, "no id: never merged");
        a.gpu_instance_id = Some(5);
        a.total_bytes = None;
        a.free_bytes = None;
        a.used_bytes = None;
        let mut c = inst(1, Some(5), Some(1), "1c.2g.20gb", 20096, 17);
        c.parent_index = 0;
        let groups = mig_gpu_instances(&[a, c]);
        assert_eq!(groups.len(), 1);
        assert_eq!(
            groups[0].total_bytes,
            Some(20096 * MIB),
            "taken from the CI that had figures"
        );
        let mut other_gpu = inst(0, Some(5), Some(0), "1g.10gb", 1, 0);
        other_gpu.parent_index = 1;
        assert_eq!(
            mig_gpu_instances(&[other_gpu, inst(0, Some(5), Some(0), "1g.10gb", 1, 0)]).len(),
            2
        );
        assert!(mig_gpu_instances(&[]).is_empty());
    }

    #[test]
    fn a_compute_instance_without_figures_does_not_erase_its_gpu_instances() {
        let first = inst(0, Some(2), Some(0), "1c.3g.71gb", 71_424, 100);
        let mut second = inst(1, Some(2), Some(1), "2c.3g.71gb", 71_424, 100);
        second.total_bytes = None;
        second.free_bytes = None;
        second.used_bytes = None;
        second.memory_error = Some(crate::error::Failure::new(
            crate::error::ErrorKind::NoPermission,
            "NVML_ERROR_NO_PERMISSION",
        ));
        for list in [vec![first.clone(), second.clone()], vec![second, first]] {
            let groups = mig_gpu_instances(&list);
            assert_eq!(groups.len(), 1);
            assert_eq!(
                (groups[0].total_bytes, groups[0].used_bytes),
                (Some(71_424 * MIB), Some(100 * MIB)),
                "the figures of the compute instance that has them, in either order"
            );
        }
    }

    #[test]
    fn sorting_and_profiles() {
        let mut list = h200();
        sort_instances(&mut list);
        let order: Vec<_> = list.iter().map(|m| m.slot).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert_eq!(
            profile_from_name("NVIDIA H200 MIG 1c.3g.71gb").as_deref(),
            Some("1c.3g.71gb")
        );
        assert_eq!(
            profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb").as_deref(),
            Some("1g.5gb")
        );
        assert_eq!(profile_from_name("NVIDIA H200"), None);
        assert_eq!(profile_from_name("NVIDIA H200 MIG "), None);
        let m = |p: &str| {
            let mut m = MigInstance::blank(0, 0, GpuQuerySource::Nvml);
            m.profile = Some(p.into());
            m.gpu_instance_profile().map(str::to_string)
        };
        assert_eq!(m("1c.3g.71gb").as_deref(), Some("3g.71gb"));
        assert_eq!(m("2g.35gb").as_deref(), Some("2g.35gb"));
        assert_eq!(m("c.3g").as_deref(), Some("c.3g"));
        assert_eq!(
            MigInstance::blank(0, 0, GpuQuerySource::Nvml).gpu_instance_profile(),
            None
        );
    }
}
