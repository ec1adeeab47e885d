//! Windows adapters through DXGI, and process listings through PDH.
//!
//! - [`DxgiBackend`] walks the DXGI adapters (skipping Microsoft's Basic Render Driver and
//!   software adapters). Its NVIDIA view lists NVIDIA adapters in NVML's order (matched by PCI
//!   address) and answers for this process's usage (`QueryVideoMemoryInfo`, which NVML cannot
//!   give under WDDM); its other view adds the other vendors' adapters after the NVIDIA ones.
//!   Device-wide usage comes from PDH's `GPU Adapter Memory` counters.
//! - [`PdhBackend`] lists the processes holding memory on an NVIDIA adapter from
//!   `\GPU Process Memory(*)\Dedicated Usage` and `Shared Usage`.

mod ffi;

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use ffi::AdapterDesc;

use super::backend::{Backend, Op, Presence, Scope};
use super::pci::PciAddress;
use super::winparse::{self, AdapterKind, NameLookup};
use crate::{
    error::HypomnesisError, error::Result, types::GpuDeviceInfo, types::GpuProcessEntry,
    types::GpuQuerySource, types::GpuVendor, types::ProcessGpuInfo, types::Residency,
    types::SourceReport, types::SourceState,
};

const DEDICATED: &str = r"\GPU Process Memory(*)\Dedicated Usage";
const SHARED: &str = r"\GPU Process Memory(*)\Shared Usage";
const ADAPTER_DEDICATED: &str = r"\GPU Adapter Memory(*)\Dedicated Usage";
const ADAPTER_SHARED: &str = r"\GPU Adapter Memory(*)\Shared Usage";
use crate::types::MIB;

/// The PCI addresses of the NVIDIA devices in NVML's order, as the dispatcher said.
static NVIDIA_ORDER: OnceLock<Vec<PciAddress>> = OnceLock::new();

/// The adapters, walked once per process.
struct Adapters {
    nvidia: Vec<AdapterDesc>,
    others: Vec<AdapterDesc>,
    skipped: Vec<String>,
}

/// A PDH failure as the source's error, its kind kept.
fn pdh_error(e: crate::error::Failure) -> HypomnesisError {
    HypomnesisError::pdh(e.kind, e.message)
}

fn adapters() -> &'static std::result::Result<Adapters, crate::error::Failure> {
    static LIST: OnceLock<std::result::Result<Adapters, crate::error::Failure>> = OnceLock::new();
    LIST.get_or_init(|| {
        let (all, mut skipped) = ffi::adapters()?;
        let mut nvidia = Vec::new();
        let mut others = Vec::new();
        for a in all {
            match winparse::classify_adapter(a.vendor_id, a.dedicated, a.flags) {
                AdapterKind::Nvidia => nvidia.push(a),
                AdapterKind::Other => others.push(a),
                AdapterKind::Skip => skipped.push(format!(
                    "{} (vendor 0x{:04X}): not a hardware GPU",
                    a.name, a.vendor_id
                )),
            }
        }
        let nvml = NVIDIA_ORDER.get().map_or(&[][..], Vec::as_slice);
        let order =
            winparse::order_by_nvml(&nvidia.iter().map(|a| a.address).collect::<Vec<_>>(), nvml);
        let nvidia = order
            .into_iter()
            .filter_map(|i| nvidia.get(i).cloned())
            .collect();
        Ok(Adapters {
            nvidia,
            others,
            skipped,
        })
    })
}

fn scoped(scope: Scope) -> Result<&'static [AdapterDesc]> {
    let list = adapters()
        .as_ref()
        .map_err(|e| HypomnesisError::dxgi(e.kind, e.message.clone()))?;
    Ok(match scope {
        Scope::Nvidia => &list.nvidia,
        Scope::Others => &list.others,
    })
}

fn adapter(scope: Scope, index: u32) -> Result<&'static AdapterDesc> {
    let list = scoped(scope)?;
    let count = u32::try_from(list.len()).unwrap_or(u32::MAX);
    usize::try_from(index)
        .ok()
        .and_then(|i| list.get(i))
        .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })
}

/// DXGI, for NVIDIA adapters or for the other vendors' ones.
pub(crate) struct DxgiBackend {
    scope: Scope,
}

impl DxgiBackend {
    pub(crate) const fn nvidia() -> Self {
        Self {
            scope: Scope::Nvidia,
        }
    }

    pub(crate) const fn others() -> Self {
        Self {
            scope: Scope::Others,
        }
    }
}

/// Whether the `GPU Adapter Memory` counter set (both counters spill is measured from) is
/// registered on this system.
#[cfg(feature = "pdh")]
pub(crate) fn spill_counters_registered() -> bool {
    ffi::counter_registered(ADAPTER_DEDICATED) && ffi::counter_registered(ADAPTER_SHARED)
}

