//! One device's figures: v1 memory, the v2 reservation, name, UUID, PCI bus id.

use super::abi::{
    Memory, MemoryV2, NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_NOT_FOUND, NVML_ERROR_NOT_SUPPORTED,
    NVML_MEMORY_V2_VERSION, NVML_SUCCESS, NVML_VALUE_NOT_AVAILABLE, NvmlReturn,
    ProcessUtilizationSample,
};
use super::decode::text;
use super::ffi::Device;
use super::model::{GpuNode, gpu_node, own_memory, pool, unified};
use super::session::{CallFailure, Facts, Loaded, failed_call};
use crate::gpu::nvidia;
use crate::{
    error::ErrorKind, error::HypomnesisError, types::GpuDeviceInfo, types::GpuQuerySource,
    types::GpuVendor, types::ProcessActivity, types::ProcessActivitySample, types::Utilization,
};

/// Tries of the sizing protocol before a sample list that keeps growing is given up on.
const MAX_SAMPLE_ATTEMPTS: usize = 4;
/// A sample count above this is garbage: the driver keeps a few seconds' worth per process.
const MAX_SAMPLES: usize = 1 << 16;

impl Loaded {
    /// v1 memory of a device, validated.
    pub(super) fn memory(
        &self,
        dev: Device,
        index: u32,
    ) -> std::result::Result<Memory, CallFailure> {
        checked_memory(self.nvml.memory(dev), index)
    }

    /// The memory total of a device with memory of its own: kept from the first valid answer
    /// of the session (a GPU's total does not change while its handle lives), else asked.
    /// `None`: no such memory (a unified GPU answers 0 or `NOT_SUPPORTED`), or the call failed.
    pub(super) fn total(&self, dev: Device, index: u32) -> Option<u64> {
        if let Some(&(_, total)) = self.lock().totals.iter().find(|(d, _)| *d == dev) {
            return Some(total);
        }
        let total = self.memory(dev, index).ok()?.total;
        self.keep_total(dev, total);
        Some(total).filter(|&t| t > 0)
    }

    /// Keeps `total` as the memory total of `dev` for the session (not 0: no memory of its own).
    fn keep_total(&self, dev: Device, total: u64) {
        let mut s = self.lock();
        if total > 0 && !s.totals.iter().any(|(d, _)| *d == dev) {
            s.totals.push((dev, total));
        }
    }

    /// GPU and memory utilization: unknown when the library has no such function or the GPU
    /// does not sample it (`NOT_SUPPORTED`: a GPU in MIG mode, an old board).
    pub(super) fn utilization(&self, index: u32) -> std::result::Result<Utilization, CallFailure> {
        let dev = self.device(index)?;
        match self.nvml.utilization(dev) {
            None | Some(Err(NVML_ERROR_NOT_SUPPORTED)) => {
                Ok(Utilization::unknown(GpuQuerySource::Nvml))
            }
            Some(Err(code)) => Err(failed_call("nvmlDeviceGetUtilizationRates", Some(index))(
                code,
            )),
            Some(Ok(u)) => Ok(Utilization::new(
                Some(u.gpu),
                Some(u.memory),
                GpuQuerySource::Nvml,
            )),
        }
    }

    /// The driver's per-process activity samples newer than `since_us`: the sizing call, then
    /// a buffer that size (again while the list grows); `NOT_FOUND` is no sample, not an error.
    /// The minor number of GPU `index`'s device file; `None` when the driver does not say.
    pub(super) fn minor_number(&self, index: u32) -> std::result::Result<Option<u32>, CallFailure> {
        let dev = self.device(index)?;
        Ok(self
            .nvml
            .minor_number(dev)
            .and_then(std::result::Result::ok))
    }

