//! MIG (Multi-Instance GPU) end to end: the library and `hmn` against the fake NVML with MIG
//! scenarios (loaded through the real loader), and against the stand-in `nvidia-smi` replaying
//! the recorded H100 MIG capture and the H200 MIG captures in
//! `crates/testkit/fixtures/nvidia-smi/`.
//!
//! NVML and the `nvidia-smi` source keep their settings for the life of a process, so library
//! cases run in child processes (`HMN_CHILD=<case>` re-runs this binary's ignored `child` test).

use crate::util::hmn::run;
use support::capture_reader;

use std::path::{Path, PathBuf};
use std::process::Command;

use hypomnesis::{GpuQuerySource, HypomnesisError, MigInstance, SourceState};
use support::{FakeVariant, capture, fake_nvml, fake_smi, write_scenario};

const MIB: u64 = 1 << 20;
/// Pids above Linux's largest possible `pid_max` (2^22): never visible here.
const GHOST: u32 = 4_194_400;

const H200_UUID: &str = "GPU-11111111-2222-3333-4444-555555555555";
const MIG_UUIDS: [&str; 5] = [
    "MIG-2a4c6e80-1b3d-4f70-9a1c-3e5f7a9c1e30",
    "MIG-7b9d1f32-5c7e-4a91-8b3d-5f7a9c1e3a52",
    "MIG-c1e3a5b7-9d1f-4234-a567-89abcdef0123",
    "MIG-e5f7a9c1-3b5d-4e7f-9a1b-3c5d7e9f1a2b",
    "MIG-0f1e2d3c-4b5a-4697-8877-665544332211",
];

/// The H200 of the issue, split into five MIG devices: GI 2 holds CI 0 and CI 1 (the second
/// has no figures of its own: it shares GI 2's), then 2g, 1g, 1g; three processes on GI 2 CI 1.
/// Then an L40S (no MIG) and an A100 with MIG off. `extra` goes into the H200 object, `last`
/// into its last MIG device's.
fn scenario_with(extra: &str, last: &str) -> String {
    let procs = format!(
        r#"[{{"pid": {GHOST}, "used": {}}}, {{"pid": {}, "used": {}}}, {{"pid": {}, "used": {}}}]"#,
        12_288 * MIB,
        GHOST + 1,
        4096 * MIB,
        GHOST + 2,
        512 * MIB
    );
    let mig = |slot: u32, gi: u32, ci: u32, profile: &str, mem: Option<(u64, u64)>, more: &str| {
        let mem = mem.map_or(String::new(), |(t, f)| {
            format!(
                r#", "total": {}, "free": {}, "reserved": 0"#,
                t * MIB,
                f * MIB
            )
        });
        format!(
            r#"{{"slot": {slot}, "gpu_instance_id": {gi}, "compute_instance_id": {ci},
                "name": "NVIDIA H200 MIG {profile}", "uuid": "{}" {mem} {more}}}"#,
            MIG_UUIDS[slot as usize]
        )
    };
    let migs = [
        mig(0, 2, 0, "1c.3g.71gb", Some((71_424, 54_499)), ""),
        mig(
            1,
            2,
            1,
            "2c.3g.71gb",
            None,
            &format!(r#", "compute_processes": {procs}"#),
        ),
        mig(2, 3, 0, "2g.35gb", Some((33_280, 33_264)), ""),
        mig(3, 9, 0, "1g.18gb", Some((16_384, 16_375)), ""),
        mig(4, 10, 0, "1g.18gb", Some((16_384, 16_375)), last),
    ];
    format!(
        r#"{{"devices": [
            {{"name": "NVIDIA H200", "uuid": "{H200_UUID}", "pci_bus_id": "00000000:19:00.0",
              "total": {}, "reserved": {}, "free": {}, "mig_mode": 1,
              "mig_devices": [{}] {extra}}},
            {{"name": "NVIDIA L40S", "total": {}, "reserved": {}, "free": {}}},
            {{"name": "NVIDIA A100-SXM4-80GB", "total": {}, "free": {}, "mig_mode": 0}}
        ]}}"#,
        143_771 * MIB,
        614 * MIB,
        126_198 * MIB,
        migs.join(", "),
        46_068 * MIB,
        609 * MIB,
        44_225 * MIB,
        81_920 * MIB,
        81_000 * MIB,
    )
}

