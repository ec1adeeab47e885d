//! The exposition byte for byte, and the success rules of the model it renders. The fixtures
//! are built with the `test-helpers` builders of the library (a dev-dependency).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]
use hypomnesis::{
    ErrorKind, GpuContextKind, GpuProcessEntry, GpuQuerySource, ProcessContext, SourceReport,
    SourceState,
};

use super::*;

use crate::view::MIB;

const GIB: u64 = 1 << 30;

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

fn sample() -> Measurement {
    let mut bare = device(1, None);
    bare.name = None;
    bare.uuid = None;
    bare.vendor = None;
    bare.memory_model = Some(hypomnesis::MemoryModel::Unified);
    Measurement {
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
        contexts: [(20, alice_in_a_pod().into())].into_iter().collect(),
        max_process_series: None,
        max_allocation_series: None,
        sources: vec![
            report(GpuQuerySource::Nvml, SourceState::Answered),
            report(
                GpuQuerySource::NvidiaSmi,
                SourceState::absent(hypomnesis::ErrorKind::NotInstalled, "not on PATH"),
            ),
            report(
                GpuQuerySource::Drm,
                SourceState::failed(hypomnesis::ErrorKind::Other, "no"),
            ),
        ],
        probes: Vec::new(),
        mig: Vec::new(),
        kube: None,
        ghosts: None,
    }
}

