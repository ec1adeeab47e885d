//! MIG on NVML: the mode (remembered a few seconds), the MIG device handles, each instance's
//! ids and memory, lookup by UUID, and the doctor line.

use std::time::{Duration, Instant};

use super::abi::{
    NVML_DEVICE_MIG_ENABLE, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED, NVML_MEMORY_V2_VERSION,
    NVML_VALUE_NOT_AVAILABLE, NVML_VALUE_NOT_AVAILABLE_U32,
};
use super::decode::{kind_of_return, return_name, text};
use super::device::reserved_from_v2;
use super::ffi::Device;
use super::session::{CallFailure, Loaded, failed_call};
use crate::error::Failure;
use crate::gpu::{mig, nvidia};
use crate::{
    error::ErrorKind, error::HypomnesisError, types::GpuQuerySource, types::MigInstance,
    types::MigState,
};

/// How long a device's MIG mode is reused before NVML is asked again.
const MIG_MODE_REUSE: Duration = Duration::from_secs(5);
/// A MIG device count above this is garbage (GPUs have at most 7 today).
const MAX_MIG_SLOTS: u32 = 256;

/// The MIG instance a process list belongs to (GPU and compute instance ids), for lists read on
/// MIG device handles.
pub(super) type InstanceIds = (Option<u32>, Option<u32>);

/// A GPU/compute instance id, `None` for NVML's "not available" (MIG off).
pub(super) fn instance_id(v: u32) -> Option<u32> {
    (v != NVML_VALUE_NOT_AVAILABLE_U32).then_some(v)
}

impl Loaded {
    /// Current and pending MIG mode; `None` when the GPU cannot be split (or NVML will not say).
    /// Remembered for [`MIG_MODE_REUSE`].
    pub(super) fn mig_mode(&self, dev: Device) -> Option<(bool, bool)> {
        if let Some((_, _, mode)) = self
            .lock()
            .mig_modes
            .iter()
            .find(|(d, at, _)| *d == dev && at.elapsed() < MIG_MODE_REUSE)
        {
            return *mode;
        }
        let mode = self
            .nvml
            .mig_mode(dev)
            .and_then(std::result::Result::ok)
            .map(|(current, pending)| {
                (
                    current == NVML_DEVICE_MIG_ENABLE,
                    pending == NVML_DEVICE_MIG_ENABLE,
                )
            });
        let mut s = self.lock();
        s.mig_modes.retain(|(d, _, _)| *d != dev);
        s.mig_modes.push((dev, Instant::now(), mode));
        mode
    }