fn scenario(extra: &str) -> String {
    scenario_with(extra, "")
}

/// The unprivileged view: the H200's device-wide memory and process lists are refused, and one
/// MIG device's memory cannot be read.
fn refused_scenario() -> String {
    scenario_with(r#", "aggregate_error": 4"#, r#", "memory_error": 999"#)
}

/// `crates/testkit/fixtures/nvidia-smi/<name>`.
fn own_capture(name: &str) -> PathBuf {
    support::fixtures("nvidia-smi").join(name)
}

const H100: &str = "linux-x86_64__nvidia-h100-mig__590.48.01.txt";
const H200_SMI: &str = "linux-x86_64__nvidia-h200-mig__590.48.01.txt";
const H200_SMI_UNPRIVILEGED: &str = "linux-x86_64__nvidia-h200-mig-unprivileged__590.48.01.txt";

fn empty_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

// ------------------------------------------------------------------ child processes

enum Source<'a> {
    Nvml(&'a str),
    Smi(&'a Path),
}

fn run_child(name: &str, source: &Source<'_>) {
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", name)
        .env("PATH", empty_dir("hmn-empty-path"))
        .env("HYPOMNESIS_PROCFS", empty_dir("hmn-mig-empty-procfs"))
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env_remove("FAKE_SMI_MODE");
    match source {
        Source::Nvml(s) => {
            cmd.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
                .env("FAKE_NVML_SCENARIO", write_scenario(s));
        }
        Source::Smi(cap) => {
            cmd.env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
                .env("HYPOMNESIS_NVIDIA_SMI", fake_smi())
                .env("FAKE_SMI_CAPTURE", cap)
                .env("FAKE_SMI_PHASE", "load");
        }
    }
    support::run_child_passing(&mut cmd, &format!("case {name}"));
}

#[test]
#[ignore = "entry point for the child processes; the other tests run it"]
fn child() {
    match std::env::var("HMN_CHILD").unwrap().as_str() {
        "nvml_privileged" => nvml_privileged(),
        "nvml_refused" => nvml_refused(),
        "smi_h100" => smi_h100(),
        "smi_h200" => smi_h200(),
        "smi_h200_unprivileged" => smi_h200_unprivileged(),
        other => panic!("unknown case {other}"),
    }
}

/// (slot, GI, CI, profile, total MiB, free MiB) of each instance, in the library's order.
fn shape(list: &[MigInstance]) -> Vec<(u32, u32, u32, String, u64, u64)> {
    list.iter()
        .map(|m| {
            (
                m.slot,
                m.gpu_instance_id.unwrap(),
                m.compute_instance_id.unwrap(),
                m.profile.clone().unwrap(),
                m.total_bytes.unwrap() / MIB,
                m.free_bytes.unwrap() / MIB,
            )
        })
        .collect()
}

fn h200_shape() -> Vec<(u32, u32, u32, String, u64, u64)> {
    [
        (0, 2, 0, "1c.3g.71gb", 71_424, 54_499),
        (1, 2, 1, "2c.3g.71gb", 71_424, 54_499),
        (2, 3, 0, "2g.35gb", 33_280, 33_264),
        (3, 9, 0, "1g.18gb", 16_384, 16_375),
        (4, 10, 0, "1g.18gb", 16_384, 16_375),
    ]
    .into_iter()
    .map(|(s, g, c, p, t, f)| (s, g, c, p.to_string(), t, f))
    .collect()
}

/// What every source must agree on for the H200: per-instance figures, GPU instance 2 counted
/// once, UUID lookup, and the processes' instance ids.
fn check_h200_instances(source: GpuQuerySource, gpu_uuid: &str) {
    let s = hypomnesis::mig_state(0).unwrap();
    assert_eq!((s.enabled, s.source), (Some(true), source));
    assert_eq!(s.name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(s.uuid.as_deref(), Some(gpu_uuid));
    let list = hypomnesis::mig_instances(0).unwrap();
    assert_eq!(list, s.instances);
    assert_eq!(shape(&list), h200_shape());
    for (m, uuid) in list.iter().zip(MIG_UUIDS) {
        assert_eq!(m.uuid.as_deref(), Some(uuid));
        assert_eq!(m.parent_index, 0);
        assert_eq!(m.reserved_bytes, Some(0));
        assert_eq!(
            m.used_bytes.unwrap(),
            m.total_bytes.unwrap() - m.free_bytes.unwrap()
        );
        assert_eq!(m.memory_error, None);
    }
    let gis = hypomnesis::mig_gpu_instances(&list);
    assert_eq!(
        gis.iter().map(|g| g.gpu_instance_id).collect::<Vec<_>>(),
        vec![Some(2), Some(3), Some(9), Some(10)]
    );
    assert_eq!(gis[0].compute_instance_ids, vec![0, 1]);
    assert_eq!(gis[0].profile.as_deref(), Some("3g.71gb"));
    let total: u64 = gis.iter().filter_map(|g| g.total_bytes).sum();
    assert_eq!(
        total,
        (71_424 + 33_280 + 16_384 + 16_384) * MIB,
        "GI 2 counted once"
    );
    let one = hypomnesis::mig_instance(MIG_UUIDS[3]).unwrap();
    assert_eq!(one, list[3]);
    let e = hypomnesis::mig_instance("MIG-00000000-dead-beef-0000-000000000000").unwrap_err();
    assert!(e.to_string().contains("no "), "{e}");
    let procs = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(procs.len(), 3);
    for p in &procs {
        assert_eq!(
            (p.gpu_instance_id, p.compute_instance_id),
            (Some(2), Some(1)),
            "{p:?}"
        );
    }
}

fn nvml_privileged() {
    check_h200_instances(GpuQuerySource::Nvml, H200_UUID);
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.mig_enabled, Some(true));
    assert_eq!(
        (d.total_bytes, d.free_bytes, d.reserved_bytes),
        (143_771 * MIB, 126_198 * MIB, Some(614 * MIB)),
        "the whole GPU's figures"
    );
    assert_eq!(hypomnesis::mig_state(0).unwrap().device_memory_error, None);
    let names: Vec<_> = hypomnesis::mig_instances(0)
        .unwrap()
        .into_iter()
        .map(|m| m.name.unwrap())
        .collect();
    assert_eq!(names[0], "NVIDIA H200 MIG 1c.3g.71gb");
    // A GPU that cannot be split, and one with MIG off.
    assert_eq!(hypomnesis::device_info(1).unwrap().mig_enabled, None);
    let l40s = hypomnesis::mig_state(1).unwrap();
    assert_eq!((l40s.enabled, l40s.instances.len()), (None, 0));
    assert_eq!(hypomnesis::device_info(2).unwrap().mig_enabled, Some(false));
    assert!(hypomnesis::mig_instances(2).unwrap().is_empty());
    let off = hypomnesis::mig_state(2).unwrap();
    assert_eq!((off.enabled, off.pending), (Some(false), Some(false)));
    assert!(matches!(
        hypomnesis::mig_state(3),
        Err(HypomnesisError::DeviceIndexOutOfRange { index: 3, count: 3 })
    ));
    let e = hypomnesis::mig_instance(H200_UUID).unwrap_err().to_string();
    assert!(e.contains("is a whole GPU, not a MIG device"), "{e}");
    let e = hypomnesis::mig_instance("MIG-nope")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no GPU or MIG device has UUID \"MIG-nope\""),
        "{e}"
    );
    let nvml = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    assert_eq!(nvml.state, SourceState::Answered);
    let detail = |k: &str| {
        nvml.details
            .iter()
            .find(|(l, _)| l == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(detail("GPU 0 MIG"), Some("on, 5 MIG devices"));
    assert_eq!(detail("GPU 1 MIG"), Some("not supported by this GPU"));
    assert_eq!(detail("GPU 2 MIG"), Some("off"));
}

fn nvml_refused() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(
        e.contains("nvmlDeviceGetMemoryInfo for GPU 0 failed: NVML_ERROR_NO_PERMISSION (4"),
        "the refusal is said: {e}"
    );
    let s = hypomnesis::mig_state(0).unwrap();
    assert_eq!(s.enabled, Some(true));
    assert_eq!(
        s.device_memory_error.as_ref().map(|f| f.message.as_str()),
        Some("NVML_ERROR_NO_PERMISSION")
    );
    assert_eq!(
        s.device_memory_error_kind(),
        Some(hypomnesis::ErrorKind::NoPermission)
    );
    assert_eq!(shape(&s.instances[..4]), h200_shape()[..4].to_vec());
    let broken = &s.instances[4];
    assert_eq!(
        (broken.gpu_instance_id, broken.profile.as_deref()),
        (Some(10), Some("1g.18gb"))
    );
    assert_eq!(
        (broken.total_bytes, broken.free_bytes, broken.used_bytes),
        (None, None, None),
        "unknown, not zeros"
    );
    assert_eq!(
        broken.memory_error.as_ref().map(|f| f.message.as_str()),
        Some("NVML_ERROR_UNKNOWN")
    );
    let gis = hypomnesis::mig_gpu_instances(&s.instances);
    assert_eq!(gis[3].total_bytes, None);
    // The GPU-wide process lists are refused too: the MIG devices' lists answer.
    let procs = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        procs
            .iter()
            .map(|p| (
                p.pid,
                p.used_bytes / MIB,
                p.gpu_instance_id,
                p.compute_instance_id
            ))
            .collect::<Vec<_>>(),
        vec![
            (GHOST, 12_288, Some(2), Some(1)),
            (GHOST + 1, 4096, Some(2), Some(1)),
            (GHOST + 2, 512, Some(2), Some(1)),
        ]
    );
    // Beyond pid_max: no local process (outside, or no such pid in the initial namespace).
    assert!(procs.iter().all(|p| p.local_pid().is_none()));
    assert_eq!(
        hypomnesis::mig_instance(MIG_UUIDS[4])
            .unwrap()
            .memory_error
            .map(|f| f.message),
        Some("NVML_ERROR_UNKNOWN".into())
    );
    // Other GPUs are unaffected.
    assert_eq!(
        hypomnesis::device_info(1).unwrap().total_bytes,
        46_068 * MIB
    );
}

