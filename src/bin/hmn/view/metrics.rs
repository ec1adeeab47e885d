//! The exporter's view: one measurement of the host (`Sample`) as `OpenMetrics` text, written by
//! prometheus-client's encoder, and as the classic Prometheus text format. Pure; tested byte for
//! byte.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

use hypomnesis::{
    ErrorKind, GpuDeviceInfo, GpuProcessEntry, GpuVendor, MigGpuInstance, ProcessContext,
    SourceReport, SourceState,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

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
fn present(r: &SourceReport) -> bool {
    !matches!(r.state, SourceState::Absent(_))
}

/// The label value of an error kind: its JSON name (`gpu_lost`, `no_permission`, …).
fn kind_label(kind: ErrorKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "other".to_string())
}

/// The `OpenMetrics` text of `sample`, which took `took` to measure and was the `measurements`-th
/// one, ending with `# EOF`. With `stalled`, a newer measurement has not finished within the
/// scrape's budget: the figures are stale and the scrape not a success.
pub fn render(
    sample: Sample,
    took: Duration,
    measurements: u64,
    stalled: Option<Duration>,
) -> String {
    let mut registry = Registry::with_prefix("hypomnesis");
    registry.register_collector(Box::new(Exposition {
        sample,
        took,
        measurements,
        stalled,
    }));
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => text,
        // Writing to a String cannot fail and every value fits; never a half exposition.
        Err(fmt::Error) => "# EOF\n".to_string(),
    }
}

/// The Prometheus text format (0.0.4) of an exposition made by [`render`], for clients that do
/// not take `OpenMetrics` (`promtool check metrics`, older agents): no `# UNIT` lines and no
/// `# EOF`, counters described under their `_total` sample name, the `unknown` type as
/// `untyped`.
pub fn classic_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // A HELP line waits for its TYPE line, which may rename the family.
    let mut help: Option<&str> = None;
    let flush = |out: &mut String, help: &mut Option<&str>| {
        if let Some(h) = help.take() {
            out.push_str(h);
            out.push('\n');
        }
    };
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            flush(&mut out, &mut help);
            help = Some(line);
            continue;
        }
        if let Some((name, kind)) = line
            .strip_prefix("# TYPE ")
            .and_then(|t| t.rsplit_once(' '))
        {
            match kind {
                "counter" => {
                    if let Some(text) = help
                        .take()
                        .and_then(|h| h.strip_prefix("# HELP "))
                        .and_then(|h| h.strip_prefix(name))
                    {
                        let _ = writeln!(out, "# HELP {name}_total{text}");
                    }
                    let _ = writeln!(out, "# TYPE {name}_total counter");
                    continue;
                }
                "unknown" => {
                    flush(&mut out, &mut help);
                    let _ = writeln!(out, "# TYPE {name} untyped");
                    continue;
                }
                _ => {}
            }
        }
        flush(&mut out, &mut help);
        out.push_str(line);
        out.push('\n');
    }
    flush(&mut out, &mut help);
    out
}

/// Escapes a label value for the text format: backslash, double quote and line feed.
/// (prometheus-client writes label values as given.)
pub fn label_value(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Bytes as a gauge value (every real figure fits; larger ones saturate).
fn gauge(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A (device, pid) row of the process series: its memory and the process's short name.
type ProcessRow<'a> = ((u32, u32), (u64, &'a str));

/// A sample turned into metric families, in a stable order.
#[derive(Debug)]
struct Exposition {
    sample: Sample,
    took: Duration,
    measurements: u64,
    /// How long the measurement in progress has run past the scrape's budget, when it has.
    stalled: Option<Duration>,
}

