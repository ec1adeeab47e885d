//! The exporter's model: what one measurement of the host found (`Measurement`), and the rules that
//! decide whether a source is up and whether the measurement counts as a success. The
//! exposition (`super::exposition`) renders it.

use std::collections::BTreeMap;
use std::time::Instant;

use hypomnesis::{
    ErrorKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, MigGpuInstance, ProcessContext,
    SourceReport, SourceState,
};

/// The source that answers when NVML does not, and whose health is probed apart while NVML
/// gives the figures (`super::probe`).
pub const FALLBACK: GpuQuerySource = GpuQuerySource::NvidiaSmi;
/// The source the fallback stands in for.
pub const PRIMARY: GpuQuerySource = GpuQuerySource::Nvml;

/// A source whose report comes from a probe (`super::probe`): when the probe was made, and
/// whether apart from the measurement (its source gave no figure there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    pub source: GpuQuerySource,
    pub at: Instant,
    pub apart: bool,
}

/// What one measurement found.
#[derive(Debug, Clone, Default)]
pub struct Measurement {
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
    /// Shared with the exporter's memory of each process ([`crate::collect::known::KnownProcesses`]).
    pub contexts: BTreeMap<u32, std::sync::Arc<ProcessContext>>,
    /// The most per-process series to expose, the largest first (`None`: all; 0: none).
    pub max_process_series: Option<usize>,
    /// The most allocation series to expose (`None`: all; 0: none).
    pub max_allocation_series: Option<usize>,
    /// What each GPU source said about itself.
    pub sources: Vec<SourceReport>,
    /// The sources among them whose report is a probe's, and when it was made.
    pub probes: Vec<Probe>,
    /// MIG GPU instances of the devices in MIG mode (memory counted once per GPU instance).
    pub mig: Vec<MigGpuInstance>,
    /// Which pod the kubelet allocated each GPU to, where a pod-resources socket is in use.
    pub kube: Option<super::allocation::KubeSample>,
    /// The ghosts of the listed GPUs (`None`: not looked for, off Linux or when the look
    /// failed).
    pub ghosts: Option<hypomnesis::GhostReport>,
}

impl Measurement {
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
    /// present source that fails is one, even when another source counted the GPUs). A
    /// fallback probed apart from the measurement gave none of its figures: its health is its
    /// `up`, not this.
    pub fn success(&self) -> bool {
        self.counted.is_some()
            && self
                .unreadable
                .iter()
                .all(|(_, kind)| *kind == ErrorKind::NotSupported)
            && self
                .sources
                .iter()
                .filter(|r| present(r) && !self.probed_apart(r.source))
                .all(|r| self.source_up(r))
    }

    /// The devices' figures of `d` (a measurement of the devices alone) in place of this one's.
    pub fn devices_from(&mut self, d: Self) {
        self.counted = d.counted;
        self.devices = d.devices;
        self.unreadable = d.unreadable;
        self.mig = d.mig;
    }

    /// Whether `source`'s report is a probe's made apart from this measurement.
    pub fn probed_apart(&self, source: GpuQuerySource) -> bool {
        self.probes.iter().any(|p| p.source == source && p.apart)
    }

    /// Whether this measurement needs the fallback's health from itself: the primary did not
    /// answer it, or some figure came from the fallback.
    pub fn needs_fallback(&self) -> bool {
        let primary_up = self
            .sources
            .iter()
            .find(|r| r.source == PRIMARY)
            .is_some_and(|r| self.source_up(r));
        !primary_up
            || self.devices.iter().any(|d| d.source == FALLBACK)
            || self.processes.iter().any(|p| p.source == FALLBACK)
    }

    /// Adds a probe's report of a source, after the primary's when there is one (the order of
    /// `hypomnesis::sources`).
    pub fn add_probed(&mut self, report: SourceReport, at: Instant, apart: bool) {
        self.probes.push(Probe {
            source: report.source,
            at,
            apart,
        });
        let place = self
            .sources
            .iter()
            .position(|r| r.source == PRIMARY)
            .map_or(0, |i| i + 1);
        self.sources.insert(place, report);
    }
}

