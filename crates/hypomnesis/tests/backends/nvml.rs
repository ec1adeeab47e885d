//! The real NVML loader against the fake `libnvidia-ml` (`fake-nvml/`), loaded through
//! `HYPOMNESIS_NVML_LIBRARY`.
//!
//! NVML is loaded once per process, so each scenario runs in a child process: the parent test
//! re-runs this test binary with `HMN_CHILD=<scenario>` and the ignored `child` entry point
//! performs that scenario's assertions.
#![cfg(feature = "nvml")]
#![allow(unsafe_code)] // the test dlopens the fake itself to read its counters and probe the v2 tag

use std::path::{Path, PathBuf};
use std::process::Command;

use hypomnesis::{
    GpuContextKind, GpuQuerySource, HypomnesisError, NVML_MEMORY_V2_VERSION, Snapshot, SourceState,
};
use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;
/// Pids above Linux's largest possible `pid_max` (2^22): never visible here.
const GHOST: u32 = 4_194_400;

/// An H200-like device: total 143771 MiB, reserved 614 MiB, 110796 MiB free.
fn h200(extra: &str) -> String {
    format!(
        r#"{{"name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:18:00.0", "total": {}, "reserved": {}, "free": {} {extra}}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB
    )
}

/// Run scenario `name` in a child process with the fake library of `variant`.
fn run_child(name: &str, variant: FakeVariant, scenario: &str, env: &[(&str, &str)]) {
    let lib = fake_nvml(variant);
    let scenario = write_scenario(scenario);
    let empty_path = std::env::temp_dir().join("hmn-empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", name)
        .env("HYPOMNESIS_NVML_LIBRARY", &lib)
        .env("HMN_FAKE_LIB", &lib)
        .env("FAKE_NVML_SCENARIO", &scenario)
        // No nvidia-smi fallback unless a test provides one.
        .env("PATH", &empty_path)
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env_remove("HYPOMNESIS_PROCFS")
        .env("HYPOMNESIS_SYSFS", support::empty_dir());
    for (k, v) in env {
        cmd.env(k, v);
    }
    support::run_child_passing(&mut cmd, &format!("scenario {name}"));
}

/// Entry point of the child processes.
#[test]
#[ignore = "entry point for the scenario child processes; the other tests run it"]
fn child() {
    let name = std::env::var("HMN_CHILD").expect("HMN_CHILD names the scenario");
    match name.as_str() {
        "r510" => r510(),
        "pre_r510" => pre_r510(),
        "r450" => r450(),
        "tag" => tag(),
        "sentinels" => sentinels(),
        "many" => many(),
        "grow" => grow(),
        "no_permission" => no_permission(),
        "init_error" => init_error(),
        "multi" => multi(),
        "init_once" => init_once(),
        "reinit" => reinit(),
        "merge" => merge(),
        "mps" => mps(),
        "own" => own(),
        "garbage_count" => garbage_count(),
        "garbage_name" => garbage_name(),
        "not_found" => not_found(),
        "utilization" => utilization(),
        other => panic!("unknown scenario {other}"),
    }
}

fn fake_lib() -> PathBuf {
    PathBuf::from(std::env::var("HMN_FAKE_LIB").unwrap())
}

/// The fake's own counters, read through a second `dlopen` of the same library (same instance).
fn fake_counter(symbol: &[u8]) -> u64 {
    // SAFETY: the fake exports these introspection functions with these signatures.
    unsafe {
        let lib = libloading::Library::new(fake_lib()).unwrap();
        if symbol == b"fake_nvml_init_count\0" {
            let f: libloading::Symbol<unsafe extern "C" fn() -> u32> = lib.get(symbol).unwrap();
            u64::from(f())
        } else {
            let f: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char) -> u64> =
                lib.get(b"fake_nvml_call_count\0").unwrap();
            f(symbol.as_ptr().cast())
        }
    }
}

fn assert_invariants(d: &hypomnesis::GpuDeviceInfo) {
    assert_eq!(
        d.free_bytes + d.used_bytes,
        d.total_bytes,
        "free + used == total"
    );
    if let Some(r) = d.reserved_bytes {
        assert!(
            r <= d.used_bytes && d.used_bytes <= d.total_bytes,
            "reserved <= used <= total: {d:?}"
        );
    }
}

// ---------------------------------------------------------------- scenarios (child side)

