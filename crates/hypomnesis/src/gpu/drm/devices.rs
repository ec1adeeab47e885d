//! The DRM devices: the walk of `<sysfs>/class/drm` (every card, NVIDIA ones too), the list
//! this backend answers for (NVIDIA cards the NVIDIA sources measure left out), and each
//! device's memory from its sysfs files.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::parse::{self, FDINFO_MEMORY_DRIVERS};
use crate::error::Failure;
use crate::gpu::pci::PciAddress;
use crate::host::roots;
use crate::{
    error::ErrorKind, error::HypomnesisError, error::Result, types::GpuDeviceInfo,
    types::GpuQuerySource, types::GpuVendor, types::MemoryModel,
};

/// One DRM device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Device {
    pub(super) card: String,
    /// `<sysfs>/class/drm/cardN`.
    pub(super) card_dir: PathBuf,
    pub(super) slot: String,
    pub(super) vendor_id: u16,
    pub(super) product_id: Option<u16>,
    pub(super) driver: Option<String>,
}

impl Device {
    pub(super) fn dev(&self) -> PathBuf {
        self.card_dir.join("device")
    }
}

fn read(path: &Path) -> std::result::Result<String, String> {
    crate::host::file::read_capped(path, crate::host::file::SYSFS)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn read_u64(path: &Path) -> std::result::Result<u64, String> {
    parse::parse_sysfs_u64(&read(path)?).map_err(|why| format!("{}: {why}", path.display()))
}

/// Every `cardN` under `<sysfs>/class/drm`, by PCI slot; notes for what was skipped.
fn walk(sysfs: &Path) -> (Vec<Device>, Vec<String>) {
    let mut devices = Vec::new();
    let mut notes = Vec::new();
    let class = sysfs.join("class").join("drm");
    let entries = match fs::read_dir(&class) {
        Ok(e) => e,
        Err(e) => {
            notes.push(format!("{}: {e}", class.display()));
            return (devices, notes);
        }
    };
    let mut seen = HashSet::new();
    for entry in entries.flatten() {
        let card = entry.file_name().to_string_lossy().into_owned();
        let is_card = card
            .strip_prefix("card")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !is_card {
            continue;
        }
        let card_dir = class.join(&card);
        let dev = card_dir.join("device");
        let vendor = match read(&dev.join("vendor")).and_then(|t| parse::parse_pci_id(&t)) {
            Ok(v) => v,
            Err(why) => {
                notes.push(format!("{card}: {why}"));
                continue;
            }
        };
        let (driver, slot) =
            crate::host::file::read_capped(&dev.join("uevent"), crate::host::file::SYSFS)
                .map(|t| parse::parse_uevent(&t))
                .unwrap_or_default();
        let slot = slot.or_else(|| {
            fs::read_link(&dev).ok().and_then(|l| {
                l.file_name()
                    .map(|n| n.to_string_lossy().to_ascii_lowercase())
            })
        });
        let Some(slot) = slot else {
            notes.push(format!("{card}: no PCI slot (not a PCI device?)"));
            continue;
        };
        if !seen.insert(slot.clone()) {
            continue;
        }
        let product_id = read(&dev.join("device"))
            .ok()
            .and_then(|t| parse::parse_pci_id(&t).ok());
        devices.push(Device {
            card,
            card_dir,
            slot,
            vendor_id: vendor,
            product_id,
            driver,
        });
    }
    devices.sort_by_key(|d| {
        let a = PciAddress::parse(&d.slot);
        (a.is_none(), a)
    });
    (devices, notes)
}

/// The walk of `<sysfs>/class/drm`, every card (NVIDIA ones too), or why there is none.
type Walked = std::result::Result<(Vec<Device>, Vec<String>), Failure>;

pub(super) fn walked() -> &'static Walked {
    static WALK: OnceLock<Walked> = OnceLock::new();
    WALK.get_or_init(|| match roots::sysfs() {
        Ok(sysfs) => Ok(walk(sysfs)),
        Err(e) => Err(Failure::new(e.kind(), e.to_string())),
    })
}

/// The PCI addresses of the devices the NVIDIA sources measure, as the dispatcher said.
pub(super) static NVIDIA: OnceLock<Vec<PciAddress>> = OnceLock::new();

/// The devices this backend lists: all but NVIDIA cards that the NVIDIA sources measure.
pub(super) struct Devices {
    pub(super) list: Vec<Device>,
    pub(super) notes: Vec<String>,
    /// Why no device could be looked for (a bad sysfs root).
    pub(super) error: Option<Failure>,
}