/// Device-wide dedicated usage of an adapter from PDH.
fn adapter_used(a: &AdapterDesc) -> Result<u64> {
    let rows = ffi::sample(&[ADAPTER_DEDICATED]).map_err(pdh_error)?;
    let first = rows.first().map(Vec::as_slice).unwrap_or_default();
    winparse::adapter_sum(first.iter().map(|(n, v)| (n.as_str(), *v)), a.luid).ok_or_else(|| {
        HypomnesisError::pdh(
            crate::error::ErrorKind::Other,
            format!(
                "no `GPU Adapter Memory` counter for {} (LUID 0x{:08X}_0x{:08X})",
                a.name, a.luid.0, a.luid.1
            ),
        )
    })
}

/// `(dedicated, shared, capacity)` of device `index` (NVIDIA devices first, then the others,
/// as in the device list).
pub(crate) fn residency(index: u32) -> Result<Residency> {
    let nvidia = scoped(Scope::Nvidia)?;
    let a = if let Some(a) = usize::try_from(index).ok().and_then(|i| nvidia.get(i)) {
        a
    } else {
        let local = index.saturating_sub(u32::try_from(nvidia.len()).unwrap_or(u32::MAX));
        adapter(Scope::Others, local)?
    };
    let rows = ffi::sample(&[ADAPTER_DEDICATED, ADAPTER_SHARED]).map_err(pdh_error)?;
    let sum = |k: usize| {
        let r = rows.get(k).map(Vec::as_slice).unwrap_or_default();
        winparse::adapter_sum(r.iter().map(|(n, v)| (n.as_str(), *v)), a.luid)
    };
    match (sum(0), sum(1)) {
        (Some(d), Some(s)) => Ok(Residency {
            dedicated_bytes: d,
            shared_bytes: s,
            capacity_bytes: a.dedicated,
        }),
        _ => Err(HypomnesisError::pdh(
            crate::error::ErrorKind::Other,
            format!("no `GPU Adapter Memory` counters for {}", a.name),
        )),
    }
}

/// Processes on an adapter from PDH, sorted by pid; `device_index` as given.
fn processes(a: &AdapterDesc, device_index: u32) -> Result<Vec<GpuProcessEntry>> {
    let rows = ffi::sample(&[DEDICATED, SHARED]).map_err(pdh_error)?;
    let pick = |k: usize| {
        let r = rows.get(k).map(Vec::as_slice).unwrap_or_default();
        winparse::sum_by_pid(r.iter().map(|(n, v)| (n.as_str(), *v)), a.luid).0
    };
    let dedicated = pick(0);
    let shared = pick(1);
    let mut merged: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for (pid, v) in &dedicated {
        merged.entry(*pid).or_default().0 = *v;
    }
    for (pid, v) in &shared {
        merged.entry(*pid).or_default().1 = *v;
    }
    let mut snapshot: Option<HashMap<u32, String>> = None;
    Ok(merged
        .into_iter()
        .filter(|(_, (d, s))| *d > 0 || *s > 0)
        .map(|(pid, (d, s))| {
            let lookup = ffi::image_name(pid);
            let from_snapshot = if lookup == NameLookup::Denied {
                snapshot
                    .get_or_insert_with(|| ffi::snapshot_names().unwrap_or_default())
                    .get(&pid)
                    .cloned()
            } else {
                None
            };
            GpuProcessEntry {
                pid,
                name: winparse::display_name(pid, lookup, from_snapshot.as_deref()),
                used_bytes: d,
                device_index,
                shared_used_bytes: s,
                context: None,
                ..GpuProcessEntry::blank(GpuQuerySource::Pdh)
            }
        })
        .collect())
}

