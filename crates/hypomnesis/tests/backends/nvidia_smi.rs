//! The `nvidia-smi` fallback against a stand-in `nvidia-smi` (`fake-nvidia-smi/`) that replays
//! the recorded captures in `crates/testkit/fixtures/nvidia-smi/recorded/`, with NVML made to fail
//! (`HYPOMNESIS_NVML_LIBRARY` names a library that does not exist), so the dispatcher falls back.
//! Each case runs in a child process (the source's settings are read once per process).
#![cfg(feature = "nvidia-smi-fallback")]

use support::capture_reader;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hypomnesis::{GpuContextKind, GpuQuerySource, HypomnesisError, Snapshot, SourceState};
use support::{all_captures, capture, fake_smi};

const MIB: u64 = 1 << 20;

fn run_child(name: &str, capture_path: &PathBuf, env: &[(&str, &str)]) {
    let smi = fake_smi();
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", name)
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .env("HYPOMNESIS_NVIDIA_SMI", &smi)
        .env("FAKE_SMI_CAPTURE", capture_path)
        .env_remove("HYPOMNESIS_NVIDIA_SMI_TIMEOUT")
        .env_remove("HYPOMNESIS_PROCFS")
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env_remove("FAKE_SMI_MODE")
        .env_remove("FAKE_SMI_PHASE")
        .env_remove("FAKE_SMI_LOG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    support::run_child_passing(&mut cmd, &format!("case {name}"));
}

#[test]
#[ignore = "entry point for the child processes; the other tests run it"]
fn child() {
    match std::env::var("HMN_CHILD").unwrap().as_str() {
        "replay" => replay(),
        "hang" => hang(),
        "garbage" => garbage(),
        "exit_fail" => exit_fail(),
        "reject_reserved" => reject_reserved(),
        "half_line" => half_line(),
        "half_line_apps" => half_line_apps(),
        "flood" => flood(),
        "bad_timeout" => bad_timeout(),
        "no_source" => no_source(),
        "empty_timeout" => empty_timeout(),
        "found_on_path" => found_on_path(),
        "not_on_path" => not_on_path(),
        "mig_ids_when_needed" => mig_ids_when_needed(),
        "reject_mig" => reject_mig(),
        "lost_gpu" => lost_gpu(),
        "probe" => probe(),
        "probe_failing" => probe_failing(),
        #[cfg(target_os = "linux")]
        "exit_mid_run" => exit_mid_run(),
        other => panic!("unknown case {other}"),
    }
}

fn env(k: &str) -> String {
    std::env::var(k).unwrap()
}

/// The invocations the fake `nvidia-smi` logged (`FAKE_SMI_LOG`), one argument list per line.
fn runs() -> Vec<String> {
    std::fs::read_to_string(env("FAKE_SMI_LOG"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A fresh path for `FAKE_SMI_LOG`.
fn log_file(name: &str) -> String {
    let p = std::env::temp_dir().join(format!("hmn-smi-log-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p.to_string_lossy().into_owned()
}

/// The details of the `nvidia-smi` source's report.
fn smi_details() -> Vec<(String, String)> {
    hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap()
        .details
}

fn detail(key: &str) -> Option<String> {
    smi_details()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// Every figure the library gives equals the capture's.
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn replay() {
    let text = capture_reader::read(env("FAKE_SMI_CAPTURE").as_ref());
    let phase = env("FAKE_SMI_PHASE");
    let gpus = capture_reader::gpu_rows(&text, &phase);
    // Asked before any process list was read, the report reads them to count what they drop.
    let unknown_rows = capture_reader::app_rows(&text, &phase)
        .iter()
        .filter(|a| capture_reader::mib(&a["used_gpu_memory"]).is_none())
        .count();
    let early = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert_eq!(early.dropped_process_rows, unknown_rows as u64, "{early:?}");
    assert_eq!(hypomnesis::device_count().unwrap() as usize, gpus.len());
    for (i, g) in gpus.iter().enumerate() {
        let d = hypomnesis::device_info(u32::try_from(i).unwrap()).unwrap();
        let total = capture_reader::mib(&g["memory.total"]).unwrap();
        let free = capture_reader::mib(&g["memory.free"]).unwrap();
        let reserved = capture_reader::mib(&g["memory.reserved"]);
        assert_eq!(d.source, GpuQuerySource::NvidiaSmi);
        assert_eq!(d.total_bytes, total * MIB);
        assert_eq!(d.free_bytes, free * MIB);
        assert_eq!(
            d.used_bytes,
            (total - free) * MIB,
            "used is total - free, not nvidia-smi's used"
        );
        assert_eq!(d.reserved_bytes, reserved.map(|r| r * MIB));
        assert_eq!(d.name.as_deref(), Some(g["name"].as_str()));
        assert_eq!(
            d.driver_version.as_deref(),
            Some(g["driver_version"].as_str())
        );
        assert_eq!(d.pci_bus_id.as_deref(), Some(g["pci.bus_id"].as_str()));
        assert_eq!(d.free_bytes + d.used_bytes, d.total_bytes);
        if let Some(r) = d.reserved_bytes {
            assert!(
                r <= d.used_bytes + 2 * MIB,
                "within nvidia-smi's MiB rounding"
            );
        }
    }
    let want: Vec<(u32, u64, String)> = capture_reader::app_rows(&text, &phase)
        .iter()
        .filter_map(|a| {
            let used = capture_reader::mib(&a["used_gpu_memory"])?;
            let name = a["process_name"]
                .rsplit(['/', '\\'])
                .next()
                .unwrap()
                .to_string();
            Some((a["pid"].parse().unwrap(), used * MIB, name))
        })
        .collect();
    let mut want = want;
    want.sort();
    let got: Vec<(u32, u64, String)> = hypomnesis::gpu_processes(0)
        .unwrap()
        .into_iter()
        .map(|e| {
            assert_eq!(e.context, Some(GpuContextKind::Compute));
            assert_eq!(e.source, GpuQuerySource::NvidiaSmi);
            (e.pid, e.used_bytes, e.name.unwrap())
        })
        .collect();
    assert_eq!(got, want);
    let me = hypomnesis::process_gpu_info(0).unwrap();
    assert_eq!(
        (me.used_bytes, me.is_per_process),
        (0, true),
        "no CUDA context here: zero, per process"
    );
    let s = Snapshot::now(0).unwrap();
    assert_eq!(
        s.gpu_device.unwrap().total_bytes,
        capture_reader::mib(&gpus[0]["memory.total"]).unwrap() * MIB
    );
    let smi = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert_eq!(smi.state, SourceState::Answered);
    let version = smi
        .details
        .iter()
        .find(|(k, _)| k == "version")
        .map(|(_, v)| v.clone());
    assert_eq!(version.as_deref(), Some(g0_driver(&gpus).as_str()));
    let timeout = smi
        .details
        .iter()
        .find(|(k, _)| k == "timeout")
        .map(|(_, v)| v.clone());
    assert_eq!(
        timeout.as_deref(),
        Some("10s"),
        "without HYPOMNESIS_NVIDIA_SMI_TIMEOUT, a run may take 10 s"
    );
    assert_eq!(detail("executable"), Some(env("HYPOMNESIS_NVIDIA_SMI")));
    let unknown = capture_reader::app_rows(&text, &phase)
        .iter()
        .filter(|a| capture_reader::mib(&a["used_gpu_memory"]).is_none())
        .count();
    assert_eq!(
        detail("process rows dropped"),
        (unknown > 0)
            .then(|| format!("{unknown} (no usable memory figure, or more than the GPU has)")),
        "rows without a memory figure are counted, and only they"
    );
    let nvml = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::Nvml)
        .unwrap();
    assert!(
        matches!(&nvml.state, SourceState::Failed(w) if w.message.contains("/nonexistent/libnvidia-ml.so.1")),
        "{nvml:?}"
    );
}

fn g0_driver(gpus: &[std::collections::HashMap<String, String>]) -> String {
    gpus[0]["driver_version"].clone()
}

/// How much longer than its limit a timed-out run may take end to end here: starting this
/// child, NVML failing to load, starting and killing nvidia-smi, on a busy two-core machine
/// with the other tests running. (The runner's own precision is measured in its unit tests.)
const TIMEOUT_GRACE: Duration = Duration::from_millis(800);

fn hang() {
    let limit = Duration::from_millis(200);
    let t = Instant::now();
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    let took = t.elapsed();
    assert!(
        // wait-timeout's timer may fire a fraction of a millisecond early.
        took + Duration::from_millis(5) >= limit && took < limit + TIMEOUT_GRACE,
        "a 200 ms limit is honoured within {TIMEOUT_GRACE:?}: took {took:?}"
    );
    assert!(
        e.contains("did not finish within 200ms and was killed"),
        "{e}"
    );
    let smi = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert!(
        matches!(
            smi.kind(),
            Some(hypomnesis::ErrorKind::TimedOut | hypomnesis::ErrorKind::Paused)
        ),
        "{smi:?}"
    );
    assert!(
        e.contains("NVML") && e.contains("nvidia-smi fallback"),
        "both reasons are kept: {e}"
    );
    let t = Instant::now();
    let err = hypomnesis::device_count().unwrap_err();
    assert_eq!(err.kind(), hypomnesis::ErrorKind::Paused, "{err}");
    let e = err.to_string();
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "not re-run right after a timeout"
    );
    assert!(e.contains("not run again"), "{e}");
    assert_eq!(
        runs().len(),
        1,
        "one run, then none while paused: {:?}",
        runs()
    );
}

/// Runs after the library's own exit handler (registered before it): holds the exit up, as a
/// loaded machine may, so that a run started after that handler would have time to start.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // an exit handler is an extern "C" fn
extern "C" fn linger_at_exit() {
    std::thread::sleep(Duration::from_millis(500));
}

/// The process exits while one thread waits on a hung `nvidia-smi` and another waits for its
/// turn to run one: the hung one is killed on the way out, and the waiting one starts none.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // atexit, to hold the exit up
fn exit_mid_run() {
    // SAFETY: an `extern "C" fn()` that does not unwind; registered before any run, so it runs
    // after the handler the library registers at its first run.
    assert_eq!(unsafe { libc::atexit(linger_at_exit) }, 0);
    let dir = PathBuf::from(env("FAKE_SMI_PID_DIR"));
    std::thread::spawn(|| hypomnesis::device_info(0));
    let t = Instant::now();
    while support::pids_in(&dir).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "nvidia-smi never ran"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::spawn(hypomnesis::device_count);
    // The second caller is now waiting for the hung run to end.
    std::thread::sleep(Duration::from_millis(200));
    std::process::exit(0);
}

#[cfg(target_os = "linux")]
#[test]
fn no_nvidia_smi_outlives_an_exit_in_the_middle_of_a_run() {
    let dir = std::env::temp_dir().join(format!("hmn-smi-exit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", "exit_mid_run")
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .env("HYPOMNESIS_NVIDIA_SMI", fake_smi())
        .env("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "60s")
        .env("FAKE_SMI_CAPTURE", l40s())
        .env("FAKE_SMI_MODE", "hang")
        .env("FAKE_SMI_PID_DIR", &dir)
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env_remove("HYPOMNESIS_PROCFS")
        .env_remove("FAKE_SMI_LOG");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let started = support::pids_in(&dir);
    assert!(!started.is_empty(), "nvidia-smi never ran");
    for pid in &started {
        assert!(
            !support::still_running_after(*pid, Duration::from_secs(2)),
            "nvidia-smi {pid} outlived the process that ran it (all: {started:?})"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `probe_source` asks nvidia-smi one `--query-gpu`; `sources_where` leaving it out asks it
/// nothing, and `sources` (the doctor's) asks it for its details too.
fn probe() {
    let others = hypomnesis::sources_where(|s| s != GpuQuerySource::NvidiaSmi);
    assert!(others.iter().all(|r| r.source != GpuQuerySource::NvidiaSmi));
    assert!(
        others.iter().any(|r| r.source == GpuQuerySource::Nvml),
        "{others:?}"
    );
    assert_eq!(runs(), Vec::<String>::new(), "left out: not run");
    let r = hypomnesis::probe_source(GpuQuerySource::NvidiaSmi);
    assert_eq!(r.state, SourceState::Answered, "{r:?}");
    assert!(r.details.is_empty(), "{r:?}");
    let ran = runs();
    assert_eq!(ran.len(), 1, "{ran:?}");
    assert!(ran[0].starts_with("--query-gpu="), "{ran:?}");
    let full = hypomnesis::sources();
    let smi = full
        .iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert_eq!(smi.state, r.state, "the same state as the full report");
    assert!(runs().len() > 2, "the full report asks more: {:?}", runs());
    // A source this build or platform does not have is absent, and nothing is run for it.
    let before = runs().len();
    let metal = hypomnesis::probe_source(GpuQuerySource::Metal);
    if !cfg!(target_os = "macos") {
        assert!(matches!(metal.state, SourceState::Absent(_)), "{metal:?}");
    }
    assert_eq!(runs().len(), before);
}

/// A failing nvidia-smi: its probe says failed, with its exit status, after one run.
fn probe_failing() {
    let r = hypomnesis::probe_source(GpuQuerySource::NvidiaSmi);
    let SourceState::Failed(why) = &r.state else {
        panic!("{r:?}")
    };
    assert!(why.message.contains("exit status: 9"), "{why}");
    assert_eq!(runs().len(), 1, "{:?}", runs());
}

fn garbage() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(e.contains("unexpected `--query-gpu` output"), "{e}");
}

fn exit_fail() {
    // nvidia-smi cannot reach the driver: no GPU (as 0.2.x has it), and the source says why.
    assert!(matches!(
        hypomnesis::device_count(),
        Err(HypomnesisError::NoGpuSource)
    ));
    let e = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .map(|r| format!("{:?}", r.state))
        .unwrap();
    assert!(
        e.contains("exit status: 9") && e.contains("couldn't communicate with the NVIDIA driver"),
        "{e}"
    );
    assert!(
        e.contains(&env("HYPOMNESIS_NVIDIA_SMI")),
        "the executable is named: {e}"
    );
    let queries: Vec<String> = runs()
        .into_iter()
        .filter(|r| r.starts_with("--query-gpu="))
        .collect();
    // The count and the report each asked once; neither asked again without the field.
    assert!(
        !queries.is_empty() && queries.iter().all(|q| q.contains("memory.reserved")),
        "a failure that is not a rejected field is not retried without memory.reserved: \
         {queries:?}"
    );
}

fn empty_timeout() {
    assert!(hypomnesis::device_info(0).is_ok());
    assert_eq!(
        detail("timeout").as_deref(),
        Some("10s"),
        "empty means the default"
    );
}

fn found_on_path() {
    assert_eq!(hypomnesis::device_count().unwrap(), 1);
    assert_eq!(detail("executable"), Some(env("HMN_WANT_SMI")));
}

fn not_on_path() {
    let e = hypomnesis::device_count().unwrap_err().to_string();
    assert!(
        e.contains("/nonexistent/libnvidia-ml.so.1"),
        "NVML's failure alone: {e}"
    );
    let smi = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert!(
        matches!(&smi.state, SourceState::Absent(w) if w.message.contains("nvidia-smi was not found on PATH")),
        "{smi:?}"
    );
}

/// The H100 capture: `-q` (for the MIG ids of processes) is run only when there are processes.
fn mig_ids_when_needed() {
    let procs = hypomnesis::gpu_processes(0).unwrap();
    let q_runs = runs().iter().filter(|r| r.as_str() == "-q").count();
    if env("FAKE_SMI_PHASE") == "idle" {
        assert!(procs.is_empty());
        assert_eq!(q_runs, 0, "no process to place: {:?}", runs());
    } else {
        assert_eq!(procs.len(), 3);
        for p in &procs {
            assert_eq!(
                (p.gpu_instance_id, p.compute_instance_id),
                (Some(2), Some(0)),
                "{p:?}"
            );
        }
        assert_eq!(q_runs, 1, "{:?}", runs());
    }
}

/// Four GPUs, GPU 2 fallen off the bus: nvidia-smi prints a sentence in its place and exits 15.
fn lost_gpu() {
    assert_eq!(
        hypomnesis::device_count().unwrap(),
        4,
        "the lost GPU keeps its index"
    );
    for i in [0, 1, 3] {
        let d = hypomnesis::device_info(i).unwrap();
        assert_eq!((d.index, d.total_bytes), (i, 46068 * MIB));
    }
    let e = hypomnesis::device_info(2).unwrap_err();
    assert_eq!(e.kind(), hypomnesis::ErrorKind::GpuLost, "{e}");
    let said = e.to_string();
    assert!(
        said.contains("GPU 2 is missing from nvidia-smi's list: lost (it lists GPUs 0, 1, 3); nvidia-smi said: Unable to determine the device handle for GPU 0000:5C:00.0: GPU is lost."),
        "{said}"
    );
    assert_eq!(
        hypomnesis::gpu_processes(2).unwrap_err().kind(),
        hypomnesis::ErrorKind::GpuLost
    );
    let on_3: Vec<u32> = hypomnesis::gpu_processes(3)
        .unwrap()
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(
        on_3,
        vec![20037, 20038],
        "GPU 3's processes are listed under it"
    );
    assert!(hypomnesis::gpu_processes(0).unwrap().is_empty());
    assert!(hypomnesis::device_info(4).is_err());
    assert_eq!(
        detail("devices").as_deref(),
        Some("4 (GPU 2 not listed: lost)")
    );
    let skipped = detail("--query-gpu lines skipped").unwrap();
    assert!(
        skipped.starts_with("2: line 3: expected 8 comma-separated fields, got 1")
            && skipped.ends_with(" / nvidia-smi exited with exit status: 15"),
        "{skipped}"
    );
}

/// A driver without the `mig.mode.*` fields: MIG unknown, said so, and not asked again.
fn reject_mig() {
    let s = hypomnesis::mig_state(0).unwrap();
    assert_eq!((s.enabled, s.pending), (None, None));
    assert!(s.instances.is_empty());
    assert_eq!(
        detail("GPU 0 MIG").as_deref(),
        Some("unknown (this nvidia-smi does not know mig.mode.current)")
    );
    assert!(hypomnesis::mig_state(0).is_ok());
    let asked = runs()
        .iter()
        .filter(|r| r.contains("mig.mode.current"))
        .count();
    assert_eq!(
        asked,
        1,
        "a rejected field is not asked for again: {:?}",
        runs()
    );
}

fn reject_reserved() {
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.total_bytes, 46068 * MIB);
    assert_eq!(
        d.reserved_bytes, None,
        "asked again without memory.reserved"
    );
    let smi = hypomnesis::sources()
        .into_iter()
        .find(|r| r.source == GpuQuerySource::NvidiaSmi)
        .unwrap();
    assert!(
        smi.details
            .iter()
            .any(|(k, v)| k == "memory.reserved field" && v.contains("rejected"))
    );
}

fn half_line() {
    // The last row is cut: either an error that says so, or the rows that were whole. Never a panic.
    match hypomnesis::gpu_processes(0) {
        Ok(rows) => assert!(rows.len() <= 2),
        Err(e) => assert!(e.to_string().contains("unexpected"), "{e}"),
    }
}

fn half_line_apps() {
    // The GPU list is whole; the process list's last row is cut in half: the process-list
    // parser skips that line, says so to the doctor, and keeps the whole rows.
    let rows = hypomnesis::gpu_processes(0).unwrap();
    assert_eq!(rows.len(), 1, "the whole row stands: {rows:?}");
    let said = detail("--query-compute-apps lines skipped").unwrap();
    assert!(said.starts_with("1: line 2: "), "{said}");
    assert!(
        said.contains("expected 4 comma-separated fields") || said.contains("is not a number"),
        "{said}"
    );
    assert_eq!(hypomnesis::device_info(0).unwrap().total_bytes, 46068 * MIB);
}

fn flood() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(e.contains("printed more than"), "{e}");
}

fn bad_timeout() {
    let e = hypomnesis::device_info(0).unwrap_err().to_string();
    assert!(
        e.contains("HYPOMNESIS_NVIDIA_SMI_TIMEOUT") && e.contains("soon"),
        "{e}"
    );
}

fn no_source() {
    assert!(matches!(
        hypomnesis::device_count(),
        Err(HypomnesisError::NoGpuSource)
    ));
    assert!(matches!(
        hypomnesis::device_info(0),
        Err(HypomnesisError::NoGpuSource)
    ));
    assert!(Snapshot::all().unwrap().is_empty(), "no GPU: an empty list");
    let s = Snapshot::now(0).unwrap();
    assert!(s.ram_bytes > 0 && s.gpu.is_none());
    for r in hypomnesis::sources() {
        assert!(matches!(r.state, SourceState::Absent(_)), "{r:?}");
    }
    let nvml = hypomnesis::sources().into_iter().next().unwrap();
    assert_eq!(nvml.source, GpuQuerySource::Nvml);
    assert!(
        matches!(&nvml.state, SourceState::Absent(w)
            if w.message.contains("tried libnvidia-ml.so.1: ")
                && w.message.contains("; libnvidia-ml.so: ")
                && w.message.contains("; /usr/lib/wsl/lib/libnvidia-ml.so.1: ")),
        "every default place is tried and named: {nvml:?}"
    );
}

#[test]
fn every_capture_both_phases_replays_exactly() {
    let captures = all_captures();
    assert!(captures.len() >= 6, "captures missing: {captures:?}");
    for c in &captures {
        for phase in ["idle", "load"] {
            run_child("replay", c, &[("FAKE_SMI_PHASE", phase)]);
        }
    }
}

fn l40s() -> PathBuf {
    capture("linux-x86_64__nvidia-l40s__595.80.txt")
}

#[test]
fn a_hanging_nvidia_smi_is_killed_at_the_timeout() {
    run_child(
        "hang",
        &l40s(),
        &[
            ("FAKE_SMI_MODE", "hang"),
            ("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "200ms"),
            ("FAKE_SMI_LOG", &log_file("hang")),
        ],
    );
}

#[test]
fn an_empty_timeout_variable_means_the_default() {
    run_child(
        "empty_timeout",
        &l40s(),
        &[("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "")],
    );
}

#[cfg(unix)]
/// A folder of `PATH` candidates: `dir/` holds a directory named `nvidia-smi`, `plain/` a file
/// that is not executable, `rel/` (put on `PATH` relatively) and `real/` the fake.
fn path_candidates() -> PathBuf {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let base = std::env::temp_dir().join(format!("hmn-smi-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("dir").join("nvidia-smi")).unwrap();
    std::fs::create_dir_all(base.join("plain")).unwrap();
    let plain = base.join("plain").join("nvidia-smi");
    std::fs::write(&plain, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    for d in ["rel", "real"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
        symlink(fake_smi(), base.join(d).join("nvidia-smi")).unwrap();
    }
    base
}

#[cfg(unix)]
fn search_path(base: &std::path::Path, dirs: &[&str]) -> String {
    dirs.iter()
        .map(|d| match *d {
            "rel" => "rel".to_string(),
            d => base.join(d).to_string_lossy().into_owned(),
        })
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(unix)]
#[test]
fn nvidia_smi_is_looked_for_on_path() {
    let base = path_candidates();
    let real = base.join("real").join("nvidia-smi");
    for (name, dirs, want) in [
        (
            "found_on_path",
            &["rel", "dir", "plain", "real"][..],
            real.to_str().unwrap(),
        ),
        ("not_on_path", &["rel", "dir", "plain"][..], ""),
    ] {
        let mut cmd = support::child_command(module_path!());
        cmd.current_dir(&base)
            .env("HMN_CHILD", name)
            .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
            .env_remove("HYPOMNESIS_NVIDIA_SMI")
            .env("PATH", search_path(&base, dirs))
            .env("HMN_WANT_SMI", want)
            .env("FAKE_SMI_CAPTURE", l40s())
            .env_remove("FAKE_SMI_MODE")
            .env("HYPOMNESIS_SYSFS", support::empty_dir());
        support::run_child_passing(&mut cmd, name);
    }
}

#[test]
fn mig_ids_of_processes_are_asked_for_only_when_there_are_processes() {
    let h100 = capture("linux-x86_64__nvidia-h100-mig__590.48.01.txt");
    for phase in ["idle", "load"] {
        run_child(
            "mig_ids_when_needed",
            &h100,
            &[
                ("FAKE_SMI_PHASE", phase),
                ("FAKE_SMI_LOG", &log_file(phase)),
            ],
        );
    }
}

#[test]
fn a_lost_gpu_keeps_its_index_and_is_named() {
    run_child("lost_gpu", &l40s(), &[("FAKE_SMI_MODE", "lost-gpu")]);
}

#[test]
fn a_driver_without_mig_fields() {
    run_child(
        "reject_mig",
        &capture("linux-x86_64__nvidia-h100-mig__590.48.01.txt"),
        &[
            ("FAKE_SMI_MODE", "reject-mig"),
            ("FAKE_SMI_LOG", &log_file("reject-mig")),
        ],
    );
}

#[test]
fn garbage_output_is_an_error() {
    run_child("garbage", &l40s(), &[("FAKE_SMI_MODE", "garbage")]);
}

#[test]
fn a_probe_of_nvidia_smi_runs_it_once() {
    run_child("probe", &l40s(), &[("FAKE_SMI_LOG", &log_file("probe"))]);
}

#[test]
fn a_probe_of_a_failing_nvidia_smi_says_it_failed() {
    run_child(
        "probe_failing",
        &l40s(),
        &[
            ("FAKE_SMI_MODE", "exit-fail"),
            ("FAKE_SMI_LOG", &log_file("probe-failing")),
        ],
    );
}

#[test]
fn a_failing_nvidia_smi_reports_status_and_message() {
    run_child(
        "exit_fail",
        &l40s(),
        &[
            ("FAKE_SMI_MODE", "exit-fail"),
            ("FAKE_SMI_LOG", &log_file("exit-fail")),
        ],
    );
}

#[test]
fn a_driver_that_rejects_memory_reserved_is_asked_again_without_it() {
    run_child(
        "reject_reserved",
        &l40s(),
        &[("FAKE_SMI_MODE", "reject-reserved")],
    );
}

#[test]
fn half_a_line_never_panics() {
    run_child("half_line", &l40s(), &[("FAKE_SMI_MODE", "half-line")]);
}

#[test]
fn half_a_process_row_is_skipped_by_the_process_list_parser() {
    run_child(
        "half_line_apps",
        &l40s(),
        &[("FAKE_SMI_MODE", "half-line-apps")],
    );
}

#[test]
fn a_flood_of_output_is_bounded() {
    run_child("flood", &l40s(), &[("FAKE_SMI_MODE", "flood")]);
}

#[test]
fn a_bad_timeout_variable_is_named() {
    run_child(
        "bad_timeout",
        &l40s(),
        &[("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "soon")],
    );
}

#[test]
fn no_source_at_all() {
    let empty = std::env::temp_dir().join("hmn-empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = support::child_command(module_path!())
        .env("HMN_CHILD", "no_source")
        .env_remove("HYPOMNESIS_NVML_LIBRARY")
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env("PATH", &empty)
        // An empty library search path: libnvidia-ml.so.1 cannot be found on this GPU-less host.
        .env("LD_LIBRARY_PATH", &empty)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if std::path::Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() {
        eprintln!(
            "skipped: this host has a real libnvidia-ml.so.1, so 'no source' cannot be staged"
        );
        return;
    }
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}