    /// The occupied MIG device slots of a GPU in MIG mode, with their handles (empty slots,
    /// `NVML_ERROR_NOT_FOUND`, are skipped).
    pub(super) fn mig_devices(
        &self,
        dev: Device,
        index: u32,
    ) -> std::result::Result<Vec<(u32, Device)>, CallFailure> {
        let missing = |f: &str| {
            CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::Other,
                format!(
                    "the library exports no {f}, so the MIG devices of GPU {index} cannot be listed"
                ),
            ))
        };
        let max = self
            .nvml
            .max_mig_devices(dev)
            .ok_or_else(|| missing("nvmlDeviceGetMaxMigDeviceCount"))?
            .map_err(failed_call("nvmlDeviceGetMaxMigDeviceCount", Some(index)))?;
        if max > MAX_MIG_SLOTS {
            return Err(CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::Other,
                format!(
                    "nvmlDeviceGetMaxMigDeviceCount for GPU {index} returned {max}, more than any GPU has"
                ),
            )));
        }
        let mut out = Vec::new();
        for slot in 0..max {
            match self
                .nvml
                .mig_handle(dev, slot)
                .ok_or_else(|| missing("nvmlDeviceGetMigDeviceHandleByIndex"))?
            {
                Ok(h) => out.push((slot, h)),
                Err(NVML_ERROR_NOT_FOUND) => {}
                Err(code) => {
                    return Err(failed_call(
                        "nvmlDeviceGetMigDeviceHandleByIndex",
                        Some(index),
                    )(code));
                }
            }
        }
        Ok(out)
    }

    /// The GPU and compute instance ids of a MIG device handle.
    pub(super) fn instance_ids(&self, h: Device) -> InstanceIds {
        (
            self.nvml
                .gpu_instance_id(h)
                .and_then(std::result::Result::ok),
            self.nvml
                .compute_instance_id(h)
                .and_then(std::result::Result::ok),
        )
    }

    /// Everything NVML says about one MIG device. Memory that cannot be read is `None` with the
    /// reason, never zeros.
    pub(super) fn mig_instance_of(&self, index: u32, slot: u32, h: Device) -> MigInstance {
        let mut m = MigInstance::blank(index, slot, GpuQuerySource::Nvml);
        m.uuid = self
            .nvml
            .device_uuid(h)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        m.name = self
            .nvml
            .device_name(h)
            .and_then(std::result::Result::ok)
            .and_then(|b| text(&b));
        m.profile = m.name.as_deref().and_then(mig::profile_from_name);
        (m.gpu_instance_id, m.compute_instance_id) = self.instance_ids(h);
        match self.nvml.memory(h) {
            None => {
                m.memory_error = Some(Failure::new(
                    ErrorKind::NotSupported,
                    "the library exports no nvmlDeviceGetMemoryInfo",
                ));
            }
            Some(Err(code)) => {
                m.memory_error = Some(Failure::new(kind_of_return(code), return_name(code)));
            }
            Some(Ok(mem)) if mem.free > mem.total || mem.total == NVML_VALUE_NOT_AVAILABLE => {
                m.memory_error = Some(Failure::new(
                    ErrorKind::BadAnswer,
                    format!(
                        "impossible figures (total {}, free {})",
                        mem.total, mem.free
                    ),
                ));
            }
            Some(Ok(mem)) => {
                m.total_bytes = Some(mem.total);
                m.free_bytes = Some(mem.free);
                m.used_bytes = Some(mem.total - mem.free);
                m.reserved_bytes = reserved_from_v2(
                    self.nvml.memory_v2(h, NVML_MEMORY_V2_VERSION),
                    mem.total,
                    mem.free,
                );
            }
        }
        m
    }

    pub(super) fn mig_state(&self, index: u32) -> std::result::Result<MigState, CallFailure> {
        let dev = self.device(index)?;
        let mut s = MigState::unknown(index, GpuQuerySource::Nvml);
        let facts = self.facts(dev);
        (s.name, s.uuid) = (facts.name, facts.uuid);
        let Some((current, pending)) = self.mig_mode(dev) else {
            return Ok(s);
        };
        s.enabled = Some(current);
        s.pending = Some(pending);
        if !current {
            return Ok(s);
        }
        let mut list: Vec<MigInstance> = self
            .mig_devices(dev, index)?
            .into_iter()
            .map(|(slot, h)| self.mig_instance_of(index, slot, h))
            .collect();
        mig::sort_instances(&mut list);
        s.instances = list;
        s.device_memory_error = match self.memory(dev, index) {
            Ok(_) => None,
            Err(CallFailure::Call { code, .. }) => {
                Some(Failure::new(kind_of_return(code), return_name(code)))
            }
            Err(CallFailure::Other(e)) => Some(Failure::of(&e)),
        };
        Ok(s)
    }

    /// The MIG device with this UUID, found with `nvmlDeviceGetHandleByUUID`.
    pub(super) fn find_mig(&self, uuid: &str) -> std::result::Result<MigInstance, CallFailure> {
        let other = |m: String| CallFailure::Other(HypomnesisError::nvml(ErrorKind::Other, m));
        let missing = |f: &str| other(format!("the library exports no {f}"));
        let h = match self
            .nvml
            .handle_by_uuid(uuid)
            .ok_or_else(|| missing("nvmlDeviceGetHandleByUUID"))?
        {
            Ok(h) => h,
            Err(NVML_ERROR_NOT_FOUND) => {
                return Err(other(format!("no GPU or MIG device has UUID {uuid:?}")));
            }
            Err(code) => return Err(failed_call("nvmlDeviceGetHandleByUUID", None)(code)),
        };
        let is_mig = self
            .nvml
            .is_mig_handle(h)
            .ok_or_else(|| missing("nvmlDeviceIsMigDeviceHandle"))?
            .map_err(failed_call("nvmlDeviceIsMigDeviceHandle", None))?;
        if !is_mig {
            return Err(other(format!(
                "{uuid:?} is a whole GPU, not a MIG device (ask for it by index)"
            )));
        }
        let parent = self
            .nvml
            .mig_parent(h)
            .ok_or_else(|| missing("nvmlDeviceGetDeviceHandleFromMigDeviceHandle"))?
            .map_err(failed_call(
                "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
                None,
            ))?;
        let uuid_of = |d: Device| {
            self.nvml
                .device_uuid(d)
                .and_then(std::result::Result::ok)
                .and_then(|b| text(&b))
        };
        let same =
            |a: Device, b: Device| a == b || (uuid_of(a).is_some() && uuid_of(a) == uuid_of(b));
        let count = self.device_count()?;
        let index = (0..count)
            .find(|&i| self.device(i).is_ok_and(|d| same(d, parent)))
            .ok_or_else(|| {
                other(format!(
                    "the GPU of MIG device {uuid:?} is not among the {count} GPUs NVML lists"
                ))
            })?;
        let slot = self
            .mig_devices(parent, index)?
            .into_iter()
            .find(|&(_, d)| same(d, h))
            .map(|(slot, _)| slot)
            .ok_or_else(|| {
                other(format!(
                    "MIG device {uuid:?} is not in the MIG device slots of GPU {index}"
                ))
            })?;
        Ok(self.mig_instance_of(index, slot, h))
    }

    /// One line for `hmn doctor` on GPU `index`'s MIG mode.
    pub(super) fn mig_summary(&self, index: u32) -> String {
        let dev = match self.device(index) {
            Ok(d) => d,
            Err(e) => return format!("unknown ({})", self.to_error(e)),
        };
        match self.nvml.mig_mode(dev) {
            None => "unknown (the library exports no nvmlDeviceGetMigMode)".into(),
            Some(Err(NVML_ERROR_NOT_SUPPORTED)) => "not supported by this GPU".into(),
            Some(Err(code)) => format!("unknown ({})", return_name(code)),
            Some(Ok((current, pending))) => {
                let current = current == NVML_DEVICE_MIG_ENABLE;
                let devices = if current {
                    self.mig_devices(dev, index)
                        .map(|list| list.len())
                        .map_err(|e| self.to_error(e).to_string())
                } else {
                    Ok(0)
                };
                nvidia::mig_mode_line(current, pending == NVML_DEVICE_MIG_ENABLE, devices)
            }
        }
    }
}
