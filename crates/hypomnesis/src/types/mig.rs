//! MIG: instances, the state of each GPU, and GPU instances with their shared memory.

use super::GpuQuerySource;

/// One MIG device of a GPU in MIG (Multi-Instance GPU) mode: a compute instance inside a GPU
/// instance, with the memory it can use.
///
/// Memory belongs to the **GPU instance**: compute instances of the same GPU instance report
/// the same figures (an H200's GI 2 split into CI 0 and CI 1 shows 71424 MiB total on both).
/// Never add up the figures of a list of instances; [`crate::gpu::mig_gpu_instances`] groups them
/// per GPU instance, counting shared memory once.
///
/// Memory figures are all `Some` or all `None` together; `used_bytes = total_bytes -
/// free_bytes` as for whole devices, so it includes the instance's reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigInstance {
    /// Index of the GPU the instance is part of (as in [`crate::gpu::device_info`]).
    pub parent_index: u32,
    /// The MIG device's index on its GPU (NVML's `nvmlDeviceGetMigDeviceHandleByIndex` index;
    /// `Device N` in `nvidia-smi -L`).
    pub slot: u32,
    /// MIG device UUID (`MIG-…`); `None` when unknown. [`crate::gpu::mig_instance`] finds it by this.
    pub uuid: Option<String>,
    /// The MIG device's name as the source gives it, e.g. `NVIDIA H200 MIG 1c.3g.71gb`;
    /// `None` when unknown.
    pub name: Option<String>,
    /// Profile, e.g. `1g.18gb`, `2g.35gb`, or `1c.3g.71gb` for one compute instance of a
    /// `3g.71gb` GPU instance; `None` when unknown.
    pub profile: Option<String>,
    /// GPU instance id (`GI` in `nvidia-smi`); `None` when unknown.
    pub gpu_instance_id: Option<u32>,
    /// Compute instance id within the GPU instance (`CI`); `None` when unknown.
    pub compute_instance_id: Option<u32>,
    /// Memory of the GPU instance, bytes; `None` when the source could not read it (then
    /// `memory_error` says why).
    pub total_bytes: Option<u64>,
    /// Free memory of the GPU instance, bytes; `None` with `total_bytes`.
    pub free_bytes: Option<u64>,
    /// `total_bytes - free_bytes`, bytes; `None` with `total_bytes`.
    pub used_bytes: Option<u64>,
    /// The instance's driver reservation, bytes (a subset of `used_bytes`); `None` when the
    /// source does not give it.
    pub reserved_bytes: Option<u64>,
    /// Why the memory figures are `None` (e.g. `NVML_ERROR_UNKNOWN`) and what kind of failure
    /// that is; `None` when they were read. In JSON, the message (the kind is
    /// [`Self::memory_error_kind`]).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::error::message_only")
    )]
    pub memory_error: Option<crate::error::Failure>,
    /// Which source produced these figures.
    pub source: GpuQuerySource,
}

impl MigInstance {
    /// An instance with nothing known, for the crate's constructors.
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn blank(parent_index: u32, slot: u32, source: GpuQuerySource) -> Self {
        Self {
            parent_index,
            slot,
            uuid: None,
            name: None,
            profile: None,
            gpu_instance_id: None,
            compute_instance_id: None,
            total_bytes: None,
            free_bytes: None,
            used_bytes: None,
            reserved_bytes: None,
            memory_error: None,
            source,
        }
    }

    /// The GPU-instance part of the profile: `3g.71gb` for `1c.3g.71gb`, the profile itself
    /// when it names no compute-instance share; `None` without a profile.
    #[must_use]
    pub fn gpu_instance_profile(&self) -> Option<&str> {
        let p = self.profile.as_deref()?;
        Some(match p.split_once('.') {
            Some((head, rest))
                if head
                    .strip_suffix('c')
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                rest
            }
            _ => p,
        })
    }
}

/// The MIG view of one GPU: whether MIG is on, and its instances.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigState {
    /// Index of the GPU (as in [`crate::gpu::device_info`]).
    pub index: u32,
    /// Product name of the GPU, e.g. `NVIDIA H200`; `None` when unknown.
    pub name: Option<String>,
    /// GPU UUID (`GPU-…`); `None` when unknown.
    pub uuid: Option<String>,
    /// Current MIG mode: `Some(true)` on, `Some(false)` off, `None` when the GPU cannot be split
    /// or the source does not say.
    pub enabled: Option<bool>,
    /// MIG mode after the next GPU reset, where the source reports it.
    pub pending: Option<bool>,
    /// The MIG devices, sorted by GPU instance id, then compute instance id, then slot; empty
    /// when MIG is off.
    pub instances: Vec<MigInstance>,
    /// With MIG on: why the GPU's device-wide memory could not be read, in the source's words
    /// (`NVML_ERROR_NO_PERMISSION` for unprivileged callers of NVML); `None` when it could be
    /// read, or MIG is off. [`crate::gpu::device_info`] fails with the full error in that case.
    /// In JSON, the message (the kind is [`Self::device_memory_error_kind`]).
    #[cfg_attr(
        feature = "serde",
        serde(serialize_with = "crate::error::message_only")
    )]
    pub device_memory_error: Option<crate::error::Failure>,
    /// Which source answered.
    pub source: GpuQuerySource,
}

impl MigState {
    /// Nothing known yet about GPU `index`'s MIG mode: the start value a source fills in, and
    /// what sources that know nothing of MIG (and other vendors' devices) answer.
    #[allow(dead_code)] // a build without GPU backends constructs none
    pub(crate) fn unknown(index: u32, source: GpuQuerySource) -> Self {
        Self {
            index,
            name: None,
            uuid: None,
            enabled: None,
            pending: None,
            instances: Vec::new(),
            device_memory_error: None,
            source,
        }
    }
}

impl MigState {
    /// What kind of failure `device_memory_error` is (see [`crate::error::ErrorKind`]), when there is
    /// one: `NoPermission` when the whole GPU's figures are refused to this user.
    #[must_use]
    pub fn device_memory_error_kind(&self) -> Option<crate::error::ErrorKind> {
        self.device_memory_error.as_ref().map(|f| f.kind)
    }
}

impl MigInstance {
    /// What kind of failure `memory_error` is, when there is one.
    #[must_use]
    pub fn memory_error_kind(&self) -> Option<crate::error::ErrorKind> {
        self.memory_error.as_ref().map(|f| f.kind)
    }
}

/// The memory of one MIG GPU instance, counted once however many compute instances share it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct MigGpuInstance {
    /// Index of the GPU it is part of.
    pub parent_index: u32,
    /// GPU instance id; `None` when the source did not give one (then the group holds one MIG
    /// device, since instances without an id cannot be matched up).
    pub gpu_instance_id: Option<u32>,
    /// GPU-instance profile, e.g. `3g.71gb` (see [`MigInstance::gpu_instance_profile`]).
    pub profile: Option<String>,
    /// The MIG device slots of its compute instances, in [`MigState::instances`] order.
    pub slots: Vec<u32>,
    /// Its compute instance ids, where known, in the same order.
    pub compute_instance_ids: Vec<u32>,
    /// Memory of the GPU instance, bytes (from the first compute instance that had figures);
    /// `None` when none had.
    pub total_bytes: Option<u64>,
    /// Free memory, bytes; `None` with `total_bytes`.
    pub free_bytes: Option<u64>,
    /// `total_bytes - free_bytes`, bytes; `None` with `total_bytes`.
    pub used_bytes: Option<u64>,
    /// Reservation, bytes, where the source gives it.
    pub reserved_bytes: Option<u64>,
}
