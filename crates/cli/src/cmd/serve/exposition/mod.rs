//! The exporter's exposition: one measurement of the host (`super::model::Measurement`) as
//! `OpenMetrics` text, written by prometheus-client's encoder, and as the classic Prometheus text
//! format. Pure; tested byte for byte (`tests.rs` beside it).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hypomnesis::{GpuContextKind, GpuDeviceInfo, GpuVendor, MigGpuInstance, UnreadableReason};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use super::model::{Measurement, present};
use crate::view::printable::printable;

mod classic;
mod ghosts;
mod pods;

pub use classic::classic_text;

/// The `OpenMetrics` text of `sample`, which took `took` to measure and was the `measurements`-th
/// one, ending with `# EOF`. With `stall`, a newer measurement has not finished within the
/// scrape's budget: the figures are stale (but the devices', when a measurement of them alone
/// gave them) and the scrape not a success.
pub fn render(
    sample: Measurement,
    took: Duration,
    measurements: u64,
    stall: Option<Stall>,
) -> String {
    let mut registry = Registry::with_prefix("hypomnesis");
    registry.register_collector(Box::new(Exposition {
        sample,
        took,
        measurements,
        stalled: stall.as_ref().map(|s| s.ran),
        waiting: stall.map(|s| s.waiting).unwrap_or_default(),
    }));
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &registry) {
        Ok(()) => text,
        // Writing to a String cannot fail and every value fits; never a half exposition.
        Err(fmt::Error) => "# EOF\n".to_string(),
    }
}

/// A label value as the text format carries it: every control character (C0, DEL, C1) and
/// every mark that reorders text written right to left shown as `?`, as the text views show
/// them ([`printable`]: a process named `\x1b]0;…\x07` must not retitle the terminal of whoever
/// runs `curl /metrics`), then backslash and double quote escaped. Every label value taken from
/// outside (names, paths, the kubelet's answer) goes through here.
/// (prometheus-client writes label values as given.)
pub fn label_value(raw: &str) -> String {
    let shown = printable(raw);
    let mut out = String::with_capacity(shown.len());
    for c in shown.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// Bytes as a gauge value (every real figure fits; larger ones saturate).
fn gauge(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// A (device, pid) row of the process series: its memory, the process's short name, its
/// context kinds on that device, and whether it is the MPS server.
type ProcessRow<'a> = ((u32, u32), Held<'a>);

#[derive(Debug, Clone, Copy)]
struct Held<'a> {
    used: u64,
    name: &'a str,
    kind: Option<GpuContextKind>,
    mps_server: bool,
    /// Why the process's files cannot be read (its owner, container unknown).
    unreadable: Option<UnreadableReason>,
}

/// A sample turned into metric families, in a stable order.
#[derive(Debug)]
struct Exposition {
    sample: Measurement,
    took: Duration,
    measurements: u64,
    /// How long the measurement in progress has run past the scrape's budget, when it has.
    stalled: Option<Duration>,
    /// What that measurement waits for (`hypomnesis::in_flight`), the longest first.
    waiting: Vec<String>,
}

/// A measurement that has run past a scrape's budget: for how long, and what it waits for.
#[derive(Debug, Clone, Default)]
pub struct Stall {
    pub ran: Duration,
    pub waiting: Vec<String>,
}

/// The most operations a scrape names in `measurement_waiting_info`.
const MAX_WAITING: usize = 8;