    pub(super) fn process_activity(
        &self,
        index: u32,
        since_us: u64,
    ) -> std::result::Result<ProcessActivity, CallFailure> {
        const NAME: &str = "nvmlDeviceGetProcessUtilization";
        let dev = self.device(index)?;
        let mut buf: Vec<ProcessUtilizationSample> = Vec::new();
        for _ in 0..MAX_SAMPLE_ATTEMPTS {
            let Some((rc, count)) = self.nvml.process_utilization(dev, since_us, &mut buf) else {
                return Ok(ProcessActivity::Unknown {
                    reason: format!("the NVML library exports no {NAME}"),
                });
            };
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            match rc {
                NVML_SUCCESS if !buf.is_empty() || count == 0 => {
                    let samples = buf
                        .iter()
                        .take(count)
                        .filter(|s| s.pid != 0)
                        .map(|s| {
                            ProcessActivitySample::new(
                                s.pid,
                                s.time_stamp,
                                [s.sm_util, s.mem_util, s.enc_util, s.dec_util],
                            )
                        })
                        .collect();
                    return Ok(ProcessActivity::Samples { samples });
                }
                NVML_SUCCESS | NVML_ERROR_INSUFFICIENT_SIZE if count <= MAX_SAMPLES => {
                    // Room for what it asked, and for a few more that start meanwhile.
                    let room = count.max(buf.len().saturating_mul(2)).max(1) + 8;
                    buf = vec![ProcessUtilizationSample::default(); room];
                }
                NVML_SUCCESS | NVML_ERROR_INSUFFICIENT_SIZE => {
                    return Err(CallFailure::Other(HypomnesisError::nvml(
                        ErrorKind::BadAnswer,
                        format!("{NAME} for GPU {index} asked room for {count} samples"),
                    )));
                }
                NVML_ERROR_NOT_FOUND => {
                    return Ok(ProcessActivity::Samples {
                        samples: Vec::new(),
                    });
                }
                NVML_ERROR_NOT_SUPPORTED => {
                    return Ok(ProcessActivity::Unknown {
                        reason: format!(
                            "{NAME} is not supported on GPU {index} (MIG mode, or a board \
                             that does not sample it)"
                        ),
                    });
                }
                code => return Err(failed_call(NAME, Some(index))(code)),
            }
        }
        Err(CallFailure::Other(HypomnesisError::nvml(
            ErrorKind::Other,
            format!("{NAME} for GPU {index}: the list grew at each of {MAX_SAMPLE_ATTEMPTS} tries"),
        )))
    }

    /// What does not change while `dev`'s handle lives: asked of the driver once a session
    /// (a refresh of a view asked each again: 7 of its 16 NVML calls), unless an answer was a
    /// failure that may pass (only answers, "not supported" and a missing symbol are kept).
    pub(super) fn facts(&self, dev: Device) -> Facts {
        if let Some((_, f)) = self.lock().facts.iter().find(|(d, _)| *d == dev) {
            return f.clone();
        }
        let name = self.nvml.device_name(dev);
        let uuid = self.nvml.device_uuid(dev);
        let pci = self.nvml.pci_info(dev);
        let numa = self.nvml.numa_node_id(dev);
        let addressing = self.nvml.addressing_mode(dev);
        let keep = lasting(name.as_ref())
            && lasting(uuid.as_ref())
            && lasting(pci.as_ref())
            && lasting(numa.as_ref())
            && lasting(addressing.as_ref());
        let string = |answer: Option<std::result::Result<Vec<u8>, NvmlReturn>>| {
            answer
                .and_then(std::result::Result::ok)
                .and_then(|b| text(&b))
        };
        let (name, uuid) = (string(name), string(uuid));
        let pci_bus_id = pci.and_then(std::result::Result::ok).and_then(|p| {
            text(
                &p.bus_id
                    .iter()
                    .map(|c| c.cast_unsigned())
                    .take_while(|&b| b != 0)
                    .collect::<Vec<u8>>(),
            )
        });
        let facts = Facts {
            name,
            uuid,
            pci_bus_id,
            numa,
            addressing,
        };
        if keep {
            self.lock().facts.push((dev, facts.clone()));
        }
        facts
    }

    /// Device `index`'s used memory as cheaply as it is read: the memory call alone for a GPU
    /// with memory of its own and figures that can be; what [`Self::device_info`] says for any
    /// other (a unified GPU, a refusal, impossible figures: its rules, its errors).
    pub(super) fn device_used(&self, index: u32) -> std::result::Result<u64, CallFailure> {
        let dev = self.device(index)?;
        match self.nvml.memory(dev) {
            Some(Ok(m))
                if m.total > 0 && m.total != NVML_VALUE_NOT_AVAILABLE && m.free <= m.total =>
            {
                Ok(m.total - m.free)
            }
            _ => self.device_info(index).map(|d| d.used_bytes),
        }
    }

