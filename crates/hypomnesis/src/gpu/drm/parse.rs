//! Pure parsers for Linux DRM sources: `/proc/<pid>/fdinfo/<fd>` of DRM clients and the sysfs
//! files of a DRM device (compiled and tested on every OS).
#![cfg_attr(not(all(target_os = "linux", feature = "drm")), allow(dead_code))]

use std::collections::BTreeMap;

use crate::error::clip;

/// Memory statistics of one region of one DRM client, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Region {
    /// `drm-total-<region>`: every buffer the client created there, resident or not.
    pub total: Option<u64>,
    /// `drm-resident-<region>`.
    pub resident: Option<u64>,
    /// Legacy `drm-memory-<region>` (= resident; amdgpu prints it).
    pub legacy: Option<u64>,
}

impl Region {
    /// What the region holds: resident memory when the kernel says, else the legacy resident
    /// figure, else the total.
    #[must_use]
    pub fn bytes(&self) -> Option<u64> {
        self.resident.or(self.legacy).or(self.total)
    }
}

/// One DRM client's fdinfo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FdInfo {
    /// `drm-driver` (mandatory in DRM fdinfo).
    pub driver: String,
    /// `drm-pdev` (or amdgpu's pre-5.19 `pdev`): the PCI slot, lower-case.
    pub pdev: Option<String>,
    /// `drm-client-id`.
    pub client_id: Option<u64>,
    /// Regions by name (`vram`, `gtt`, `local0`, `system0`, `vram0`, `memory`, …).
    pub regions: BTreeMap<String, Region>,
    /// Lines of a known key that did not make sense (each `key: why`), left out; the client's
    /// other figures stand.
    pub bad_lines: Vec<String>,
}

/// A size as the kernel prints it: `<uint>` with no unit (bytes), `KiB`, `MiB` (and `GiB`,
/// `kB` for good measure).
pub fn parse_size(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let (number, unit) = match v.split_once(char::is_whitespace) {
        Some((n, u)) => (n, u.trim()),
        None => (v, ""),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("size {:?} is not a number", clip(v)))?;
    let scale: u64 = match unit {
        "" => 1,
        "KiB" | "kB" | "KB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "size {:?} has an unknown unit {:?}",
                clip(v),
                clip(other)
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("size {:?} overflows", clip(v)))
}

/// Parse DRM fdinfo. `Err` when this is not a DRM client's fdinfo (no `drm-driver`); a
/// malformed memory or client-id line is left out and named in `bad_lines`.
pub fn parse_fdinfo(text: &str) -> Result<FdInfo, String> {
    let mut info = FdInfo::default();
    let mut driver = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        match key {
            "drm-driver" => driver = Some(value.to_string()),
            "drm-pdev" | "pdev" => info.pdev = Some(value.to_ascii_lowercase()),
            "drm-client-id" => match value.parse() {
                Ok(id) => info.client_id = Some(id),
                Err(_) => info
                    .bad_lines
                    .push(format!("drm-client-id {:?} is not a number", clip(value))),
            },
            _ => {
                let (region, set): (&str, fn(&mut Region, u64)) =
                    if let Some(r) = key.strip_prefix("drm-total-") {
                        (r, |e, b| e.total = Some(b))
                    } else if let Some(r) = key.strip_prefix("drm-resident-") {
                        (r, |e, b| e.resident = Some(b))
                    } else if let Some(r) = key.strip_prefix("drm-memory-") {
                        (r, |e, b| e.legacy = Some(b))
                    } else {
                        continue;
                    };
                match parse_size(value) {
                    Ok(bytes) => set(info.regions.entry(region.to_string()).or_default(), bytes),
                    Err(why) => info.bad_lines.push(format!("{key}: {why}")),
                }
            }
        }
    }
    info.driver = driver.ok_or("no drm-driver line: not a DRM client")?;
    Ok(info)
}

/// What a memory region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionKind {
    /// Device-local memory (VRAM): amdgpu `vram`, i915 `local<N>`, xe `vram<N>`.
    Local,
    /// System memory the GPU uses: amdgpu `gtt`, i915 `system<N>`, xe `system`/`gtt`, and the
    /// `memory` region of simple drivers.
    System,
    /// Anything else (stolen memory, amdgpu `cpu`, `gds`, `gws`, `oa`, `doorbell`…).
    Other,
}