pub(super) fn devices() -> &'static Devices {
    static LIST: OnceLock<Devices> = OnceLock::new();
    LIST.get_or_init(|| {
        let (all, notes) = match walked() {
            Ok(w) => w,
            Err(e) => {
                return Devices {
                    list: Vec::new(),
                    notes: Vec::new(),
                    error: Some(e.clone()),
                };
            }
        };
        let nvidia = NVIDIA.get().map_or(&[][..], Vec::as_slice);
        let mut notes = notes.clone();
        let mut list = Vec::new();
        for d in all.iter().cloned() {
            if d.vendor_id == 0x10DE
                && PciAddress::parse(&d.slot).is_some_and(|a| nvidia.contains(&a))
            {
                notes.push(format!(
                    "{} ({}): NVIDIA, measured by NVML/nvidia-smi",
                    d.card, d.slot
                ));
                continue;
            }
            list.push(d);
        }
        Devices {
            list,
            notes,
            error: None,
        }
    })
}

pub(super) fn device(index: u32) -> Result<&'static Device> {
    if let Some(e) = &devices().error {
        return Err(HypomnesisError::drm(e.kind, e.message.clone()));
    }
    let list = &devices().list;
    usize::try_from(index).ok().and_then(|i| list.get(i)).ok_or(
        HypomnesisError::DeviceIndexOutOfRange {
            index,
            count: u32::try_from(list.len()).unwrap_or(u32::MAX),
        },
    )
}

/// Whether any listed device's driver publishes fdinfo memory statistics.
pub(super) fn sweep_worthwhile(list: &[Device]) -> bool {
    list.iter().any(|d| {
        d.driver
            .as_deref()
            .is_some_and(|drv| FDINFO_MEMORY_DRIVERS.contains(&drv))
    })
}

/// Why the backend is absent: no AMD or Intel card under the sysfs root in use.
pub(super) fn no_device() -> String {
    match roots::sysfs() {
        Ok(p) => format!("no AMD or Intel DRM device under {}/class/drm", p.display()),
        Err(e) => e.to_string(),
    }
}

pub(super) fn vendor(d: &Device) -> Option<GpuVendor> {
    GpuVendor::from_pci_vendor_id(d.vendor_id)
}

/// Memory of one device from its sysfs files.
pub(super) fn memory(d: &Device) -> Result<(u64, u64, GpuDeviceInfo)> {
    let dev = d.dev();
    let drm =
        |kind, why: String| HypomnesisError::drm(kind, format!("{} ({}): {why}", d.card, d.slot));
    let unreadable = |why: String| drm(ErrorKind::Other, why);
    if dev.join("mem_info_vram_total").exists() {
        let total = read_u64(&dev.join("mem_info_vram_total")).map_err(unreadable)?;
        let used = read_u64(&dev.join("mem_info_vram_used")).map_err(unreadable)?;
        let opt = |f: &str| read_u64(&dev.join(f)).ok();
        let (gtt_total, gtt_used) = (opt("mem_info_gtt_total"), opt("mem_info_gtt_used"));
        let (memory_model, memory_model_evidence) = super::model::amdgpu(&dev, total, gtt_total);
        // A unified device's figures are its pool's: the carve-out and GTT together.
        let (total, used) = match (memory_model, gtt_total, gtt_used) {
            (Some(MemoryModel::Unified), Some(gt), Some(gu)) => super::model::pool(
                (total, used),
                (gt, gu),
                crate::host::memory::host::host_memory()
                    .ok()
                    .map(|h| h.total_bytes),
            ),
            _ => (total, used),
        };
        return Ok((
            total,
            used,
            GpuDeviceInfo {
                gtt_total_bytes: gtt_total,
                gtt_used_bytes: gtt_used,
                visible_vram_total_bytes: opt("mem_info_vis_vram_total"),
                visible_vram_used_bytes: opt("mem_info_vis_vram_used"),
                memory_model,
                memory_model_evidence,
                ..GpuDeviceInfo::blank(GpuQuerySource::Drm)
            },
        ));
    }
    // Intel's out-of-tree i915 publishes local memory on the card directory.
    if d.card_dir.join("lmem_total_bytes").exists() {
        let total = read_u64(&d.card_dir.join("lmem_total_bytes")).map_err(unreadable)?;
        let avail = read_u64(&d.card_dir.join("lmem_avail_bytes")).map_err(unreadable)?;
        return Ok((
            total,
            total.saturating_sub(avail),
            GpuDeviceInfo::blank(GpuQuerySource::Drm),
        ));
    }
    let driver = d.driver.as_deref().unwrap_or("unknown driver");
    Err(drm(
        ErrorKind::NotSupported,
        match driver {
            "i915" | "xe" => format!(
                "{driver} {} in sysfs on this kernel (only through an ioctl that needs CAP_PERFMON): total unknown",
                crate::error::NO_MEMORY_FIGURES
            ),
            _ => format!(
                "{driver} {} in sysfs: total unknown",
                crate::error::NO_MEMORY_FIGURES
            ),
        },
    ))
}
