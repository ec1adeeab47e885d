//! The DRM backend: device walk, memory files, and the fdinfo sweep.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::parse::{self, FDINFO_MEMORY_DRIVERS};
use crate::gpu::backend::{Backend, Presence, Scope};
use crate::gpu::pci::PciAddress;
use crate::{
    GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, GpuVendor, HypomnesisError, ProcessGpuInfo,
    Result, SourceReport, SourceState, procfs, roots,
};

/// How long one sweep's result is reused (one `hmn ps` asks for every device in turn).
const SWEEP_REUSE: Duration = Duration::from_millis(250);

/// One DRM device.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Device {
    card: String,
    /// `<sysfs>/class/drm/cardN`.
    card_dir: PathBuf,
    slot: String,
    vendor_id: u16,
    product_id: Option<u16>,
    driver: Option<String>,
}

impl Device {
    fn dev(&self) -> PathBuf {
        self.card_dir.join("device")
    }
}

fn read(path: &Path) -> std::result::Result<String, String> {
    fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
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
        let (driver, slot) = fs::read_to_string(dev.join("uevent"))
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
type Walked = std::result::Result<(Vec<Device>, Vec<String>), String>;

fn walked() -> &'static Walked {
    static WALK: OnceLock<Walked> = OnceLock::new();
    WALK.get_or_init(|| match roots::sysfs() {
        Ok(sysfs) => Ok(walk(sysfs)),
        Err(e) => Err(e.to_string()),
    })
}

/// The PCI addresses of the devices the NVIDIA sources measure, as the dispatcher said.
static NVIDIA: OnceLock<Vec<PciAddress>> = OnceLock::new();

/// The devices this backend lists: all but NVIDIA cards that the NVIDIA sources measure.
struct Devices {
    list: Vec<Device>,
    notes: Vec<String>,
    /// Why no device could be looked for (a bad sysfs root).
    error: Option<String>,
}

fn devices() -> &'static Devices {
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

fn device(index: u32) -> Result<&'static Device> {
    if let Some(e) = &devices().error {
        return Err(HypomnesisError::Drm(e.clone()));
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
fn sweep_worthwhile(list: &[Device]) -> bool {
    list.iter().any(|d| {
        d.driver
            .as_deref()
            .is_some_and(|drv| FDINFO_MEMORY_DRIVERS.contains(&drv))
    })
}

/// One sweep of every process's DRM file descriptors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Per PCI slot (lower-case), per pid: (used, shared) bytes.
    pub per_slot: HashMap<String, BTreeMap<u32, (u64, u64)>>,
    /// Pids whose fd table could not be read (other users' processes, hidepid).
    pub unreadable: usize,
    /// Pids looked at.
    pub pids: usize,
    /// fdinfo files read.
    pub fdinfo_reads: usize,
}

/// Sweep the processes under `procfs`. Public (hidden) for the benchmark suite.
#[must_use]
pub fn sweep_tree(procfs: &Path) -> Sweep {
    let mut out = Sweep::default();
    let Ok(entries) = fs::read_dir(procfs) else {
        return out;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    pids.sort_unstable();
    // (pdev, client id) already counted: dup'ed fds and children that inherited one count once,
    // for the lowest pid holding it.
    let mut clients: HashSet<(String, u64)> = HashSet::new();
    for pid in pids {
        out.pids += 1;
        let dir = procfs.join(pid.to_string());
        let fds = match fs::read_dir(dir.join("fd")) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue, // exited meanwhile
            Err(_) => {
                out.unreadable += 1;
                continue;
            }
        };
        for fd in fds.flatten() {
            // Decide by the link text, so a host's procfs mounted elsewhere works too.
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            if !target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"/dev/dri/")
            {
                continue;
            }
            out.fdinfo_reads += 1;
            let Ok(text) = fs::read_to_string(dir.join("fdinfo").join(fd.file_name())) else {
                continue;
            };
            let Ok(info) = parse::parse_fdinfo(&text) else {
                continue;
            };
            let Some(pdev) = info.pdev.clone() else {
                continue;
            };
            if let Some(id) = info.client_id
                && !clients.insert((pdev.clone(), id))
            {
                continue;
            }
            let (used, shared) = parse::client_usage(&info);
            let slot = out
                .per_slot
                .entry(pdev)
                .or_default()
                .entry(pid)
                .or_insert((0, 0));
            slot.0 = slot.0.saturating_add(used);
            slot.1 = slot.1.saturating_add(shared);
        }
    }
    out
}

