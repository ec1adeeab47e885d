//! Pure rendering: data in, text or JSON out to any `Write`. Tested byte for byte.

use std::cmp::Reverse;
use std::fmt::Write as _;
use std::io::{self, Write};

use hypomnesis::{
    ErrorKind, GpuDeviceInfo, GpuProcessEntry, GpuQuerySource, MigInstance, MigState, Root,
    RootOrigin, Roots, SourceReport, SourceState,
};
use serde::Serialize;

use crate::ps::SortKey;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The one-line summary of a device:
/// `GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01`.
/// MiB are rounded down; the name, the reserved part and the driver are left out when unknown.
pub fn summary_line(d: &GpuDeviceInfo) -> String {
    let mut s = format!("GPU {}", d.index);
    if let Some(name) = &d.name {
        let _ = write!(s, " [{name}]");
    }
    let _ = write!(
        s,
        ": free {} MiB / {} MiB",
        d.free_bytes / MIB,
        d.total_bytes / MIB
    );
    if let Some(r) = d.reserved_bytes {
        let _ = write!(s, " ({} MiB reserved)", r / MIB);
    }
    if let Some(v) = &d.driver_version {
        let _ = write!(s, ", driver {v}");
    }
    s
}

/// What `hmn` shows for one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceView {
    /// The device-wide figures were read. `mig` is `Some` (possibly empty) when MIG is on.
    Read {
        device: GpuDeviceInfo,
        mig: Option<Vec<MigInstance>>,
    },
    /// MIG is on and the device-wide figures were refused, but the instances were read.
    MigOnly(MigState),
}

/// `  MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB`, with ` CI <n>` after the GPU instance when
/// `show_ci`, ` (<R> MiB reserved)` when the instance has a nonzero reservation (MIG devices
/// report 0, which would only repeat on every line), and `memory unknown (<why>)` when the
/// figures could not be read. Without a profile the MIG device is named by its slot
/// (`MIG device 3`). MiB are rounded down.
pub fn mig_line(m: &MigInstance, show_ci: bool) -> String {
    let mut s = match &m.profile {
        Some(p) => format!("  MIG {p}"),
        None => format!("  MIG device {}", m.slot),
    };
    if let Some(gi) = m.gpu_instance_id {
        let _ = write!(s, " GI {gi}");
    }
    if show_ci && let Some(ci) = m.compute_instance_id {
        let _ = write!(s, " CI {ci}");
    }
    match (m.free_bytes, m.total_bytes) {
        (Some(free), Some(total)) => {
            let _ = write!(s, ": free {} MiB / {} MiB", free / MIB, total / MIB);
            if let Some(r) = m.reserved_bytes.filter(|&r| r > 0) {
                let _ = write!(s, " ({} MiB reserved)", r / MIB);
            }
        }
        _ => {
            let _ = write!(
                s,
                ": memory unknown ({})",
                m.memory_error.as_deref().unwrap_or("not reported")
            );
        }
    }
    s
}

/// The lines of a GPU's MIG devices, in the order given. ` CI <n>` is shown for the compute
/// instances of a GPU instance that has several (they share its memory, so the figures repeat).
pub fn mig_lines(instances: &[MigInstance]) -> Vec<String> {
    if instances.is_empty() {
        return vec!["  MIG on: no MIG devices".to_string()];
    }
    instances
        .iter()
        .map(|m| {
            let shared = m.gpu_instance_id.is_some_and(|gi| {
                instances
                    .iter()
                    .filter(|o| o.parent_index == m.parent_index && o.gpu_instance_id == Some(gi))
                    .count()
                    > 1
            });
            mig_line(m, shared)
        })
        .collect()
}

/// `GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (NVML_ERROR_NO_PERMISSION)`
/// ("unavailable" instead of "refused" when the reason is not a permission one).
pub fn refused_line(s: &MigState) -> String {
    let mut line = format!("GPU {}", s.index);
    if let Some(name) = &s.name {
        let _ = write!(line, " [{name}]");
    }
    let why = s.device_memory_error.as_deref().unwrap_or("reason unknown");
    let verb = if s.device_memory_error_kind() == Some(ErrorKind::NoPermission) {
        "refused"
    } else {
        "unavailable"
    };
    let _ = write!(line, ": MIG on; device-wide memory {verb} ({why})");
    line
}

