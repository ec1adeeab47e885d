//! Fault injection through the fake NVML: every NVML function the loader calls fails once with
//! each plausible code, or returns garbage; the library answers with a named error or a
//! degraded field — never a wrong number, never a panic. The test prints the scenario table.
//! Also a soak: 100,000 `Snapshot::now` calls with stable RSS and file descriptors.
#![cfg(all(target_os = "linux", feature = "nvml"))]

use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;
const TOTAL: u64 = 143_771 * MIB;
const FREE: u64 = 110_796 * MIB;
const RESERVED: u64 = 614 * MIB;

const FUNCTIONS: &[&str] = &[
    "nvmlInit_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
];

/// (code, name): uninitialised, no permission, not supported, GPU lost, unknown, never seen.
const CODES: &[(u32, &str)] = &[
    (1, "NVML_ERROR_UNINITIALIZED"),
    (4, "NVML_ERROR_NO_PERMISSION"),
    (3, "NVML_ERROR_NOT_SUPPORTED"),
    (15, "NVML_ERROR_GPU_IS_LOST"),
    (999, "NVML_ERROR_UNKNOWN"),
    (77, "an NVML return code this crate does not know"),
];

fn scenario(extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0",
            "total": {TOTAL}, "reserved": {RESERVED}, "free": {FREE},
            "compute_processes": [{{"pid": 4194400, "used": {}}}]}}] {extra}}}"#,
        1024 * MIB
    )
}

/// Runs the `child` entry with a scenario; returns its stdout (one `RESULT …` line per call).
fn run_case(case: &str, scenario: &str) -> String {
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_FAULT_CASE", case)
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("PATH", "/nonexistent")
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env_remove("HYPOMNESIS_NVIDIA_SMI");
    support::run_child_passing(&mut cmd, &format!("case {case}"))
}

#[test]
#[ignore = "entry point for the fault-injection child processes; the other tests run it"]
fn child() {
    let case = std::env::var("HMN_FAULT_CASE").unwrap();
    if case == "soak" {
        return soak();
    }
    // Every figure that comes back must be the scenario's; every error must be named.
    let d = hypomnesis::device_info(0);
    match &d {
        Ok(d) => {
            assert_eq!(
                (d.total_bytes, d.free_bytes, d.used_bytes),
                (TOTAL, FREE, TOTAL - FREE),
                "{case}"
            );
            assert!(
                d.reserved_bytes.is_none_or(|r| r == RESERVED),
                "{case}: {d:?}"
            );
            assert!(
                d.name.as_deref().is_none_or(|n| n == "NVIDIA H200"),
                "{case}: {d:?}"
            );
            println!(
                "RESULT device_info ok reserved={} name={} uuid={} pci={} driver={}",
                d.reserved_bytes.is_some(),
                d.name.is_some(),
                d.uuid.is_some(),
                d.pci_bus_id.is_some(),
                d.driver_version.is_some()
            );
        }
        Err(e) => println!("RESULT device_info err {e}"),
    }
    match hypomnesis::gpu_processes(0) {
        Ok(rows) => {
            for r in &rows {
                assert_eq!(
                    (r.pid, r.used_bytes),
                    (4_194_400, 1024 * MIB),
                    "{case}: {rows:?}"
                );
            }
            println!("RESULT gpu_processes ok rows={}", rows.len());
        }
        Err(e) => println!("RESULT gpu_processes err {e}"),
    }
    let dropped = hypomnesis::sources()
        .into_iter()
        .next()
        .and_then(|r| {
            r.details
                .into_iter()
                .find(|(k, _)| k == "process rows dropped")
        })
        .map_or_else(|| "none".to_string(), |(_, v)| v);
    println!("RESULT dropped={dropped}");
    let s = hypomnesis::Snapshot::now(0).unwrap();
    assert!(s.ram_bytes > 0);
}

fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn soak() {
    for _ in 0..10_000 {
        hypomnesis::Snapshot::now(0).unwrap();
    }
    let (rss0, fds0) = (hypomnesis::process_rss().unwrap(), fds());
    for _ in 0..90_000 {
        std::hint::black_box(hypomnesis::Snapshot::now(0).unwrap());
    }
    let (rss1, fds1) = (hypomnesis::process_rss().unwrap(), fds());
    println!("RESULT soak rss {rss0} -> {rss1}, fds {fds0} -> {fds1}");
    assert_eq!(fds0, fds1, "file descriptors leak");
    assert!(
        rss1 < rss0 + 8 * MIB,
        "RSS grew from {rss0} to {rss1} over 90,000 snapshots"
    );
}

fn results(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.find("RESULT ").and_then(|i| l.get(i + 7..)))
        .map(String::from)
        .collect()
}

#[test]
fn every_loader_call_fails_once_with_every_code() {
    let mut table = vec![format!(
        "{:<42} {:<46} {:<60} {}",
        "function", "code", "device_info", "gpu_processes"
    )];
    for f in FUNCTIONS {
        for (code, name) in CODES {
            let s = scenario(&format!(
                r#", "fail": [{{"function": "{f}", "code": {code}, "times": 1}}]"#
            ));
            let r = results(&run_case(&format!("{f}/{code}"), &s));
            let (di, gp) = (&r[0], &r[1]);
            // What must happen for each function.
            let errs_di = di.starts_with("device_info err");
            let errs_gp = gp.starts_with("gpu_processes err");
            let names_it =
                |line: &str| line.contains(name) && (line.contains(f) || *f == "nvmlInit_v2");
            match (*f, *code) {
                // The driver went away: re-initialised, retried, answered.
                (f, 1) if f != "nvmlInit_v2" => {
                    assert!(!errs_di && !errs_gp, "{f}/{code}: {di} | {gp}");
                }
                ("nvmlInit_v2", _) => assert!(errs_di && names_it(di), "{f}/{code}: {di}"),
                (
                    "nvmlDeviceGetCount_v2"
                    | "nvmlDeviceGetHandleByIndex_v2"
                    | "nvmlDeviceGetMemoryInfo",
                    _,
                ) => {
                    assert!(errs_di && names_it(di), "{f}/{code}: {di}");
                }
                ("nvmlDeviceGetMemoryInfo_v2", _) => {
                    assert!(di.contains("reserved=false"), "{f}/{code}: {di}");
                }
                ("nvmlDeviceGetName", _) => assert!(di.contains("name=false"), "{f}/{code}: {di}"),
                ("nvmlDeviceGetUUID", _) => assert!(di.contains("uuid=false"), "{f}/{code}: {di}"),
                ("nvmlDeviceGetPciInfo_v3", _) => {
                    assert!(di.contains("pci=false"), "{f}/{code}: {di}");
                }
                ("nvmlSystemGetDriverVersion", _) => {
                    assert!(di.contains("driver=false"), "{f}/{code}: {di}");
                }
                ("nvmlDeviceGetGraphicsRunningProcesses_v3", 3) => {
                    assert_eq!(gp, "gpu_processes ok rows=1");
                }
                (_, _) => assert!(errs_gp && names_it(gp), "{f}/{code}: {gp}"),
            }
            let clip = |s: &str| s.chars().take(58).collect::<String>();
            table.push(format!("{f:<42} {name:<46} {:<60} {}", clip(di), clip(gp)));
        }
    }
    println!("{}", table.join("\n"));
}

#[test]
fn garbage_answers_degrade_never_lie() {
    let cases = [
        ("count_larger_than_buffer", "gpu_processes err"),
        ("name_without_nul", "name=false"),
        ("name_without_nul", "dropped=none"),
        ("process_used_max", "gpu_processes ok rows=0"),
        (
            "process_used_max",
            "dropped=1 (no usable memory figure, or more than the GPU has)",
        ),
    ];
    for (knob, want) in cases {
        let s = scenario(&format!(r#", "garbage": {{"{knob}": true}}"#));
        let out = results(&run_case(knob, &s)).join(" | ");
        assert!(out.contains(want), "{knob}: {out}");
        println!("{knob:<28} {out}");
    }
}

#[test]
fn soak_100k_snapshots_stable_rss_and_fds() {
    let out = run_case("soak", &scenario(""));
    println!("{}", results(&out).join("\n"));
}