/// The DRM backend.
pub(crate) struct DrmBackend {
    last: Mutex<Option<(Instant, Sweep)>>,
}

impl DrmBackend {
    pub(crate) const fn new() -> Self {
        Self {
            last: Mutex::new(None),
        }
    }

    fn sweep(&self) -> Result<Sweep> {
        let root = procfs::root()?;
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, s)) = last.as_ref()
            && at.elapsed() < SWEEP_REUSE
        {
            return Ok(s.clone());
        }
        let s = if sweep_worthwhile(&devices().list) {
            sweep_tree(root)
        } else {
            Sweep::default()
        };
        *last = Some((Instant::now(), s.clone()));
        Ok(s)
    }

    fn rows(&self, d: &Device) -> Result<BTreeMap<u32, (u64, u64)>> {
        Ok(self.sweep()?.per_slot.remove(&d.slot).unwrap_or_default())
    }
}

/// Why the backend is absent: no AMD or Intel card under the sysfs root in use.
fn no_device() -> String {
    match roots::sysfs() {
        Ok(p) => format!("no AMD or Intel DRM device under {}/class/drm", p.display()),
        Err(e) => e.to_string(),
    }
}

fn vendor(d: &Device) -> Option<GpuVendor> {
    GpuVendor::from_pci_vendor_id(d.vendor_id)
}

/// Memory of one device from its sysfs files.
fn memory(d: &Device) -> Result<(u64, u64, GpuDeviceInfo)> {
    let dev = d.dev();
    let drm = |why: String| HypomnesisError::Drm(format!("{} ({}): {why}", d.card, d.slot));
    if dev.join("mem_info_vram_total").exists() {
        let total = read_u64(&dev.join("mem_info_vram_total")).map_err(drm)?;
        let used = read_u64(&dev.join("mem_info_vram_used")).map_err(drm)?;
        let opt = |f: &str| read_u64(&dev.join(f)).ok();
        return Ok((
            total,
            used,
            GpuDeviceInfo {
                gtt_total_bytes: opt("mem_info_gtt_total"),
                gtt_used_bytes: opt("mem_info_gtt_used"),
                visible_vram_total_bytes: opt("mem_info_vis_vram_total"),
                visible_vram_used_bytes: opt("mem_info_vis_vram_used"),
                ..GpuDeviceInfo::blank()
            },
        ));
    }
    // Intel's out-of-tree i915 publishes local memory on the card directory.
    if d.card_dir.join("lmem_total_bytes").exists() {
        let total = read_u64(&d.card_dir.join("lmem_total_bytes")).map_err(drm)?;
        let avail = read_u64(&d.card_dir.join("lmem_avail_bytes")).map_err(drm)?;
        return Ok((total, total.saturating_sub(avail), GpuDeviceInfo::blank()));
    }
    let driver = d.driver.as_deref().unwrap_or("unknown driver");
    Err(drm(match driver {
        "i915" | "xe" => format!(
            "{driver} does not publish device memory in sysfs on this kernel (only through an ioctl that needs CAP_PERFMON): total unknown"
        ),
        _ => format!("{driver} publishes no memory figures in sysfs: total unknown"),
    }))
}