impl Backend for DxgiBackend {
    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Dxgi
    }

    fn presence(&self) -> Presence {
        match scoped(self.scope) {
            // DXGI lists no such adapter, or cannot be asked.
            Ok([]) | Err(_) => Presence::Absent,
            Ok(_) => Presence::Present,
        }
    }

    fn scope(&self) -> Scope {
        self.scope
    }

    fn needs_nvidia_devices(&self) -> bool {
        // The NVIDIA adapters take NVML's order, so that indices agree across sources.
        self.scope == Scope::Nvidia
    }

    fn nvidia_devices(&self, addresses: &[PciAddress]) {
        let _ = NVIDIA_ORDER.set(addresses.to_vec());
    }

    fn answers(&self, op: Op) -> bool {
        // NVIDIA process lists come from PdhBackend; other vendors' from here. DXGI knows
        // nothing of MIG (which Windows does not offer).
        !(self.scope == Scope::Nvidia && matches!(op, Op::GpuProcesses | Op::Mig))
    }

    fn device_count(&self) -> Result<u32> {
        Ok(u32::try_from(scoped(self.scope)?.len()).unwrap_or(u32::MAX))
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        let a = adapter(self.scope, index)?;
        let used = adapter_used(a)?.min(a.dedicated);
        Ok(GpuDeviceInfo {
            index,
            name: Some(a.name.clone()).filter(|n| !n.is_empty()),
            total_bytes: a.dedicated,
            free_bytes: a.dedicated - used,
            used_bytes: used,
            reserved_bytes: None,
            driver_version: None,
            uuid: None,
            pci_bus_id: a.address.map(|a| a.to_string()),
            vendor: u16::try_from(a.vendor_id)
                .ok()
                .and_then(GpuVendor::from_pci_vendor_id),
            ..GpuDeviceInfo::blank(GpuQuerySource::Dxgi)
        })
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        let a = adapter(self.scope, index)?;
        let used =
            ffi::local_usage(a.luid).map_err(|e| HypomnesisError::dxgi(e.kind, e.message))?;
        Ok(ProcessGpuInfo {
            used_bytes: used,
            is_per_process: true,
            source: GpuQuerySource::Dxgi,
        })
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        processes(adapter(self.scope, index)?, index)
    }

    fn report(&self) -> SourceReport {
        let mut details = Vec::new();
        let state = match adapters() {
            Err(e) => SourceState::Failed(e.clone()),
            Ok(list) => {
                let mine = match self.scope {
                    Scope::Nvidia => &list.nvidia,
                    Scope::Others => &list.others,
                };
                for (i, a) in mine.iter().enumerate() {
                    details.push((
                        format!("{} adapter {i}", if self.scope == Scope::Nvidia { "NVIDIA" } else { "other" }),
                        format!(
                            "{} (vendor 0x{:04X}, {} MiB dedicated, LUID 0x{:08X}_0x{:08X}, PCI {})",
                            a.name,
                            a.vendor_id,
                            a.dedicated / MIB,
                            a.luid.0,
                            a.luid.1,
                            a.address.map_or("unknown".into(), |a| a.to_string())
                        ),
                    ));
                }
                if self.scope == Scope::Nvidia {
                    for s in &list.skipped {
                        details.push(("skipped".into(), s.clone()));
                    }
                }
                if mine.is_empty() {
                    SourceState::absent(
                        crate::error::ErrorKind::NotInstalled,
                        "DXGI lists no such adapter",
                    )
                } else {
                    SourceState::Answered
                }
            }
        };
        SourceReport {
            source: GpuQuerySource::Dxgi,
            state,
            details,
            dropped_process_rows: 0,
        }
    }
}

/// PDH process listings for NVIDIA adapters (NVML's per-process figures are N/A under WDDM).
pub(crate) struct PdhBackend;

impl Backend for PdhBackend {
    fn source(&self) -> GpuQuerySource {
        GpuQuerySource::Pdh
    }

    fn presence(&self) -> Presence {
        match scoped(Scope::Nvidia) {
            // No NVIDIA adapter to list processes for, or DXGI cannot be asked.
            Ok([]) | Err(_) => Presence::Absent,
            Ok(_) => Presence::Present,
        }
    }

    fn answers(&self, op: Op) -> bool {
        op == Op::GpuProcesses
    }

    fn device_count(&self) -> Result<u32> {
        DxgiBackend::nvidia().device_count()
    }

    fn device_info(&self, index: u32) -> Result<GpuDeviceInfo> {
        DxgiBackend::nvidia().device_info(index)
    }

    fn process_gpu_info(&self, index: u32) -> Result<ProcessGpuInfo> {
        DxgiBackend::nvidia().process_gpu_info(index)
    }

    fn gpu_processes(&self, index: u32) -> Result<Vec<GpuProcessEntry>> {
        processes(adapter(Scope::Nvidia, index)?, index)
    }

    fn report(&self) -> SourceReport {
        let state = match ffi::sample(&[DEDICATED, SHARED]) {
            Ok(rows) => {
                let n = rows.first().map_or(0, Vec::len);
                return SourceReport {
                    source: GpuQuerySource::Pdh,
                    state: SourceState::Answered,
                    details: vec![("GPU Process Memory instances".into(), n.to_string())],
                    dropped_process_rows: 0,
                };
            }
            Err(e) => SourceState::Failed(e),
        };
        SourceReport {
            source: GpuQuerySource::Pdh,
            state,
            details: Vec::new(),
            dropped_process_rows: 0,
        }
    }
}

#[cfg(all(test, feature = "pdh"))]
mod tests {
    use super::*;

    #[test]
    fn a_counter_set_is_registered_or_not_and_spill_follows_the_adapter_set() {
        // Every Windows (and Wine) registers the processor counters; nothing registers this.
        assert!(ffi::counter_registered(
            r"\Processor(_Total)\% Processor Time"
        ));
        assert!(!ffi::counter_registered(r"\No Such Counter Set(*)\Nothing"));
        let adapter =
            ffi::counter_registered(ADAPTER_DEDICATED) && ffi::counter_registered(ADAPTER_SHARED);
        assert_eq!(crate::gpu::is_spill_measurable(), adapter);
        // Wine registers no GPU counter sets (the Windows test runner says it runs under Wine).
        if std::env::var_os("HYPOMNESIS_UNDER_WINE").is_some() {
            assert!(!crate::gpu::is_spill_measurable());
        }
    }
}
