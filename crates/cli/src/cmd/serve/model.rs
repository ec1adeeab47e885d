//! The exporter's model: what one measurement of the host found (`Sample`), and the rules that
//! decide whether a source is up and whether the measurement counts as a success. The
//! exposition (`super::exposition`) renders it.

use std::collections::BTreeMap;

use hypomnesis::{
    ErrorKind, GpuDeviceInfo, GpuProcessEntry, MigGpuInstance, ProcessContext, SourceReport,
    SourceState,
};

/// What one measurement found.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Devices counted; `None` when counting failed.
    pub counted: Option<u32>,
    /// The devices that could be read, in index order.
    pub devices: Vec<GpuDeviceInfo>,
    /// Counted devices whose memory could not be read, and why (a lost GPU, a refusal…).
    pub unreadable: Vec<(u32, ErrorKind)>,
    /// Processes of the devices whose lists could be read.
    pub processes: Vec<GpuProcessEntry>,
    /// Counted devices whose process list could not be read.
    pub process_errors: u32,
    /// The devices whose process lists were read (what "not visible from here" needs).
    pub listed: Vec<u32>,
    /// The owner and container of the listed processes, by pid (where readable).
    pub contexts: BTreeMap<u32, ProcessContext>,
    /// The most per-process series to expose, the largest first (`None`: all; 0: none).
    pub max_process_series: Option<usize>,
    /// What each GPU source said about itself.
    pub sources: Vec<SourceReport>,
    /// MIG GPU instances of the devices in MIG mode (memory counted once per GPU instance).
    pub mig: Vec<MigGpuInstance>,
    /// Which pod the kubelet allocated each GPU to, where a pod-resources socket is in use.
    pub kube: Option<super::allocation::KubeSample>,
}

impl Sample {
    /// A measurement that could not be made at all (the measuring task died).
    pub fn failed() -> Self {
        Self::default()
    }

    /// Whether source `r` answered in this measurement: a device of it was read here, or it
    /// says it answers and nothing in this measurement failed. Its own report alone is taken
    /// after the figures and may tell another story (a driver that came back, or went away).
    pub fn source_up(&self, r: &SourceReport) -> bool {
        self.devices.iter().any(|d| d.source == r.source)
            || (matches!(r.state, SourceState::Answered)
                && self.counted.is_some()
                && self.unreadable.is_empty())
    }

    /// Devices counted, every one of them read, and every source this host has answering (a
    /// host without any GPU source counts as read: there is nothing to measure; a device whose
    /// driver publishes no memory figures at all is a limit of the host, not a failure; a
    /// present source that fails is one, even when another source counted the GPUs).
    pub fn success(&self) -> bool {
        self.counted.is_some()
            && self
                .unreadable
                .iter()
                .all(|(_, kind)| *kind == ErrorKind::NotSupported)
            && self
                .sources
                .iter()
                .filter(|r| present(r))
                .all(|r| self.source_up(r))
    }
}

/// Whether a source exists on this host (it may still fail); one that does not has no `up`.
pub fn present(r: &SourceReport) -> bool {
    !matches!(r.state, SourceState::Absent(_))
}