/// One block per GPU: its line, then its MIG devices' lines.
pub fn devices(out: &mut impl Write, views: &[DeviceView]) -> io::Result<()> {
    for v in views {
        let (head, mig) = match v {
            DeviceView::Read { device, mig } => (summary_line(device), mig.as_deref()),
            DeviceView::MigOnly(s) => (refused_line(s), Some(s.instances.as_slice())),
        };
        writeln!(out, "{head}")?;
        for line in mig.map(mig_lines).unwrap_or_default() {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct ReadJson<'a> {
    #[serde(flatten)]
    device: &'a GpuDeviceInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    mig_instances: Option<&'a [MigInstance]>,
}

#[derive(Serialize)]
struct MigOnlyJson<'a> {
    index: u32,
    name: Option<&'a str>,
    uuid: Option<&'a str>,
    total_bytes: Option<u64>,
    free_bytes: Option<u64>,
    used_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    source: GpuQuerySource,
    mig_enabled: Option<bool>,
    memory_error: Option<&'a str>,
    mig_instances: &'a [MigInstance],
}

#[derive(Serialize)]
#[serde(untagged)]
enum DeviceJson<'a> {
    Read(ReadJson<'a>),
    MigOnly(MigOnlyJson<'a>),
}

/// `hmn --json`: the devices as an array; a GPU in MIG mode has its MIG devices under
/// `mig_instances`. A GPU whose device-wide figures were refused has them `null`, with
/// `memory_error` saying why.
pub fn devices_json(out: &mut impl Write, views: &[DeviceView]) -> io::Result<()> {
    let v: Vec<DeviceJson<'_>> = views
        .iter()
        .map(|v| match v {
            DeviceView::Read { device, mig } => DeviceJson::Read(ReadJson {
                device,
                mig_instances: mig.as_deref(),
            }),
            DeviceView::MigOnly(s) => DeviceJson::MigOnly(MigOnlyJson {
                index: s.index,
                name: s.name.as_deref(),
                uuid: s.uuid.as_deref(),
                total_bytes: None,
                free_bytes: None,
                used_bytes: None,
                reserved_bytes: None,
                source: s.source,
                mig_enabled: s.enabled,
                memory_error: s.device_memory_error.as_deref(),
                mig_instances: &s.instances,
            }),
        })
        .collect();
    json(out, &v)
}

/// A write whose reader may be gone: a closed pipe is not an error (for commands that still
/// have a status of their own to pass on, such as `hmn run`'s command's).
pub fn unless_closed(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `value` as pretty JSON and a newline. A write error keeps its kind (a closed pipe stays
/// `BrokenPipe`, which `hmn` exits quietly on).
pub fn json<T: Serialize + ?Sized>(out: &mut impl Write, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value).map_err(io::Error::from)?;
    writeln!(out)
}

/// Where a newcomer without a GPU goes next; the reasons themselves are `hmn doctor`'s.
const NO_GPU_NEXT: &str =
    "`hmn doctor` says why; `scripts/demo.sh` in the source tree runs hmn on a simulated GPU";

/// The sentence for a host with no GPU source at all.
pub fn no_gpu_sentence() -> String {
    format!("No GPU found ({NO_GPU_NEXT}).")
}

/// The sentence for a source that answered but counts no device.
pub fn zero_gpus_sentence() -> String {
    format!("No GPU found: the GPU sources report no device ({NO_GPU_NEXT}).")
}

/// The sentence for devices that were enumerated but none of which could be read.
pub fn none_readable_sentence(n: usize) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!(
        "hmn: {n} GPU{s} found, but none could be read (reasons above; `hmn doctor` has details)."
    )
}

/// `<n> MiB` below 1 GiB, else `<x.y> GiB`.
pub fn format_size(bytes: u64) -> String {
    if bytes < GIB {
        format!("{} MiB", bytes / MIB)
    } else {
        #[allow(clippy::cast_precision_loss)] // display only
        let gib = bytes as f64 / GIB as f64;
        format!("{gib:.1} GiB")
    }
}

/// A process row with the name of its device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRow {
    pub entry: GpuProcessEntry,
    pub device_name: Option<String>,
    /// The device's maker, shown when it has no name.
    pub device_vendor: Option<hypomnesis::GpuVendor>,
}

impl PsRow {
    fn total(&self) -> u64 {
        self.entry
            .used_bytes
            .saturating_add(self.entry.shared_used_bytes)
    }
}

/// The order of `hmn ps`: the chosen key, then VRAM descending, name, pid.
pub fn sort_rows(rows: &mut [PsRow], key: SortKey) {
    let tie = |r: &PsRow| {
        (
            Reverse(r.entry.used_bytes),
            r.entry.name.clone(),
            r.entry.pid,
        )
    };
    match key {
        SortKey::Dedicated => rows.sort_by_key(tie),
        SortKey::Shared => rows.sort_by_key(|r| (Reverse(r.entry.shared_used_bytes), tie(r))),
        SortKey::Total => rows.sort_by_key(|r| (Reverse(r.total()), tie(r))),
        SortKey::Pid => rows.sort_by_key(|r| (r.entry.pid, r.entry.device_index)),
        SortKey::Name => {
            rows.sort_by_key(|r| (r.entry.name.is_none(), r.entry.name.clone(), tie(r)));
        }
    }
}

/// The `PID  NAME  VRAM  SHARED  DEVICE` table (nothing when there are no rows). When a row has
/// MIG instance ids, `GI  CI` columns come before `DEVICE` (`-` where a row has none).
pub fn ps_table(out: &mut impl Write, rows: &[PsRow]) -> io::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mig = rows
        .iter()
        .any(|r| r.entry.gpu_instance_id.is_some() || r.entry.compute_instance_id.is_some());
    let id = |v: Option<u32>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            let device = match (&r.device_name, r.device_vendor) {
                (Some(n), _) => format!("{} {n}", r.entry.device_index),
                (None, Some(v)) => format!("{} {}", r.entry.device_index, vendor_label(v)),
                (None, None) => r.entry.device_index.to_string(),
            };
            let pid = match (r.entry.host_pid, r.entry.outside_pid_namespace) {
                (Some(h), _) => format!("{} (host {h})", r.entry.pid),
                (None, true) => format!("{} (outside)", r.entry.pid),
                (None, false) => r.entry.pid.to_string(),
            };
            [
                pid,
                r.entry.name.clone().unwrap_or_else(|| "?".into()),
                format_size(r.entry.used_bytes),
                format_size(r.entry.shared_used_bytes),
                id(r.entry.gpu_instance_id),
                id(r.entry.compute_instance_id),
                device,
            ]
        })
        .collect();
    let header = ["PID", "NAME", "VRAM", "SHARED", "GI", "CI", "DEVICE"];
    let mut width = header.map(str::len);
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |c: [&str; 7]| {
        let mut s = format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:>w3$}  ",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3]
        );
        if mig {
            let _ = write!(
                s,
                "{:>w4$}  {:>w5$}  ",
                c[4],
                c[5],
                w4 = width[4],
                w5 = width[5]
            );
        }
        s.push_str(c[6]);
        s
    };
    writeln!(out, "{}", line(header))?;
    for c in &cells {
        writeln!(
            out,
            "{}",
            line([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6]])
        )?;
    }
    Ok(())
}