type Labels<const N: usize> = [(&'static str, String); N];

/// Labels whose empty values are left out (an unknown uuid is no `uuid=""`).
type PresentLabels = Vec<(&'static str, String)>;

/// `labels` without those whose value is empty.
fn known(labels: impl IntoIterator<Item = (&'static str, String)>) -> PresentLabels {
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
    fn device_labels(d: &GpuDeviceInfo) -> PresentLabels {
        known([
            ("gpu", d.index.to_string()),
            ("uuid", label_value(d.uuid.as_deref().unwrap_or_default())),
        ])
    }

    /// One `hypomnesis_gpu_info` series per device: what it is, as labels (empty ones left out).
    fn info(&self) -> Vec<(PresentLabels, i64)> {
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
                    (
                        "memory_model",
                        d.memory_model
                            .map(hypomnesis::MemoryModel::as_str)
                            .unwrap_or_default()
                            .into(),
                    ),
                    (
                        "numa_node",
                        d.numa_node.map(|n| n.to_string()).unwrap_or_default(),
                    ),
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
    fn devices(&self, figure: impl Fn(&GpuDeviceInfo) -> Option<u64>) -> Vec<(PresentLabels, i64)> {
        self.sample
            .devices
            .iter()
            .filter_map(|d| figure(d).map(|v| (Self::device_labels(d), gauge(v))))
            .collect()
    }

    /// Per MIG GPU instance series of one figure (labels `gpu` and `uuid` of the GPU, `mig` =
    /// GPU instance id, `profile`; unknown ones left out), skipping instances where it is unknown.
    fn mig(&self, figure: impl Fn(&MigGpuInstance) -> Option<u64>) -> Vec<(PresentLabels, i64)> {
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
        d.unaccounted_bytes(&self.sample.processes)
    }

    /// Every (device, pid) row, its memory added up over the lists that have it.
    fn held(&self) -> BTreeMap<(u32, u32), Held<'_>> {
        let mut rows: BTreeMap<(u32, u32), Held<'_>> = BTreeMap::new();
        for p in &self.sample.processes {
            let row = rows.entry((p.device_index, p.pid)).or_insert(Held {
                used: 0,
                name: p.name.as_deref().unwrap_or_default(),
                kind: None,
                mps_server: false,
                unreadable: None,
            });
            row.used = row.used.saturating_add(p.used_bytes);
            row.kind = match (row.kind, p.context) {
                (Some(a), Some(b)) => Some(a.union(b)),
                (a, b) => a.or(b),
            };
            row.mps_server |= p.mps_server;
            row.unreadable = row.unreadable.or(p.unreadable).or(p
                .outside_pid_namespace
                .then_some(UnreadableReason::OutsidePidNamespace));
        }
        rows
    }

    /// One series per (device, pid) row of [`Self::process_rows`] whose files cannot be read:
    /// the GPU's index and UUID, the pid, and the reason (`hidden_by_hidepid`, …).
    fn unreadable(&self, rows: &[ProcessRow<'_>]) -> Vec<(PresentLabels, i64)> {
        rows.iter()
            .filter_map(|((gpu, pid), held)| {
                let why = held.unreadable?;
                Some((
                    known([
                        ("gpu", gpu.to_string()),
                        ("uuid", self.uuid_of(*gpu)),
                        ("pid", pid.to_string()),
                        ("reason", why.as_str().to_string()),
                    ]),
                    1,
                ))
            })
            .collect()
    }

    /// The (device, pid) rows, their memory added up, the largest first (then by device and
    /// pid), and how many of them the series cap leaves out.
    fn process_rows(&self) -> (Vec<ProcessRow<'_>>, usize) {
        let mut rows: Vec<_> = self.held().into_iter().collect();
        let keep = self.sample.max_process_series.unwrap_or(usize::MAX);
        let dropped = rows.len().saturating_sub(keep);
        if dropped > 0 {
            rows.sort_by(|a, b| b.1.used.cmp(&a.1.used).then(a.0.cmp(&b.0)));
            rows.truncate(keep);
            rows.sort_by_key(|r| r.0);
        }
        (rows, dropped)
    }

    /// One series per (device, pid) row of [`Self::process_rows`]. Labels: the GPU's index and
    /// UUID, the pid, and the process's short name as `process` (not `name`, which would
    /// collide with a GPU's in a join), its context `type` as nvidia-smi prints it (`C`, `M+C`),
    /// `role="mps-server"` on the MPS server; empty ones left out.
    fn processes(&self, rows: Vec<ProcessRow<'_>>) -> Vec<(PresentLabels, i64)> {
        rows.into_iter()
            .map(|((gpu, pid), held)| {
                let Held { used, name, .. } = held;
                let ctx = self.sample.contexts.get(&pid);
                let container = ctx.and_then(|c| c.container.as_ref());
                let claim = container.map_or_else(String::new, |c| self.claim_of(gpu, c));
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
                        "namespace",
                        label_value(
                            container
                                .and_then(|c| c.namespace.as_deref())
                                .unwrap_or_default(),
                        ),
                    ),
                    (
                        "pod",
                        label_value(&container.and_then(pods::pod_label).unwrap_or_default()),
                    ),
                    (
                        "container",
                        label_value(&container.map(pods::container_label).unwrap_or_default()),
                    ),
                    ("claim", claim),
                    (
                        "type",
                        held.kind
                            .map(GpuContextKind::short)
                            .unwrap_or_default()
                            .to_string(),
                    ),
                    (
                        "role",
                        if held.mps_server { "mps-server" } else { "" }.to_string(),
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
            "One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source, MIG mode, memory model (discrete, unified: one pool with the CPU, coherent) and the NUMA node that is its memory (coherent machines in NUMA mode) as labels (unknown ones left out), to join on `gpu` or `uuid`.",
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
        gauges(
            e,
            "gpu_numa_node_memory_total",
            "Where the GPU's memory is a NUMA node of the kernel's (Grace Hopper, Grace Blackwell in NUMA mode): that node's memory as the kernel counts it (MemTotal); absent elsewhere.",
            bytes,
            &self.devices(|d| d.numa_node_total_bytes),
        )?;
        gauges(
            e,
            "gpu_numa_node_memory_used",
            "Where the GPU's memory is a NUMA node of the kernel's: what the kernel has placed there (MemTotal - MemFree: malloc'd and migrated pages), which gpu_memory_used does not count; absent elsewhere.",
            bytes,
            &self.devices(|d| d.numa_node_used_bytes),
        )?;
        self.encode_ghosts(e, bytes)?;
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

    /// The kubelet's allocations and the pod-resources socket's health.
    fn encode_allocations(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let (series, dropped) = self.allocations();
        gauges(
            e,
            "gpu_allocation_info",
            "One series per GPU and container the kubelet allocated it to (the GPU, a MIG instance or a time-slicing replica of it), always 1; from the pod-resources socket; at most --max-allocation-series of them. claim_namespace and claim name a DRA allocation's resource claim; mig the MIG GPU instance, where the node names it.",
            None,
            &series,
        )?;
        let Some(status) = self.pod_resources_status() else {
            return Ok(());
        };
        single(
            e,
            "pod_resources_up",
            "Whether the kubelet's pod-resources socket answered the last question (1) or not (0); absent where none is in use.",
            None,
            status.up,
        )?;
        single(
            e,
            "pod_resources_age",
            "How old the kubelet's answer is that these series come from: the kubelet is asked in the background, never on a scrape's path, so a hung kubelet shows here as an age that grows.",
            Some(&Unit::Seconds),
            status.age.as_secs_f64(),
        )?;
        if let Some(n) = status.unknown {
            single(
                e,
                "gpu_allocation_unknown_devices",
                "Devices the kubelet allocated that this node's GPUs are not (a UUID or index no GPU here has): their pods' allocations are not shown.",
                None,
                n,
            )?;
            single(
                e,
                "gpu_allocation_series_dropped",
                "Allocation series left out by --max-allocation-series.",
                None,
                i64::try_from(dropped).unwrap_or(i64::MAX),
            )?;
        }
        if let Some(n) = status.invalid {
            single(
                e,
                "gpu_allocation_invalid_names",
                "Allocations whose namespace, pod or container name, or whose DRA claim's namespace or name, is not a Kubernetes name (a DNS-1123 label or subdomain; an empty claim name, one that is not UTF-8): not shown, as no label may hold such a name.",
                None,
                n,
            )?;
        }
        Ok(())
    }

    fn encode_processes(&self, e: &mut DescriptorEncoder<'_>, bytes: Option<&Unit>) -> fmt::Result {
        gauges(
            e,
            "gpu_pod_memory",
            "GPU memory a Kubernetes pod holds on a GPU: its processes' memory added up (each process once). Labels namespace and pod are the kubelet's names; pod is the pod UID where its logs do not name it; claim the pod's DRA resource claims on that GPU (comma-separated).",
            bytes,
            &self.pods(),
        )?;
        gauges(
            e,
            "gpu_pod_memory_outside_allocation",
            "GPU memory a Kubernetes pod holds on a GPU the kubelet did not allocate to it (a container started with NVIDIA_VISIBLE_DEVICES=all, a privileged pod): the scheduler counts that GPU as free or as another pod's. Only where the pod-resources socket answers and the kubelet's logs name the pod.",
            bytes,
            &self.outside_allocation(),
        )?;
        gauges(
            e,
            "gpu_claim_memory",
            "GPU memory the processes of a DRA resource claim's containers hold on a GPU allocated to the claim (the containers that hold the claim, not their whole pods; each process once, also when several pods share the claim): what the claim's processes really hold, beside what the claim books. A container holding several claims on one GPU cannot say which its memory is under: that memory is on one series whose claim label lists them all, comma-separated, never on each claim's own (no booking series matches it; a claim held only with others has no series of its own).",
            bytes,
            &self.claims(),
        )?;
        gauges(
            e,
            "gpu_claim_memory_booked",
            "GPU memory a DRA resource claim books on a GPU (consumable capacity: its devices' consumed memory capacity there, added up), as the node's NVIDIA DRA driver keeps it; absent for a claim that books no memory figure (a whole GPU) or where the driver's checkpoint cannot be read.",
            bytes,
            &self.booked(),
        )?;
        self.encode_allocations(e)?;
        // The processes' memory, and how many series the cap left out.
        let (rows, dropped) = self.process_rows();
        let unreadable = self.unreadable(&rows);
        gauges(
            e,
            "gpu_process_memory",
            "GPU memory a process holds on a GPU; type: its contexts as nvidia-smi prints them (C compute, G graphics, M an MPS client: M+C, C+G), and role mps-server on the MPS server.",
            bytes,
            &self.processes(rows),
        )?;
        gauges(
            e,
            "gpu_process_unreadable_info",
            "One series per process series whose process's files this exporter cannot read (its user, pod and container unknown), always 1; reason: outside_pid_namespace (another PID namespace: run in the host's), hidden_by_hidepid (the procfs mount's hidepid hides another user's process: run as root or in the mount's gid= group), exited, not_readable, no_such_pid (a pid no process here can have). Joins the process series on gpu and pid.",
            None,
            &unreadable,
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
            .map(|(gpu, kind)| {
                (
                    [
                        ("gpu", gpu.to_string()),
                        ("kind", kind.as_str().to_string()),
                    ],
                    1,
                )
            })
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

    /// How long the measurement in progress has run past the budget, and what it waits for.
    fn encode_stall(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        single(
            e,
            "measurement_stalled",
            "How long the measurement in progress has run without finishing (a blocked driver call or file read: measurement_waiting_info says which); 0 when none is stalled. While it is not 0 the figures are those of the last measurement that finished, but the devices' own, measured apart.",
            Some(&Unit::Seconds),
            self.stalled.unwrap_or_default().as_secs_f64(),
        )?;
        let waiting: Vec<(Labels<1>, i64)> = self
            .waiting
            .iter()
            .take(MAX_WAITING)
            .map(|w| ([("on", label_value(w))], 1))
            .collect();
        gauges(
            e,
            "measurement_waiting_info",
            "What the stalled measurement waits for, one series per driver call or file read that has not returned (the longest first, at most 8), always 1; none while no measurement is stalled.",
            None,
            &waiting,
        )
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
            "Whether a GPU source this host has answered at the last measurement (1) or not (0); the nvidia-smi fallback, while NVML answers, as of its last probe (see source_probe_age_seconds). A source the host does not have has no series.",
            None,
            &up,
        )?;
        let ages: Vec<(Labels<1>, f64)> = self
            .sample
            .probes
            .iter()
            .filter(|p| {
                self.sample
                    .sources
                    .iter()
                    .any(|r| r.source == p.source && present(r))
            })
            .map(|p| {
                (
                    [("source", p.source.as_str().to_string())],
                    p.at.elapsed().as_secs_f64(),
                )
            })
            .collect();
        gauges(
            e,
            "source_probe_age",
            "How old the probe is that a source's up comes from: the nvidia-smi fallback is probed at start and every --fallback-probe-interval while NVML answers, and at each measurement NVML does not answer.",
            Some(&Unit::Seconds),
            &ages,
        )?;
        self.encode_reads(e)?;
        single(
            e,
            "scrape_success",
            "Whether the last measurement counted the GPUs, read every one, and every GPU source this host has answered (1) or not (0, also while a newer one is stalled); the nvidia-smi fallback counts only when NVML did not answer, and is otherwise in up alone.",
            None,
            i64::from(self.sample.success() && self.stalled.is_none()),
        )?;
        self.encode_stall(e)?;
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

#[cfg(test)]
mod tests;
