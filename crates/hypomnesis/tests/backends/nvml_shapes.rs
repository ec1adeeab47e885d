//! What real drivers do that a simpler fake would not: the 32-byte `_v3` rows of drivers
//! 535.43–535.86, an idle GPU whose whole used memory is the reservation, one pid with different
//! compute and graphics figures, a process list that outgrows every buffer, v1 and v2 totals
//! that disagree, and the device-wide fallback of `process_gpu_info` when NVML lists this
//! process under a pid we cannot see.
//!
//! Each scenario runs in a child process (NVML is loaded once per process).
#![cfg(all(target_os = "linux", feature = "nvml"))]
#![allow(unsafe_code)] // the test dlopens the fake itself to read its call counters

use std::path::{Path, PathBuf};

use hypomnesis::{GpuContextKind, GpuQuerySource, GpuVendor, SourceState};
use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;
/// Pids above Linux's largest possible `pid_max` (2^22): never visible here.
const GHOST: u32 = 4_194_400;

fn run_child(name: &str, variant: FakeVariant, scenario: &str, procfs: Option<&Path>) {
    run_child_env(name, variant, scenario, procfs, &[]);
}

fn run_child_env(
    name: &str,
    variant: FakeVariant,
    scenario: &str,
    procfs: Option<&Path>,
    env: &[(&str, &str)],
) {
    let lib = fake_nvml(variant);
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", name)
        .env("HYPOMNESIS_NVML_LIBRARY", &lib)
        .env("HMN_FAKE_LIB", &lib)
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("PATH", support::empty_dir())
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env("HYPOMNESIS_SYSFS", support::empty_dir());
    match procfs {
        Some(p) => cmd.env("HYPOMNESIS_PROCFS", p),
        None => cmd.env_remove("HYPOMNESIS_PROCFS"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    support::run_child_passing(&mut cmd, &format!("scenario {name}"));
}

#[test]
#[ignore = "entry point for the scenario child processes; the other tests run it"]
fn child() {
    match std::env::var("HMN_CHILD").unwrap().as_str() {
        "wide" => wide(),
        "idle" => idle(),
        "compute_graphics" => compute_graphics(),
        "runaway" => runaway(),
        "v2_total" => v2_total(),
        "fallback" => fallback(),
        "no_context" => no_context(),
        "impossible" => impossible(),
        "mig_mode_reuse" => mig_mode_reuse(),
        "mig_slots" => mig_slots(),
        "mig_alias" => mig_alias(),
        "mig_impossible" => mig_impossible(),
        "mig_list_fails" => mig_list_fails(),
        "huge_list" => huge_list(),
        "names" => names(),
        "ids" => ids(),
        "huge_count" => huge_count(),
        other => panic!("unknown scenario {other}"),
    }
}

/// A call counter of the fake, read through a second `dlopen` of the same library.
fn calls(symbol: &str) -> u64 {
    let lib = PathBuf::from(std::env::var("HMN_FAKE_LIB").unwrap());
    let name = std::ffi::CString::new(symbol).unwrap();
    // SAFETY: the fake exports `fake_nvml_call_count(const char*) -> unsigned long long`; the
    // name is a live NUL-terminated string for the duration of the call.
    unsafe {
        let lib = libloading::Library::new(lib).unwrap();
        let f: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u64> =
            lib.get(b"fake_nvml_call_count\0").unwrap();
        f(name.as_ptr())
    }
}

fn h200(extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {} {extra}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB
    )
}

// ---------------------------------------------------------------- child side

fn wide() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    let rows: Vec<_> = p.iter().map(|e| (e.pid, e.used_bytes)).collect();
    assert_eq!(
        rows,
        vec![
            (GHOST, 1024 * MIB),
            (GHOST + 1, 2048 * MIB),
            (GHOST + 2, 512 * MIB)
        ],
        "32-byte rows read with a 32-byte stride"
    );
    let nvml = hypomnesis::sources().into_iter().next().unwrap();
    let detail = |k: &str| {
        nvml.details
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        detail("compute process list"),
        "nvmlDeviceGetComputeRunningProcesses_v3 (32-byte entries)"
    );
}