fn r510() {
    assert_eq!(hypomnesis::device_count().unwrap(), 1);
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.total_bytes, 143_771 * MIB);
    assert_eq!(d.free_bytes, 110_796 * MIB);
    assert_eq!(d.used_bytes, (143_771 - 110_796) * MIB);
    assert_eq!(d.reserved_bytes, Some(614 * MIB));
    assert_eq!(d.name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(
        d.uuid.as_deref(),
        Some("GPU-11111111-2222-3333-4444-555555555555")
    );
    assert_eq!(d.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
    assert_eq!(d.driver_version.as_deref(), Some("590.48.01"));
    assert_eq!(d.source, GpuQuerySource::Nvml);
    assert_eq!(d.allocatable_bytes(), Some((143_771 - 614) * MIB));
    assert_invariants(&d);
    let e = hypomnesis::device_info(1).unwrap_err();
    assert!(
        matches!(
            e,
            HypomnesisError::DeviceIndexOutOfRange { index: 1, count: 1 }
        ),
        "{e}"
    );
    let report = hypomnesis::sources();
    let nvml = report
        .iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    assert_eq!(nvml.state, SourceState::Answered);
    let detail = |k: &str| {
        nvml.details
            .iter()
            .find(|(l, _)| l == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(detail("library"), Some(fake_lib().display().to_string()));
    assert_eq!(detail("driver version").as_deref(), Some("590.48.01"));
    assert_eq!(detail("NVML version").as_deref(), Some("13.590.48.01"));
    assert_eq!(
        detail("reserved memory (nvmlDeviceGetMemoryInfo_v2)").as_deref(),
        Some("available")
    );
    assert!(
        detail("compute process list")
            .unwrap()
            .contains("_v3 (24-byte")
    );
    let smi = report
        .iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert!(matches!(smi.state, SourceState::Absent(_)), "{smi:?}");
}

fn pre_r510() {
    let d = hypomnesis::device_info(0).unwrap();
    // v1 figures are identical to the R510 case; only the reservation is unknown.
    assert_eq!(d.total_bytes, 143_771 * MIB);
    assert_eq!(d.free_bytes, 110_796 * MIB);
    assert_eq!(d.used_bytes, (143_771 - 110_796) * MIB);
    assert_eq!(d.reserved_bytes, None);
    assert_invariants(&d);
    assert_eq!(fake_counter(b"nvmlDeviceGetMemoryInfo\0"), 1);
    let nvml = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    let v2 = nvml
        .details
        .iter()
        .find(|(l, _)| l.starts_with("reserved memory"))
        .unwrap();
    assert!(v2.1.contains("older than R510"), "{v2:?}");
    let list = nvml
        .details
        .iter()
        .find(|(l, _)| l == "compute process list")
        .unwrap();
    assert!(list.1.contains("_v2 (24-byte"), "{list:?}");
    let p = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        p.iter().map(|e| (e.pid, e.used_bytes)).collect::<Vec<_>>(),
        vec![(GHOST, 5 * MIB)]
    );
}

fn r450() {
    // Only the unversioned process list exists: 16-byte elements must still give the right rows.
    let p = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        p.iter().map(|e| (e.pid, e.used_bytes)).collect::<Vec<_>>(),
        vec![(GHOST, 5 * MIB), (GHOST + 1, 7 * MIB), (GHOST + 2, 9 * MIB)]
    );
    assert_eq!(hypomnesis::device_info(0).unwrap().reserved_bytes, None);
    assert_eq!(fake_counter(b"nvmlDeviceGetComputeRunningProcesses\0"), 1);
}

fn tag() {
    #[repr(C)]
    struct MemoryV2 {
        version: u32,
        total: u64,
        reserved: u64,
        free: u64,
        used: u64,
    }
    type GetV2 = unsafe extern "C" fn(*mut std::ffi::c_void, *mut MemoryV2) -> u32;
    type Handle = unsafe extern "C" fn(u32, *mut *mut std::ffi::c_void) -> u32;
    // Our tag is accepted: reserved comes back.
    assert_eq!(
        hypomnesis::device_info(0).unwrap().reserved_bytes,
        Some(614 * MIB)
    );
    // A wrong tag is rejected by the fake the way real drivers reject it.
    // SAFETY: signatures as in nvml.h; the struct matches nvmlMemory_v2_t.
    unsafe {
        let lib = libloading::Library::new(fake_lib()).unwrap();
        let handle: libloading::Symbol<Handle> =
            lib.get(b"nvmlDeviceGetHandleByIndex_v2\0").unwrap();
        let v2: libloading::Symbol<GetV2> = lib.get(b"nvmlDeviceGetMemoryInfo_v2\0").unwrap();
        let mut h = std::ptr::null_mut();
        assert_eq!(handle(0, &raw mut h), 0);
        for (version, want) in [
            (2_u32, 13_u32),
            (0, 13),
            (0x0100_0028, 13),
            (NVML_MEMORY_V2_VERSION, 0),
        ] {
            let mut m = MemoryV2 {
                version,
                total: 0,
                reserved: 0,
                free: 0,
                used: 0,
            };
            assert_eq!(v2(h, &raw mut m), want, "version tag {version:#x}");
            if want == 0 {
                assert_eq!(m.reserved, 614 * MIB);
                assert_eq!(
                    m.reserved + m.free + m.used,
                    m.total,
                    "v2: total = reserved + free + used"
                );
            }
        }
    }
}

fn sentinels() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        p.iter().map(|e| (e.pid, e.used_bytes)).collect::<Vec<_>>(),
        vec![(GHOST, MIB), (GHOST + 3, 143_771 * MIB)],
        "N/A and larger-than-the-device rows are dropped, the device's own size is kept"
    );
    let nvml = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    let dropped = nvml
        .details
        .iter()
        .find(|(l, _)| l == "process rows dropped")
        .unwrap();
    assert!(dropped.1.starts_with("2 "), "{dropped:?}");
    assert_eq!(nvml.dropped_process_rows, 2, "the count, as a field");
    assert_eq!(hypomnesis::dropped_process_rows(), 2, "and for all sources");
}

