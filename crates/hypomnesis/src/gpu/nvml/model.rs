//! What kind of memory an NVIDIA GPU has (`memory_model`), from the answers of its memory
//! query, its addressing mode and the NUMA node NVML names for it; and a unified GPU's
//! figures, the host's pool.

use super::abi::{Memory, NvmlReturn};
use super::session::CallFailure;
use crate::{error::ErrorKind, error::HypomnesisError, types::MemoryModel, types::NumaNode};

/// `NVML_DEVICE_ADDRESSING_MODE_NONE`, `_HMM` (heterogeneous memory management: a discrete
/// GPU that reaches host memory through the kernel's HMM) and `_ATS` (address translation
/// services: the GPU shares the CPU's page tables, as on Grace Hopper, Grace Blackwell and
/// GB10).
const NVML_ADDRESSING_MODE_NONE: u32 = 0;
const NVML_ADDRESSING_MODE_HMM: u32 = 1;
const NVML_ADDRESSING_MODE_ATS: u32 = 2;

/// A memory model and the sentence that says why.
pub(super) type Model = (Option<MemoryModel>, Option<String>);

/// The host's memory as the figures of GPU `index`, which has none of its own (`why`):
/// `MemTotal` as its total and `MemAvailable` as its free memory.
pub(super) fn pool(index: u32, why: &str) -> std::result::Result<Memory, CallFailure> {
    let (total, free) = crate::gpu::nvidia::host_pool(crate::host::memory::host::host_memory())
        .map_err(|e| {
            CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::NotSupported,
                format!("GPU {index}: {why}, and {e}"),
            ))
        })?;
    Ok(Memory {
        total,
        free,
        used: total - free,
    })
}

/// A GPU with no device memory to report (`why`): one pool with the CPU.
pub(super) fn unified(
    why: &str,
    addressing: Option<std::result::Result<u32, NvmlReturn>>,
) -> Model {
    let ats = matches!(addressing, Some(Ok(NVML_ADDRESSING_MODE_ATS)));
    (
        Some(MemoryModel::Unified),
        Some(format!(
            "{why}{}: the GPU's memory is the host's, so its figures are the host's MemTotal \
             and MemAvailable",
            if ats {
                " and the addressing mode is ATS"
            } else {
                ""
            }
        )),
    )
}

/// A GPU that reports memory of its own, by its addressing mode alone: coherent with the
/// CPU's where it is ATS, discrete where it is none or HMM, not known where the driver does
/// not say.
fn by_addressing(addressing: Option<std::result::Result<u32, NvmlReturn>>) -> Model {
    match addressing {
        Some(Ok(NVML_ADDRESSING_MODE_ATS)) => (
            Some(MemoryModel::Coherent),
            Some(
                "device memory of its own, and addressing mode ATS: the GPU shares the CPU's \
                 page tables and reaches its memory coherently (Grace Hopper, Grace Blackwell)"
                    .into(),
            ),
        ),
        Some(Ok(mode @ (NVML_ADDRESSING_MODE_NONE | NVML_ADDRESSING_MODE_HMM))) => (
            Some(MemoryModel::Discrete),
            Some(format!(
                "device memory of its own, and addressing mode {}",
                if mode == NVML_ADDRESSING_MODE_HMM {
                    "HMM (the kernel mirrors host memory for it; the memory is still apart)"
                } else {
                    "none"
                }
            )),
        ),
        _ => (None, None),
    }
}

/// The NUMA node NVML names for a GPU, as the kernel describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum GpuNode {
    /// A node of memory only: the GPU's memory, handed to the kernel.
    Memory(NumaNode),
    /// A node whose files cannot be read under the sysfs root in use (a container without the
    /// host's `/sys`): named, its figures unknown.
    Unread(u32, String),
}

impl GpuNode {
    pub(super) fn id(&self) -> u32 {
        match self {
            Self::Memory(n) => n.id,
            Self::Unread(id, _) => *id,
        }
    }
}