fn idle() {
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.used_bytes, 614 * MIB, "v1 used is the reservation alone");
    assert_eq!(
        d.reserved_bytes,
        Some(614 * MIB),
        "reserved == used on an idle GPU is consistent, not refused"
    );
    assert_eq!(d.allocatable_bytes(), Some((143_771 - 614) * MIB));
    assert!(hypomnesis::gpu_processes(0).unwrap().is_empty());
    // The doctor names the functions this driver is read with.
    let nvml = hypomnesis::sources().into_iter().next().unwrap();
    let detail = |k: &str| {
        nvml.details
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(detail("PCI info"), Some("nvmlDeviceGetPciInfo_v3"));
    assert_eq!(
        detail("CUDA driver API"),
        Some("12.4"),
        "12040 is CUDA 12.4"
    );
    assert_eq!(detail("NVML version"), Some("13.590.48.01"));
    assert_eq!(
        detail("compute process list"),
        Some("nvmlDeviceGetComputeRunningProcesses_v3 (24-byte entries)")
    );
}

fn compute_graphics() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    let rows: Vec<_> = p.iter().map(|e| (e.pid, e.used_bytes, e.context)).collect();
    assert_eq!(
        rows,
        vec![
            (GHOST, 300 * MIB, Some(GpuContextKind::ComputeAndGraphics)),
            (
                GHOST + 1,
                700 * MIB,
                Some(GpuContextKind::ComputeAndGraphics)
            ),
        ],
        "one pid in both lists takes the larger figure, whichever list has it"
    );
}

fn runaway() {
    let e = hypomnesis::gpu_processes(0).unwrap_err().to_string();
    assert!(
        e.contains("nvmlDeviceGetComputeRunningProcesses_v3")
            && e.contains("still answered NVML_ERROR_INSUFFICIENT_SIZE after 8 tries"),
        "{e}"
    );
    assert_eq!(
        calls("nvmlDeviceGetComputeRunningProcesses_v3"),
        8,
        "eight tries, then it gives up"
    );
    assert!(hypomnesis::device_info(0).is_ok());
}

fn v2_total() {
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.total_bytes, 143_771 * MIB, "the v1 total stands");
    assert_eq!(
        d.reserved_bytes, None,
        "a v2 answer with another total is not trusted"
    );
    assert_eq!(d.used_bytes, (143_771 - 110_796) * MIB);
    // The cheap read of the used memory says the same, from the v1 call alone.
    let v2_calls = calls("nvmlDeviceGetMemoryInfo_v2");
    let v1_calls = calls("nvmlDeviceGetMemoryInfo");
    assert_eq!(hypomnesis::device_used_bytes(0).unwrap(), d.used_bytes);
    assert_eq!(calls("nvmlDeviceGetMemoryInfo_v2"), v2_calls);
    assert_eq!(calls("nvmlDeviceGetMemoryInfo"), v1_calls + 1);
}

/// GPU 0 says free > total, GPU 1 a total of "not available"; GPU 2 is wholly free.
fn impossible() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "nvmlDeviceGetMemoryInfo for GPU 0 returned impossible figures (total {}, free {})",
            1024 * MIB,
            1025 * MIB
        )),
        "{e}"
    );
    let e = hypomnesis::device_info(1).unwrap_err().to_string();
    assert!(e.contains("GPU 1 returned impossible figures"), "{e}");
    // The cheap read of the used memory refuses them alike (it falls back to the full read).
    for i in [0, 1] {
        let e = hypomnesis::device_used_bytes(i).unwrap_err().to_string();
        assert!(e.contains("impossible figures"), "{e}");
    }
    assert_eq!(hypomnesis::device_used_bytes(2).unwrap(), 0);
    let d = hypomnesis::device_info(2).unwrap();
    assert_eq!(
        (d.free_bytes, d.used_bytes),
        (1024 * MIB, 0),
        "free == total is fine"
    );
    assert_eq!(
        (d.vendor, d.source),
        (Some(GpuVendor::Nvidia), GpuQuerySource::Nvml)
    );
}

