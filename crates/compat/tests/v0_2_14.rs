//! The 0.2.14 consumer of `src/lib.rs`, run: what it needs no GPU for here, the rest against
//! the fake NVML in a child process per scenario (NVML is loaded once per process). Linux: the
//! fake NVML and the process checks are Linux's (Windows' spill is tested under Wine).
#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use hypomnesis::error::HypomnesisError;
use hypomnesis::snapshot::{GpuDeviceInfo, Snapshot};
use hypomnesis::spill::{DEFAULT_DEDICATED_THRESHOLD_PCT, DEFAULT_SHARED_GROWTH_BYTES};
use hypomnesis::{GpuQuerySource, SpillTracker};
use hypomnesis_compat as program;
use hypomnesis_testkit::{self as kit, FakeVariant};

const MIB: u64 = 1 << 20;

#[test]
fn the_constants_and_the_const_fns() {
    const LIMIT: u64 = program::tuned_threshold(100);
    let pct: u64 = DEFAULT_DEDICATED_THRESHOLD_PCT;
    let growth: u64 = DEFAULT_SHARED_GROWTH_BYTES;
    assert_eq!((pct, growth), (85, 256 * MIB));
    assert_eq!(LIMIT, 85);
    let d: GpuDeviceInfo = program::sized(GpuDeviceInfo::builder()).build();
    assert_eq!(
        (d.total_bytes, d.free_bytes, d.used_bytes),
        (16 << 30, 12 << 30, 4 << 30)
    );
    let s = Snapshot::builder().ram_bytes(512 * MIB).build();
    assert!((program::ram_of(&s) - 512.0).abs() < f64::EPSILON);
    assert_eq!(s.vram_mb(), None);
}

#[test]
fn spill_is_not_measurable_here_and_says_so() {
    let r = program::train_with_spill_check(0, 3).unwrap();
    assert!(!r.measurable && !r.spilled());
    assert_eq!(
        r.observations, 0,
        "no sample is taken where there are no counters"
    );
    assert_eq!(
        program::describe(&r),
        "spill not measurable (0 observations)"
    );
    assert_eq!(program::spill_now(0), "not measurable");
    assert!(!hypomnesis::is_spill_measurable());
    let t = program::tighten(SpillTracker::new(7).unwrap());
    assert!(!t.is_measurable() && !t.is_spilling() && !t.has_spilled());
}

#[test]
fn a_fabricated_report_answers_every_question() {
    let r = program::fabricated();
    assert_eq!(
        program::describe(&r),
        "spilled=true first=Some(\"step 12\") total=11s longest=[step 12..step 20 8000 ms 8 obs \
         3221225472 B] peak_ded=16106127360 limit=17179869184 peak_shared=3221225472 \
         base=1073741824"
    );
    assert_eq!(r.episodes.len(), 2);
    assert_eq!(r.episodes[1].end_label, None, "still spilling at the end");
    let copy = r.clone();
    assert_eq!(copy, r);
}

#[test]
fn a_refused_list_matches_by_its_one_field() {
    let e = HypomnesisError::ProcessListDenied { denied: 3 };
    assert!(e.to_string().contains('3'), "{e}");
    let HypomnesisError::ProcessListDenied { denied } = e else {
        unreachable!()
    };
    assert_eq!(denied, 3);
}

#[test]
fn process_exists_tells_processes_from_threads_and_the_gone() {
    assert_eq!(program::still_running(std::process::id()), "running");
    let mut child = Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    assert_eq!(program::still_running(gone), "gone");
    assert_eq!(hypomnesis::process_exists(u32::MAX), Some(false));
    // A thread id has a /proc entry, but is not a process.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        tx.send(tid).unwrap();
        stop_rx.recv().unwrap();
    });
    let tid = rx.recv().unwrap();
    assert_ne!(tid, std::process::id());
    assert!(Path::new(&format!("/proc/{tid}/status")).exists());
    assert_eq!(hypomnesis::process_exists(tid), Some(false));
    assert_eq!(hypomnesis::process_name(tid), None);
    stop_tx.send(()).unwrap();
    t.join().unwrap();
}