fn vendor_label(v: hypomnesis::GpuVendor) -> &'static str {
    match v {
        hypomnesis::GpuVendor::Nvidia => "NVIDIA GPU",
        hypomnesis::GpuVendor::Amd => "AMD GPU",
        hypomnesis::GpuVendor::Intel => "Intel GPU",
        hypomnesis::GpuVendor::Apple => "Apple GPU",
        _ => "GPU",
    }
}

/// `hmn: <N> GPU processes found[ matching pid=<p> device=<d>][ (<total> committed total)].`
pub fn ps_summary(rows: &[PsRow], pid: Option<u32>, device: Option<u32>) -> String {
    let n = rows.len();
    let mut s = format!(
        "hmn: {n} GPU process{} found",
        if n == 1 { "" } else { "es" }
    );
    let mut filters = Vec::new();
    if let Some(p) = pid {
        filters.push(format!("pid={p}"));
    }
    if let Some(d) = device {
        filters.push(format!("device={d}"));
    }
    if !filters.is_empty() {
        let _ = write!(s, " matching {}", filters.join(" "));
    }
    if n > 0 {
        let total: u64 = rows
            .iter()
            .map(|r| r.entry.used_bytes)
            .fold(0, u64::saturating_add);
        let _ = write!(s, " ({} committed total)", format_size(total));
    }
    s.push('.');
    s
}

#[derive(Serialize)]
struct PsJson<'a> {
    pid: u32,
    host_pid: Option<u32>,
    outside_pid_namespace: bool,
    name: Option<&'a str>,
    used_bytes: u64,
    shared_used_bytes: u64,
    device_index: u32,
    device_name: Option<&'a str>,
    context: Option<hypomnesis::GpuContextKind>,
    source: GpuQuerySource,
    gpu_instance_id: Option<u32>,
    compute_instance_id: Option<u32>,
}

pub fn ps_json(out: &mut impl Write, rows: &[PsRow]) -> io::Result<()> {
    let v: Vec<PsJson<'_>> = rows
        .iter()
        .map(|r| PsJson {
            pid: r.entry.pid,
            host_pid: r.entry.host_pid,
            outside_pid_namespace: r.entry.outside_pid_namespace,
            name: r.entry.name.as_deref(),
            used_bytes: r.entry.used_bytes,
            shared_used_bytes: r.entry.shared_used_bytes,
            device_index: r.entry.device_index,
            device_name: r.device_name.as_deref(),
            context: r.entry.context,
            source: r.entry.source,
            gpu_instance_id: r.entry.gpu_instance_id,
            compute_instance_id: r.entry.compute_instance_id,
        })
        .collect();
    json(out, &v)
}

