//! AMD and Intel devices and processes from checked-in sysfs/procfs fixture trees
//! (`crates/testkit/fixtures/drm/`, written by `scripts/gen/drm-fixtures.py` in the kernel's
//! formats), through the built `hmn` and the public API, with the root variables and flags; and
//! the PID-namespace mapping through a host-like procfs built at run time.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;

use support::{FakeVariant, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;

fn tree(name: &str) -> PathBuf {
    support::fixtures("drm").join(name)
}

use support::empty_dir;

/// A fake NVML with one H200 at the PCI slot of the fixture's NVIDIA card.
fn h200(procs: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "pci_bus_id": "00000000:18:00.0", "total": {}, "reserved": {}, "free": {},
            "compute_processes": {procs}}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB
    )
}

fn hmn(tree_name: &str, nvml: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let t = tree(tree_name);
    let mut c = crate::util::hmn::hmn();
    c.env("PATH", empty_dir())
        .env("LD_LIBRARY_PATH", empty_dir())
        .env("HYPOMNESIS_PROCFS", t.join("proc"))
        .env("HYPOMNESIS_SYSFS", t.join("sys"));
    match nvml {
        Some(s) => c
            .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", write_scenario(s)),
        None => c.env_remove("HYPOMNESIS_NVML_LIBRARY"),
    };
    let out = c.args(args).output().unwrap();
    let (o, e) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert!(!e.contains("panicked"), "{e}");
    (out.status.code().unwrap(), o, e)
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn mixed_host_devices_nvidia_first_then_by_slot() {
    let nvml = h200(r#"[{"pid": 4194400, "used": 1073741824}]"#);
    let (code, out, err) = hmn("mixed", Some(&nvml), &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "GPU 0 [NVIDIA H200]: free 110796 MiB / 143771 MiB (614 MiB reserved), driver 590.48.01\n\
         GPU 2: free 19856 MiB / 24560 MiB\n\
         GPU 3: free 15232 MiB / 16256 MiB\n"
    );
    assert_eq!(
        err,
        "hmn: failed to query device 1: DRM: card3 (0000:00:02.0): xe publishes no memory figures in sysfs on this kernel (only through an ioctl that needs CAP_PERFMON): total unknown (skipped)\n"
    );
    let v = json(&hmn("mixed", Some(&nvml), &["--json"]).1);
    let a = v.as_array().unwrap();
    assert_eq!(a.len(), 4, "the NVIDIA card is listed once, by NVML");
    let xe = &a[1];
    assert_eq!(
        (xe["index"].as_u64(), xe["error_kind"].as_str()),
        (Some(1), Some("not_supported"))
    );
    assert!(
        xe["total_bytes"].is_null()
            && xe["error"]
                .as_str()
                .unwrap()
                .contains("xe publishes no memory figures"),
        "{xe}"
    );
    let amd = a.iter().find(|d| d["index"] == 2).unwrap();
    assert_eq!(amd["source"], "drm");
    assert_eq!(amd["vendor"], "amd");
    assert_eq!(amd["pci_bus_id"], "0000:03:00.0");
    assert_eq!(amd["total_bytes"], 24560 * MIB);
    assert_eq!(amd["used_bytes"], 4704 * MIB);
    assert_eq!(amd["free_bytes"], (24560 - 4704) * MIB);
    assert!(amd["reserved_bytes"].is_null());
    assert_eq!(amd["gtt_total_bytes"], 31995 * MIB);
    assert_eq!(amd["gtt_used_bytes"], 112 * MIB);
    assert_eq!(amd["visible_vram_total_bytes"], 24560 * MIB);
    let intel = a.iter().find(|d| d["index"] == 3).unwrap();
    assert_eq!(
        (intel["vendor"].as_str(), intel["total_bytes"].as_u64()),
        (Some("intel"), Some(16256 * MIB))
    );
    let nv = a.iter().find(|d| d["index"] == 0).unwrap();
    assert!(nv["gtt_total_bytes"].is_null());
}

#[test]
fn mixed_host_processes_deduplicated_and_attributed() {
    let nvml = h200(r#"[{"pid": 4194400, "used": 1073741824}]"#);
    let (code, out, err) = hmn("mixed", Some(&nvml), &["ps", "--json", "--sort", "pid"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<(u64, String, u64, u64, u64)> = json(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["pid"].as_u64().unwrap(),
                r["name"].as_str().unwrap_or("?").to_string(),
                r["used_bytes"].as_u64().unwrap(),
                r["shared_used_bytes"].as_u64().unwrap(),
                r["device_index"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (100, "Xorg".into(), 256 * MIB, 32 * MIB, 2), // two fds, one client: once
            (200, "python3".into(), 4096 * MIB, 64 * MIB, 2), // legacy keys; its child 201 shares the client
            (300, "firefox".into(), 512 * MIB, 8 * MIB, 3),   // i915 local0 / system0
            (301, "gnome-shell".into(), 128 * MIB, 0, 1),     // xe iGPU: its system memory is used
            (4_194_400, "?".into(), 1024 * MIB, 0, 0),        // NVML
        ]
    );
    // The fake H200's figures leave 30.6 GiB to processes it does not list (GPU 0 only: the
    // AMD and Intel cards know no reservation, so no allocated figure).
    assert!(
        err.starts_with(
            "hmn: 5 GPU processes found (5.9 GiB committed total).\n\
             hmn: 1 process is listed with a pid no process here can have (above pid_max, and this is the initial PID namespace): memory counted, the process unknown.\n\
             hmn: 30.6 GiB on GPU 0 is held by processes not visible from here"
        ),
        "{err}"
    );
    assert_eq!(err.lines().count(), 3, "{err}");
    let (_, out, _) = hmn("mixed", Some(&nvml), &["ps", "--device", "2"]);
    // The fixture's procfs has no cmdline or statm: memory unknown, the name shown. Its owner is
    // whoever owns the directory, by uid: a procfs other than /proc names users from its
    // system's passwd (`<procfs>/1/root/etc/passwd`), which the fixture does not have.
    let uid = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(tree("mixed").join("proc/200")).unwrap(),
    )
    .to_string();
    let table: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        table,
        vec![
            vec![
                "PID", "USER", "TYPE", "VRAM", "SHARED", "SPILL", "RSS", "GPU", "DEVICE", "COMMAND"
            ],
            vec![
                "200", &uid, "-", "4.0", "GiB", "64", "MiB", "n/a", "?", "2", "AMD", "GPU",
                "python3"
            ],
            vec![
                "100", &uid, "-", "256", "MiB", "32", "MiB", "n/a", "?", "2", "AMD", "GPU", "Xorg"
            ],
        ],
        "{out}"
    );
}

#[test]
fn doctor_counts_unreadable_processes_and_skipped_cards() {
    let nvml = h200("[]");
    let (code, out, _) = hmn("mixed", Some(&nvml), &["doctor"]);
    assert_eq!(code, 0);
    assert!(out.contains("DRM: answered\n"), "{out}");
    assert!(
        out.contains("    skipped: card0 (0000:18:00.0): NVIDIA, measured by NVML/nvidia-smi\n"),
        "{out}"
    );
    assert!(out.contains("    processes not readable: 1 "), "{out}");
    assert!(out.contains("    device 1: card1 0000:03:00.0 (PCI 1002:744C, driver amdgpu): 4704 MiB of 24560 MiB used\n"), "{out}");
}

#[test]
fn without_nvml_the_nvidia_card_is_listed_with_its_limits() {
    let (code, out, err) = hmn("mixed", None, &["--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let slots: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["pci_bus_id"].as_str())
        .collect();
    assert_eq!(slots, vec!["0000:03:00.0", "0000:07:00.0"]);
    assert!(err.contains("hmn: failed to query device 3: DRM: card0 (0000:18:00.0): nvidia publishes no memory figures in sysfs: total unknown (skipped)"), "{err}");
}

#[test]
fn nvidia_only_host_never_sweeps() {
    let nvml = h200(r#"[{"pid": 4194400, "used": 1048576}]"#);
    let (code, out, _) = hmn("nvidia-only", Some(&nvml), &["doctor"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("DRM: not present: no AMD or Intel DRM device under"),
        "{out}"
    );
    assert!(!out.contains("processes swept"), "{out}");
    let (_, out, err) = hmn("nvidia-only", Some(&nvml), &["ps"]);
    assert!(out.contains("4194400"), "{out}");
    assert!(
        err.starts_with("hmn: 1 GPU process found (1 MiB committed total).\n"),
        "{err}"
    );
    // Without NVML the NVIDIA card is a DRM device, but its driver has no fdinfo memory: no sweep.
    let (_, out, _) = hmn("nvidia-only", None, &["doctor"]);
    assert!(
        out.contains("process sweep: skipped: no device's driver publishes fdinfo memory"),
        "{out}"
    );
}

#[test]
fn root_flags_work_like_the_variables() {
    let t = tree("mixed");
    let out = crate::util::hmn::hmn()
        .env("PATH", empty_dir())
        .env("LD_LIBRARY_PATH", empty_dir())
        .arg("--procfs")
        .arg(t.join("proc"))
        .arg("--sysfs")
        .arg(t.join("sys"))
        .args(["ps", "--device", "0"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("gnome-shell"), "{text}");
    let bad = crate::util::hmn::hmn()
        .args(["--sysfs", "/nonexistent/sys"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("sysfs root /nonexistent/sys does not exist")
    );
}

#[test]
fn host_pids_map_into_the_callers_namespace() {
    // A host-like procfs: 48213 runs in *our* PID namespace as pid 7; 50000 in another pod.
    let root = std::env::temp_dir().join(format!("hmn-hostproc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let own_ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    for (pid, nspid, ns, comm) in [
        (48213, "48213\t7", own_ns.clone(), "trainer"),
        (
            50000,
            "50000\t3",
            PathBuf::from("pid:[4026530099]"),
            "other-pod",
        ),
    ] {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(d.join("ns")).unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\t{comm}\nNSpid:\t{nspid}\n"),
        )
        .unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::os::unix::fs::symlink(&ns, d.join("ns/pid")).unwrap();
    }
    std::fs::create_dir_all(root.join("1/ns")).unwrap();
    std::os::unix::fs::symlink("pid:[4026530001]", root.join("1/ns/pid")).unwrap();
    let nvml = h200(r#"[{"pid": 48213, "used": 1073741824}, {"pid": 50000, "used": 2147483648}]"#);
    let out = crate::util::hmn::hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&nvml))
        .env("HYPOMNESIS_PROCFS", &root)
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .env("PATH", empty_dir())
        .args(["ps", "--json", "--sort", "pid"])
        .output()
        .unwrap();
    let v = json(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(v[0]["pid"], 7);
    assert_eq!(v[0]["host_pid"], 48213);
    assert_eq!(v[0]["name"], "trainer");
    assert_eq!(v[0]["outside_pid_namespace"], false);
    assert_eq!(v[1]["pid"], 50000);
    assert_eq!(
        v[1]["outside_pid_namespace"], true,
        "listed, marked, with its memory"
    );
    assert_eq!(v[1]["used_bytes"], 2048 * MIB);
    assert_eq!(v[1]["name"], "other-pod");
    let table = crate::util::hmn::hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&nvml))
        .env("HYPOMNESIS_PROCFS", &root)
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .env("PATH", empty_dir())
        .arg("ps")
        .output()
        .unwrap();
    let t = String::from_utf8(table.stdout).unwrap();
    assert!(
        t.contains("50000 (outside)") && t.contains("7 (host 48213)"),
        "{t}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn the_public_api_with_fixture_roots() {
    // The roots are process-wide: run the API checks in a child process.
    if std::env::var("HMN_DRM_CHILD").is_ok() {
        assert_eq!(
            hypomnesis::device_count().unwrap(),
            4,
            "xe, amdgpu, i915, and the NVIDIA card (no NVML here)"
        );
        let amd = hypomnesis::device_info(1).unwrap();
        assert_eq!((amd.total_bytes, amd.used_bytes), (24560 * MIB, 4704 * MIB));
        let busy = hypomnesis::device_utilization(1).unwrap();
        assert_eq!(
            (busy.gpu_percent, busy.memory_percent),
            (Some(37), Some(12))
        );
        let i915 = hypomnesis::device_utilization(2).unwrap();
        assert_eq!(
            (i915.gpu_percent, i915.memory_percent),
            (None, None),
            "not published"
        );
        assert!(matches!(
            hypomnesis::device_info(0),
            Err(hypomnesis::HypomnesisError::Drm(_))
        ));
        let p = hypomnesis::gpu_processes(1).unwrap();
        assert_eq!(p.iter().map(|e| e.pid).collect::<Vec<_>>(), vec![100, 200]);
        assert_eq!(p[1].shared_used_bytes, 64 * MIB);
        let mine = hypomnesis::process_gpu_info(1).unwrap();
        assert_eq!((mine.used_bytes, mine.is_per_process), (0, true));
        let all = hypomnesis::Snapshot::all().unwrap();
        assert_eq!(all.len(), 4);
        assert!(all[0].gpu_device.is_none() && all[1].gpu_device.is_some());
        let s = hypomnesis::__parsers::sweep_tree(&tree("mixed").join("proc"));
        assert_eq!((s.pids, s.unreadable, s.fdinfo_reads), (8, 1, 7));
        return;
    }
    let t = tree("mixed");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &support::test_name(module_path!(), "the_public_api_with_fixture_roots"),
            "--nocapture",
        ])
        .env("HMN_DRM_CHILD", "1")
        .env("PATH", empty_dir())
        .env("LD_LIBRARY_PATH", empty_dir())
        .env("HYPOMNESIS_PROCFS", t.join("proc"))
        .env("HYPOMNESIS_SYSFS", t.join("sys"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// Machines whose GPU shares the host's memory (`apus`): an APU whose power firmware keeps an
/// APU's table, and an MI300A-like card with no VRAM beside its GTT. Both are unified, their
/// figures the pool's (carve-out and GTT), their processes' memory VRAM and GTT together, and
/// the totals add up.
#[test]
fn apus_are_one_pool_with_the_host() {
    let (code, out, err) = hmn("apus", None, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "GPU 0: free 109568 MiB / 131072 MiB; unified memory: these are the host's RAM, shared with the CPU\n\
         GPU 1: free 60828 MiB / 64000 MiB; unified memory: these are the host's RAM, shared with the CPU\n"
    );
    let v = json(&hmn("apus", None, &["--json"]).1);
    let (mi300a, apu) = (&v[0], &v[1]);
    assert_eq!(mi300a["memory_model"], "unified");
    assert!(
        mi300a["memory_model_evidence"]
            .as_str()
            .unwrap()
            .contains("mem_info_vram_total reads 0")
    );
    assert_eq!(mi300a["total_bytes"], 128 * 1024 * MIB);
    assert_eq!(apu["memory_model"], "unified");
    assert!(
        apu["memory_model_evidence"]
            .as_str()
            .unwrap()
            .contains("APU's table (format 3.0)")
    );
    assert_eq!(
        apu["total_bytes"],
        (512 + 62 * 1024) * MIB,
        "carve-out and GTT"
    );
    assert_eq!(apu["used_bytes"], (100 + 3 * 1024) * MIB);
    assert_eq!(
        apu["gtt_total_bytes"],
        62 * 1024 * MIB,
        "GTT still said apart"
    );
    let rows = json(&hmn("apus", None, &["ps", "--json"]).1);
    let used = |pid: u64| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .map(|r| {
                (
                    r["used_bytes"].as_u64().unwrap(),
                    r["shared_used_bytes"].as_u64().unwrap(),
                )
            })
            .unwrap()
    };
    assert_eq!(
        used(600),
        ((64 + 40 * 1024) * MIB, 0),
        "VRAM and GTT together"
    );
    assert_eq!(used(700), (20 * 1024 * MIB, 0));
    for (d, pid) in [(apu, 600), (mi300a, 700)] {
        let (u, _) = used(pid);
        assert!(
            u <= d["total_bytes"].as_u64().unwrap(),
            "a process within its pool"
        );
        assert!(d["used_bytes"].as_u64().unwrap() <= d["total_bytes"].as_u64().unwrap());
    }
}