/// Two GPUs that can be split: each one's MIG mode is asked once, then reused.
fn mig_mode_reuse() {
    for _ in 0..3 {
        for i in 0..2 {
            assert_eq!(hypomnesis::device_info(i).unwrap().mig_enabled, Some(false));
        }
    }
    assert_eq!(
        calls("nvmlDeviceGetMigMode"),
        2,
        "once per GPU within the reuse time"
    );
}

/// A GPU with 256 MIG slots (one occupied, slot 200) and one that claims 257.
fn mig_slots() {
    let list = hypomnesis::mig_instances(0).unwrap();
    assert_eq!(list.iter().map(|m| m.slot).collect::<Vec<_>>(), vec![200]);
    let e = hypomnesis::mig_instances(1).unwrap_err().to_string();
    assert!(
        e.contains("nvmlDeviceGetMaxMigDeviceCount for GPU 1 returned 257, more than any GPU has"),
        "{e}"
    );
}

/// The parent handle NVML gives for a MIG device is not the one GPU 1 was listed with: the
/// GPU is recognised by its UUID.
fn mig_alias() {
    let list = hypomnesis::mig_instances(1).unwrap();
    let second = list[1].uuid.clone().unwrap();
    let m = hypomnesis::mig_instance(&second).unwrap();
    assert_eq!((m.parent_index, m.slot), (1, list[1].slot));
    assert_eq!(m, list[1]);
}

/// MIG devices whose memory figures cannot be: free > total, a total of "not available";
/// then one wholly free.
fn mig_impossible() {
    let list = hypomnesis::mig_instances(0).unwrap();
    assert_eq!(
        list[0].memory_error.as_ref().map(|f| f.message.as_str()),
        Some(format!("impossible figures (total {}, free {})", 10 * MIB, 11 * MIB).as_str())
    );
    assert_eq!((list[0].total_bytes, list[0].used_bytes), (None, None));
    assert!(
        list[1]
            .memory_error
            .as_ref()
            .map(|f| f.message.as_str())
            .unwrap()
            .starts_with("impossible figures")
    );
    assert_eq!(list[2].memory_error, None);
    assert_eq!(
        (list[2].total_bytes, list[2].used_bytes),
        (Some(10 * MIB), Some(0))
    );
}

/// One MIG device's process list fails: with the GPU-wide list at hand it only loses that
/// device's instance ids; without it (unprivileged) the failure is the answer.
fn mig_list_fails() {
    let got = hypomnesis::gpu_processes(0);
    if std::env::var("HMN_WANT").unwrap() == "list" {
        let pids: Vec<u32> = got.unwrap().iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![GHOST, GHOST + 1]);
    } else {
        let e = got.unwrap_err().to_string();
        assert!(e.contains("for GPU 0 failed") && e.contains("(999"), "{e}");
    }
}

/// A driver that asks for room for more processes than pids exist.
fn huge_list() {
    let ask: u32 = std::env::var("HMN_WANT").unwrap().parse().unwrap();
    let got = hypomnesis::gpu_processes(0);
    if ask > 1 << 22 {
        let e = got.unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "asked for room for {ask} processes, more than any host can run"
            )),
            "{e}"
        );
    } else {
        assert_eq!(got.unwrap().len(), 3, "room for {ask} rows is given");
    }
}

/// Names: `comm` first; NVML's name for a pid this procfs shows without a `comm`; none for a
/// pid outside this view (NVML would name whatever has that number here).
fn names() {
    let rows: Vec<(u32, Option<String>)> = hypomnesis::gpu_processes(0)
        .unwrap()
        .into_iter()
        .map(|p| (p.pid, p.name))
        .collect();
    assert_eq!(
        rows,
        vec![
            (GHOST, Some("python3".into())),
            (GHOST + 1, Some("trainer".into())),
            (GHOST + 2, None)
        ]
    );
}

