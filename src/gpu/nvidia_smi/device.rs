//! Devices and their processes from `nvidia-smi --query-gpu` and `--query-compute-apps`.

use std::sync::atomic::Ordering;

use super::SmiBackend;
use super::parse::{self, APP_FIELDS, Field, GPU_FIELDS, GPU_FIELDS_WITH_RESERVED, SmiApp, SmiGpu};
use super::{MIB, ROUNDING};
use crate::gpu::nvidia;
use crate::{GpuDeviceInfo, GpuQuerySource, GpuVendor, HypomnesisError, Result};

pub(super) type AppRow = (u32, u64, Option<String>);

impl SmiBackend {
    /// Every GPU `--query-gpu` lists. `memory.reserved` is asked for until the driver rejects it.
    pub(super) fn gpus(&self) -> Result<Vec<SmiGpu>> {
        loop {
            let with_reserved = !self.reserved_rejected.load(Ordering::Relaxed);
            let fields = if with_reserved {
                GPU_FIELDS_WITH_RESERVED
            } else {
                GPU_FIELDS
            };
            let query = format!("--query-gpu={fields}");
            let args = [query.as_str(), "--format=csv,noheader,nounits"];
            let ran = self.run(&args)?;
            if !ran.status.success() {
                if with_reserved && parse::is_field_rejection(&ran.stdout, &ran.stderr) {
                    crate::debug_log!("nvidia-smi rejects memory.reserved; asking without it");
                    self.reserved_rejected.store(true, Ordering::Relaxed);
                    continue;
                }
                return Err(Self::failed_run(&args, &self.exe_path(), &ran));
            }
            return parse::parse_gpus(&ran.stdout, with_reserved).map_err(|why| {
                HypomnesisError::NvidiaSmi(format!("unexpected `--query-gpu` output: {why}"))
            });
        }
    }

    pub(super) fn apps(&self) -> Result<Vec<SmiApp>> {
        let query = format!("--query-compute-apps={APP_FIELDS}");
        let args = [query.as_str(), "--format=csv,noheader,nounits"];
        let ran = self.run(&args)?;
        if !ran.status.success() {
            return Err(Self::failed_run(&args, &self.exe_path(), &ran));
        }
        parse::parse_apps(&ran.stdout).map_err(|why| {
            HypomnesisError::NvidiaSmi(format!("unexpected `--query-compute-apps` output: {why}"))
        })
    }

    pub(super) fn gpu(&self, index: u32) -> Result<SmiGpu> {
        let gpus = self.gpus()?;
        let count = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
        gpus.into_iter()
            .find(|g| g.index == index)
            .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })
    }

    /// Processes on GPU `index` with known memory (rows printed `[N/A]` are dropped and counted).
    pub(super) fn rows(&self, index: u32) -> Result<(SmiGpu, Vec<AppRow>)> {
        let gpus = self.gpus()?;
        let count = u32::try_from(gpus.len()).unwrap_or(u32::MAX);
        let only = gpus.len() == 1;
        let gpu = gpus
            .into_iter()
            .find(|g| g.index == index)
            .ok_or(HypomnesisError::DeviceIndexOutOfRange { index, count })?;
        let mut rows = Vec::new();
        let mut dropped = 0;
        for a in self.apps()? {
            let mine = match (&a.pci_bus_id, &gpu.pci_bus_id) {
                (Some(a), Some(g)) => a.eq_ignore_ascii_case(g),
                _ => only,
            };
            if !mine {
                continue;
            }
            match a.used_mib.ok().and_then(|m| m.checked_mul(MIB)) {
                Some(bytes) => rows.push((a.pid, bytes, a.name)),
                None => dropped += 1,
            }
        }
        if dropped > 0 {
            self.dropped_rows.fetch_add(dropped, Ordering::Relaxed);
        }
        rows.sort_by_key(|r| r.0);
        Ok((gpu, rows))
    }
}