/// The node that is GPU `index`'s memory, from `nvmlDeviceGetNumaNodeId`'s answer: `None` when
/// the call is missing or refused (a GPU that is no NUMA node), or when the node it names has
/// CPUs (then it is the CPU's memory near the GPU, not the GPU's).
pub(super) fn gpu_node(
    answer: Option<std::result::Result<u32, NvmlReturn>>,
    read: impl FnOnce(u32) -> crate::error::Result<NumaNode>,
) -> Option<GpuNode> {
    let id = answer?.ok()?;
    match read(id) {
        Ok(node) if node.has_cpus => None,
        Ok(node) => Some(GpuNode::Memory(node)),
        Err(e) => Some(GpuNode::Unread(id, e.to_string())),
    }
}

/// A GPU that reports memory of its own: coherent where that memory is a NUMA node of the
/// kernel's (whatever the addressing mode says) or the addressing mode is ATS; else as the
/// addressing mode says.
pub(super) fn own_memory(
    addressing: Option<std::result::Result<u32, NvmlReturn>>,
    node: Option<&GpuNode>,
) -> Model {
    let (model, evidence) = by_addressing(addressing);
    let Some(node) = node else {
        return (model, evidence);
    };
    let said = match node {
        GpuNode::Memory(_) => format!(
            "NVML names its memory NUMA node {}, a node of memory only: the kernel manages \
             the GPU's memory beside the CPU's (Grace Hopper, Grace Blackwell in NUMA mode)",
            node.id()
        ),
        GpuNode::Unread(id, why) => {
            format!("NVML names its memory NUMA node {id}, whose files cannot be read here ({why})")
        }
    };
    let evidence = match (model, evidence) {
        (Some(MemoryModel::Coherent), Some(e)) => format!("{e}; and {said}"),
        (_, Some(e)) => format!("{said} (though {e})"),
        (_, None) => format!("device memory of its own, and {said}"),
    };
    (Some(MemoryModel::Coherent), Some(evidence))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn node(id: u32, has_cpus: bool) -> NumaNode {
        NumaNode {
            id,
            total_bytes: 96 << 30,
            free_bytes: 80 << 30,
            used_bytes: 16 << 30,
            has_cpus,
        }
    }

    #[test]
    fn the_gpus_node_is_one_of_memory_only() {
        assert_eq!(
            gpu_node(Some(Ok(1)), |id| Ok(node(id, false))),
            Some(GpuNode::Memory(node(1, false)))
        );
        // A node with CPUs is the CPU's memory near the GPU, not the GPU's.
        assert_eq!(gpu_node(Some(Ok(0)), |id| Ok(node(id, true))), None);
        // Refused (a GPU that is no NUMA node) or missing: none, and nothing read.
        assert_eq!(gpu_node(Some(Err(3)), |_| unreachable!()), None);
        assert_eq!(gpu_node(None, |_| unreachable!()), None);
        let unread = gpu_node(Some(Ok(4)), |_| {
            Err(HypomnesisError::ram(ErrorKind::Other, "no such file"))
        });
        assert!(
            matches!(unread, Some(GpuNode::Unread(4, ref why)) if why.contains("no such file"))
        );
    }

    #[test]
    fn a_node_of_its_memory_makes_a_gpu_coherent() {
        let memory = GpuNode::Memory(node(1, false));
        // Whatever the addressing mode says, or without one.
        for addressing in [None, Some(Err(3)), Some(Ok(0)), Some(Ok(2))] {
            let (model, why) = own_memory(addressing, Some(&memory));
            assert_eq!(model, Some(MemoryModel::Coherent), "{addressing:?}");
            assert!(why.unwrap().contains("NUMA node 1"), "{addressing:?}");
        }
        // Without a node, the addressing mode decides.
        assert_eq!(own_memory(Some(Ok(0)), None).0, Some(MemoryModel::Discrete));
        assert_eq!(own_memory(Some(Ok(2)), None).0, Some(MemoryModel::Coherent));
        assert_eq!(own_memory(None, None), (None, None));
        let unread = GpuNode::Unread(4, "denied".into());
        let (model, why) = own_memory(None, Some(&unread));
        assert_eq!(model, Some(MemoryModel::Coherent));
        assert!(why.unwrap().contains("cannot be read here (denied)"));
    }
}