fn source_name(s: GpuQuerySource) -> &'static str {
    match s {
        GpuQuerySource::Nvml => "NVML",
        GpuQuerySource::NvidiaSmi => "nvidia-smi",
        GpuQuerySource::Dxgi => "DXGI",
        GpuQuerySource::Pdh => "PDH",
        GpuQuerySource::Metal => "Metal",
        GpuQuerySource::Drm => "DRM",
        _ => "other",
    }
}

/// What a user can do about a source that did not answer, by the kind of its failure.
pub fn hint(r: &SourceReport) -> Option<&'static str> {
    Some(match r.kind()? {
        ErrorKind::NotBuiltIn => "rebuild hmn with that cargo feature",
        ErrorKind::NotInstalled => match r.source {
            GpuQuerySource::Nvml if cfg!(windows) => {
                "install the NVIDIA driver (it provides nvml.dll), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path"
            }
            GpuQuerySource::Nvml => {
                "install the NVIDIA driver (it provides libnvidia-ml.so.1), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path"
            }
            GpuQuerySource::NvidiaSmi => {
                "install the NVIDIA driver utilities, or set HYPOMNESIS_NVIDIA_SMI to nvidia-smi's path"
            }
            _ => return None,
        },
        ErrorKind::DriverNotLoaded => {
            "the NVIDIA kernel driver is not loaded: install the driver, or load it (`sudo modprobe nvidia`)"
        }
        ErrorKind::DriverVersionMismatch => {
            "the driver was upgraded but the old kernel module is still loaded: reboot, or reload the nvidia modules"
        }
        ErrorKind::NoPermission => {
            "this user may not query that GPU (a container or cgroup restricts it)"
        }
        ErrorKind::TimedOut | ErrorKind::Paused => {
            "nvidia-smi hangs on this host: run it by hand to see, and consider enabling persistence mode"
        }
        ErrorKind::BadSetting => "fix or unset the environment variable named above",
        _ => return None,
    })
}

/// `/host/proc (from --procfs)`: a root and where it came from, as `hmn` users set it.
pub fn root_line(r: &Root) -> String {
    let flag = if r.variable.ends_with("PROCFS") {
        "--procfs"
    } else {
        "--sysfs"
    };
    let from = match r.origin {
        RootOrigin::Default => "default".to_string(),
        RootOrigin::Environment => format!("from {}", r.variable),
        RootOrigin::SetRoots => format!("from {flag}"),
        _ => "origin unknown".to_string(),
    };
    format!("{} ({from})", r.path.display())
}