/// The instance ids a list layout carries (the v1 layout has none).
fn ids() {
    let got: Vec<_> = hypomnesis::gpu_processes(0)
        .unwrap()
        .into_iter()
        .map(|p| {
            (
                p.pid,
                p.used_bytes,
                p.gpu_instance_id,
                p.compute_instance_id,
            )
        })
        .collect();
    let ids = match std::env::var("HMN_WANT").unwrap().as_str() {
        "none" => (None, None),
        _ => (Some(3), Some(1)),
    };
    assert_eq!(got, vec![(GHOST, 5 * MIB, ids.0, ids.1)]);
}

/// A driver that claims more GPUs than a host can have.
fn huge_count() {
    let claimed: u32 = std::env::var("HMN_WANT").unwrap().parse().unwrap();
    let got = hypomnesis::device_count();
    if claimed > 1024 {
        let e = got.unwrap_err().to_string();
        assert!(
            e.contains(&format!("returned {claimed}, more GPUs than any host has")),
            "{e}"
        );
        assert!(hypomnesis::device_info(0).is_err());
    } else {
        assert_eq!(got.unwrap(), claimed);
        assert!(hypomnesis::device_info(0).is_ok());
    }
}

fn fallback() {
    let g = hypomnesis::process_gpu_info(0).unwrap();
    assert_eq!(
        (g.used_bytes, g.is_per_process),
        ((143_771 - 110_796) * MIB, false),
        "this process has a CUDA context but NVML lists only pids we cannot see: the \
         device-wide figure, flagged as such"
    );
}

fn no_context() {
    let g = hypomnesis::process_gpu_info(0).unwrap();
    assert_eq!(
        (g.used_bytes, g.is_per_process),
        (0, true),
        "no CUDA context here, or a source that sees every pid does not list this one: this \
         process holds nothing on the device"
    );
    // The doctor report still says the source answered.
    let nvml = hypomnesis::sources().into_iter().next().unwrap();
    assert_eq!(nvml.state, SourceState::Answered);
}

// ---------------------------------------------------------------- parent side

fn procs(rows: &[(u32, u64)]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|(pid, mib)| format!(r#"{{"pid": {pid}, "used": {}}}"#, mib * MIB))
        .collect();
    format!("[{}]", v.join(", "))
}

#[test]
fn thirty_two_byte_v3_rows_of_drivers_535_43_to_535_86() {
    let list = procs(&[(GHOST, 1024), (GHOST + 1, 2048), (GHOST + 2, 512)]);
    run_child(
        "wide",
        FakeVariant::R535Wide,
        &h200(&format!(r#", "compute_processes": {list}"#)),
        None,
    );
}

#[test]
fn every_list_layout_gives_pid_memory_and_instance_ids() {
    let s = format!(
        r#"{{"devices": [{{"compute_processes": [{{"pid": {GHOST}, "used": {},
            "gpu_instance_id": 3, "compute_instance_id": 1}}]}}]}}"#,
        5 * MIB
    );
    for (variant, want) in [
        (FakeVariant::Modern, "3,1"),
        (FakeVariant::R535Wide, "3,1"),
        (FakeVariant::PreR510, "3,1"),
        (FakeVariant::R450, "none"),
    ] {
        run_child_env("ids", variant, &s, None, &[("HMN_WANT", want)]);
    }
}