/// A copy of `sleep` named `Trainer-Worker-Number-Seven` (27 bytes: its `comm` is cut to 15),
/// started, and its pid written to `pid_file`.
fn long_named_sleeper(pid_file: &Path) -> Child {
    let dir = std::env::temp_dir().join(format!("hmn-compat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("Trainer-Worker-Number-Seven");
    if !exe.exists() {
        std::fs::copy("/bin/sleep", &exe).unwrap();
    }
    let child = Command::new(&exe).arg("30").spawn().unwrap();
    let comm = format!("/proc/{}/comm", child.id());
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "Trainer-Worker-") {
        assert!(started.elapsed() < Duration::from_secs(5), "it never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::write(pid_file, child.id().to_string()).unwrap();
    child
}

/// The fake NVML's library and a scenario for a child.
fn scenario(json: &str) -> (PathBuf, PathBuf) {
    (
        kit::fake_nvml(FakeVariant::Modern),
        kit::write_scenario(json),
    )
}

fn run_child(name: &str, env: &[(&str, &std::ffi::OsStr)]) {
    let mut c = kit::child_command(module_path!());
    c.env("HMN_COMPAT_CHILD", name)
        .env_remove("HYPOMNESIS_NVML_LIBRARY")
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env_remove("HYPOMNESIS_PROCFS")
        .env("HYPOMNESIS_SYSFS", kit::empty_dir())
        .env("LD_LIBRARY_PATH", kit::empty_dir())
        .env("PATH", "/usr/bin:/bin");
    for (k, v) in env {
        c.env(k, v);
    }
    kit::run_child_passing(&mut c, name);
}

#[test]
fn two_gpus_a_long_named_holder_and_the_module_paths() {
    let pid_file = std::env::temp_dir().join(format!("hmn-compat-{}.pid", std::process::id()));
    let mut sleeper = long_named_sleeper(&pid_file);
    let (lib, s) = scenario(&format!(
        r#"{{"devices": [
            {{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
              "compute_processes": [{{"pid_file": "{}", "used": {}}}, {{"pid": 4194400, "used": {}}}]}},
            {{"name": "NVIDIA H200", "total": {}, "free": {}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB,
        pid_file.display(),
        3072 * MIB,
        1024 * MIB,
        143_771 * MIB,
        143_771 * MIB,
    ));
    let pid = sleeper.id().to_string();
    run_child(
        "two_gpus",
        &[
            ("HYPOMNESIS_NVML_LIBRARY", lib.as_os_str()),
            ("FAKE_NVML_SCENARIO", s.as_os_str()),
            ("HMN_COMPAT_PID", std::ffi::OsStr::new(&pid)),
        ],
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let _ = std::fs::remove_file(pid_file);
}

#[test]
fn an_nvml_that_cannot_start_is_an_error_and_no_driver_is_no_gpu() {
    let (lib, mismatch) = scenario(r#"{"init_error": 18, "devices": [{}]}"#);
    run_child(
        "mismatch",
        &[
            ("HYPOMNESIS_NVML_LIBRARY", lib.as_os_str()),
            ("FAKE_NVML_SCENARIO", mismatch.as_os_str()),
        ],
    );
    let (lib, unloaded) = scenario(r#"{"init_error": 9, "devices": [{}]}"#);
    run_child(
        "no_driver",
        &[
            ("HYPOMNESIS_NVML_LIBRARY", lib.as_os_str()),
            ("FAKE_NVML_SCENARIO", unloaded.as_os_str()),
        ],
    );
}

#[test]
fn no_gpu_source_at_all() {
    if Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() {
        eprintln!("skipped: this host has a real libnvidia-ml.so.1");
        return;
    }
    run_child("no_gpu", &[]);
}

/// The scenarios' own process (see `run_child`).
#[test]
#[ignore = "run by the other tests, in a process of its own with the scenario's environment"]
fn child() {
    match std::env::var("HMN_COMPAT_CHILD").as_deref() {
        Ok("two_gpus") => two_gpus(),
        Ok("mismatch") => mismatch(),
        Ok("no_driver") => no_driver(),
        Ok("no_gpu") => no_gpu(),
        other => panic!("no such child: {other:?}"),
    }
}

fn two_gpus() {
    let pid: u32 = std::env::var("HMN_COMPAT_PID").unwrap().parse().unwrap();
    let (rss, first, n) = program::by_module_paths().unwrap();
    assert!(rss > 0);
    assert_eq!(n, 2, "one snapshot per GPU");
    let first = first.unwrap();
    assert_eq!(first.name_or_unknown(), "NVIDIA H200");
    assert_eq!(first.reserved_bytes, Some(614 * MIB));
    let (holders, denied) = program::holders(0).unwrap();
    assert_eq!(denied, 0, "only macOS refuses");
    let pids: Vec<u32> = holders.iter().map(|e| e.pid).collect();
    let mut sorted = pids.clone();
    sorted.sort_unstable();
    assert_eq!(pids, sorted, "sorted by pid");
    let mine = holders.iter().find(|e| e.pid == pid).unwrap();
    assert_eq!(mine.name.as_deref(), Some("Trainer-Worker-Number-Seven"));
    assert_eq!(mine.used_bytes, 3072 * MIB);
    assert_eq!(mine.source, GpuQuerySource::Nvml);
    assert_eq!(
        hypomnesis::gpu_processes(0).unwrap(),
        holders,
        "the listing's entries"
    );
    assert_eq!(
        hypomnesis::process_name(pid).as_deref(),
        Some("Trainer-Worker-Number-Seven")
    );
    assert_eq!(program::still_running(pid), "running");
    let (none, _) = program::holders(1).unwrap();
    assert!(none.is_empty());
}

fn mismatch() {
    let e = Snapshot::all().unwrap_err();
    assert!(matches!(e, HypomnesisError::Nvml(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("nvmlInit_v2") && text.contains("NVML_ERROR_LIB_RM_VERSION_MISMATCH (18"),
        "{text}"
    );
    assert!(matches!(
        hypomnesis::gpu::device_count(),
        Err(HypomnesisError::Nvml(_))
    ));
    assert!(matches!(
        hypomnesis::gpu_process_listing(0),
        Err(HypomnesisError::Nvml(_))
    ));
    // A snapshot of one device still maps the failure to "GPU unknown".
    let s = Snapshot::now(0).unwrap();
    assert!(s.ram_bytes > 0 && s.gpu.is_none() && s.gpu_device.is_none());
}

fn no_driver() {
    assert!(Snapshot::all().unwrap().is_empty());
    assert!(matches!(
        hypomnesis::gpu::device_count(),
        Err(HypomnesisError::NoGpuSource)
    ));
}

fn no_gpu() {
    assert!(Snapshot::all().unwrap().is_empty(), "an empty list: no GPU");
    assert!(matches!(
        hypomnesis::device_count(),
        Err(HypomnesisError::NoGpuSource)
    ));
    let (rss, first, n) = program::by_module_paths().unwrap();
    assert!(rss > 0 && first.is_none() && n == 0);
    assert!(matches!(
        program::holders(0),
        Err(HypomnesisError::NoGpuSource)
    ));
}