fn smi_h100() {
    let cap = capture(H100);
    let text = capture_reader::read(&cap);
    let s = hypomnesis::mig_state(0).unwrap();
    assert_eq!(
        (s.enabled, s.pending, s.source),
        (Some(true), Some(true), GpuQuerySource::NvidiaSmi)
    );
    assert_eq!(s.device_memory_error, None);
    // Expected values from the capture's -L and -q sections, read independently.
    let list = capture_reader::section(&text, "capabilities", "list (-L)").unwrap();
    let want_uuids: Vec<String> = list
        .lines()
        .filter_map(|l| l.split("(UUID: ").nth(1))
        .filter(|u| u.starts_with("MIG-"))
        .map(|u| u.trim_end_matches(')').to_string())
        .collect();
    assert_eq!(want_uuids.len(), 4);
    assert_eq!(
        s.instances
            .iter()
            .map(|m| m.uuid.clone().unwrap())
            .collect::<Vec<_>>(),
        want_uuids
    );
    assert_eq!(
        shape(&s.instances),
        vec![
            (0, 2, 0, "3g.40gb".to_string(), 40_448, 29_357),
            (1, 3, 0, "2g.20gb".to_string(), 20_096, 20_080),
            (2, 9, 0, "1g.10gb".to_string(), 9984, 9976),
            (3, 10, 0, "1g.10gb".to_string(), 9984, 9976),
        ]
    );
    assert!(
        s.instances
            .iter()
            .all(|m| m.source == GpuQuerySource::NvidiaSmi && m.reserved_bytes == Some(0))
    );
    assert_eq!(
        hypomnesis::mig_instance(&want_uuids[2].to_lowercase())
            .unwrap()
            .gpu_instance_id,
        Some(9),
        "UUIDs compare without regard to case"
    );
    let procs = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        procs
            .iter()
            .map(|p| (p.pid, p.gpu_instance_id, p.compute_instance_id))
            .collect::<Vec<_>>(),
        vec![
            (21_180, Some(2), Some(0)),
            (21_181, Some(2), Some(0)),
            (21_198, Some(2), Some(0))
        ]
    );
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(
        d.mig_enabled, None,
        "the CSV query does not say; mig_state does"
    );
    let smi = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert!(
        smi.details
            .contains(&("GPU 0 MIG".to_string(), "on, 4 MIG devices".to_string())),
        "{smi:?}"
    );
}