    pub(super) fn device_info(
        &self,
        index: u32,
    ) -> std::result::Result<GpuDeviceInfo, CallFailure> {
        let dev = self.device(index)?;
        let Facts {
            name,
            uuid,
            pci_bus_id,
            numa,
            addressing,
        } = self.facts(dev);
        // Whether the v2 query (where the library has it) agrees that there is no device
        // memory: a v1 refusal alone, once, is a failure, not a kind of GPU.
        let v2_agrees = |total_zero: bool| match self.nvml.memory_v2(dev, NVML_MEMORY_V2_VERSION) {
            None | Some(Err(NVML_ERROR_NOT_SUPPORTED)) => true,
            Some(Ok(m)) => total_zero && m.total == 0,
            Some(Err(_)) => false,
        };
        let (mem, reserved, (model, evidence), node) = match self.nvml.memory(dev) {
            // No memory of its own to report: the GPU's memory is the host's (GB10, Jetson).
            Some(Err(NVML_ERROR_NOT_SUPPORTED)) if v2_agrees(false) => {
                let why = "nvmlDeviceGetMemoryInfo answers NOT_SUPPORTED";
                (pool(index, why)?, None, unified(why, addressing), None)
            }
            Some(Ok(m)) if m.total == 0 && v2_agrees(true) => {
                let why = "nvmlDeviceGetMemoryInfo reports 0 bytes of device memory";
                (pool(index, why)?, None, unified(why, addressing), None)
            }
            answer => {
                let mem = checked_memory(answer, index)?;
                self.keep_total(dev, mem.total);
                let v2 = self.nvml.memory_v2(dev, NVML_MEMORY_V2_VERSION);
                let reserved = reserved_from_v2(v2, mem.total, mem.free);
                let node = gpu_node(numa, crate::host::numa::numa_node);
                (mem, reserved, own_memory(addressing, node.as_ref()), node)
            }
        };
        let figures = match &node {
            Some(GpuNode::Memory(n)) => Some(n),
            _ => None,
        };
        Ok(GpuDeviceInfo {
            index,
            name,
            total_bytes: mem.total,
            free_bytes: mem.free,
            used_bytes: mem.total - mem.free,
            reserved_bytes: reserved,
            driver_version: self.driver_version(),
            uuid,
            pci_bus_id,
            vendor: Some(GpuVendor::Nvidia),
            mig_enabled: self.mig_mode(dev).map(|(current, _)| current),
            memory_model: model,
            memory_model_evidence: evidence,
            numa_node: node.as_ref().map(GpuNode::id),
            numa_node_total_bytes: figures.map(|n| n.total_bytes),
            numa_node_used_bytes: figures.map(|n| n.used_bytes),
            ..GpuDeviceInfo::blank(GpuQuerySource::Nvml)
        })
    }
}

/// Whether an answer may be kept for the session: an answer, "not supported", or no such
/// function in the library (not a failure that may pass).
fn lasting<T>(answer: Option<&std::result::Result<T, NvmlReturn>>) -> bool {
    matches!(answer, None | Some(Ok(_) | Err(NVML_ERROR_NOT_SUPPORTED)))
}

/// What `nvmlDeviceGetMemoryInfo` answered for GPU `index` (`None`: no such symbol), validated.
fn checked_memory(
    answer: Option<std::result::Result<Memory, NvmlReturn>>,
    index: u32,
) -> std::result::Result<Memory, CallFailure> {
    let m = answer
        .ok_or_else(|| {
            CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::Other,
                "the library exports no nvmlDeviceGetMemoryInfo",
            ))
        })?
        .map_err(failed_call("nvmlDeviceGetMemoryInfo", Some(index)))?;
    if m.free > m.total || m.total == NVML_VALUE_NOT_AVAILABLE {
        return Err(CallFailure::Other(HypomnesisError::nvml(
            ErrorKind::BadAnswer,
            format!(
                "nvmlDeviceGetMemoryInfo for GPU {index} returned {} (total {}, free {})",
                crate::error::IMPOSSIBLE,
                m.total,
                m.free
            ),
        )));
    }
    Ok(m)
}

/// `reserved` from a v2 answer, only when it is consistent with the v1 figures: same total, and
/// `reserved <= total - free` (the reservation is a subset of v1's used). Otherwise `None`.
pub(super) fn reserved_from_v2(
    v2: Option<std::result::Result<MemoryV2, NvmlReturn>>,
    total: u64,
    free: u64,
) -> Option<u64> {
    let m = v2?.ok()?;
    let used = total.checked_sub(free)?;
    if m.total != total {
        return None;
    }
    nvidia::consistent_reservation(m.reserved, used, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::unnecessary_wraps)] // the shape reserved_from_v2 takes
    fn v2(total: u64, reserved: u64) -> Option<std::result::Result<MemoryV2, NvmlReturn>> {
        Some(Ok(MemoryV2 {
            version: NVML_MEMORY_V2_VERSION,
            total,
            reserved,
            free: 0,
            used: 0,
        }))
    }

    #[test]
    fn reserved_only_when_consistent() {
        let total = 150_754_820_096;
        let free = 116_181_811_200;
        assert_eq!(
            reserved_from_v2(v2(total, 643_825_664), total, free),
            Some(643_825_664)
        );
        assert_eq!(
            reserved_from_v2(None, total, free),
            None,
            "pre-R510: symbol absent"
        );
        assert_eq!(
            reserved_from_v2(Some(Err(13)), total, free),
            None,
            "rejected tag"
        );
        assert_eq!(
            reserved_from_v2(v2(total - 1, 1), total, free),
            None,
            "totals disagree"
        );
        assert_eq!(
            reserved_from_v2(v2(total, total - free + 1), total, free),
            None,
            "reserved > used"
        );
    }
}