/// Classify a region name.
#[must_use]
pub fn region_kind(region: &str) -> RegionKind {
    let base = region.trim_end_matches(|c: char| c.is_ascii_digit());
    match base {
        "vram" | "local" => RegionKind::Local,
        "gtt" | "system" | "memory" => RegionKind::System,
        _ => RegionKind::Other,
    }
}

/// (`used_bytes`, `shared_used_bytes`) of one client: device-local regions give used, system
/// regions shared; a client of an integrated GPU (no local region at all) reports its system
/// memory as used.
#[must_use]
pub fn client_usage(info: &FdInfo) -> (u64, u64) {
    let mut local: Option<u64> = None;
    let mut system: Option<u64> = None;
    for (name, r) in &info.regions {
        let Some(b) = r.bytes() else { continue };
        let slot = match region_kind(name) {
            RegionKind::Local => &mut local,
            RegionKind::System => &mut system,
            RegionKind::Other => continue,
        };
        *slot = Some(slot.unwrap_or(0).saturating_add(b));
    }
    match local {
        Some(l) => (l, system.unwrap_or(0)),
        None => (system.unwrap_or(0), 0),
    }
}

/// A decimal sysfs value (`mem_info_vram_total`, …).
pub fn parse_sysfs_u64(text: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse()
        .map_err(|_| format!("{:?} is not a decimal number", clip(t)))
}

/// A PCI id file (`vendor`, `device`): `0x1002`.
pub fn parse_pci_id(text: &str) -> Result<u16, String> {
    let t = text.trim();
    let hex = t
        .strip_prefix("0x")
        .ok_or_else(|| format!("{:?} is not a 0x-prefixed PCI id", clip(t)))?;
    u16::from_str_radix(hex, 16).map_err(|_| format!("{:?} is not a 16-bit hex PCI id", clip(t)))
}

/// `DRIVER=` and `PCI_SLOT_NAME=` of a device's `uevent`.
#[must_use]
pub fn parse_uevent(text: &str) -> (Option<String>, Option<String>) {
    let get = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    (
        get("DRIVER="),
        get("PCI_SLOT_NAME=").map(|s| s.to_ascii_lowercase()),
    )
}

/// Drivers whose fdinfo carries memory statistics: a host whose DRM devices all use other
/// drivers (NVIDIA's, nouveau) never has its processes swept.
pub const FDINFO_MEMORY_DRIVERS: &[&str] = &[
    "amdgpu",
    "i915",
    "xe",
    "msm",
    "panfrost",
    "panthor",
    "v3d",
    "etnaviv",
    "lima",
    "virtio_gpu",
];

#[cfg(test)]
mod tests {
    use super::*;

    const AMD_NEW: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t27\nino:\t1073\ndrm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:03:00.0\npasid:\t32772\ndrm-total-vram:\t524288 KiB\ndrm-shared-vram:\t0\ndrm-active-vram:\t0\ndrm-resident-vram:\t524288 KiB\ndrm-purgeable-vram:\t0\ndrm-total-gtt:\t16384 KiB\ndrm-resident-gtt:\t16384 KiB\ndrm-total-cpu:\t0\ndrm-memory-vram:\t524288 KiB\ndrm-memory-gtt: \t16384 KiB\ndrm-memory-cpu: \t0 KiB\namd-evicted-vram:\t0 KiB\ndrm-engine-gfx:\t1234 ns\n";

    #[test]
    fn amdgpu_new_and_legacy_keys() {
        let f = parse_fdinfo(AMD_NEW).unwrap();
        assert_eq!(f.driver, "amdgpu");
        assert_eq!(f.pdev.as_deref(), Some("0000:03:00.0"));
        assert_eq!(f.client_id, Some(42));
        assert_eq!(f.regions["vram"].bytes(), Some(512 << 20));
        assert_eq!(
            f.regions["gtt"],
            Region {
                total: Some(16 << 20),
                resident: Some(16 << 20),
                legacy: Some(16 << 20)
            }
        );
        let one_each = "drm-driver: x\ndrm-total-a: 1\ndrm-resident-b: 2\ndrm-memory-c: 3\n";
        let g = parse_fdinfo(one_each).unwrap();
        let only = |total, resident, legacy| Region {
            total,
            resident,
            legacy,
        };
        assert_eq!(g.regions["a"], only(Some(1), None, None));
        assert_eq!(g.regions["b"], only(None, Some(2), None));
        assert_eq!(g.regions["c"], only(None, None, Some(3)));
        assert_eq!(g.regions.len(), 3);
        assert_eq!(client_usage(&f), (512 << 20, 16 << 20));
        let legacy = "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t7\ndrm-memory-vram:\t2048 KiB\ndrm-memory-gtt: \t1024 KiB\ndrm-memory-cpu: \t512 KiB\n";
        assert_eq!(
            client_usage(&parse_fdinfo(legacy).unwrap()),
            (2 << 20, 1 << 20),
            "cpu is not counted"
        );
    }