fn smi_h200() {
    check_h200_instances(
        GpuQuerySource::NvidiaSmi,
        "GPU-5d1c2a7e-0f3b-4c1d-9a8e-6b7c8d9e0f12",
    );
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(
        (d.total_bytes, d.free_bytes, d.reserved_bytes),
        (143_771 * MIB, 126_198 * MIB, Some(614 * MIB))
    );
}

fn smi_h200_unprivileged() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(
        e.contains("memory.total is [Insufficient Permissions]"),
        "{e}"
    );
    let s = hypomnesis::mig_state(0).unwrap();
    assert_eq!(
        s.device_memory_error.as_ref().map(|f| f.message.as_str()),
        Some("Insufficient Permissions")
    );
    assert_eq!(shape(&s.instances), h200_shape());
}

#[test]
fn library_against_the_fake_nvml_with_mig() {
    run_child("nvml_privileged", &Source::Nvml(&scenario("")));
}

#[test]
fn library_when_the_whole_gpu_is_refused() {
    run_child("nvml_refused", &Source::Nvml(&refused_scenario()));
}

#[test]
fn library_on_the_h100_mig_capture() {
    run_child("smi_h100", &Source::Smi(&capture(H100)));
}

#[test]
fn library_on_the_h200_mig_captures() {
    run_child("smi_h200", &Source::Smi(&own_capture(H200_SMI)));
    run_child(
        "smi_h200_unprivileged",
        &Source::Smi(&own_capture(H200_SMI_UNPRIVILEGED)),
    );
}