#[test]
fn up_is_what_this_measurement_saw() {
    let nvml = report(GpuQuerySource::Nvml, SourceState::Answered);
    let smi_failed = report(
        GpuQuerySource::NvidiaSmi,
        SourceState::failed(hypomnesis::ErrorKind::Other, "late"),
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
    let idle = Measurement {
        counted: Some(0),
        ..Measurement::default()
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
    let series = |s: &Measurement| {
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
        r#"# HELP hypomnesis_gpu_info One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source, MIG mode, memory model (discrete, unified: one pool with the CPU, coherent) and the NUMA node that is its memory (coherent machines in NUMA mode) as labels (unknown ones left out), to join on `gpu` or `uuid`.
# TYPE hypomnesis_gpu_info gauge
hypomnesis_gpu_info{{gpu="0",uuid="GPU-0",model="NVIDIA H200",vendor="nvidia",source="nvml"}} 1
hypomnesis_gpu_info{{gpu="1",source="nvml",memory_model="unified"}} 1
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
# HELP hypomnesis_gpu_pod_memory_bytes GPU memory a Kubernetes pod holds on a GPU: its processes' memory added up (each process once). Labels namespace and pod are the kubelet's names; pod is the pod UID where its logs do not name it; claim the pod's DRA resource claims on that GPU (comma-separated).
# TYPE hypomnesis_gpu_pod_memory_bytes gauge
# UNIT hypomnesis_gpu_pod_memory_bytes bytes
hypomnesis_gpu_pod_memory_bytes{{gpu="0",uuid="GPU-0",pod="6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"}} 106954752
# HELP hypomnesis_gpu_process_memory_bytes GPU memory a process holds on a GPU; type: its contexts as nvidia-smi prints them (C compute, G graphics, M an MPS client: M+C, C+G), and role mps-server on the MPS server.
# TYPE hypomnesis_gpu_process_memory_bytes gauge
# UNIT hypomnesis_gpu_process_memory_bytes bytes
hypomnesis_gpu_process_memory_bytes{{gpu="0",uuid="GPU-0",pid="20",process="python3",user="alice",pod="6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d",container="9e8d7c6b5a4938271605f4e3d2c1b0a99e8d7c6b5a4938271605f4e3d2c1b0a9"}} 106954752
hypomnesis_gpu_process_memory_bytes{{gpu="1",pid="7"}} 1048576
# HELP hypomnesis_up Whether a GPU source this host has answered at the last measurement (1) or not (0); the nvidia-smi fallback, while NVML answers, as of its last probe (see source_probe_age_seconds). A source the host does not have has no series.
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
# HELP hypomnesis_scrape_success Whether the last measurement counted the GPUs, read every one, and every GPU source this host has answered (1) or not (0, also while a newer one is stalled); the nvidia-smi fallback counts only when NVML did not answer, and is otherwise in up alone.
# TYPE hypomnesis_scrape_success gauge
hypomnesis_scrape_success 0
# HELP hypomnesis_measurement_stalled_seconds How long the measurement in progress has run without finishing (a blocked driver call or file read: measurement_waiting_info says which); 0 when none is stalled. While it is not 0 the figures are those of the last measurement that finished, but the devices' own, measured apart.
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
    s.sources[2] = report(
        GpuQuerySource::Drm,
        SourceState::absent(hypomnesis::ErrorKind::NotInstalled, "no card"),
    );
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
    let broken = Measurement {
        counted: Some(0),
        sources: vec![report(
            GpuQuerySource::Nvml,
            SourceState::failed(hypomnesis::ErrorKind::Other, "mismatch"),
        )],
        ..Measurement::default()
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
    let none = Measurement {
        counted: Some(0),
        ..Measurement::default()
    };
    let text = render(none, Duration::ZERO, 1, None);
    assert!(text.contains("\nhypomnesis_scrape_success 1\n"), "{text}");
    assert!(text.contains("\nhypomnesis_gpu_devices 0\n"), "{text}");
    assert!(!text.contains("gpu_memory"), "{text}");

    // Counting failed, or the measurement died.
    let text = render(Measurement::failed(), Duration::ZERO, 2, None);
    assert!(text.contains("\nhypomnesis_scrape_success 0\n"), "{text}");
    assert!(!text.contains("hypomnesis_gpu_devices"), "{text}");
    assert!(
        text.contains("\nhypomnesis_measurements_total 2\n"),
        "{text}"
    );
    assert!(text.ends_with("\n# EOF\n"));
}

/// The fallback probed apart while NVML answered: its up says it failed, the scrape is still a
/// success, and the probe's age is there to see.
#[test]
fn a_fallback_probed_apart_is_in_up_and_its_age_alone() {
    let mut s = sample();
    s.unreadable.clear();
    s.sources = vec![report(GpuQuerySource::Nvml, SourceState::Answered)];
    let at = std::time::Instant::now()
        .checked_sub(Duration::from_secs(90))
        .unwrap();
    s.add_probed(
        report(
            GpuQuerySource::NvidiaSmi,
            SourceState::failed(hypomnesis::ErrorKind::Other, "exit 9"),
        ),
        at,
        true,
    );
    let text = render(s.clone(), Duration::ZERO, 1, None);
    let up_smi = r#"hypomnesis_up{source="nvidia-smi"} 0"#;
    assert!(text.contains(&format!("\n{up_smi}\n")), "{text}");
    assert!(text.contains("\nhypomnesis_scrape_success 1\n"), "{text}");
    let age: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"hypomnesis_source_probe_age_seconds{source="nvidia-smi"} "#)
        })
        .unwrap()
        .parse()
        .unwrap();
    assert!((90.0..120.0).contains(&age), "{age}: {text}");
    assert!(
        text.contains("# TYPE hypomnesis_source_probe_age_seconds gauge\n"),
        "{text}"
    );
    // Probed by a measurement NVML did not answer: its failure fails the scrape.
    s.probes[0].apart = false;
    let text = render(s.clone(), Duration::ZERO, 1, None);
    assert!(text.contains("\nhypomnesis_scrape_success 0\n"), "{text}");
    // Absent (not on PATH): neither up nor age.
    s.sources[1] = report(
        GpuQuerySource::NvidiaSmi,
        SourceState::absent(hypomnesis::ErrorKind::NotInstalled, "no"),
    );
    let text = render(s, Duration::ZERO, 1, None);
    assert!(
        !text.contains(r#"{source="nvidia-smi"}"#),
        "no series: {text}"
    );
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
            "# HELP hypomnesis_gpu_info One series per GPU, always 1: its UUID, model, PCI bus id, driver version, vendor, source, MIG mode, memory model (discrete, unified: one pool with the CPU, coherent) and the NUMA node that is its memory (coherent machines in NUMA mode) as labels (unknown ones left out), to join on `gpu` or `uuid`.\n\
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
    assert_eq!(
        label_value("x\ny"),
        "x?y",
        "a line feed is a control character"
    );
    assert_eq!(label_value("plain name"), "plain name");
    let mut s = Measurement {
        counted: Some(1),
        ..Measurement::default()
    };
    s.processes
        .push(process(9, Some("evil\"} 1\nfake_metric 2"), MIB, 0));
    let text = render(s, Duration::ZERO, 1, None);
    assert!(
        text.contains(
            "hypomnesis_gpu_process_memory_bytes{gpu=\"0\",pid=\"9\",process=\"evil\\\"} 1?fake_metric 2\"} 1048576\n"
        ),
        "{text}"
    );
    assert!(!text.contains("\nfake_metric"), "{text}");
}

#[test]
fn huge_values_saturate() {
    let mut d = device(0, Some(u64::MAX));
    d.total_bytes = u64::MAX;
    let s = Measurement {
        counted: Some(1),
        devices: vec![d],
        ..Measurement::default()
    };
    let text = render(s, Duration::ZERO, 1, None);
    assert!(text.contains("} 9223372036854775807\n"), "{text}");
}

/// MPS: each process's contexts as `type` (a client in the compute and MPS lists is `M+C`, its
/// memory once), the server marked with `role`; rows without a kind have no `type` label.
#[test]
fn mps_clients_and_the_server_are_labelled() {
    let mut s = sample();
    let with = |pid, name: &str, used, kind, server| {
        let mut p = process(pid, Some(name), used, 0);
        p.context = Some(kind);
        p.mps_server = server;
        p
    };
    s.processes = vec![
        with(
            30,
            "nvidia-cuda-mps",
            30 * MIB,
            GpuContextKind::Compute,
            true,
        ),
        with(
            31,
            "python3",
            500 * MIB,
            GpuContextKind::MpsAndCompute,
            false,
        ),
        with(32, "python3", 300 * MIB, GpuContextKind::Mps, false),
    ];
    s.contexts.clear();
    let text = render(s, Duration::from_millis(10), 1, None);
    for want in [
        format!(
            "hypomnesis_gpu_process_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pid=\"30\",process=\"nvidia-cuda-mps\",type=\"C\",role=\"mps-server\"}} {}\n",
            30 * MIB
        ),
        format!(
            "hypomnesis_gpu_process_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pid=\"31\",process=\"python3\",type=\"M+C\"}} {}\n",
            500 * MIB
        ),
        format!(
            "hypomnesis_gpu_process_memory_bytes{{gpu=\"0\",uuid=\"GPU-0\",pid=\"32\",process=\"python3\",type=\"M\"}} {}\n",
            300 * MIB
        ),
    ] {
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
}

/// A process whose files cannot be read has an info series with the reason, beside its memory
/// series (the label budget of that one unchanged); one only said to be outside gets
/// `outside_pid_namespace`; a capped-out process has neither.
#[test]
fn unreadable_processes_have_an_info_series_with_the_reason() {
    let mut s = sample();
    let mut hidden = process(40, None, 50 * MIB, 0);
    hidden.unreadable = Some(hypomnesis::UnreadableReason::HiddenByHidepid);
    let mut outside = process(41, None, 40 * MIB, 1);
    outside.outside_pid_namespace = true;
    s.processes.extend([hidden, outside]);
    let text = render(s.clone(), Duration::ZERO, 1, None);
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_gpu_process_unreadable_info{"))
        .collect();
    assert_eq!(
        info,
        [
            "hypomnesis_gpu_process_unreadable_info{gpu=\"0\",uuid=\"GPU-0\",pid=\"40\",reason=\"hidden_by_hidepid\"} 1",
            "hypomnesis_gpu_process_unreadable_info{gpu=\"1\",pid=\"41\",reason=\"outside_pid_namespace\"} 1",
        ],
        "{text}"
    );
    assert!(
        text.contains(
            "hypomnesis_gpu_process_memory_bytes{gpu=\"0\",uuid=\"GPU-0\",pid=\"40\"} 52428800"
        ),
        "{text}"
    );
    s.max_process_series = Some(0);
    let text = render(s, Duration::ZERO, 1, None);
    assert!(!text.contains("unreadable_info{"), "{text}");
}

/// A stalled measurement names what it waits for, one series each (at most eight), with a
/// value a label can hold.
#[test]
fn a_stall_says_what_it_waits_for() {
    let waiting: Vec<String> = (0..10)
        .map(|i| format!("the file /host/proc/60{i}/status \"quoted\"\nnewline"))
        .collect();
    let stall = Stall {
        ran: Duration::from_secs(7),
        waiting,
    };
    let text = render(sample(), Duration::ZERO, 1, Some(stall));
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("hypomnesis_measurement_waiting_info{"))
        .collect();
    assert_eq!(series.len(), 8, "{text}");
    assert!(series[0].contains("/host/proc/600/status"), "{}", series[0]);
    assert!(
        !series[0].contains('\n') && series[0].ends_with(" 1"),
        "{}",
        series[0]
    );
    assert!(
        text.contains("hypomnesis_measurement_stalled_seconds 7.0"),
        "{text}"
    );
    assert!(text.contains("hypomnesis_scrape_success 0"), "{text}");
    let calm = render(sample(), Duration::ZERO, 1, None);
    assert!(!calm.contains("measurement_waiting_info{"), "{calm}");
}

mod labels;
mod pods;

#[test]
fn ghost_bytes_are_summed_by_class_per_listed_gpu_and_absent_unlooked() {
    use hypomnesis::{Ghost, GhostClass, GhostReport};
    let mut s = sample();
    let text = render(s.clone(), Duration::from_millis(10), 1, None);
    assert!(!text.contains("gpu_ghost"), "not looked for: no family");
    let mut report = GhostReport::default();
    report.ghosts = vec![
        Ghost::new(GhostClass::Exited, 0, Some(4400), 3 * GIB),
        Ghost::new(GhostClass::Exited, 0, Some(4401), GIB),
        Ghost::new(GhostClass::Unaccounted, 0, None, 2 * GIB),
        Ghost::new(GhostClass::Idle, 1, Some(77), MIB),
    ];
    s.ghosts = Some(report);
    s.listed = vec![0];
    let text = render(s, Duration::from_millis(10), 1, None);
    let series = |gpu: u32, class: &str| {
        let head = format!("hypomnesis_gpu_ghost_bytes{{gpu=\"{gpu}\",");
        text.lines()
            .find(|l| l.starts_with(&head) && l.contains(&format!("class=\"{class}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!(series(0, "exited"), Some(4 * GIB), "{text}");
    assert_eq!(series(0, "unaccounted"), Some(2 * GIB));
    assert_eq!(
        series(0, "zombie"),
        Some(0),
        "a class not found is 0, not absent"
    );
    assert_eq!(
        series(1, "idle"),
        None,
        "GPU 1's list was not read: unknown"
    );
    assert_eq!(text.matches("hypomnesis_gpu_ghost_bytes{").count(), 7);
    assert!(
        text.contains("# UNIT hypomnesis_gpu_ghost_bytes bytes"),
        "{text}"
    );
}

/// A GPU whose memory is a NUMA node: the node on its info series, the kernel's figures of it
/// as two series of their own; none of them for a GPU without one.
#[test]
fn a_gpus_numa_node_is_exported() {
    let mut s = sample();
    let d = &mut s.devices[0];
    d.memory_model = Some(hypomnesis::MemoryModel::Coherent);
    d.numa_node = Some(1);
    d.numa_node_total_bytes = Some(94 << 30);
    d.numa_node_used_bytes = Some(16 << 30);
    let text = render(s, Duration::ZERO, 1, None);
    assert!(
        text.contains(r#"memory_model="coherent",numa_node="1"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "\nhypomnesis_gpu_numa_node_memory_total_bytes{{gpu=\"0\",uuid=\"GPU-0\"}} {}\n",
            94u64 << 30
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "\nhypomnesis_gpu_numa_node_memory_used_bytes{{gpu=\"0\",uuid=\"GPU-0\"}} {}\n",
            16u64 << 30
        )),
        "{text}"
    );
    assert!(
        !text.contains(r#"numa_node_memory_used_bytes{gpu="1""#),
        "no node, no series: {text}"
    );
}