type Labels<const N: usize> = [(&'static str, String); N];

/// Labels whose empty values are left out (an unknown uuid is no `uuid=""`).
type Known = Vec<(&'static str, String)>;

/// `labels` without those whose value is empty.
fn known(labels: impl IntoIterator<Item = (&'static str, String)>) -> Known {
    labels.into_iter().filter(|(_, v)| !v.is_empty()).collect()
}

/// Encodes one gauge family; a family without series is left out.
fn gauges<L, V>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[(L, V)],
) -> fmt::Result
where
    L: EncodeLabelSet,
    V: prometheus_client::encoding::EncodeGaugeValue + Copy,
{
    if series.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?;
    for (labels, value) in series {
        ConstGauge::new(*value).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// Encodes a gauge without labels.
fn single<V: prometheus_client::encoding::EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: V,
) -> fmt::Result {
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

impl Exposition {
    /// The labels of a device's memory series: its index and, when known, its UUID (the
    /// model, PCI address, driver and vendor are on `hypomnesis_gpu_info`, to join on).
    fn device_labels(d: &GpuDeviceInfo) -> Known {
        known([
            ("gpu", d.index.to_string()),
            ("uuid", label_value(d.uuid.as_deref().unwrap_or_default())),
        ])
    }

    /// One `hypomnesis_gpu_info` series per device: what it is, as labels (empty ones left out).
    fn info(&self) -> Vec<(Known, i64)> {
        self.sample
            .devices
            .iter()
            .map(|d| {
                let mig = match d.mig_enabled {
                    Some(true) => "enabled",
                    Some(false) => "disabled",
                    None => "",
                };
                let labels = known([
                    ("gpu", d.index.to_string()),
                    ("uuid", label_value(d.uuid.as_deref().unwrap_or_default())),
                    ("model", label_value(d.name.as_deref().unwrap_or_default())),
                    (
                        "pci_bus_id",
                        label_value(d.pci_bus_id.as_deref().unwrap_or_default()),
                    ),
                    (
                        "driver",
                        label_value(d.driver_version.as_deref().unwrap_or_default()),
                    ),
                    (
                        "vendor",
                        d.vendor.map(GpuVendor::as_str).unwrap_or_default().into(),
                    ),
                    ("source", d.source.as_str().to_string()),
                    ("mig_mode", mig.to_string()),
                ]);
                (labels, 1)
            })
            .collect()
    }

    /// The UUID of device `index`, when it was read and has one.
    fn uuid_of(&self, index: u32) -> String {
        self.sample
            .devices
            .iter()
            .find(|d| d.index == index)
            .and_then(|d| d.uuid.as_deref())
            .map(label_value)
            .unwrap_or_default()
    }

    /// Per-device series of one figure, skipping devices where it is unknown.
    fn devices(&self, figure: impl Fn(&GpuDeviceInfo) -> Option<u64>) -> Vec<(Known, i64)> {
        self.sample
            .devices
            .iter()
            .filter_map(|d| figure(d).map(|v| (Self::device_labels(d), gauge(v))))
            .collect()
    }

    /// Per MIG GPU instance series of one figure (labels `gpu` and `uuid` of the GPU, `mig` =
    /// GPU instance id, `profile`; unknown ones left out), skipping instances where it is unknown.
    fn mig(&self, figure: impl Fn(&MigGpuInstance) -> Option<u64>) -> Vec<(Known, i64)> {
        self.sample
            .mig
            .iter()
            .filter_map(|m| {
                let v = figure(m)?;
                let labels = known([
                    ("gpu", m.parent_index.to_string()),
                    ("uuid", self.uuid_of(m.parent_index)),
                    (
                        "mig",
                        m.gpu_instance_id
                            .map_or_else(String::new, |g| g.to_string()),
                    ),
                    (
                        "profile",
                        label_value(m.profile.as_deref().unwrap_or_default()),
                    ),
                ]);
                Some((labels, gauge(v)))
            })
            .collect()
    }

    /// What no visible process accounts for on `d` (as `hmn ps`'s "(not visible from here)"
    /// row): the unattributed memory above the driver's overhead allowance, else 0.
    fn not_visible(&self, d: &GpuDeviceInfo) -> Option<u64> {
        if !self.sample.listed.contains(&d.index) || d.mig_enabled == Some(true) {
            return None;
        }
        let unattributed = d.unattributed_bytes(&self.sample.processes)?;
        let listed = self
            .sample
            .processes
            .iter()
            .filter(|p| p.device_index == d.index)
            .count();
        Some(
            if unattributed > hypomnesis::driver_overhead_allowance(listed) {
                unattributed
            } else {
                0
            },
        )
    }

    /// The (device, pid) rows, their memory added up, the largest first (then by device and
    /// pid), and how many of them the series cap leaves out.
    fn process_rows(&self) -> (Vec<ProcessRow<'_>>, usize) {
        let mut rows: BTreeMap<(u32, u32), (u64, &str)> = BTreeMap::new();
        for p in &self.sample.processes {
            let row = rows
                .entry((p.device_index, p.pid))
                .or_insert((0, p.name.as_deref().unwrap_or_default()));
            row.0 = row.0.saturating_add(p.used_bytes);
        }
        let mut rows: Vec<_> = rows.into_iter().collect();
        let keep = self.sample.max_process_series.unwrap_or(usize::MAX);
        let dropped = rows.len().saturating_sub(keep);
        if dropped > 0 {
            rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
            rows.truncate(keep);
            rows.sort_by_key(|r| r.0);
        }
        (rows, dropped)
    }

    /// One series per (device, pid) row of [`Self::process_rows`]. Labels: the GPU's index and
    /// UUID, the pid, and the process's short name as `process` (not `name`, which would
    /// collide with a GPU's in a join); empty ones left out.
    fn processes(&self, rows: Vec<ProcessRow<'_>>) -> Vec<(Known, i64)> {
        rows.into_iter()
            .map(|((gpu, pid), (used, name))| {
                let ctx = self.sample.contexts.get(&pid);
                let container = ctx.and_then(|c| c.container.as_ref());
                let labels = known([
                    ("gpu", gpu.to_string()),
                    ("uuid", self.uuid_of(gpu)),
                    ("pid", pid.to_string()),
                    ("process", label_value(name)),
                    (
                        "user",
                        label_value(ctx.and_then(|c| c.user.as_deref()).unwrap_or_default()),
                    ),
                    (
                        "container",
                        container.map(|c| c.id.clone()).unwrap_or_default(),
                    ),
                    (
                        "pod",
                        container
                            .and_then(|c| c.pod_uid.clone())
                            .unwrap_or_default(),
                    ),
                ]);
                (labels, gauge(used))
            })
            .collect()
    }
}

/// A MIG GPU instance's allocated memory: total − reserved − free where the reservation is
/// reported (and the figures agree), else its used figure.
fn mig_allocated(m: &MigGpuInstance) -> Option<u64> {
    let allocated = m
        .total_bytes
        .zip(m.free_bytes)
        .zip(m.reserved_bytes)
        .and_then(|((t, f), r)| t.checked_sub(r)?.checked_sub(f));
    allocated.or(m.used_bytes)
}

impl Collector for Exposition {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        self.encode_memory(&mut encoder)?;
        self.encode_status(&mut encoder)
    }
}

impl Exposition {
    /// The devices' and processes' memory.
    fn encode_memory(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let bytes = Some(&Unit::Bytes);
        gauges(
            e,
            "gpu_info",
            "One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source and MIG mode as labels (unknown ones left out), to join on `gpu` or `uuid`.",
            None,
            &self.info(),
        )?;
        gauges(
            e,
            "gpu_memory_total",
            "Total memory of the GPU as its driver reports it.",
            bytes,
            &self.devices(|d| Some(d.total_bytes)),
        )?;
        gauges(
            e,
            "gpu_memory_free",
            "Memory of the GPU that new allocations can still get.",
            bytes,
            &self.devices(|d| Some(d.free_bytes)),
        )?;
        gauges(
            e,
            "gpu_memory_used",
            "Memory of the GPU taken by allocations: total - reserved - free where the driver reports the reservation (as DCGM's FB_USED and nvidia-smi's memory.used), else total - free; used + reserved + free = total.",
            bytes,
            &self.devices(|d| Some(d.allocated_bytes().unwrap_or(d.used_bytes))),
        )?;
        gauges(
            e,
            "gpu_memory_reserved",
            "Driver/firmware reservation, part of total; absent when the driver does not report it.",
            bytes,
            &self.devices(|d| d.reserved_bytes),
        )?;
        gauges(
            e,
            "gpu_memory_not_visible",
            "Allocated memory of the GPU that no process this exporter can see accounts for, beyond the driver's own overhead per process (processes of other PID namespaces or users); 0 when all is accounted for, absent when unknown (no reservation figure, the process list not read, MIG mode).",
            bytes,
            &self.devices(|d| self.not_visible(d)),
        )?;
        self.encode_mig(e, bytes)?;
        self.encode_processes(e, bytes)
    }

    /// The MIG GPU instances' memory.
    fn encode_mig(&self, e: &mut DescriptorEncoder<'_>, bytes: Option<&Unit>) -> fmt::Result {
        gauges(
            e,
            "gpu_mig_memory_total",
            "Memory of a MIG GPU instance (its compute instances share it).",
            bytes,
            &self.mig(|m| m.total_bytes),
        )?;
        gauges(
            e,
            "gpu_mig_memory_free",
            "Free memory of a MIG GPU instance.",
            bytes,
            &self.mig(|m| m.free_bytes),
        )?;
        gauges(
            e,
            "gpu_mig_memory_used",
            "Memory of a MIG GPU instance taken by allocations: total - reserved - free where the reservation is reported, else total - free.",
            bytes,
            &self.mig(mig_allocated),
        )?;
        gauges(
            e,
            "gpu_mig_memory_reserved",
            "Driver reservation of a MIG GPU instance; absent when not reported.",
            bytes,
            &self.mig(|m| m.reserved_bytes),
        )
    }

    /// The processes' memory, and how many series the cap left out.
    fn encode_processes(&self, e: &mut DescriptorEncoder<'_>, bytes: Option<&Unit>) -> fmt::Result {
        let (rows, dropped) = self.process_rows();
        gauges(
            e,
            "gpu_process_memory",
            "GPU memory a process holds on a GPU.",
            bytes,
            &self.processes(rows),
        )?;
        if self.sample.max_process_series.is_some() {
            single(
                e,
                "gpu_process_series_dropped",
                "Per-process series left out by --max-process-series (the smallest holders).",
                None,
                i64::try_from(dropped).unwrap_or(i64::MAX),
            )?;
        }
        Ok(())
    }

    /// Sources, errors, and the exporter itself.
    /// The GPUs counted, and those whose memory or process list could not be read.
    fn encode_reads(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        if let Some(n) = self.sample.counted {
            single(
                e,
                "gpu_devices",
                "GPUs counted at the last measurement.",
                None,
                i64::from(n),
            )?;
        }
        single(
            e,
            "gpu_read_errors",
            "Counted GPUs whose memory could not be read at the last measurement (their series are absent).",
            None,
            i64::try_from(self.sample.unreadable.len()).unwrap_or(i64::MAX),
        )?;
        let unreadable: Vec<(Labels<2>, i64)> = self
            .sample
            .unreadable
            .iter()
            .map(|(gpu, kind)| ([("gpu", gpu.to_string()), ("kind", kind_label(*kind))], 1))
            .collect();
        gauges(
            e,
            "gpu_unreadable",
            "GPUs counted but not read at the last measurement, by why (gpu_lost: fallen off the bus or not listed; no_permission; not_supported: the driver publishes no memory figures; …).",
            None,
            &unreadable,
        )?;
        single(
            e,
            "gpu_process_read_errors",
            "Counted GPUs whose process list could not be read at the last measurement.",
            None,
            i64::from(self.sample.process_errors),
        )?;
        Ok(())
    }

    fn encode_status(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let up: Vec<(Labels<1>, i64)> = self
            .sample
            .sources
            .iter()
            .filter(|r| present(r))
            .map(|r| {
                (
                    [("source", r.source.as_str().to_string())],
                    i64::from(self.sample.source_up(r)),
                )
            })
            .collect();
        gauges(
            e,
            "up",
            "Whether a GPU source this host has answered at the last measurement (1) or not (0); a source the host does not have has no series.",
            None,
            &up,
        )?;
        self.encode_reads(e)?;
        single(
            e,
            "scrape_success",
            "Whether the last measurement counted the GPUs, read every one, and every GPU source this host has answered (1) or not (0, also while a newer one is stalled).",
            None,
            i64::from(self.sample.success() && self.stalled.is_none()),
        )?;
        single(
            e,
            "measurement_stalled",
            "How long the measurement in progress has run without finishing (a blocked driver call); 0 when none is stalled. While it is not 0 the figures are those of the last measurement that finished.",
            Some(&Unit::Seconds),
            self.stalled.unwrap_or_default().as_secs_f64(),
        )?;
        single(
            e,
            "scrape_duration",
            "How long the last measurement took.",
            Some(&Unit::Seconds),
            self.took.as_secs_f64(),
        )?;
        let counter = ConstCounter::new(self.measurements);
        counter.encode(e.encode_descriptor(
            "measurements",
            "Measurements made since start (scrapes within --min-interval share one).",
            None,
            MetricType::Counter,
        )?)?;
        gauges(
            e,
            "build_info",
            "The hmn version serving these metrics.",
            None,
            &[([("version", env!("CARGO_PKG_VERSION").to_string())], 1_i64)],
        )
    }
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(all(test, feature = "test-helpers"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::{GpuQuerySource, GpuVendor};

    use super::*;

    const MIB: u64 = 1 << 20;

    fn device(index: u32, reserved: Option<u64>) -> GpuDeviceInfo {
        GpuDeviceInfo::builder()
            .index(index)
            .name(Some("NVIDIA H200".into()))
            .uuid(Some(format!("GPU-{index}")))
            .vendor(Some(GpuVendor::Nvidia))
            .total_bytes(1000 * MIB)
            .free_bytes(600 * MIB)
            .used_bytes(400 * MIB)
            .reserved_bytes(reserved)
            .build()
    }

    fn process(pid: u32, name: Option<&str>, used: u64, device: u32) -> GpuProcessEntry {
        GpuProcessEntry::builder()
            .pid(pid)
            .name(name.map(String::from))
            .used_bytes(used)
            .device_index(device)
            .build()
    }

    fn report(source: GpuQuerySource, state: SourceState) -> SourceReport {
        SourceReport::builder().source(source).state(state).build()
    }

    const CONTAINER: &str = "9e8d7c6b5a4938271605f4e3d2c1b0a99e8d7c6b5a4938271605f4e3d2c1b0a9";
    const POD: &str = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";

    fn alice_in_a_pod() -> ProcessContext {
        let mut c = ProcessContext::default();
        c.user = Some("alice".into());
        c.container = hypomnesis::parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{CONTAINER}.scope\n",
            POD.replace('-', "_")
        ));
        c
    }

    fn sample() -> Sample {
        let mut bare = device(1, None);
        bare.name = None;
        bare.uuid = None;
        bare.vendor = None;
        Sample {
            counted: Some(3),
            devices: vec![device(0, Some(5 * MIB)), bare],
            unreadable: vec![(2, ErrorKind::GpuLost)],
            processes: vec![
                process(20, Some("python3"), 100 * MIB, 0),
                process(7, None, MIB, 1),
                process(20, Some("python3"), 2 * MIB, 0),
            ],
            process_errors: 1,
            listed: vec![0, 1],
            contexts: [(20, alice_in_a_pod())].into_iter().collect(),
            max_process_series: None,
            sources: vec![
                report(GpuQuerySource::Nvml, SourceState::Answered),
                report(
                    GpuQuerySource::NvidiaSmi,
                    SourceState::Absent("not on PATH".into()),
                ),
                report(GpuQuerySource::Drm, SourceState::Failed("no".into())),
            ],
            mig: Vec::new(),
        }
    }

    #[test]
    fn up_is_what_this_measurement_saw() {
        let nvml = report(GpuQuerySource::Nvml, SourceState::Answered);
        let smi_failed = report(
            GpuQuerySource::NvidiaSmi,
            SourceState::Failed("late".into()),
        );
        let mut s = sample();
        // A device of NVML was read here, although another device was lost.
        assert!(s.source_up(&nvml));
        // The fallback read a device in this measurement; its later report failed.
        let mut from_smi = device(0, None);
        from_smi.source = GpuQuerySource::NvidiaSmi;
        s.devices = vec![from_smi];
        assert!(s.source_up(&smi_failed));
        // NVML read nothing here and a device was lost: it did not answer, whatever it says now.
        assert!(!s.source_up(&nvml));
        s.unreadable.clear();
        assert!(s.source_up(&nvml), "nothing failed and it answers");
        s.counted = None;
        assert!(!s.source_up(&nvml), "counting failed in this measurement");
        let idle = Sample {
            counted: Some(0),
            ..Sample::default()
        };
        assert!(idle.source_up(&nvml), "loaded, no GPU: answered");
        assert!(!idle.source_up(&smi_failed));
    }

    #[test]
    fn mig_instances_have_their_own_series() {
        let mut s = sample();
        s.mig = vec![
            MigGpuInstance::builder()
                .parent_index(0)
                .gpu_instance_id(Some(9))
                .profile(Some("1g.18gb".into()))
                .total_bytes(Some(16_384 * MIB))
                .free_bytes(Some(16_375 * MIB))
                .used_bytes(Some(9 * MIB))
                .build(),
        ];
        let text = render(s, Duration::from_millis(10), 1, None);
        assert!(text.contains(&format!(
            "hypomnesis_gpu_mig_memory_total_bytes{{gpu=\"0\",uuid=\"GPU-0\",mig=\"9\",profile=\"1g.18gb\"}} {}\n",
            16_384 * MIB
        )), "{text}");
        assert!(text.contains(&format!(
            "hypomnesis_gpu_mig_memory_used_bytes{{gpu=\"0\",uuid=\"GPU-0\",mig=\"9\",profile=\"1g.18gb\"}} {}\n",
            9 * MIB
        )));
        // An instance whose id or profile is unknown has no empty labels.
        let mut s = sample();
        s.mig = vec![
            MigGpuInstance::builder()
                .parent_index(1)
                .total_bytes(Some(MIB))
                .build(),
        ];
        let text = render(s, Duration::from_millis(10), 1, None);
        assert!(
            text.contains(&format!(
                "hypomnesis_gpu_mig_memory_total_bytes{{gpu=\"1\"}} {MIB}\n"
            )),
            "{text}"
        );
        assert!(
            !text.contains("hypomnesis_gpu_mig_memory_reserved"),
            "unknown: absent"
        );
    }

    /// The figure of series `name` with labels starting `{gpu="<gpu>"`, if any.
    fn figure(text: &str, name: &str, gpu: u32) -> Option<u64> {
        let head = format!("{name}{{gpu=\"{gpu}\"");
        text.lines()
            .find(|l| l.starts_with(&head))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    #[test]
    fn used_reserved_and_free_add_up_and_hidden_memory_has_its_series() {
        let mut s = sample();
        s.mig = vec![
            MigGpuInstance::builder()
                .parent_index(0)
                .gpu_instance_id(Some(3))
                .total_bytes(Some(100 * MIB))
                .free_bytes(Some(60 * MIB))
                .used_bytes(Some(40 * MIB))
                .reserved_bytes(Some(10 * MIB))
                .build(),
        ];
        let text = render(s.clone(), Duration::from_millis(10), 1, None);
        let f = |name: &str, gpu| figure(&text, &format!("hypomnesis_gpu_{name}_bytes"), gpu);
        let (used, reserved, free) = (
            f("memory_used", 0),
            f("memory_reserved", 0),
            f("memory_free", 0),
        );
        assert_eq!(
            used.unwrap() + reserved.unwrap() + free.unwrap(),
            f("memory_total", 0).unwrap(),
            "{text}"
        );
        assert_eq!(
            f("memory_used", 1),
            Some(400 * MIB),
            "no reservation: total - free"
        );
        assert_eq!(f("mig_memory_used", 0), Some(30 * MIB), "100 - 10 - 60");
        // 395 MiB allocated on GPU 0, 102 MiB in listed processes: 293 MiB not visible.
        assert_eq!(f("memory_not_visible", 0), Some(293 * MIB));
        assert_eq!(
            f("memory_not_visible", 1),
            None,
            "no reservation figure: unknown"
        );
        // Within the driver's overhead allowance: 0, not a hidden process.
        s.processes.push(process(30, Some("x"), 290 * MIB, 0));
        let text = render(s.clone(), Duration::from_millis(10), 1, None);
        assert_eq!(
            figure(&text, "hypomnesis_gpu_memory_not_visible_bytes", 0),
            Some(0)
        );
        // Process list not read, or MIG mode: unknown.
        s.listed = vec![1];
        let text = render(s.clone(), Duration::from_millis(10), 1, None);
        assert!(!text.contains("not_visible_bytes{"), "{text}");
        s.listed = vec![0, 1];
        s.devices[0].mig_enabled = Some(true);
        let text = render(s, Duration::from_millis(10), 1, None);
        assert!(!text.contains("not_visible_bytes{"), "{text}");
    }

    #[test]
    fn process_series_are_capped_largest_first_and_can_be_switched_off() {
        let mut s = sample();
        s.processes.push(process(30, Some("big"), 900 * MIB, 0));
        let series = |s: &Sample| {
            let text = render(s.clone(), Duration::ZERO, 1, None);
            let pids: Vec<String> = text
                .lines()
                .filter(|l| l.starts_with("hypomnesis_gpu_process_memory_bytes{"))
                .filter_map(|l| {
                    l.split("pid=\"")
                        .nth(1)?
                        .split('"')
                        .next()
                        .map(String::from)
                })
                .collect();
            let dropped = text
                .lines()
                .find_map(|l| l.strip_prefix("hypomnesis_gpu_process_series_dropped "))
                .map(String::from);
            (pids, dropped)
        };
        assert_eq!(
            series(&s),
            (vec!["20".into(), "30".into(), "7".into()], None)
        );
        s.max_process_series = Some(2);
        assert_eq!(
            series(&s),
            (vec!["20".into(), "30".into()], Some("1".into())),
            "the two largest (900 and 102 MiB) kept, in their order; the 1 MiB one counted"
        );
        s.max_process_series = Some(0);
        assert_eq!(series(&s), (Vec::new(), Some("3".into())), "switched off");
        // Not-visible memory still counts every listed process, capped series or not.
        let text = render(s, Duration::ZERO, 1, None);
        assert!(
            text.contains("hypomnesis_gpu_memory_not_visible_bytes{gpu=\"0\""),
            "{text}"
        );
    }

    #[test]
    fn exposition_is_exact_and_stable() {
        let text = render(sample(), Duration::from_millis(1500), 4, None);
        let version = env!("CARGO_PKG_VERSION");
        let expected = format!(
            r#"# HELP hypomnesis_gpu_info One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source and MIG mode as labels (unknown ones left out), to join on `gpu` or `uuid`.
# TYPE hypomnesis_gpu_info gauge
hypomnesis_gpu_info{{gpu="0",uuid="GPU-0",model="NVIDIA H200",vendor="nvidia",source="nvml"}} 1
hypomnesis_gpu_info{{gpu="1",source="nvml"}} 1
# HELP hypomnesis_gpu_memory_total_bytes Total memory of the GPU as its driver reports it.
# TYPE hypomnesis_gpu_memory_total_bytes gauge
# UNIT hypomnesis_gpu_memory_total_bytes bytes
hypomnesis_gpu_memory_total_bytes{{gpu="0",uuid="GPU-0"}} 1048576000
hypomnesis_gpu_memory_total_bytes{{gpu="1"}} 1048576000
# HELP hypomnesis_gpu_memory_free_bytes Memory of the GPU that new allocations can still get.
# TYPE hypomnesis_gpu_memory_free_bytes gauge
# UNIT hypomnesis_gpu_memory_free_bytes bytes
hypomnesis_gpu_memory_free_bytes{{gpu="0",uuid="GPU-0"}} 629145600
hypomnesis_gpu_memory_free_bytes{{gpu="1"}} 629145600
# HELP hypomnesis_gpu_memory_used_bytes Memory of the GPU taken by allocations: total - reserved - free where the driver reports the reservation (as DCGM's FB_USED and nvidia-smi's memory.used), else total - free; used + reserved + free = total.
# TYPE hypomnesis_gpu_memory_used_bytes gauge
# UNIT hypomnesis_gpu_memory_used_bytes bytes
hypomnesis_gpu_memory_used_bytes{{gpu="0",uuid="GPU-0"}} 414187520
hypomnesis_gpu_memory_used_bytes{{gpu="1"}} 419430400
# HELP hypomnesis_gpu_memory_reserved_bytes Driver/firmware reservation, part of total; absent when the driver does not report it.
# TYPE hypomnesis_gpu_memory_reserved_bytes gauge
# UNIT hypomnesis_gpu_memory_reserved_bytes bytes
hypomnesis_gpu_memory_reserved_bytes{{gpu="0",uuid="GPU-0"}} 5242880
# HELP hypomnesis_gpu_memory_not_visible_bytes Allocated memory of the GPU that no process this exporter can see accounts for, beyond the driver's own overhead per process (processes of other PID namespaces or users); 0 when all is accounted for, absent when unknown (no reservation figure, the process list not read, MIG mode).
# TYPE hypomnesis_gpu_memory_not_visible_bytes gauge
# UNIT hypomnesis_gpu_memory_not_visible_bytes bytes
hypomnesis_gpu_memory_not_visible_bytes{{gpu="0",uuid="GPU-0"}} 307232768
# HELP hypomnesis_gpu_process_memory_bytes GPU memory a process holds on a GPU.
# TYPE hypomnesis_gpu_process_memory_bytes gauge
# UNIT hypomnesis_gpu_process_memory_bytes bytes
hypomnesis_gpu_process_memory_bytes{{gpu="0",uuid="GPU-0",pid="20",process="python3",user="alice",container="9e8d7c6b5a4938271605f4e3d2c1b0a99e8d7c6b5a4938271605f4e3d2c1b0a9",pod="6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"}} 106954752
hypomnesis_gpu_process_memory_bytes{{gpu="1",pid="7"}} 1048576
# HELP hypomnesis_up Whether a GPU source this host has answered at the last measurement (1) or not (0); a source the host does not have has no series.
# TYPE hypomnesis_up gauge
hypomnesis_up{{source="nvml"}} 1
hypomnesis_up{{source="drm"}} 0
# HELP hypomnesis_gpu_devices GPUs counted at the last measurement.
# TYPE hypomnesis_gpu_devices gauge
hypomnesis_gpu_devices 3
# HELP hypomnesis_gpu_read_errors Counted GPUs whose memory could not be read at the last measurement (their series are absent).
# TYPE hypomnesis_gpu_read_errors gauge
hypomnesis_gpu_read_errors 1
# HELP hypomnesis_gpu_unreadable GPUs counted but not read at the last measurement, by why (gpu_lost: fallen off the bus or not listed; no_permission; not_supported: the driver publishes no memory figures; …).
# TYPE hypomnesis_gpu_unreadable gauge
hypomnesis_gpu_unreadable{{gpu="2",kind="gpu_lost"}} 1
# HELP hypomnesis_gpu_process_read_errors Counted GPUs whose process list could not be read at the last measurement.
# TYPE hypomnesis_gpu_process_read_errors gauge
hypomnesis_gpu_process_read_errors 1
# HELP hypomnesis_scrape_success Whether the last measurement counted the GPUs, read every one, and every GPU source this host has answered (1) or not (0, also while a newer one is stalled).
# TYPE hypomnesis_scrape_success gauge
hypomnesis_scrape_success 0
# HELP hypomnesis_measurement_stalled_seconds How long the measurement in progress has run without finishing (a blocked driver call); 0 when none is stalled. While it is not 0 the figures are those of the last measurement that finished.
# TYPE hypomnesis_measurement_stalled_seconds gauge
# UNIT hypomnesis_measurement_stalled_seconds seconds
hypomnesis_measurement_stalled_seconds 0.0
# HELP hypomnesis_scrape_duration_seconds How long the last measurement took.
# TYPE hypomnesis_scrape_duration_seconds gauge
# UNIT hypomnesis_scrape_duration_seconds seconds
hypomnesis_scrape_duration_seconds 1.5
# HELP hypomnesis_measurements Measurements made since start (scrapes within --min-interval share one).
# TYPE hypomnesis_measurements counter
hypomnesis_measurements_total 4
# HELP hypomnesis_build_info The hmn version serving these metrics.
# TYPE hypomnesis_build_info gauge
hypomnesis_build_info{{version="{version}"}} 1
# EOF
"#
        );
        assert_eq!(text, expected);
        assert_eq!(render(sample(), Duration::from_millis(1500), 4, None), text);
    }

    #[test]
    fn success_and_failure() {
        let mut s = sample();
        s.unreadable = vec![(2, ErrorKind::NotSupported)];
        // DRM is present and failing: not a success, even though NVML read every GPU.
        assert!(!s.success());
        s.sources[2] = report(GpuQuerySource::Drm, SourceState::Absent("no card".into()));
        assert!(s.success(), "absent sources are no failure");
        let text = render(s.clone(), Duration::ZERO, 1, None);
        assert!(
            !text.contains(r#"hypomnesis_up{source="drm"}"#),
            "absent: no series"
        );
        assert!(
            !text.contains(r#"hypomnesis_up{source="nvidia-smi"}"#),
            "{text}"
        );
        // A node whose only driver fails entirely (no GPU counted) is not healthy.
        let broken = Sample {
            counted: Some(0),
            sources: vec![report(
                GpuQuerySource::Nvml,
                SourceState::Failed("mismatch".into()),
            )],
            ..Sample::default()
        };
        assert!(!broken.success());
        let text = render(broken, Duration::ZERO, 1, None);
        assert!(text.contains("\nhypomnesis_scrape_success 0\n"), "{text}");
        assert!(
            text.contains("\nhypomnesis_up{source=\"nvml\"} 0\n"),
            "{text}"
        );
        let text = render(s, Duration::ZERO, 1, None);
        assert!(text.contains("\nhypomnesis_scrape_success 1\n"), "{text}");
        assert!(
            text.contains("\nhypomnesis_scrape_duration_seconds 0.0\n"),
            "{text}"
        );

        // No GPU source at all: a successful, empty measurement.
        let none = Sample {
            counted: Some(0),
            ..Sample::default()
        };
        let text = render(none, Duration::ZERO, 1, None);
        assert!(text.contains("\nhypomnesis_scrape_success 1\n"), "{text}");
        assert!(text.contains("\nhypomnesis_gpu_devices 0\n"), "{text}");
        assert!(!text.contains("gpu_memory"), "{text}");

        // Counting failed, or the measurement died.
        let text = render(Sample::failed(), Duration::ZERO, 2, None);
        assert!(text.contains("\nhypomnesis_scrape_success 0\n"), "{text}");
        assert!(!text.contains("hypomnesis_gpu_devices"), "{text}");
        assert!(
            text.contains("\nhypomnesis_measurements_total 2\n"),
            "{text}"
        );
        assert!(text.ends_with("\n# EOF\n"));
    }

    #[test]
    fn classic_text_format() {
        let om = render(sample(), Duration::from_millis(1500), 4, None);
        let text = classic_text(&om);
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert!(
            text.contains(
                "# HELP hypomnesis_measurements_total Measurements made since start (scrapes within --min-interval share one).\n\
                 # TYPE hypomnesis_measurements_total counter\n\
                 hypomnesis_measurements_total 4\n"
            ),
            "{text}"
        );
        assert!(
            text.starts_with(
                "# HELP hypomnesis_gpu_info One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source and MIG mode as labels (unknown ones left out), to join on `gpu` or `uuid`.\n\
                 # TYPE hypomnesis_gpu_info gauge\n\
                 hypomnesis_gpu_info{gpu=\"0\""
            ),
            "{text}"
        );
        let samples = |t: &str| {
            t.lines()
                .filter(|l| !l.starts_with('#'))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(samples(&text), samples(&om));
        assert_eq!(
            classic_text("# HELP x_info Odd.\n# TYPE x unknown\nx 1\n# EOF\n"),
            "# HELP x_info Odd.\n# TYPE x untyped\nx 1\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(label_value("x\ny"), "x\\ny");
        assert_eq!(label_value("plain name"), "plain name");
        let mut s = Sample {
            counted: Some(1),
            ..Sample::default()
        };
        s.processes
            .push(process(9, Some("evil\"} 1\nfake_metric 2"), MIB, 0));
        let text = render(s, Duration::ZERO, 1, None);
        assert!(
            text.contains(
                "hypomnesis_gpu_process_memory_bytes{gpu=\"0\",pid=\"9\",process=\"evil\\\"} 1\\nfake_metric 2\"} 1048576\n"
            ),
            "{text}"
        );
        assert!(!text.contains("\nfake_metric"), "{text}");
    }

    #[test]
    fn huge_values_saturate() {
        let mut d = device(0, Some(u64::MAX));
        d.total_bytes = u64::MAX;
        let s = Sample {
            counted: Some(1),
            devices: vec![d],
            ..Sample::default()
        };
        let text = render(s, Duration::ZERO, 1, None);
        assert!(text.contains("} 9223372036854775807\n"), "{text}");
    }
}