// ------------------------------------------------------------------ pure parsers

/// The MIG panel of the default `nvidia-smi` table: (GI, CI, MIG dev, used MiB, total MiB).
fn table_mig_rows(table: &str) -> Vec<(u32, u32, u32, u64, u64)> {
    table
        .lines()
        .skip_while(|l| !l.contains("MIG devices:"))
        .take_while(|l| !l.contains("Processes:"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let ids: Vec<u32> = cells
                .get(1)?
                .split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<_>>()?;
            let (used, total) = cells.get(2)?.split_once(" / ")?;
            let mib = |v: &str| v.trim().strip_suffix("MiB")?.parse::<u64>().ok();
            match ids.as_slice() {
                [_gpu, gi, ci, dev] => Some((*gi, *ci, *dev, mib(used)?, mib(total)?)),
                _ => None,
            }
        })
        .collect()
}

#[test]
fn parsers_on_the_h100_mig_capture() {
    use hypomnesis::__parsers::{parse_list, parse_q_mig};
    let text = capture_reader::read(&capture(H100));
    let list = parse_list(&capture_reader::section(&text, "capabilities", "list (-L)").unwrap());
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(
        list[0]
            .mig
            .iter()
            .map(|m| (m.index, m.profile.clone().unwrap()))
            .collect::<Vec<_>>(),
        vec![
            (0, "3g.40gb".to_string()),
            (1, "2g.20gb".to_string()),
            (2, "1g.10gb".to_string()),
            (3, "1g.10gb".to_string())
        ]
    );
    for phase in ["idle", "load"] {
        let q = parse_q_mig(&capture_reader::section(&text, phase, "query (-q)").unwrap());
        assert_eq!(q.len(), 1, "{phase}");
        let g = &q[0];
        assert_eq!(g.pci_bus_id, "00000000:00:09.0");
        assert_eq!((g.mig_current, g.mig_pending), (Some(true), Some(true)));
        // The default table's MIG panel, read independently, says the same.
        let table = table_mig_rows(
            &capture_reader::section(&text, phase, "nvidia-smi (default table)").unwrap(),
        );
        assert_eq!(table.len(), 4, "{phase}");
        for (d, (gi, ci, dev, used, total)) in g.devices.iter().zip(&table) {
            assert_eq!(
                (d.index, d.gpu_instance_id, d.compute_instance_id),
                (Some(*dev), Some(*gi), Some(*ci)),
                "{phase}"
            );
            let m = d.memory.clone().unwrap();
            assert_eq!(m.total_mib, Some(Ok(*total)), "{phase}");
            assert_eq!(m.used_mib, Some(Ok(*used)), "{phase}");
            assert_eq!(m.reserved_mib, Some(Ok(0)), "{phase}");
            let free = m.free_mib.unwrap().unwrap();
            assert!(
                (free + used).abs_diff(*total) <= 1,
                "{phase}: MiB rounding only"
            );
        }
        let apps = capture_reader::app_rows(&text, phase);
        assert_eq!(g.processes.len(), apps.len(), "{phase}");
        for (p, a) in g.processes.iter().zip(&apps) {
            assert_eq!(p.pid.unwrap().to_string(), a["pid"]);
            assert_eq!(
                (p.gpu_instance_id, p.compute_instance_id),
                (Some(2), Some(0))
            );
            assert_eq!(
                p.used_mib.clone().unwrap().ok(),
                capture_reader::mib(&a["used_gpu_memory"])
            );
        }
    }
    // Cut anywhere, the parsers give what they can and never panic.
    let q = capture_reader::section(&text, "load", "query (-q)").unwrap();
    for (i, _) in q.char_indices().step_by(97) {
        let _ = parse_q_mig(&q[..i]);
        let _ = parse_list(&q[..i]);
    }
}