/// The `hmn doctor` report.
pub fn doctor(
    out: &mut impl Write,
    rss: &Result<u64, String>,
    roots: &Result<Roots, String>,
    reports: &[SourceReport],
) -> io::Result<()> {
    match rss {
        Ok(b) => writeln!(
            out,
            "RAM: answered, this process has {} MiB resident",
            b / MIB
        )?,
        Err(e) => writeln!(out, "RAM: failed: {e}")?,
    }
    match roots {
        Ok(r) => {
            writeln!(out, "procfs: {}", root_line(&r.procfs))?;
            writeln!(out, "sysfs: {}", root_line(&r.sysfs))?;
        }
        Err(e) => writeln!(out, "roots: {e}")?,
    }
    for r in reports {
        let name = source_name(r.source);
        match &r.state {
            SourceState::Answered => writeln!(out, "{name}: answered")?,
            SourceState::Failed(why) => writeln!(out, "{name}: failed: {why}")?,
            SourceState::Absent(why) => writeln!(out, "{name}: not present: {why}")?,
            _ => writeln!(out, "{name}: unknown state")?,
        }
        for (k, v) in &r.details {
            writeln!(out, "    {k}: {v}")?;
        }
        if let Some(h) = hint(r) {
            writeln!(out, "    what to do: {h}")?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct DoctorJson<'a> {
    rss_bytes: Option<u64>,
    rss_error: Option<&'a str>,
    roots: Option<&'a Roots>,
    roots_error: Option<&'a str>,
    sources: &'a [SourceReport],
}

pub fn doctor_json(
    out: &mut impl Write,
    rss: &Result<u64, String>,
    roots: &Result<Roots, String>,
    reports: &[SourceReport],
) -> io::Result<()> {
    json(
        out,
        &DoctorJson {
            rss_bytes: rss.as_ref().ok().copied(),
            rss_error: rss.as_ref().err().map(String::as_str),
            roots: roots.as_ref().ok(),
            roots_error: roots.as_ref().err().map(String::as_str),
            sources: reports,
        },
    )
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(all(test, feature = "test-helpers"))]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use hypomnesis::{GpuContextKind, GpuVendor, MigInstance};

    use super::*;

    fn h200() -> GpuDeviceInfo {
        let mut d = GpuDeviceInfo::builder()
            .index(0)
            .name(Some("NVIDIA H200".into()))
            .total_bytes(143_771 * MIB + 5)
            .free_bytes(110_796 * MIB + 1023)
            .reserved_bytes(Some(614 * MIB + 77))
            .driver_version(Some("590.48.01".into()))
            .vendor(Some(GpuVendor::Nvidia))
            .build();
        d.used_bytes = d.total_bytes - d.free_bytes;
        d
    }

    fn entry(pid: u32, name: Option<&str>, used: u64, shared: u64, device: u32) -> PsRow {
        PsRow {
            entry: GpuProcessEntry::builder()
                .pid(pid)
                .name(name.map(String::from))
                .used_bytes(used)
                .shared_used_bytes(shared)
                .device_index(device)
                .context(Some(GpuContextKind::Compute))
                .build(),
            device_name: Some("NVIDIA L40S".into()),
            device_vendor: Some(GpuVendor::Nvidia),
        }
    }

    fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
        let mut v = Vec::new();
        f(&mut v).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn summary_lines() {
        let d = h200();
        assert_eq!(
            summary_line(&d),
            "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01"
        );
        let mut bare = d.clone();
        bare.name = None;
        bare.reserved_bytes = None;
        bare.driver_version = None;
        bare.index = 3;
        assert_eq!(summary_line(&bare), "GPU 3: free 110796 MiB / 143771 MiB");
        let mut zero = d;
        zero.reserved_bytes = Some(0);
        assert!(
            summary_line(&zero).contains("(0 MiB reserved)"),
            "a real zero is shown"
        );
        assert_eq!(
            text(|w| devices(
                w,
                &[
                    DeviceView::Read {
                        device: h200(),
                        mig: None
                    },
                    DeviceView::Read {
                        device: bare.clone(),
                        mig: None
                    }
                ]
            )),
            "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\nGPU 3: free 110796 MiB / 143771 MiB\n"
        );
    }

    #[test]
    fn json_keys_and_nulls() {
        let mut d = h200();
        d.uuid = None;
        let s = text(|w| json(w, &[d]));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        let o = v[0].as_object().unwrap();
        for k in [
            "index",
            "name",
            "total_bytes",
            "free_bytes",
            "used_bytes",
            "reserved_bytes",
            "driver_version",
            "uuid",
            "pci_bus_id",
            "vendor",
            "source",
        ] {
            assert!(o.contains_key(k), "{k} missing in {s}");
        }
        assert!(o["uuid"].is_null() && o["pci_bus_id"].is_null());
        assert_eq!(o["reserved_bytes"], 614 * MIB + 77);
        assert_eq!(o["vendor"], "nvidia");
        assert_eq!(o["source"], "nvml");
        assert!(s.ends_with("]\n"));
    }

    #[test]
    fn sizes() {
        assert_eq!(format_size(0), "0 MiB");
        assert_eq!(format_size(538 * MIB + 12), "538 MiB");
        assert_eq!(format_size(GIB - 1), "1023 MiB");
        assert_eq!(format_size(GIB), "1.0 GiB");
        assert_eq!(format_size(7484 * MIB), "7.3 GiB");
    }

    #[test]
    fn ps_table_and_summary() {
        let mut rows = vec![
            entry(20037, Some("ffmpeg"), 538 * MIB, 0, 0),
            entry(4_194_400, None, 2 * GIB, 0, 0),
            entry(20038, Some("ffmpeg"), 681 * MIB, 0, 0),
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        assert_eq!(
            text(|w| ps_table(w, &rows)),
            "\
PID      NAME       VRAM  SHARED  DEVICE
4194400  ?       2.0 GiB   0 MiB  0 NVIDIA L40S
20038    ffmpeg  681 MiB   0 MiB  0 NVIDIA L40S
20037    ffmpeg  538 MiB   0 MiB  0 NVIDIA L40S
"
        );
        assert_eq!(
            ps_summary(&rows, None, None),
            "hmn: 3 GPU processes found (3.2 GiB committed total)."
        );
        assert_eq!(
            ps_summary(&rows[1..2], Some(20038), Some(0)),
            "hmn: 1 GPU process found matching pid=20038 device=0 (681 MiB committed total)."
        );
        assert_eq!(
            ps_summary(&[], None, Some(1)),
            "hmn: 0 GPU processes found matching device=1."
        );
        assert_eq!(text(|w| ps_table(w, &[])), "");
        sort_rows(&mut rows, SortKey::Pid);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20037, 20038, 4_194_400]
        );
        sort_rows(&mut rows, SortKey::Name);
        assert_eq!(
            rows.iter().map(|r| r.entry.pid).collect::<Vec<_>>(),
            vec![20038, 20037, 4_194_400]
        );
        let mut shared = vec![
            entry(1, Some("a"), 10 * MIB, 0, 0),
            entry(2, Some("b"), MIB, 50 * MIB, 0),
        ];
        sort_rows(&mut shared, SortKey::Shared);
        assert_eq!(shared[0].entry.pid, 2);
        sort_rows(&mut shared, SortKey::Total);
        assert_eq!(shared[0].entry.pid, 2);
        sort_rows(&mut shared, SortKey::Dedicated);
        assert_eq!(shared[0].entry.pid, 1);
    }

    #[test]
    fn ps_json_rows() {
        let rows = vec![entry(7, None, MIB, 0, 1)];
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["pid"], 7);
        assert!(v[0]["name"].is_null());
        assert_eq!(v[0]["used_bytes"], MIB);
        assert_eq!(v[0]["shared_used_bytes"], 0);
        assert_eq!(v[0]["device_index"], 1);
        assert_eq!(v[0]["device_name"], "NVIDIA L40S");
        assert_eq!(v[0]["context"], "compute");
        assert_eq!(text(|w| ps_json(w, &[])), "[]\n");
    }

    fn reports() -> Vec<SourceReport> {
        vec![
            SourceReport::builder()
                .source(GpuQuerySource::Nvml)
                .state(SourceState::Absent(
                    "could not load the NVML library (tried libnvidia-ml.so.1: not found)".into(),
                ))
                .details(vec![])
                .build(),
            SourceReport::builder()
                .source(GpuQuerySource::NvidiaSmi)
                .state(SourceState::Absent(
                    "nvidia-smi was not found on PATH".into(),
                ))
                .details(vec![])
                .build(),
        ]
    }

    #[test]
    fn sentences() {
        assert_eq!(
            no_gpu_sentence(),
            "No GPU found (`hmn doctor` says why; `scripts/demo.sh` in the source tree runs hmn on a simulated GPU)."
        );
        assert!(no_gpu_sentence().len() < 120, "one short sentence");
        assert_eq!(
            none_readable_sentence(2),
            "hmn: 2 GPUs found, but none could be read (reasons above; `hmn doctor` has details)."
        );
        assert!(zero_gpus_sentence().starts_with("No GPU found: the GPU sources report no device"));
    }

    /// The H200 of the MIG issue: GI 2 split into CI 0 and CI 1 (same figures), 2g, 1g, 1g.
    fn h200_mig() -> Vec<MigInstance> {
        let m = |slot: u32, gi: u32, ci: u32, profile: &str, total: u64, used: u64| {
            MigInstance::builder()
                .slot(slot)
                .uuid(Some(format!("MIG-{slot}")))
                .profile(Some(profile.into()))
                .gpu_instance_id(Some(gi))
                .compute_instance_id(Some(ci))
                .total_bytes(Some(total * MIB))
                .free_bytes(Some((total - used) * MIB + 7))
                .used_bytes(Some(used * MIB - 7))
                .reserved_bytes(Some(0))
                .build()
        };
        vec![
            m(0, 2, 0, "1c.3g.71gb", 71424, 16925),
            m(1, 2, 1, "2c.3g.71gb", 71424, 16925),
            m(2, 3, 0, "2g.35gb", 33280, 16),
            m(3, 9, 0, "1g.18gb", 16384, 9),
            m(4, 10, 0, "1g.18gb", 16384, 9),
        ]
    }

    const H200_MIG_LINES: &str = concat!(
        "  MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB\n",
        "  MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB\n",
        "  MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB\n",
        "  MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB\n",
        "  MIG 1g.18gb GI 10: free 16375 MiB / 16384 MiB\n",
    );

    #[test]
    fn mig_lines_under_their_parent() {
        let mut d = h200();
        d.mig_enabled = Some(true);
        let views = [
            DeviceView::Read {
                device: d,
                mig: Some(h200_mig()),
            },
            DeviceView::Read {
                device: h200(),
                mig: None,
            },
        ];
        assert_eq!(
            text(|w| devices(w, &views)),
            format!(
                "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n{H200_MIG_LINES}GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n"
            )
        );
        // MIG on without instances, an unnamed instance, unknown memory, a nonzero reservation.
        let mut odd = h200_mig();
        odd[0].profile = None;
        odd[0].gpu_instance_id = None;
        odd[1].total_bytes = None;
        odd[1].free_bytes = None;
        odd[1].used_bytes = None;
        odd[1].memory_error = Some("NVML_ERROR_UNKNOWN".into());
        odd[2].reserved_bytes = Some(12 * MIB + 1);
        odd[3].memory_error = Some("x".into());
        odd[3].free_bytes = None;
        assert_eq!(
            mig_lines(&odd[..4]),
            vec![
                "  MIG device 0: free 54499 MiB / 71424 MiB",
                "  MIG 2c.3g.71gb GI 2: memory unknown (NVML_ERROR_UNKNOWN)",
                "  MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB (12 MiB reserved)",
                "  MIG 1g.18gb GI 9: memory unknown (x)",
            ]
        );
        assert_eq!(mig_lines(&[]), vec!["  MIG on: no MIG devices"]);
        let mut unknown = h200_mig()[3].clone();
        unknown.total_bytes = None;
        assert_eq!(
            mig_line(&unknown, true),
            "  MIG 1g.18gb GI 9 CI 0: memory unknown (not reported)"
        );
    }

    fn refused() -> MigState {
        MigState::builder()
            .index(0)
            .name(Some("NVIDIA H200".into()))
            .uuid(Some("GPU-1".into()))
            .enabled(Some(true))
            .pending(Some(true))
            .instances(h200_mig())
            .device_memory_error(Some("NVML_ERROR_NO_PERMISSION".into()))
            .build()
    }

    #[test]
    fn refused_parent_line_then_instances() {
        assert_eq!(
            text(|w| devices(w, &[DeviceView::MigOnly(refused())])),
            format!(
                "GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (NVML_ERROR_NO_PERMISSION)\n{H200_MIG_LINES}"
            )
        );
        let mut s = refused();
        s.name = None;
        s.index = 2;
        s.device_memory_error = Some("Insufficient Permissions".into());
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory refused (Insufficient Permissions)"
        );
        s.device_memory_error = Some("NVML_ERROR_GPU_IS_LOST".into());
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory unavailable (NVML_ERROR_GPU_IS_LOST)"
        );
        s.device_memory_error = None;
        assert_eq!(
            refused_line(&s),
            "GPU 2: MIG on; device-wide memory unavailable (reason unknown)"
        );
    }

    #[test]
    fn json_nests_instances_under_their_device() {
        let mut d = h200();
        d.mig_enabled = Some(true);
        let mut off = h200();
        off.index = 1;
        off.mig_enabled = Some(false);
        let mut third = refused();
        third.index = 2;
        third.instances = h200_mig()[4..].to_vec();
        let views = [
            DeviceView::Read {
                device: d,
                mig: Some(h200_mig()[3..4].to_vec()),
            },
            DeviceView::Read {
                device: off,
                mig: None,
            },
            DeviceView::MigOnly(third),
        ];
        let s = text(|w| devices_json(w, &views));
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v[0]["mig_enabled"], true);
        assert_eq!(v[0]["total_bytes"], 143_771 * MIB + 5);
        assert_eq!(
            v[0]["mig_instances"],
            serde_json::json!([{
                "parent_index": 0, "slot": 3, "uuid": "MIG-3", "name": null,
                "profile": "1g.18gb", "gpu_instance_id": 9, "compute_instance_id": 0,
                "total_bytes": 16384 * MIB, "free_bytes": 16375 * MIB + 7,
                "used_bytes": 9 * MIB - 7, "reserved_bytes": 0, "memory_error": null,
                "source": "nvml"
            }])
        );
        assert_eq!(v[1]["mig_enabled"], false);
        assert!(
            v[1].get("mig_instances").is_none(),
            "absent when MIG is off"
        );
        let refused = v[2].as_object().unwrap();
        let mut keys = refused.keys().cloned().collect::<Vec<_>>();
        keys.sort();
        let mut want = [
            "index",
            "name",
            "uuid",
            "total_bytes",
            "free_bytes",
            "used_bytes",
            "reserved_bytes",
            "source",
            "mig_enabled",
            "memory_error",
            "mig_instances",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        for k in ["total_bytes", "free_bytes", "used_bytes", "reserved_bytes"] {
            assert!(refused[k].is_null(), "{k} is null, not 0");
        }
        assert_eq!(refused["memory_error"], "NVML_ERROR_NO_PERMISSION");
        assert_eq!(refused["mig_instances"][0]["gpu_instance_id"], 10);
        assert_eq!(text(|w| devices_json(w, &[])), "[]\n");
    }

    #[test]
    fn ps_shows_gi_and_ci_when_a_row_has_them() {
        let row = |pid: u32, name: &str, used: u64, ids: Option<(u32, u32)>| PsRow {
            entry: GpuProcessEntry::builder()
                .pid(pid)
                .name(Some(name.into()))
                .used_bytes(used)
                .gpu_instance_id(ids.map(|i| i.0))
                .compute_instance_id(ids.map(|i| i.1))
                .build(),
            device_name: Some("NVIDIA H200".into()),
            device_vendor: Some(GpuVendor::Nvidia),
        };
        let mut rows = vec![
            row(31337, "python3", 12288 * MIB, Some((2, 1))),
            row(31401, "all_reduce_perf", 512 * MIB, Some((2, 1))),
            row(31338, "python3", 4096 * MIB, Some((2, 1))),
            row(31500, "ffmpeg", 100 * MIB, None),
            row(31600, "trainer", 2 * GIB, Some((10, 0))),
        ];
        sort_rows(&mut rows, SortKey::Dedicated);
        assert_eq!(
            text(|w| ps_table(w, &rows)),
            "\
PID    NAME                 VRAM  SHARED  GI  CI  DEVICE
31337  python3          12.0 GiB   0 MiB   2   1  0 NVIDIA H200
31338  python3           4.0 GiB   0 MiB   2   1  0 NVIDIA H200
31600  trainer           2.0 GiB   0 MiB  10   0  0 NVIDIA H200
31401  all_reduce_perf   512 MiB   0 MiB   2   1  0 NVIDIA H200
31500  ffmpeg            100 MiB   0 MiB   -   -  0 NVIDIA H200
"
        );
        let v: serde_json::Value = serde_json::from_str(&text(|w| ps_json(w, &rows))).unwrap();
        assert_eq!(v[0]["gpu_instance_id"], 2);
        assert_eq!(v[0]["compute_instance_id"], 1);
        assert!(v[4]["gpu_instance_id"].is_null() && v[4]["compute_instance_id"].is_null());
        // Without instance ids the table keeps its five columns.
        assert_eq!(
            text(|w| ps_table(w, &rows[4..])),
            "\
PID    NAME       VRAM  SHARED  DEVICE
31500  ffmpeg  100 MiB   0 MiB  0 NVIDIA H200
"
        );
    }

    fn roots() -> Roots {
        Roots::builder()
            .procfs(
                Root::builder()
                    .path("/host/proc".into())
                    .origin(RootOrigin::SetRoots)
                    .variable("HYPOMNESIS_PROCFS")
                    .build(),
            )
            .sysfs(
                Root::builder()
                    .path("/sys".into())
                    .variable("HYPOMNESIS_SYSFS")
                    .build(),
            )
            .build()
    }

    #[test]
    fn root_lines() {
        let r = roots();
        assert_eq!(root_line(&r.procfs), "/host/proc (from --procfs)");
        let env = Root::builder()
            .path("/host/sys".into())
            .origin(RootOrigin::Environment)
            .variable("HYPOMNESIS_SYSFS")
            .build();
        assert_eq!(root_line(&env), "/host/sys (from HYPOMNESIS_SYSFS)");
    }

    #[test]
    fn doctor_text() {
        let mut r = reports();
        r[1] = SourceReport::builder()
            .source(GpuQuerySource::NvidiaSmi)
            .state(SourceState::Answered)
            .details(vec![
                ("executable".into(), "/usr/bin/nvidia-smi".into()),
                ("version".into(), "595.80".into()),
            ])
            .build();
        assert_eq!(
            text(|w| doctor(w, &Ok(12 * MIB + 5), &Ok(roots()), &r)),
            "\
RAM: answered, this process has 12 MiB resident
procfs: /host/proc (from --procfs)
sysfs: /sys (default)
NVML: not present: could not load the NVML library (tried libnvidia-ml.so.1: not found)
    what to do: install the NVIDIA driver (it provides libnvidia-ml.so.1), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path
nvidia-smi: answered
    executable: /usr/bin/nvidia-smi
    version: 595.80
"
        );
        let report = |state: SourceState| {
            SourceReport::builder()
                .source(GpuQuerySource::Nvml)
                .state(state)
                .build()
        };
        let failed = report(SourceState::Failed(
            "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)".into(),
        ));
        assert!(hint(&failed).unwrap().contains("modprobe"));
        assert_eq!(hint(&report(SourceState::Answered)), None);
        let off = report(SourceState::Absent(
            "not compiled in (cargo feature `nvml`)".into(),
        ));
        assert_eq!(hint(&off), Some("rebuild hmn with that cargo feature"));
        let v: serde_json::Value = serde_json::from_str(&text(|w| {
            doctor_json(w, &Err("no statm".into()), &Ok(roots()), &r)
        }))
        .unwrap();
        assert!(v["rss_bytes"].is_null());
        assert_eq!(v["roots"]["procfs"]["path"], "/host/proc");
        assert_eq!(v["roots"]["procfs"]["origin"], "set_roots");
        assert_eq!(v["roots"]["sysfs"]["origin"], "default");
        assert_eq!(v["rss_error"], "no statm");
        assert_eq!(v["sources"][0]["state"]["state"], "absent");
        assert_eq!(v["sources"][1]["details"][1][1], "595.80");
    }
}