impl Backend for DrmBackend {
    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Drm
    }

    fn scope(&self) -> Scope {
        Scope::Others
    }

    fn needs_nvidia_devices(&self) -> bool {
        walked()
            .as_ref()
            .is_ok_and(|(all, _)| all.iter().any(|d| d.vendor_id == 0x10DE))
    }

    fn nvidia_devices(&self, addresses: &[PciAddress]) {
        let _ = NVIDIA.set(addresses.to_vec());
    }

    fn presence(&self) -> Presence {
        let devs = devices();
        if devs.list.is_empty() && devs.error.is_none() {
            Presence::Absent(no_device())
        } else {
            Presence::Present
        }
    }

    fn device_count(&self) -> Result<u32> {
        let devs = devices();
        if let Some(e) = &devs.error {
            return Err(HypomnesisError::Drm(e.clone()));
        }
        Ok(u32::try_from(devs.list.len()).unwrap_or(u32::MAX))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        let d = device(index)?;
        let (total, used, extra) = memory(d)?;
        let used = used.min(total);
        let name = fs::read_to_string(d.dev().join("product_name"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Ok(GpuDeviceInfo {
            index,
            name,
            total_bytes: total,
            free_bytes: total - used,
            used_bytes: used,
            pci_bus_id: Some(d.slot.clone()),
            vendor: vendor(d),
            source: GpuQuerySource::Drm,
            ..extra
        })
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let d = device(index)?;
        let me = std::process::id();
        let root = procfs::root()?;
        let used = self
            .rows(d)?
            .into_iter()
            .find(|(pid, _)| procfs::place(root, *pid).pid() == me)
            .map_or(0, |(_, (u, _))| u);
        // The sweep reads this process's own fd table, so absence means no memory here.
        Ok(ProcessGpuInfo {
            used_bytes: used,
            is_per_process: true,
            source: GpuQuerySource::Drm,
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        let d = device(index)?;
        let root = procfs::root()?;
        Ok(self
            .rows(d)?
            .into_iter()
            .filter(|(_, (u, s))| *u > 0 || *s > 0)
            .map(|(pid, (used, shared))| {
                let view = procfs::place(root, pid);
                GpuProcessEntry {
                    pid: view.pid(),
                    name: procfs::comm(root, pid),
                    used_bytes: used,
                    source: GpuQuerySource::Drm,
                    device_index: index,
                    shared_used_bytes: shared,
                    host_pid: view.host_pid(),
                    outside_pid_namespace: view.is_outside(),
                    ..GpuProcessEntry::blank()
                }
            })
            .collect())
    }

    fn report(&self) -> SourceReport {
        let devs = devices();
        if let Some(e) = &devs.error {
            return SourceReport {
                source: GpuQuerySource::Drm,
                state: SourceState::Failed(e.clone()),
                details: Vec::new(),
            };
        }
        let mut details = match roots::sysfs() {
            Ok(p) => vec![("sysfs".to_string(), p.display().to_string())],
            Err(_) => Vec::new(),
        };
        for (i, d) in devs.list.iter().enumerate() {
            let mem = match memory(d) {
                Ok((t, u, _)) => format!("{} MiB of {} MiB used", u >> 20, t >> 20),
                Err(e) => e.to_string(),
            };
            details.push((
                format!("device {i}"),
                format!(
                    "{} {} (PCI {:04X}:{}, driver {}): {mem}",
                    d.card,
                    d.slot,
                    d.vendor_id,
                    d.product_id.map_or("?".into(), |p| format!("{p:04X}")),
                    d.driver.as_deref().unwrap_or("unknown")
                ),
            ));
        }
        for n in &devs.notes {
            details.push(("skipped".into(), n.clone()));
        }
        if !devs.list.is_empty() {
            if sweep_worthwhile(&devs.list) {
                let s = match self.sweep() {
                    Ok(s) => s,
                    Err(e) => {
                        return SourceReport {
                            source: GpuQuerySource::Drm,
                            state: SourceState::Failed(e.to_string()),
                            details,
                        };
                    }
                };
                details.push((
                    "processes swept".into(),
                    format!("{} ({} DRM fdinfo files read)", s.pids, s.fdinfo_reads),
                ));
                if s.unreadable > 0 {
                    details.push((
                        "processes not readable".into(),
                        format!("{} (other users' processes: their GPU memory is not counted; run as root to see them)", s.unreadable),
                    ));
                }
            } else {
                details.push((
                    "process sweep".into(),
                    "skipped: no device's driver publishes fdinfo memory".into(),
                ));
            }
        }
        let state = if devs.list.is_empty() {
            SourceState::Absent(no_device())
        } else {
            SourceState::Answered
        };
        SourceReport {
            source: GpuQuerySource::Drm,
            state,
            details,
        }
    }
}
