//! End-to-end runs of the built `hmn` against the fake NVML and the stand-in `nvidia-smi`
//! replaying the recorded captures: exact output, exit codes, stderr summaries, broken pipes.
#![allow(clippy::format_collect)] // test code

use crate::util::hmn::run;
use support::capture_reader;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use support::{FakeVariant, all_captures, fake_nvml, fake_smi, write_scenario};

const MIB: u64 = 1 << 20;
const GHOST: u32 = 4_194_400;

/// `hmn` with a clean environment: no NVML, no nvidia-smi unless given.
use crate::util::hmn::{isolated as hmn, with_fake};

fn with_smi(capture: &Path, phase: &str) -> Command {
    let mut c = hmn();
    c.env("HYPOMNESIS_NVIDIA_SMI", fake_smi())
        .env("FAKE_SMI_CAPTURE", capture)
        .env("FAKE_SMI_PHASE", phase);
    c
}

fn h200(extra: &str) -> String {
    format!(
        r#"{{"name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "pci_bus_id": "00000000:18:00.0", "total": {}, "reserved": {}, "free": {} {extra}}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB
    )
}

fn procs(rows: &[(u32, u64)]) -> String {
    let v: Vec<String> = rows
        .iter()
        .map(|(p, u)| format!(r#"{{"pid": {p}, "used": {u}}}"#))
        .collect();
    format!("[{}]", v.join(","))
}

pub(super) fn two_gpus() -> String {
    format!(
        r#"{{"devices": [{}, {}]}}"#,
        h200(&format!(
            r#", "compute_processes": {}"#,
            procs(&[(GHOST, 16 * 1024 * MIB), (GHOST + 1, 512 * MIB)])
        )),
        r#"{"name": "NVIDIA H200", "total": 150754820096, "free": 150000000000, "compute_processes": [{"pid": 4194402, "used": 681574400}]}"#
    )
}

#[test]
fn summary_lines_against_the_fake() {
    let (code, out, err) = run(with_fake(&two_gpus()), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n\
         GPU 1 [NVIDIA H200]: free 143051 MiB / 143771 MiB (0 MiB reserved), driver 590.48.01\n"
    );
    assert_eq!(err, "");
}

#[test]
fn pre_r510_driver_has_no_reserved_parenthetical() {
    let mut c = hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::PreR510))
        .env(
            "FAKE_NVML_SCENARIO",
            write_scenario(&format!(r#"{{"devices": [{}]}}"#, h200(""))),
        );
    let (code, out, _) = run(c, &[]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB, driver 590.48.01\n"
    );
}

#[test]
fn json_has_the_contract_keys_with_null_for_unknown() {
    let (code, out, _) = run(with_fake(&two_gpus()), &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 2);
    assert_eq!(a[0]["reserved_bytes"], 614 * MIB);
    assert_eq!(a[0]["total_bytes"], 143_771 * MIB);
    assert_eq!(a[0]["free_bytes"], 110_796 * MIB);
    assert_eq!(a[0]["used_bytes"], (143_771 - 110_796) * MIB);
    assert_eq!(a[0]["allocated_bytes"], (143_771 - 110_796 - 614) * MIB);
    assert_eq!(
        a[0]["unattributed_bytes"],
        (143_771 - 110_796 - 614 - 16 * 1024 - 512) * MIB
    );
    assert_eq!(a[0]["driver_version"], "590.48.01");
    assert_eq!(a[0]["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(
        a[1]["reserved_bytes"], 0,
        "the fake reports a real 0 reservation for device 1"
    );
    for k in [
        "index",
        "name",
        "total_bytes",
        "free_bytes",
        "used_bytes",
        "reserved_bytes",
        "driver_version",
    ] {
        assert!(a[1].get(k).is_some(), "{k}");
    }
}

#[test]
fn doctor_says_what_answered() {
    let (code, out, _) = run(with_fake(&two_gpus()), &["doctor"]);
    assert_eq!(code, 0);
    assert!(out.contains("NVML: answered\n"), "{out}");
    assert!(
        out.contains("    reserved memory (nvmlDeviceGetMemoryInfo_v2): available\n"),
        "{out}"
    );
    assert!(out.contains("    driver version: 590.48.01\n"), "{out}");
    assert!(out.contains("    NVML version: 13.590.48.01\n"), "{out}");
    assert!(
        out.contains("nvidia-smi: not present: nvidia-smi was not found on PATH"),
        "{out}"
    );
    let (_, out, _) = run(with_fake(&two_gpus()), &["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["rss_bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["sources"][0]["source"], "nvml");
    assert_eq!(v["sources"][0]["state"]["state"], "answered");
}

#[test]
fn no_gpu_is_one_sentence_and_exit_zero() {
    let (code, out, err) = run(hmn(), &[]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "No GPU found (`hmn doctor` says why; `scripts/demo/demo.sh` in the source tree runs hmn on a simulated GPU).\n"
    );
    assert_eq!(err, "");
    let (code, out, err) = run(hmn(), &["--json"]);
    assert_eq!((code, out.as_str()), (0, "[]\n"));
    assert!(err.starts_with("No GPU found"));
    let (code, out, err) = run(hmn(), &["ps"]);
    assert_eq!((code, out.as_str()), (0, ""));
    assert_eq!(err, "hmn: 0 GPU processes found (no GPU to list).\n");
    // Nothing listed is 1 under --exit-status (there was nothing to skip).
    let (code, _, _) = run(hmn(), &["ps", "--exit-status"]);
    assert_eq!(code, 1);
    let (code, out, _) = run(hmn(), &["doctor"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("NVML: not present") && out.contains("what to do:"),
        "{out}"
    );
}

#[test]
fn gpus_found_but_none_readable() {
    let s = format!(
        r#"{{"devices": [{}, {}]}}"#,
        h200(r#", "handle_error": 4"#),
        h200(r#", "memory_error": 15"#)
    );
    let (code, out, err) = run(with_fake(&s), &[]);
    assert_eq!(code, 2);
    assert_eq!(out, "");
    assert!(err.contains("hmn: failed to query device 0: NVML: nvmlDeviceGetHandleByIndex_v2 for GPU 0 failed: NVML_ERROR_NO_PERMISSION (4"), "{err}");
    assert!(
        err.contains(
            "hmn: failed to query device 1: NVML: nvmlDeviceGetMemoryInfo for GPU 1 failed: NVML_ERROR_GPU_IS_LOST (15"
        ),
        "{err}"
    );
    // None readable: nothing on stdout, JSON included (0.2.15).
    let (code, out, _) = run(with_fake(&s), &["--json"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.ends_with(
            "hmn: 2 GPUs found, but none could be read (reasons above; `hmn doctor` has details).\n"
        ),
        "{err}"
    );
    // One of two readable: its line, the other skipped with its reason on stderr, exit 0
    // (0.2.15).
    let s = format!(
        r#"{{"devices": [{}, {}]}}"#,
        h200(""),
        h200(r#", "memory_error": 15"#)
    );
    let (code, out, err) = run(with_fake(&s), &[]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1);
    assert!(
        err.contains("hmn: failed to query device 1: NVML: ") && err.ends_with("(skipped)\n"),
        "{err}"
    );
    let (code, out, _) = run(with_fake(&s), &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["total_bytes"], 143_771 * MIB);
    assert_eq!(v[1]["index"], 1);
    assert_eq!(v[1]["error_kind"], "gpu_lost");
    assert!(v[1]["total_bytes"].is_null());
}

#[test]
fn init_failure_is_a_measurement_failure() {
    // A driver that is not loaded: no GPU (0.2.15), and the sentence says what NVML said.
    let s = format!(r#"{{"init_error": 9, "devices": [{}]}}"#, h200(""));
    let (code, out, err) = run(with_fake(&s), &[]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(
        out.starts_with("No GPU found: NVML: ")
            && out.contains("NVML_ERROR_DRIVER_NOT_LOADED")
            && out.ends_with("(`hmn doctor` says more).\n"),
        "{out}"
    );
    let (_, out, _) = run(with_fake(&s), &["doctor"]);
    assert!(out.contains("modprobe"), "{out}");
    // A library that loads but cannot start: a failure to count, exit 2, nothing on stdout.
    let s = format!(r#"{{"init_error": 18, "devices": [{}]}}"#, h200(""));
    for args in [&[][..], &["--json"], &["ps"], &["ps", "--exit-status"]] {
        let (code, out, err) = run(with_fake(&s), args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert!(
            err.starts_with("hmn: failed to count devices: NVML: ")
                && err.contains("NVML_ERROR_LIB_RM_VERSION_MISMATCH (18"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn usage_errors_exit_2_and_help_and_version_exit_0() {
    let (code, _, err) = run(hmn(), &["frobnicate"]);
    assert_eq!(code, 2);
    assert!(err.contains("unrecognized subcommand"), "{err}");
    let (code, _, _) = run(hmn(), &["ps", "--sort", "size"]);
    assert_eq!(code, 2);
    let (code, out, _) = run(hmn(), &["--help"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("PART of total, not extra")
            && out.contains("Exit status")
            && out.contains("128 + n ended by signal n"),
        "{out}"
    );
    let (code, out, _) = run(hmn(), &["ps", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("compute processes only"), "{out}");
    let (code, out, _) = run(hmn(), &["--version"]);
    assert_eq!(
        (code, out.as_str()),
        (0, concat!("hmn ", env!("CARGO_PKG_VERSION"), "\n"))
    );
}

#[test]
fn completions_and_man_page() {
    let (code, out, _) = run(hmn(), &["completions", "bash"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("_hmn()") && out.contains("doctor"),
        "bash completion"
    );
    let (code, out, _) = run(hmn(), &["completions", "zsh"]);
    assert_eq!(code, 0);
    assert!(out.contains("#compdef hmn"));
    let (code, out, _) = run(hmn(), &["man"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with(".ie") || out.contains(".TH hmn"),
        "{}",
        &out[..200.min(out.len())]
    );
}

#[test]
fn a_closed_stdout_pipe_exits_quietly() {
    let rows: Vec<(u32, u64)> = (0..5000).map(|i| (GHOST + i, MIB)).collect();
    let s = format!(
        r#"{{"devices": [{}]}}"#,
        h200(&format!(r#", "compute_processes": {}"#, procs(&rows)))
    );
    let mut child = with_fake(&s)
        .arg("ps")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("PID"));
    // The reader is dropped here, like `hmn ps | head -1`.
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("Broken pipe"),
        "{err}"
    );
}

#[test]
fn a_closed_stdout_pipe_exits_quietly_in_json_too() {
    let rows: Vec<(u32, u64)> = (0..5000).map(|i| (GHOST + i, MIB)).collect();
    let s = format!(
        r#"{{"devices": [{}]}}"#,
        h200(&format!(r#", "compute_processes": {}"#, procs(&rows)))
    );
    let mut child = with_fake(&s)
        .args(["ps", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "[\n");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its assertions in order
fn every_capture_through_the_stand_in_nvidia_smi() {
    for cap in all_captures() {
        let text = capture_reader::read(&cap);
        for phase in ["idle", "load"] {
            let gpus = capture_reader::gpu_rows(&text, phase);
            let (code, out, err) = run(with_smi(&cap, phase), &[]);
            assert_eq!(code, 0, "{}: {err}", cap.display());
            let want: String = gpus
                .iter()
                .map(|g| {
                    let reserved = capture_reader::mib(&g["memory.reserved"])
                        .map_or(String::new(), |r| format!(" ({r} MiB reserved)"));
                    format!(
                        "GPU {} [{}]: free {} MiB / {} MiB{reserved}, driver {}\n",
                        g["index"],
                        g["name"],
                        capture_reader::mib(&g["memory.free"]).unwrap(),
                        capture_reader::mib(&g["memory.total"]).unwrap(),
                        g["driver_version"]
                    )
                })
                .collect();
            // One line per GPU, then (MIG captures) one indented line per MIG device.
            let gpu_lines: String = out
                .lines()
                .filter(|l| !l.starts_with("  "))
                .map(|l| format!("{l}\n"))
                .collect();
            assert_eq!(gpu_lines, want, "{} {phase}", cap.display());
            let q_text = capture_reader::section(&text, phase, "query (-q)").unwrap();
            assert_eq!(
                out.lines().filter(|l| l.starts_with("  MIG ")).count(),
                q_text.matches("    MIG Device\n").count(),
                "{} {phase}: {out}",
                cap.display()
            );
            // The -q section's Total/Reserved/Free lines say the same.
            let q = hypomnesis::__parsers::parse_q_memory(
                &capture_reader::section(&text, phase, "query (-q)").unwrap(),
            )
            .unwrap();
            assert!(out.contains(&format!(
                "free {} MiB / {} MiB",
                q[0].free_mib.clone().unwrap(),
                q[0].total_mib.clone().unwrap()
            )));

            let (code, out, err) = run(with_smi(&cap, phase), &["ps", "--json", "--sort", "pid"]);
            assert_eq!(code, 0, "{err}");
            let got: Vec<(u64, u64, String)> = serde_json::from_str::<serde_json::Value>(&out)
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["pid"].as_u64().unwrap(),
                        r["used_bytes"].as_u64().unwrap(),
                        r["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect();
            let mut want: Vec<(u64, u64, String)> = capture_reader::app_rows(&text, phase)
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
            want.sort();
            assert_eq!(got, want, "{} {phase}", cap.display());
            let n = want.len();
            assert!(
                err.starts_with(&format!(
                    "hmn: {n} GPU process{} found",
                    if n == 1 { "" } else { "es" }
                )),
                "{err}"
            );
        }
    }
}

#[test]
fn stand_in_that_hangs_is_killed_and_reported() {
    let cap = support::capture("linux-x86_64__nvidia-l40s__595.80.txt");
    let mut c = with_smi(&cap, "load");
    c.env("FAKE_SMI_MODE", "hang")
        .env("HYPOMNESIS_NVIDIA_SMI_TIMEOUT", "300ms");
    let t = std::time::Instant::now();
    let (code, out, err) = run(c, &[]);
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.contains("did not finish within 300ms and was killed"),
        "{err}"
    );
}

/// nvidia-smi with GPU 2 of four fallen off the bus: the others and their processes are shown,
/// GPU 2 is named lost (text, JSON, doctor) and skipped, exit 0 (0.2.15); `ps --exit-status`
/// answers from the others, as something is listed.
#[test]
fn a_lost_gpu_of_the_nvidia_smi_fallback_is_named_and_the_others_shown() {
    let capture = support::capture("linux-x86_64__nvidia-l40s__595.80.txt");
    let lost = || {
        let mut c = with_smi(&capture, "load");
        c.env("FAKE_SMI_MODE", "lost-gpu");
        c
    };
    let (code, out, err) = run(lost(), &[]);
    assert_eq!(code, 0, "{err}");
    let gpus: Vec<&str> = out.lines().map(|l| l.split(' ').nth(1).unwrap()).collect();
    assert_eq!(gpus, vec!["0", "1", "3"], "{out}");
    assert!(
        err.contains("hmn: failed to query device 2: nvidia-smi: GPU 2 is missing from nvidia-smi's list: lost (it lists GPUs 0, 1, 3); nvidia-smi said: Unable to determine the device handle for GPU 0000:5C:00.0: GPU is lost.") && err.contains("(skipped)"),
        "{err}"
    );
    let (code, out, _) = run(lost(), &["--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let kinds: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["index"].as_u64().unwrap(), d["error_kind"].as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![(0, None), (1, None), (2, Some("gpu_lost")), (3, None)]
    );
    let (code, out, err) = run(lost(), &["ps", "--json"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(lost(), &["ps", "--exit-status"]);
    assert_eq!(code, 0, "something is listed");
    let (code, _, _) = run(lost(), &["ps", "--exit-status", "--pid", "1"]);
    assert_eq!(
        code, 2,
        "an empty answer that skipped a GPU cannot be trusted"
    );
    let (code, _, _) = run(lost(), &["ps", "--device", "2"]);
    assert_eq!(code, 2, "the GPU asked for cannot be listed");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let on: Vec<_> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["pid"].as_u64().unwrap(),
                r["device_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        on,
        vec![(20038, 3), (20037, 3)],
        "GPU 3's processes are listed"
    );
    assert!(
        err.contains("hmn: failed to list GPU 2's processes: nvidia-smi: GPU 2 is missing"),
        "{err}"
    );
    let (_, out, _) = run(lost(), &["doctor"]);
    assert!(out.contains("devices: 4 (GPU 2 not listed: lost)"), "{out}");
    assert!(
        out.contains("--query-gpu lines skipped: 2: line 3: "),
        "{out}"
    );
}