#[test]
fn a_device_count_beyond_1024_is_garbage() {
    for count in [1024_u32, 1025, u32::MAX] {
        let s = format!(r#"{{"devices": [{{}}], "garbage": {{"device_count": {count}}}}}"#);
        let want = count.to_string();
        run_child_env(
            "huge_count",
            FakeVariant::Modern,
            &s,
            None,
            &[("HMN_WANT", &want)],
        );
    }
}

#[test]
fn an_idle_gpu_keeps_its_reservation() {
    let scenario = format!(
        r#"{{"cuda_driver_version": 12040,
            "devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        (143_771 - 614) * MIB
    );
    run_child("idle", FakeVariant::Modern, &scenario, None);
}

#[test]
fn different_compute_and_graphics_figures_for_one_pid() {
    let compute = procs(&[(GHOST, 100), (GHOST + 1, 700)]);
    let graphics = procs(&[(GHOST, 300), (GHOST + 1, 200)]);
    run_child(
        "compute_graphics",
        FakeVariant::Modern,
        &h200(&format!(
            r#", "compute_processes": {compute}, "graphics_processes": {graphics}"#
        )),
        None,
    );
}

#[test]
fn a_list_that_outgrows_every_buffer_is_given_up_on() {
    let list = procs(&[(GHOST, 1)]);
    run_child(
        "runaway",
        FakeVariant::Modern,
        &h200(&format!(
            r#", "compute_processes": {list}, "grow_past_every_resize": true"#
        )),
        None,
    );
}

#[test]
fn impossible_memory_figures_are_refused_and_a_wholly_free_gpu_is_not() {
    let s = format!(
        r#"{{"devices": [{{"total": {t}, "free": {}}}, {{"total": {}, "free": 0}}, {{"total": {t}, "free": {t}}}]}}"#,
        1025 * MIB,
        u64::MAX,
        t = 1024 * MIB
    );
    run_child("impossible", FakeVariant::Modern, &s, None);
}

#[test]
fn the_mig_mode_of_each_gpu_is_reused_for_a_while() {
    let gpu = r#"{"mig_mode": 0}"#;
    run_child(
        "mig_mode_reuse",
        FakeVariant::Modern,
        &format!(r#"{{"devices": [{gpu}, {gpu}]}}"#),
        None,
    );
}

#[test]
fn a_mig_device_count_beyond_256_is_garbage() {
    let s = r#"{"devices": [
        {"mig_mode": 1, "max_mig_devices": 256, "mig_devices": [{"slot": 200, "gpu_instance_id": 1}]},
        {"mig_mode": 1, "max_mig_devices": 257, "mig_devices": []}
    ]}"#;
    run_child("mig_slots", FakeVariant::Modern, s, None);
}

#[test]
fn a_mig_device_is_placed_by_uuid_when_its_parent_handle_differs() {
    let gpu = r#"{"mig_mode": 1, "mig_devices": [{"gpu_instance_id": 1}, {"gpu_instance_id": 2}]}"#;
    let s = format!(r#"{{"devices": [{gpu}, {gpu}], "garbage": {{"parent_handle_alias": true}}}}"#);
    run_child("mig_alias", FakeVariant::Modern, &s, None);
}

#[test]
fn mig_devices_with_impossible_memory_say_so() {
    let s = format!(
        r#"{{"devices": [{{"mig_mode": 1, "mig_devices": [
            {{"gpu_instance_id": 1, "total": {t}, "free": {}}},
            {{"gpu_instance_id": 2, "total": {}, "free": 0}},
            {{"gpu_instance_id": 3, "total": {t}, "free": {t}}}
        ]}}]}}"#,
        11 * MIB,
        u64::MAX,
        t = 10 * MIB
    );
    run_child("mig_impossible", FakeVariant::Modern, &s, None);
}

#[test]
fn a_mig_device_whose_process_list_fails() {
    for (aggregate, want) in [("null", "list"), ("4", "error")] {
        let s = format!(
            r#"{{"devices": [{{"mig_mode": 1, "aggregate_error": {aggregate}, "mig_devices": [
                {{"gpu_instance_id": 1, "compute_processes": [{{"pid": {GHOST}, "used": 1048576}}]}},
                {{"gpu_instance_id": 2, "compute_processes": [{{"pid": {}, "used": 1048576}}]}}
              ]}}],
              "fail": [{{"function": "nvmlDeviceGetComputeRunningProcesses_v3", "code": 999,
                        "times": 1000, "device": 0, "mig_device": 1}}]}}"#,
            GHOST + 1
        );
        run_child_env(
            "mig_list_fails",
            FakeVariant::Modern,
            &s,
            None,
            &[("HMN_WANT", want)],
        );
    }
}