    #[test]
    fn intel_regions() {
        let i915 = "drm-driver:\ti915\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t3\ndrm-total-system0:\t8 MiB\ndrm-resident-system0:\t6 MiB\ndrm-total-stolen-system0:\t0\n";
        let f = parse_fdinfo(i915).unwrap();
        assert_eq!(
            client_usage(&f),
            (6 << 20, 0),
            "an iGPU reports its system region as used"
        );
        let dg2 = "drm-driver:\ti915\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t9\ndrm-total-local0:\t1073741824\ndrm-resident-local0:\t1073741824\ndrm-total-system0:\t4096\n";
        assert_eq!(client_usage(&parse_fdinfo(dg2).unwrap()), (1 << 30, 4096));
        let xe = "drm-driver:\txe\ndrm-client-id:\t11\ndrm-pdev:\t0000:03:00.0\ndrm-total-system:\t0\ndrm-total-gtt:\t12 KiB\ndrm-resident-gtt:\t12 KiB\ndrm-total-vram0:\t24 MiB\ndrm-resident-vram0:\t20 MiB\ndrm-total-stolen:\t0\n";
        assert_eq!(
            client_usage(&parse_fdinfo(xe).unwrap()),
            (20 << 20, 12 << 10)
        );
    }

    #[test]
    fn sizes_and_bad_input() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("12 KiB"), Ok(12 << 10));
        assert_eq!(parse_size("3 MiB"), Ok(3 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("5 kB"), Ok(5 << 10));
        assert!(parse_size("3 TiB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("x KiB").unwrap_err().contains("not a number"));
        assert!(
            parse_size(&format!("{} MiB", u64::MAX))
                .unwrap_err()
                .contains("overflows")
        );
        assert!(
            parse_fdinfo("pos:\t0\nflags:\t02\n")
                .unwrap_err()
                .contains("not a DRM client")
        );
        let bad = parse_fdinfo("drm-driver: amdgpu\ndrm-total-vram: lots\ndrm-resident-vram: 4 KiB\ndrm-memory-cpu: 7 XiB\n").unwrap();
        assert_eq!(
            bad.regions["vram"].bytes(),
            Some(4096),
            "the good fields stand"
        );
        assert!(!bad.regions.contains_key("cpu"));
        assert_eq!(bad.bad_lines.len(), 2, "{:?}", bad.bad_lines);
        assert!(
            bad.bad_lines[0].starts_with("drm-total-vram: "),
            "{:?}",
            bad.bad_lines
        );
        let bad = parse_fdinfo("drm-driver: x\ndrm-client-id: -1\n").unwrap();
        assert_eq!((bad.client_id, bad.bad_lines.len()), (None, 1));
        assert_eq!(
            parse_fdinfo("drm-driver:\tnouveau\n").map(|f| client_usage(&f)),
            Ok((0, 0))
        );
    }

    #[test]
    fn sysfs_values() {
        assert_eq!(parse_sysfs_u64("17163091968\n"), Ok(17_163_091_968));
        assert!(parse_sysfs_u64("").is_err());
        assert_eq!(parse_pci_id("0x1002\n"), Ok(0x1002));
        assert!(parse_pci_id("1002").is_err());
        assert!(parse_pci_id("0x10020").is_err());
        assert_eq!(
            parse_uevent("DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_SLOT_NAME=0000:03:00.0\n"),
            (Some("amdgpu".into()), Some("0000:03:00.0".into()))
        );
        assert_eq!(parse_uevent(""), (None, None));
        assert_eq!(region_kind("vram0"), RegionKind::Local);
        assert_eq!(region_kind("local1"), RegionKind::Local);
        assert_eq!(region_kind("stolen-local0"), RegionKind::Other);
        assert_eq!(region_kind("cpu"), RegionKind::Other);
        assert_eq!(region_kind("memory"), RegionKind::System);
    }
}