fn many() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(p.len(), 300, "no row cap");
    assert!(p.windows(2).all(|w| w[0].pid < w[1].pid), "sorted by pid");
    assert_eq!(p[299].pid, GHOST + 299);
    assert_eq!(p[299].used_bytes, 300 * MIB);
    assert!(
        p.iter().all(|e| e.name.is_none()),
        "pids outside this namespace have no name"
    );
}

fn grow() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(
        p.len(),
        100 + 50,
        "the rows that appeared between the calls are listed"
    );
}

fn no_permission() {
    assert_eq!(
        hypomnesis::device_count().unwrap(),
        2,
        "the count includes the refused device"
    );
    assert!(hypomnesis::device_info(0).is_ok());
    let e = hypomnesis::device_info(1).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, HypomnesisError::Nvml(_)), "{e}");
    assert!(
        msg.contains("NVML_ERROR_NO_PERMISSION (4") && msg.contains("GPU 1"),
        "{msg}"
    );
    assert_eq!(e.kind(), hypomnesis::ErrorKind::NoPermission);
    assert!(hypomnesis::gpu_processes(1).is_err());
    let all = Snapshot::all().unwrap();
    assert_eq!(all.len(), 2);
    assert!(all[0].gpu_device.is_some() && all[1].gpu_device.is_none());
}

fn init_error() {
    let want = std::env::var("HMN_WANT").unwrap();
    let e = hypomnesis::device_count().unwrap_err();
    let kind = match want.split(' ').next().unwrap() {
        "NVML_ERROR_DRIVER_NOT_LOADED" => hypomnesis::ErrorKind::DriverNotLoaded,
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH" => hypomnesis::ErrorKind::DriverVersionMismatch,
        other => panic!("no kind expected for {other}"),
    };
    let nvml = hypomnesis::sources().into_iter().next().unwrap();
    assert_eq!(nvml.kind(), Some(kind), "the doctor report says which");
    let msg = match &nvml.state {
        SourceState::Failed(w) => w.message.clone(),
        other => panic!("NVML failed: {other:?}"),
    };
    if kind == hypomnesis::ErrorKind::DriverNotLoaded {
        // 0.2.15: a driver that is not loaded is no GPU, for the count and the snapshots.
        assert!(matches!(e, HypomnesisError::NoGpuSource), "{e}");
        assert!(Snapshot::all().unwrap().is_empty());
    } else {
        // A library that loads but cannot start is an error, never "no GPU".
        assert!(matches!(e, HypomnesisError::Nvml(_)), "{e}");
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(&want), "{e}");
        assert!(
            Snapshot::all().is_err(),
            "an empty list would read as no GPU"
        );
    }
    assert!(msg.contains(&want) && msg.contains("nvmlInit_v2"), "{msg}");
    assert!(
        msg.contains(&fake_lib().display().to_string()),
        "names the library: {msg}"
    );
    // RAM still works and the snapshot says GPU unknown.
    let s = Snapshot::now(0).unwrap();
    assert!(s.ram_bytes > 0 && s.gpu.is_none() && s.gpu_device.is_none());
    let nvml = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    assert!(
        matches!(&nvml.state, SourceState::Failed(w) if w.message.contains(&want)),
        "{nvml:?}"
    );
    // The library's own words for the code, when it has some.
    match std::env::var("HMN_WANT_TEXT") {
        Ok(text) => assert!(msg.contains(&format!(", \"{text}\")")), "{msg}"),
        Err(_) => assert!(!msg.contains('"'), "no empty quotes: {msg}"),
    }
    // A failed nvmlInit is not retried for a second, whoever asks; then it is.
    let calls = || fake_counter(b"nvmlInit_v2\0");
    let before = calls();
    assert!(hypomnesis::device_count().is_err() && hypomnesis::device_info(0).is_err());
    assert_eq!(calls(), before, "not retried at once");
    let shown = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap()
        .details
        .into_iter()
        .find(|(k, _)| k == "nvmlInit calls")
        .map(|(_, v)| v);
    assert_eq!(shown, Some(calls().to_string()), "doctor counts the calls");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert!(hypomnesis::device_count().is_err());
    assert_eq!(calls(), before + 1, "retried after a second");
}