// ------------------------------------------------------------------ hmn end to end

/// `hmn` with a clean environment and an empty procfs (every pid is "outside", so tables do
/// not depend on this host's processes).
fn hmn() -> Command {
    let mut c = crate::util::hmn::isolated();
    c.env_remove("FAKE_SMI_MODE")
        .env("HYPOMNESIS_PROCFS", empty_dir("hmn-mig-empty-procfs"));
    c
}

fn with_fake(scenario: &str) -> Command {
    let mut c = hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario));
    c
}

fn with_smi(capture: &Path) -> Command {
    let mut c = hmn();
    c.env("HYPOMNESIS_NVIDIA_SMI", fake_smi())
        .env("FAKE_SMI_CAPTURE", capture)
        .env("FAKE_SMI_PHASE", "load");
    c
}

const H200_MIG_LINES: &str = concat!(
    "  MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB\n",
    "  MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB\n",
    "  MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB\n",
    "  MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB\n",
    "  MIG 1g.18gb GI 10: free 16375 MiB / 16384 MiB\n",
);

#[test]
fn hmn_lists_instances_under_their_gpu() {
    let (code, out, err) = run(with_fake(&scenario("")), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "GPU 0 [NVIDIA H200]: free 126198 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n\
             {H200_MIG_LINES}\
             GPU 1 [NVIDIA L40S]: free 44225 MiB / 46068 MiB (609 MiB reserved), driver 590.48.01\n\
             GPU 2 [NVIDIA A100-SXM4-80GB]: free 81000 MiB / 81920 MiB (0 MiB reserved), driver 590.48.01\n"
        )
    );
    assert_eq!(err, "");
    // Through the stand-in nvidia-smi replaying the H200 capture: the same lines.
    let (code, out, err) = run(with_smi(&own_capture(H200_SMI)), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "GPU 0 [NVIDIA H200]: free 126198 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n{H200_MIG_LINES}"
        )
    );
}

