//! What kind of memory a GPU has: its own, one pool shared with the CPU, or its own with
//! coherent access to the CPU's.

use std::fmt;

/// How a GPU's memory relates to the host's, as the driver shows it
/// ([`crate::GpuDeviceInfo::memory_model`], with the evidence in
/// [`crate::GpuDeviceInfo::memory_model_evidence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum MemoryModel {
    /// Memory of its own, apart from the host's (a board on the PCI bus: an H200, a Radeon).
    Discrete,
    /// One pool shared with the CPU: the GPU has no memory of its own, or a small carve-out
    /// of the host's (NVIDIA GB10 and Jetson, AMD APUs, Apple silicon). The device's figures
    /// are the pool's: the host's RAM, which the CPU's processes use too.
    Unified,
    /// Memory of its own, and coherent access to the CPU's (NVIDIA Grace Hopper and Grace
    /// Blackwell over NVLink-C2C, where the addressing mode is ATS). The device's figures
    /// are its own memory's.
    Coherent,
}

impl MemoryModel {
    /// A short stable name: `discrete`, `unified`, `coherent`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Discrete => "discrete",
            Self::Unified => "unified",
            Self::Coherent => "coherent",
        }
    }
}

impl fmt::Display for MemoryModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