fn multi() {
    assert_eq!(hypomnesis::device_count().unwrap(), 3);
    for i in 0..3_u32 {
        let d = hypomnesis::device_info(i).unwrap();
        assert_eq!(d.index, i);
        assert_eq!(d.total_bytes, u64::from(i + 1) * 1024 * MIB);
        assert_eq!(d.reserved_bytes, Some(u64::from(i + 1) * MIB));
        assert_invariants(&d);
        let p = hypomnesis::gpu_processes(i).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].pid, GHOST + i);
        assert_eq!(p[0].device_index, i);
    }
    let all = Snapshot::all().unwrap();
    assert_eq!(
        all.iter()
            .map(|s| s.gpu_device.as_ref().unwrap().index)
            .collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
}

fn utilization() {
    let u = hypomnesis::device_utilization(0).unwrap();
    assert_eq!(
        (u.gpu_percent, u.memory_percent, u.source),
        (Some(87), Some(41), GpuQuerySource::Nvml)
    );
    // A GPU that does not sample it (NOT_SUPPORTED): unknown, not an error, never 0.
    let u = hypomnesis::device_utilization(1).unwrap();
    assert_eq!((u.gpu_percent, u.memory_percent), (None, None));
    // A figure above 100 is none.
    let u = hypomnesis::device_utilization(2).unwrap();
    assert_eq!((u.gpu_percent, u.memory_percent), (None, Some(100)));
    // Another failure is one, named.
    let e = hypomnesis::device_utilization(3).unwrap_err().to_string();
    assert!(e.contains("nvmlDeviceGetUtilizationRates"), "{e}");
    assert!(hypomnesis::device_utilization(4).is_err(), "out of range");
}

fn init_once() {
    for _ in 0..200 {
        hypomnesis::device_info(0).unwrap();
        hypomnesis::gpu_processes(0).unwrap();
        Snapshot::now(0).unwrap();
    }
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| (0..50).for_each(|_| drop(hypomnesis::device_info(0).unwrap())))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        fake_counter(b"fake_nvml_init_count\0"),
        1,
        "nvmlInit once per process"
    );
    assert_eq!(
        fake_counter(b"nvmlDeviceGetHandleByIndex_v2\0"),
        1,
        "handles are cached"
    );
}

fn reinit() {
    // The first memory query says NVML is uninitialised (the driver went away): the loader
    // re-initialises and answers.
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.total_bytes, 143_771 * MIB);
    assert_eq!(fake_counter(b"fake_nvml_init_count\0"), 2);
    assert_eq!(
        fake_counter(b"nvmlShutdown\0"),
        1,
        "the lost session is shut down before the new one (NVML counts its inits)"
    );
    hypomnesis::device_info(0).unwrap();
    assert_eq!(fake_counter(b"fake_nvml_init_count\0"), 2);
}

fn merge() {
    let p = hypomnesis::gpu_processes(0).unwrap();
    let rows: Vec<_> = p.iter().map(|e| (e.pid, e.used_bytes, e.context)).collect();
    assert_eq!(
        rows,
        vec![
            (GHOST, 100 * MIB, Some(GpuContextKind::ComputeAndGraphics)),
            (GHOST + 1, 10 * MIB, Some(GpuContextKind::Compute)),
            (GHOST + 2, 20 * MIB, Some(GpuContextKind::Graphics)),
        ],
        "a pid in both lists appears once, never summed"
    );
}