#[test]
fn hmn_on_the_h100_mig_capture() {
    let (code, out, err) = run(with_smi(&capture(H100)), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "GPU 0 [NVIDIA H100 80GB HBM3]: free 69956 MiB / 81559 MiB (479 MiB reserved), driver 590.48.01\n\
         \x20 MIG 3g.40gb GI 2: free 29357 MiB / 40448 MiB\n\
         \x20 MIG 2g.20gb GI 3: free 20080 MiB / 20096 MiB\n\
         \x20 MIG 1g.10gb GI 9: free 9976 MiB / 9984 MiB\n\
         \x20 MIG 1g.10gb GI 10: free 9976 MiB / 9984 MiB\n"
    );
    let (code, out, _) = run(with_smi(&capture(H100)), &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let m = v[0]["mig_instances"].as_array().unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(v[0]["mig_enabled"], true);
    assert_eq!(m[0]["uuid"], "MIG-00000000-0000-0000-0000-000000000000");
    assert_eq!(m[0]["profile"], "3g.40gb");
    assert_eq!(m[0]["gpu_instance_id"], 2);
    assert_eq!(m[0]["total_bytes"], 40_448 * MIB);
    assert_eq!(m[0]["free_bytes"], 29_357 * MIB);
    assert_eq!(m[0]["used_bytes"], (40_448 - 29_357) * MIB);
    assert_eq!(m[0]["source"], "nvidia_smi");
    let (code, out, err) = run(with_smi(&capture(H100)), &["ps", "--sort", "pid"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "\
PID              USER  TYPE     VRAM  SHARED  SPILL  RSS  GI  CI  GPU  DEVICE                 COMMAND
21180 (outside)  ?     C     2.2 GiB   0 MiB  n/a      ?   2   0    0  NVIDIA H100 80GB HBM3  memhog
21181 (outside)  ?     C     1.2 GiB   0 MiB  n/a      ?   2   0    0  NVIDIA H100 80GB HBM3  memhog
21198 (outside)  ?     C     7.3 GiB   0 MiB  n/a      ?   2   0    0  NVIDIA H100 80GB HBM3  gpu_burn
"
    );
    let (_, out, _) = run(with_smi(&capture(H100)), &["doctor"]);
    assert!(out.contains("    GPU 0 MIG: on, 4 MIG devices\n"), "{out}");
}

#[test]
fn hmn_json_nests_instances() {
    let (code, out, err) = run(with_fake(&scenario("")), &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["mig_enabled"], true);
    assert_eq!(v[0]["total_bytes"], 143_771 * MIB);
    let m = v[0]["mig_instances"].as_array().unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m[1]["uuid"], MIG_UUIDS[1]);
    assert_eq!(m[1]["name"], "NVIDIA H200 MIG 2c.3g.71gb");
    assert_eq!(
        (
            &m[1]["gpu_instance_id"],
            &m[1]["compute_instance_id"],
            &m[1]["total_bytes"]
        ),
        (
            &serde_json::json!(2),
            &serde_json::json!(1),
            &serde_json::json!(71_424 * MIB)
        )
    );
    assert_eq!(m[1]["free_bytes"], m[0]["free_bytes"], "GI 2's memory");
    assert!(v[1]["mig_enabled"].is_null());
    assert!(v[1].get("mig_instances").is_none(), "no MIG: absent");
    assert_eq!(v[2]["mig_enabled"], false);
    assert!(v[2].get("mig_instances").is_none());
    // The same shape through nvidia-smi.
    let (_, out, _) = run(with_smi(&own_capture(H200_SMI)), &["--json"]);
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sm = s[0]["mig_instances"].as_array().unwrap();
    for (a, b) in m.iter().zip(sm) {
        for k in [
            "slot",
            "uuid",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "total_bytes",
            "free_bytes",
            "used_bytes",
            "reserved_bytes",
        ] {
            assert_eq!(a[k], b[k], "{k}");
        }
    }
}

#[test]
fn hmn_when_the_whole_gpu_is_refused() {
    let (code, out, err) = run(with_fake(&refused_scenario()), &[]);
    assert_eq!(code, 0, "instances were read: {err}");
    assert_eq!(
        out,
        "GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (NVML_ERROR_NO_PERMISSION)\n\
         \x20 MIG 1c.3g.71gb GI 2 CI 0: free 54499 MiB / 71424 MiB\n\
         \x20 MIG 2c.3g.71gb GI 2 CI 1: free 54499 MiB / 71424 MiB\n\
         \x20 MIG 2g.35gb GI 3: free 33264 MiB / 33280 MiB\n\
         \x20 MIG 1g.18gb GI 9: free 16375 MiB / 16384 MiB\n\
         \x20 MIG 1g.18gb GI 10: memory unknown (NVML_ERROR_UNKNOWN)\n\
         GPU 1 [NVIDIA L40S]: free 44225 MiB / 46068 MiB (609 MiB reserved), driver 590.48.01\n\
         GPU 2 [NVIDIA A100-SXM4-80GB]: free 81000 MiB / 81920 MiB (0 MiB reserved), driver 590.48.01\n"
    );
    assert_eq!(err, "");
    let (code, out, _) = run(with_fake(&refused_scenario()), &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for k in ["total_bytes", "free_bytes", "used_bytes", "reserved_bytes"] {
        assert!(v[0][k].is_null(), "{k}: null, not 0");
    }
    assert_eq!(v[0]["memory_error"], "NVML_ERROR_NO_PERMISSION");
    assert_eq!(v[0]["mig_enabled"], true);
    assert_eq!(v[0]["name"], "NVIDIA H200");
    assert_eq!(v[0]["mig_instances"].as_array().unwrap().len(), 5);
    assert!(v[0]["mig_instances"][4]["total_bytes"].is_null());
    assert_eq!(
        v[0]["mig_instances"][4]["memory_error"],
        "NVML_ERROR_UNKNOWN"
    );
    assert_eq!(v[1]["total_bytes"], 46_068 * MIB);
    // nvidia-smi as an unprivileged user sees the same.
    let (code, out, err) = run(with_smi(&own_capture(H200_SMI_UNPRIVILEGED)), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "GPU 0 [NVIDIA H200]: MIG on; device-wide memory refused (Insufficient Permissions)\n{H200_MIG_LINES}"
        )
    );
    // Refused with no instance to show: still a failure (exit 2, as every failure of hmn's
    // own query), as before.
    let empty = r#"{"devices": [{"name": "NVIDIA H200", "mig_mode": 1, "aggregate_error": 4}]}"#;
    let (code, out, err) = run(with_fake(empty), &[]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("NVML_ERROR_NO_PERMISSION"), "{err}");
}

#[test]
fn hmn_ps_shows_instance_columns() {
    let (code, out, err) = run(with_fake(&scenario("")), &["ps"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "\
PID                    USER  TYPE      VRAM  SHARED  SPILL  RSS  GI  CI  GPU  DEVICE                 COMMAND
4194400 (no such pid)  ?     C     12.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200            ?
4194401 (no such pid)  ?     C      4.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200            ?
4194402 (no such pid)  ?     C      512 MiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200            ?
-                      -     -      1.2 GiB       -  -        -   -   -    1  NVIDIA L40S            (not visible from here)
-                      -     -      920 MiB       -  -        -   -   -    2  NVIDIA A100-SXM4-80GB  (not visible from here)
"
    );
    // The scenario's L40S and A100 list no process but have memory allocated.
    assert!(
        err.starts_with(
            "hmn: 3 GPU processes found (16.5 GiB committed total).\n\
             hmn: 3 processes are listed with a pid no process here can have (above pid_max, and this is the initial PID namespace): memory counted, the process unknown.\n\
             hmn: 2.1 GiB on GPU 1, 2 is held by processes not visible from here"
        ),
        "{err}"
    );
    let (_, out, _) = run(with_fake(&refused_scenario()), &["ps", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["gpu_instance_id"], 2);
    assert_eq!(v[0]["compute_instance_id"], 1);
    // Through nvidia-smi (names from nvidia-smi, ids from `-q`).
    let (code, out, err) = run(with_smi(&own_capture(H200_SMI)), &["ps"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "\
PID              USER  TYPE      VRAM  SHARED  SPILL  RSS  GI  CI  GPU  DEVICE       COMMAND
31337 (outside)  ?     C     12.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  python3
31338 (outside)  ?     C      4.0 GiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  python3
31401 (outside)  ?     C      512 MiB   0 MiB  n/a      ?   2   1    0  NVIDIA H200  all_reduce_perf
"
    );
    // Without MIG the table has no GI and CI columns and JSON says null.
    let plain = r#"{"devices": [{"name": "NVIDIA L40S", "compute_processes": [{"pid": 4194400, "used": 1048576}]}]}"#;
    let (_, out, _) = run(with_fake(plain), &["ps"]);
    assert!(
        out.starts_with(
            "PID                    USER  TYPE   VRAM  SHARED  SPILL  RSS  GPU  DEVICE       COMMAND\n"
        ),
        "{out}"
    );
    let (_, out, _) = run(with_fake(plain), &["ps", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v[0]["gpu_instance_id"].is_null() && v[0]["compute_instance_id"].is_null());
}

#[test]
fn hmn_doctor_says_whether_mig_is_on() {
    let (code, out, _) = run(with_fake(&scenario("")), &["doctor"]);
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "    GPU 0 MIG: on, 5 MIG devices\n    GPU 0 memory: kind not known: the driver does not say its addressing mode (nvmlDeviceGetAddressingMode, R580 and later)\n    GPU 1 MIG: not supported by this GPU\n"
        ),
        "{out}"
    );
    assert!(out.contains("    GPU 2 MIG: off\n"), "{out}");
    let pending = scenario(r#", "mig_pending": 0"#);
    let (_, out, _) = run(with_fake(&pending), &["doctor"]);
    assert!(
        out.contains("    GPU 0 MIG: on, 5 MIG devices; off after the next GPU reset\n"),
        "{out}"
    );
    let (_, out, _) = run(with_smi(&own_capture(H200_SMI)), &["doctor"]);
    assert!(out.contains("    GPU 0 MIG: on, 5 MIG devices\n"), "{out}");
    // A capture without MIG: the L40S cannot be split.
    let (_, out, _) = run(
        with_smi(&capture("linux-x86_64__nvidia-l40s__595.80.txt")),
        &["doctor"],
    );
    assert!(
        out.contains("    GPU 0 MIG: not supported by this GPU\n"),
        "{out}"
    );
}