fn bytes(field: &Field, what: &str, index: u32) -> Result<u64> {
    match field {
        Ok(mib) => mib.checked_mul(MIB).ok_or_else(|| {
            HypomnesisError::NvidiaSmi(format!("GPU {index}: {what} {mib} MiB overflows"))
        }),
        Err(token) => Err(HypomnesisError::NvidiaSmi(format!(
            "GPU {index}: {what} is {token}, not a number"
        ))),
    }
}

/// A `--query-gpu` row as device figures: `used = total - free`, and the reservation kept only
/// when it fits in that used figure (within nvidia-smi's rounding to whole MiB).
pub fn device_info_of(g: SmiGpu) -> Result<GpuDeviceInfo> {
    let total = bytes(&g.total_mib, "memory.total", g.index)?;
    let free = bytes(&g.free_mib, "memory.free", g.index)?;
    let used = total.checked_sub(free).ok_or_else(|| {
        HypomnesisError::NvidiaSmi(format!(
            "GPU {}: memory.free is larger than memory.total",
            g.index
        ))
    })?;
    // nvidia-smi's memory.used excludes the reservation on R510+: used is total - free here.
    // The reservation is kept when it fits inside that used figure, allowing for nvidia-smi
    // rounding each figure to whole MiB (an idle L40S prints Total 46068, Free 45460,
    // Reserved 609: 1 MiB more than total - free).
    let reserved = g
        .reserved_mib
        .and_then(std::result::Result::ok)
        .and_then(|m| m.checked_mul(MIB))
        .and_then(|r| nvidia::consistent_reservation(r, used, ROUNDING));
    Ok(GpuDeviceInfo {
        index: g.index,
        name: g.name,
        total_bytes: total,
        free_bytes: free,
        used_bytes: used,
        reserved_bytes: reserved,
        driver_version: g.driver_version,
        uuid: g.uuid,
        pci_bus_id: g.pci_bus_id,
        vendor: Some(GpuVendor::Nvidia),
        source: GpuQuerySource::NvidiaSmi,
        ..GpuDeviceInfo::blank()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(total: Field, free: Field, reserved: Option<Field>) -> SmiGpu {
        SmiGpu {
            index: 0,
            uuid: None,
            driver_version: None,
            pci_bus_id: None,
            total_mib: total,
            free_mib: free,
            reserved_mib: reserved,
            name: None,
        }
    }

    #[test]
    fn device_info_semantics() {
        // L40S, load phase: Total 46068, Reserved 609, Used 1235, Free 44225 (MiB).
        let d = device_info_of(gpu(Ok(46068), Ok(44225), Some(Ok(609)))).unwrap();
        assert_eq!(d.total_bytes, 46068 * MIB);
        assert_eq!(d.free_bytes, 44225 * MIB);
        assert_eq!(
            d.used_bytes,
            (46068 - 44225) * MIB,
            "used = total - free, not nvidia-smi's used"
        );
        assert_eq!(d.reserved_bytes, Some(609 * MIB));
        let d = device_info_of(gpu(Ok(100), Ok(90), Some(Err("[N/A]".into())))).unwrap();
        assert_eq!(d.reserved_bytes, None);
        let d = device_info_of(gpu(Ok(46068), Ok(45460), Some(Ok(609)))).unwrap();
        assert_eq!(
            d.reserved_bytes,
            Some(609 * MIB),
            "1 MiB of rounding is tolerated"
        );
        let d = device_info_of(gpu(Ok(100), Ok(90), Some(Ok(13)))).unwrap();
        assert_eq!(
            d.reserved_bytes, None,
            "a reservation well above used is not believed"
        );
        let e =
            device_info_of(gpu(Err("[Insufficient Permissions]".into()), Ok(1), None)).unwrap_err();
        assert!(
            e.to_string()
                .contains("memory.total is [Insufficient Permissions]"),
            "{e}"
        );
        assert!(device_info_of(gpu(Ok(1), Ok(2), None)).is_err());
    }
}