/// Compute, graphics and MPS lists: the server (by its name) and its clients, one row per pid.
fn mps() {
    let server: u32 = std::env::var("HMN_MPS_SERVER").unwrap().parse().unwrap();
    for named in [true, false] {
        let p = if named {
            hypomnesis::gpu_processes(0).unwrap()
        } else {
            hypomnesis::gpu_processes_unnamed(0).unwrap()
        };
        let rows: Vec<_> = p
            .iter()
            .map(|e| (e.pid, e.used_bytes, e.context, e.mps_server))
            .collect();
        let mut want = vec![
            (server, 30 * MIB, Some(GpuContextKind::Compute), true),
            (GHOST, 500 * MIB, Some(GpuContextKind::MpsAndCompute), false),
            (GHOST + 1, 300 * MIB, Some(GpuContextKind::Mps), false),
            (
                GHOST + 3,
                50 * MIB,
                Some(GpuContextKind::MpsAndGraphics),
                false,
            ),
        ];
        want.sort_unstable_by_key(|r| r.0);
        assert_eq!(rows, want, "named: {named}");
        assert_eq!(
            hypomnesis::dropped_process_rows(),
            1,
            "the MPS row without a figure and in no other list"
        );
    }
    let kinds: Vec<&str> = [
        GpuContextKind::Mps,
        GpuContextKind::MpsAndCompute,
        GpuContextKind::MpsAndGraphics,
        GpuContextKind::MpsComputeAndGraphics,
        GpuContextKind::ComputeAndGraphics,
    ]
    .iter()
    .map(|k| k.short())
    .collect();
    assert_eq!(kinds, ["M", "M+C", "M+G", "M+C+G", "C+G"]);
}