#[test]
fn a_process_list_that_asks_for_impossible_room_is_refused() {
    let list = procs(&[(GHOST, 1), (GHOST + 1, 1), (GHOST + 2, 1)]);
    for ask in [100_u64, 1 << 22, (1 << 22) + 1] {
        let s = format!(
            r#"{{"devices": [{{"compute_processes": {list}}}], "garbage": {{"ask_for_rows": {ask}}}}}"#
        );
        let want = ask.to_string();
        run_child_env(
            "huge_list",
            FakeVariant::Modern,
            &s,
            None,
            &[("HMN_WANT", &want)],
        );
    }
}

#[test]
fn process_names_come_from_comm_then_nvml_for_visible_pids_only() {
    let root = std::env::temp_dir().join(format!("hmn-shapes-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for (pid, comm) in [(GHOST, None), (GHOST + 1, Some("trainer\n"))] {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("status"), format!("Name:\tx\nNSpid:\t{pid}\n")).unwrap();
        if let Some(c) = comm {
            std::fs::write(dir.join("comm"), c).unwrap();
        }
    }
    let list = procs(&[(GHOST, 1), (GHOST + 1, 1), (GHOST + 2, 1)]);
    let s = format!(
        r#"{{"process_names": {{"{GHOST}": "python3", "{}": "nvml-name", "{}": "not-ours"}},
            "devices": [{{"compute_processes": {list}}}]}}"#,
        GHOST + 1,
        GHOST + 2
    );
    run_child("names", FakeVariant::Modern, &s, Some(&root));
}

#[test]
fn v1_and_v2_totals_that_disagree_give_no_reservation() {
    run_child(
        "v2_total",
        FakeVariant::Modern,
        &h200(&format!(r#", "v2_total": {}"#, 143_770 * MIB)),
        None,
    );
}

/// A procfs whose `self/fd` holds `/dev/nvidia-uvm` (a CUDA context) or not, seen from a
/// container's PID namespace or (`initial`) from the host's.
fn procfs_with_context(uvm: bool, initial: bool) -> PathBuf {
    let root = std::env::temp_dir().join(format!(
        "hmn-shapes-procfs-{}-{uvm}-{initial}",
        std::process::id()
    ));
    let fd = root.join("self").join("fd");
    std::fs::create_dir_all(&fd).unwrap();
    let link = fd.join("7");
    let _ = std::fs::remove_file(&link);
    let target = if uvm { "/dev/nvidia-uvm" } else { "/dev/null" };
    std::os::unix::fs::symlink(target, &link).unwrap();
    // In a container's PID namespace a pid NVML lists that this procfs does not show may be
    // of a process hidden from here. In the initial namespace a pid above pid_max is no
    // process at all, and NVML's list holds every pid there is.
    let ns = root.join("self").join("ns");
    std::fs::create_dir_all(&ns).unwrap();
    let _ = std::fs::remove_file(ns.join("pid"));
    let link = if initial {
        "pid:[4026531836]"
    } else {
        "pid:[4026532999]"
    };
    std::os::unix::fs::symlink(link, ns.join("pid")).unwrap();
    root
}

#[test]
fn a_cuda_process_nvml_lists_under_another_pid_gets_the_device_wide_figure() {
    let list = procs(&[(GHOST, 4096)]);
    let scenario = h200(&format!(r#", "compute_processes": {list}"#));
    let with = procfs_with_context(true, false);
    run_child("fallback", FakeVariant::Modern, &scenario, Some(&with));
    let without = procfs_with_context(false, false);
    run_child("no_context", FakeVariant::Modern, &scenario, Some(&without));
    // On the host, NVML's pids are ours: a listed pid that is no process hides nobody, so
    // this process (not listed) holds nothing on the device, context or not.
    let host = procfs_with_context(true, true);
    run_child("no_context", FakeVariant::Modern, &scenario, Some(&host));
    for d in [with, without, host] {
        let _ = std::fs::remove_dir_all(d);
    }
}