/// Whether a source exists on this host (it may still fail); one that does not has no `up`.
pub fn present(r: &SourceReport) -> bool {
    !matches!(r.state, SourceState::Absent(_))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::{GpuDeviceInfo, GpuQuerySource, SourceReport, SourceState};

    use super::*;

    fn report(source: GpuQuerySource, state: SourceState) -> SourceReport {
        SourceReport::builder().source(source).state(state).build()
    }

    fn device(source: GpuQuerySource) -> GpuDeviceInfo {
        GpuDeviceInfo::builder()
            .index(0)
            .total_bytes(10)
            .free_bytes(4)
            .used_bytes(6)
            .source(source)
            .build()
    }

    /// NVML answered and read the GPU.
    fn nvml_answered() -> Measurement {
        Measurement {
            counted: Some(1),
            devices: vec![device(PRIMARY)],
            sources: vec![
                report(PRIMARY, SourceState::Answered),
                report(
                    GpuQuerySource::Drm,
                    SourceState::absent(hypomnesis::ErrorKind::NotInstalled, "no card"),
                ),
            ],
            ..Measurement::default()
        }
    }

    #[test]
    fn the_fallback_is_needed_only_where_nvml_did_not_answer() {
        let s = nvml_answered();
        assert!(!s.needs_fallback());
        let mut failed = s.clone();
        failed.sources[0] = report(
            PRIMARY,
            SourceState::failed(hypomnesis::ErrorKind::Other, "init"),
        );
        failed.devices.clear();
        failed.counted = None;
        assert!(failed.needs_fallback(), "NVML failed");
        let mut absent = s.clone();
        absent.sources[0] = report(
            PRIMARY,
            SourceState::absent(hypomnesis::ErrorKind::NotInstalled, "no library"),
        );
        absent.devices = vec![device(FALLBACK)];
        assert!(
            absent.needs_fallback(),
            "NVML absent, figures from nvidia-smi"
        );
        let mut one_from_smi = s;
        one_from_smi.devices.push(device(FALLBACK));
        assert!(
            one_from_smi.needs_fallback(),
            "a figure came from nvidia-smi"
        );
        let no_gpu_source = Measurement {
            counted: Some(0),
            ..Measurement::default()
        };
        assert!(no_gpu_source.needs_fallback(), "no NVML report at all");
    }

    #[test]
    fn a_broken_fallback_probed_apart_does_not_fail_the_measurement() {
        let mut s = nvml_answered();
        let at = Instant::now();
        s.add_probed(
            report(
                FALLBACK,
                SourceState::failed(hypomnesis::ErrorKind::Other, "exit 9"),
            ),
            at,
            true,
        );
        // Placed after NVML, as `hypomnesis::sources` orders them.
        let order: Vec<_> = s.sources.iter().map(|r| r.source).collect();
        assert_eq!(order, [PRIMARY, FALLBACK, GpuQuerySource::Drm]);
        assert!(s.probed_apart(FALLBACK));
        assert!(!s.source_up(&s.sources[1]), "its up says it failed");
        assert!(s.success(), "the figures were all measured");
        // The same failure probed by a measurement that needed the fallback fails it.
        s.probes[0].apart = false;
        assert!(!s.probed_apart(FALLBACK));
        assert!(!s.success());
        // A failing primary fails it whatever the fallback's probe.
        let mut s = nvml_answered();
        s.sources[0] = report(
            PRIMARY,
            SourceState::failed(hypomnesis::ErrorKind::Other, "init"),
        );
        s.devices.clear();
        s.add_probed(report(FALLBACK, SourceState::Answered), at, true);
        assert!(!s.success());
    }
}