fn own() {
    let me = std::process::id();
    let g = hypomnesis::process_gpu_info(0).unwrap();
    assert_eq!(
        (g.used_bytes, g.is_per_process, g.source),
        (321 * MIB, true, GpuQuerySource::Nvml)
    );
    let p = hypomnesis::gpu_processes(0).unwrap();
    let mine = p.iter().find(|e| e.pid == me).unwrap();
    // The test binary is `tests-<hash>`: its comm is cut at 15 bytes, and the name is the
    // executable's whole file name (0.2.12), which begins with it.
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    let exe = std::env::current_exe().unwrap();
    let exe = exe.file_name().unwrap().to_str().unwrap();
    assert_eq!(comm.trim_end().len(), 15, "{comm:?}");
    assert!(exe.starts_with(comm.trim_end()) && exe.len() > 15, "{exe}");
    assert_eq!(
        mine.name.as_deref(),
        Some(exe),
        "own name from /proc/<pid>/comm, made whole from the exe link"
    );
    assert_eq!(hypomnesis::process_name(me).as_deref(), Some(exe));
    let ghost = p.iter().find(|e| e.pid == GHOST).unwrap();
    assert_eq!(ghost.name, None, "kept, unnamed, when not visible here");
    // Unnamed: the same rows, every name None (no comm read), the rest as named.
    let unnamed = hypomnesis::gpu_processes_unnamed(0).unwrap();
    assert!(unnamed.iter().all(|e| e.name.is_none()), "{unnamed:?}");
    let strip = |v: &[hypomnesis::GpuProcessEntry]| {
        v.iter()
            .map(|e| {
                (
                    e.pid,
                    e.used_bytes,
                    e.context,
                    e.outside_pid_namespace,
                    e.host_pid,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&unnamed), strip(&p));
    assert!(
        !unnamed
            .iter()
            .find(|e| e.pid == me)
            .unwrap()
            .outside_pid_namespace
    );
    // Device 1 does not list us, and we hold no CUDA context: per-process zero.
    let g = hypomnesis::process_gpu_info(1).unwrap();
    assert_eq!((g.used_bytes, g.is_per_process), (0, true));
    let s = Snapshot::now(0).unwrap();
    assert_eq!(s.gpu.unwrap().used_bytes, 321 * MIB);
    assert_eq!(s.gpu_device.unwrap().reserved_bytes, Some(614 * MIB));
    #[cfg(feature = "sampling")]
    own_in_frames(me);
}

/// The sampler's frames, on the scenario of [`own`]: every device once, the parts asked.
#[cfg(feature = "sampling")]
fn own_in_frames(me: u32) {
    use hypomnesis::sampling::{Sampler, Want};
    let mut want = Want::NONE;
    (want.devices, want.processes, want.own) = (true, true, true);
    let sampler = Sampler::new(want);
    std::thread::sleep(std::time::Duration::from_millis(5));
    let f = sampler.frame(&[me]);
    assert!(f.at >= std::time::Duration::from_millis(5), "{:?}", f.at);
    assert!(sampler.elapsed() >= f.at);
    assert_eq!(f.count, Ok(2));
    assert_eq!(f.devices.len(), 2);
    let d = &f.devices[0];
    let info = d.info().unwrap();
    assert_eq!(info.total_bytes, 143_771 * MIB);
    assert_eq!(f.used(0), Some(info.used_bytes));
    assert_eq!(d.own_bytes(), Some(321 * MIB));
    assert_eq!(f.gpu_by_pid(0).unwrap().get(&me), Some(&(321 * MIB)));
    let named = d.processes().unwrap().iter().find(|e| e.pid == me).unwrap();
    assert!(named.name.is_some(), "named unless asked otherwise");
    assert!(d.residency.is_none() && d.mig.is_none() && d.utilization.is_none());
    assert_eq!(
        f.devices[1].own_bytes(),
        Some(0),
        "per process, and none there"
    );
    assert!(f.rss.get(&me).copied().flatten().is_some_and(|r| r > 0));
    // One device alone, and unnamed rows.
    want.unnamed = true;
    let one = Sampler::new(want).device(0);
    assert_eq!(one.info().map(|i| i.total_bytes), Some(143_771 * MIB));
    assert!(one.processes().unwrap().iter().all(|e| e.name.is_none()));
}

fn garbage_count() {
    let e = hypomnesis::gpu_processes(0).unwrap_err().to_string();
    assert!(
        e.contains("nvmlDeviceGetComputeRunningProcesses_v3") && e.contains("not trusted"),
        "{e}"
    );
    assert!(
        hypomnesis::device_info(0).is_ok(),
        "the device figures do not depend on the list"
    );
}

fn garbage_name() {
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.name, None, "a name without NUL is unknown, not garbage");
    assert_eq!(d.total_bytes, 143_771 * MIB);
}

fn not_found() {
    let want = std::env::var("HMN_WANT").unwrap();
    let e = hypomnesis::device_count().unwrap_err();
    assert!(
        matches!(e, HypomnesisError::Nvml(_)),
        "an explicit library that fails is named: {e}"
    );
    assert!(e.to_string().contains(&want), "{e}");
}

// ---------------------------------------------------------------- parent tests

fn procs(list: &[(u32, Option<u64>)]) -> String {
    let rows: Vec<String> = list
        .iter()
        .map(|(pid, used)| match used {
            Some(u) => format!(r#"{{"pid": {pid}, "used": {u}}}"#),
            None => format!(r#"{{"pid": {pid}, "used": null}}"#),
        })
        .collect();
    format!("[{}]", rows.join(","))
}

fn one_device(extra: &str) -> String {
    format!(r#"{{"devices": [{}]}}"#, h200(extra))
}

#[test]
fn r510_reserved_is_reported_and_invariants_hold() {
    run_child("r510", FakeVariant::Modern, &one_device(""), &[]);
}

#[test]
fn pre_r510_reserved_is_none_and_v1_unchanged() {
    let extra = format!(
        r#", "compute_processes": {}"#,
        procs(&[(GHOST, Some(5 * MIB))])
    );
    run_child("pre_r510", FakeVariant::PreR510, &one_device(&extra), &[]);
}

#[test]
fn r450_v1_process_list_with_16_byte_stride() {
    let extra = format!(
        r#", "compute_processes": {}"#,
        procs(&[
            (GHOST + 1, Some(7 * MIB)),
            (GHOST, Some(5 * MIB)),
            (GHOST + 2, Some(9 * MIB))
        ])
    );
    run_child("r450", FakeVariant::R450, &one_device(&extra), &[]);
}

#[test]
fn wrong_version_tag_is_rejected_ours_is_accepted() {
    run_child("tag", FakeVariant::Modern, &one_device(""), &[]);
}

#[test]
fn sentinel_and_over_total_rows_are_dropped() {
    let extra = format!(
        r#", "compute_processes": {}"#,
        procs(&[
            (GHOST, Some(MIB)),
            (GHOST + 1, None),
            (GHOST + 2, Some(143_771 * MIB + 1)),
            (GHOST + 3, Some(143_771 * MIB))
        ])
    );
    run_child("sentinels", FakeVariant::Modern, &one_device(&extra), &[]);
}

#[test]
fn three_hundred_processes_are_all_listed() {
    let list: Vec<_> = (0..300)
        .map(|i| (GHOST + i, Some(u64::from(i + 1) * MIB)))
        .collect();
    let extra = format!(r#", "compute_processes": {}"#, procs(&list));
    run_child("many", FakeVariant::Modern, &one_device(&extra), &[]);
}

#[test]
fn a_list_that_grows_between_the_calls() {
    let list: Vec<_> = (0..100).map(|i| (GHOST + i, Some(MIB))).collect();
    let extra = format!(
        r#", "compute_processes": {}, "grow_between_calls": 50"#,
        procs(&list)
    );
    run_child("grow", FakeVariant::Modern, &one_device(&extra), &[]);
}

#[test]
fn no_permission_on_one_device() {
    let s = format!(
        r#"{{"devices": [{}, {}]}}"#,
        h200(""),
        h200(r#", "handle_error": 4"#)
    );
    run_child("no_permission", FakeVariant::Modern, &s, &[]);
}

#[test]
fn driver_not_loaded_at_init() {
    let s = format!(r#"{{"init_error": 9, "devices": [{}]}}"#, h200(""));
    run_child(
        "init_error",
        FakeVariant::Modern,
        &s,
        &[
            ("HMN_WANT", "NVML_ERROR_DRIVER_NOT_LOADED (9"),
            ("HMN_WANT_TEXT", "Driver Not Loaded"),
        ],
    );
}

#[test]
fn a_library_without_words_for_its_codes() {
    let s = format!(
        r#"{{"init_error": 9, "garbage": {{"empty_error_strings": true}}, "devices": [{}]}}"#,
        h200("")
    );
    run_child(
        "init_error",
        FakeVariant::Modern,
        &s,
        &[("HMN_WANT", "NVML_ERROR_DRIVER_NOT_LOADED (9)")],
    );
}

#[test]
fn lib_rm_version_mismatch_at_init() {
    let s = format!(r#"{{"init_error": 18, "devices": [{}]}}"#, h200(""));
    run_child(
        "init_error",
        FakeVariant::Modern,
        &s,
        &[
            ("HMN_WANT", "NVML_ERROR_LIB_RM_VERSION_MISMATCH (18"),
            (
                "HMN_WANT_TEXT",
                "RM has detected an NVML/RM version mismatch",
            ),
        ],
    );
}

#[test]
fn multi_gpu() {
    let devs: Vec<String> = (0..3_u64)
        .map(|i| {
            format!(
                r#"{{"total": {}, "reserved": {}, "free": {}, "compute_processes": {}}}"#,
                (i + 1) * 1024 * MIB,
                (i + 1) * MIB,
                (i + 1) * 512 * MIB,
                procs(&[(GHOST + u32::try_from(i).unwrap(), Some(MIB))])
            )
        })
        .collect();
    run_child(
        "multi",
        FakeVariant::Modern,
        &format!(r#"{{"devices": [{}]}}"#, devs.join(",")),
        &[],
    );
}

#[test]
fn utilization_where_the_driver_samples_it() {
    let util = [
        r#", "utilization": {"gpu": 87, "memory": 41}"#,
        "",
        r#", "utilization": {"gpu": 101, "memory": 100}"#,
        r#", "utilization": {"gpu": 1, "memory": 1}"#,
    ];
    let devs: Vec<String> = util.iter().map(|u| h200(u)).collect();
    let s = format!(
        r#"{{"devices": [{}], "fail": [{{"function": "nvmlDeviceGetUtilizationRates", "code": 999, "device": 3}}]}}"#,
        devs.join(",")
    );
    run_child("utilization", FakeVariant::Modern, &s, &[]);
}

#[test]
fn init_is_called_once_across_many_queries() {
    let extra = format!(r#", "compute_processes": {}"#, procs(&[(GHOST, Some(MIB))]));
    run_child("init_once", FakeVariant::Modern, &one_device(&extra), &[]);
}

#[test]
fn reinitialises_after_the_driver_went_away() {
    let s = format!(
        r#"{{"devices": [{}], "fail": [{{"function": "nvmlDeviceGetMemoryInfo", "code": 1, "times": 1}}]}}"#,
        h200("")
    );
    run_child("reinit", FakeVariant::Modern, &s, &[]);
}

#[test]
fn compute_and_graphics_are_merged_per_pid() {
    let extra = format!(
        r#", "compute_processes": {}, "graphics_processes": {}"#,
        procs(&[(GHOST, Some(100 * MIB)), (GHOST + 1, Some(10 * MIB))]),
        procs(&[(GHOST + 2, Some(20 * MIB)), (GHOST, Some(100 * MIB))])
    );
    run_child("merge", FakeVariant::Modern, &one_device(&extra), &[]);
}

/// An MPS node: the server in the compute list (a process named as the real one is), clients
/// in the MPS list only (`M`), in both (`M+C`), and with graphics (`M+G`, its MPS row without a
/// figure), and a client whose only row has no figure (dropped, counted).
#[test]
fn mps_clients_are_listed_once_and_the_server_is_named() {
    let dir = std::env::temp_dir().join(format!("hmn-mps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("nvidia-cuda-mps-server");
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let mut server = std::process::Command::new(&exe).arg("60").spawn().unwrap();
    let extra = format!(
        r#", "compute_processes": {}, "graphics_processes": {}, "mps_processes": {}"#,
        procs(&[(server.id(), Some(30 * MIB)), (GHOST, Some(500 * MIB))]),
        procs(&[(GHOST + 3, Some(50 * MIB))]),
        procs(&[
            (GHOST, Some(500 * MIB)),
            (GHOST + 1, Some(300 * MIB)),
            (GHOST + 2, None),
            (GHOST + 3, None),
        ])
    );
    let pid = server.id().to_string();
    run_child(
        "mps",
        FakeVariant::Modern,
        &one_device(&extra),
        &[("HMN_MPS_SERVER", &pid)],
    );
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn own_process_usage_and_names() {
    let me = std::process::id();
    let extra = format!(
        r#", "compute_processes": {}"#,
        procs(&[(me, Some(321 * MIB)), (GHOST, Some(MIB))])
    );
    let s = format!(r#"{{"devices": [{}, {}]}}"#, h200(&extra), h200(""));
    // The child is a different process: it puts its own pid in the scenario itself. Only the
    // row's pid is replaced: this test process's number may also be digits of a figure (a CI
    // run as pid 20096 turned the total 150754820096 into the child's 150754838526).
    let s = s.replace(&format!(r#""pid": {me},"#), r#""pid": __CHILD_PID__,"#);
    run_child_with_own_pid("own", &s);
}

/// Like `run_child`, but the child's pid is only known once it runs: a tiny wrapper script
/// substitutes it (`exec` keeps the pid).
fn run_child_with_own_pid(name: &str, scenario: &str) {
    let lib = fake_nvml(FakeVariant::Modern);
    let template = write_scenario(scenario);
    let script = format!(
        "sed \"s/__CHILD_PID__/$$/g\" '{}' > '{}.live' && FAKE_NVML_SCENARIO='{}.live' exec '{}' --exact '{}' --include-ignored --nocapture --test-threads=1",
        template.display(),
        template.display(),
        template.display(),
        std::env::current_exe().unwrap().display(),
        support::test_name(module_path!(), "child")
    );
    let empty_path = std::env::temp_dir().join("hmn-empty-path");
    std::fs::create_dir_all(&empty_path).unwrap();
    let out = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("HMN_CHILD", name)
        .env("HYPOMNESIS_NVML_LIBRARY", &lib)
        .env("HMN_FAKE_LIB", &lib)
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env_remove("HYPOMNESIS_PROCFS")
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("PATH", format!("/usr/bin:/bin:{}", empty_path.display()))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "scenario {name} failed:\n{text}"
    );
}

#[test]
fn process_count_larger_than_the_buffer_is_an_error_not_a_list() {
    let extra = format!(r#", "compute_processes": {}"#, procs(&[(GHOST, Some(MIB))]));
    let s = format!(
        r#"{{"devices": [{}], "garbage": {{"count_larger_than_buffer": true}}}}"#,
        h200(&extra)
    );
    run_child("garbage_count", FakeVariant::Modern, &s, &[]);
}

#[test]
fn a_name_without_nul_is_unknown() {
    let s = format!(
        r#"{{"devices": [{}], "garbage": {{"name_without_nul": true}}}}"#,
        h200("")
    );
    run_child("garbage_name", FakeVariant::Modern, &s, &[]);
}

#[test]
fn explicit_library_that_does_not_exist_is_named() {
    let lib = fake_nvml(FakeVariant::Modern);
    let missing = lib.with_file_name("no-such-libnvidia-ml.so.1");
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", "not_found")
        .env("HMN_WANT", missing.display().to_string())
        .env("HMN_FAKE_LIB", &lib)
        .env("HYPOMNESIS_NVML_LIBRARY", &missing)
        .env("PATH", "/nonexistent")
        .env_remove("HYPOMNESIS_NVIDIA_SMI");
    support::run_child_passing(&mut cmd, "a missing explicit library");
}

#[test]
fn relative_library_path_is_refused() {
    let lib = fake_nvml(FakeVariant::Modern);
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", "not_found")
        .env("HMN_WANT", "must be an absolute path")
        .env("HMN_FAKE_LIB", &lib)
        .env("HYPOMNESIS_NVML_LIBRARY", "libnvidia-ml.so.1")
        .env("PATH", "/nonexistent")
        .env_remove("HYPOMNESIS_NVIDIA_SMI");
    support::run_child_passing(&mut cmd, "a relative library path");
}

#[test]
fn fake_library_is_where_the_support_code_says() {
    assert!(Path::new(&fake_nvml(FakeVariant::Modern)).is_file());
}
