//! The long-running commands run `nvidia-smi` not at all while NVML answers: `hmn watch`,
//! `hmn run` and `hmn spill` against the fake NVML, with a counting `nvidia-smi` first on
//! `PATH` (`util::smi`); `hmn top`'s case is in `top.rs`, `hmn serve`'s in `fallback_probe.rs`.
#![cfg(target_os = "linux")]

use std::process::{Child, Command, Stdio};

use crate::util::smi::{CountingSmi, Smi};
use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;

/// `hmn <args>` against the fake NVML listing `holder` on one H200, with `smi` first on `PATH`:
/// its exit status must be 0 and `smi` not run (which `hmn doctor` then shows it would be).
fn hmn_with(smi: &CountingSmi, holder: u32, args: &[&str]) -> String {
    let scenario = write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid": {holder}, "used": {}}}]}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        100_000 * MIB,
        1024 * MIB
    ));
    let out = crate::util::hmn::hmn()
        .args(args)
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", &scenario)
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("LD_LIBRARY_PATH", support::empty_dir())
        .env("PATH", format!("{}:/usr/bin:/bin", smi.dir.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "hmn {args:?}: {err}");
    assert_eq!(smi.runs(), Vec::<String>::new(), "hmn {args:?}: {err}");
    // The control: the stand-in is there to be run, and counted.
    smi.assert_counts_a_doctor(&fake_nvml(FakeVariant::Modern), &scenario);
    let _ = std::fs::remove_file(scenario);
    err
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// A stand-in that would answer, so that nothing but not being asked keeps it from running.
fn counting(what: &str) -> CountingSmi {
    CountingSmi::new(what, Smi::Answers)
}

#[test]
fn watch_runs_no_nvidia_smi_while_nvml_answers() {
    let smi = counting("watch");
    let mut holder = sleeper();
    let err = hmn_with(
        &smi,
        holder.id(),
        &["watch", "--interval", "100ms", "--duration", "1s"],
    );
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(err.contains(&format!("{} sleep", holder.id())), "{err}");
}

#[test]
fn run_runs_no_nvidia_smi_while_nvml_answers() {
    let smi = counting("run");
    let err = hmn_with(
        &smi,
        std::process::id(),
        &["run", "--interval", "50ms", "--", "sleep", "0.8"],
    );
    assert!(err.contains("peak RAM (process tree):"), "{err}");
}

#[test]
fn spill_runs_no_nvidia_smi_while_nvml_answers() {
    let smi = counting("spill");
    let err = hmn_with(
        &smi,
        std::process::id(),
        &["spill", "--interval", "50ms", "--", "sleep", "0.5"],
    );
    assert!(err.contains("spill is not measurable here"), "{err}");
}
