//! A coherent GPU whose memory is a NUMA node of the kernel's (Grace Hopper in NUMA mode), end
//! to end: the fake NVML names node 1 as the GPU's (`docs/demo-gh200-scenario.json`), and the
//! fixture's sysfs and procfs (`fixtures/numa/gh200`) say what the kernel placed there and where
//! each process's pages lie. `hmn` says the node's figures, `hmn ps` each process's bytes on it
//! (unknown, never 0, where its `numa_maps` cannot be read), and `hmn serve` exports the node.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;

use support::{FakeVariant, empty_dir, fake_nvml};

use crate::util::hmn::run;

const GIB: u64 = 1 << 30;

fn fixture(part: &str) -> PathBuf {
    support::fixtures("numa/gh200").join(part)
}

fn scenario() -> String {
    std::fs::read_to_string(support::workspace().join("docs/demo-gh200-scenario.json")).unwrap()
}

/// `hmn` on the fixture machine, its roots given as flags.
fn hmn() -> Command {
    hmn_on(&fixture("sys"))
}

/// [`hmn`] with the sysfs root `sysfs`.
fn hmn_on(sysfs: &std::path::Path) -> Command {
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env(
            "FAKE_NVML_SCENARIO",
            support::workspace().join("docs/demo-gh200-scenario.json"),
        )
        .env("PATH", empty_dir())
        .arg("--procfs")
        .arg(fixture("proc"))
        .arg("--sysfs")
        .arg(sysfs);
    c
}

#[test]
fn hmn_says_the_gpus_node_and_json_has_its_figures() {
    let (code, out, err) = run(hmn(), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("coherent: its own memory, and the CPU's within its reach; NUMA node 1: 16384 MiB / 96256 MiB placed there by the kernel"),
        "{out}"
    );
    let (_, out, _) = run(hmn(), &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["memory_model"], "coherent");
    assert_eq!(v[0]["numa_node"], 1);
    assert_eq!(v[0]["numa_node_total_bytes"], 94 * GIB);
    assert_eq!(v[0]["numa_node_used_bytes"], 16 * GIB);
    // The driver's figures stay the GPU's own memory.
    assert_eq!(v[0]["total_bytes"], 102_626_951_168u64);
}

#[test]
fn ps_says_each_processs_bytes_on_the_gpus_node() {
    let (code, out, err) = run(hmn(), &["ps"]);
    assert_eq!(code, 0, "{err}");
    // The column's cell of a row: right-aligned, ending under its header's end.
    let cell = |pid: &str| -> String {
        let line = out.lines().find(|l| l.starts_with(pid)).unwrap();
        let header = out.lines().next().unwrap();
        let end = header.find("ON-GPU-NODE").unwrap() + "ON-GPU-NODE".len();
        line[..end].rsplit("  ").next().unwrap().trim().to_string()
    };
    assert_eq!(cell("5100"), "10.0 GiB", "{out}");
    assert_eq!(cell("5200"), "?", "unknown, never 0: {out}");
    let (_, out, _) = run(hmn(), &["ps", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let by_pid = |pid: u64| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap()
            .clone()
    };
    assert_eq!(by_pid(5100)["numa_node"], 1);
    assert_eq!(by_pid(5100)["numa_node_bytes"], 10 * GIB);
    assert_eq!(by_pid(5200)["numa_node"], 1);
    assert!(by_pid(5200)["numa_node_bytes"].is_null());
}

/// Without the node's files (another sysfs root), the node is named and its figures unknown;
/// on a GPU that is no node, the column is not shown at all.
#[test]
fn without_the_nodes_files_the_figures_are_unknown() {
    let (code, out, err) = run(hmn_on(&empty_dir()), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("; NUMA node 1 (its figures cannot be read here)"),
        "{out}"
    );
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env(
            "FAKE_NVML_SCENARIO",
            support::write_scenario(&scenario().replace(r#""numa_node": 1,"#, "")),
        )
        .env("PATH", empty_dir())
        .arg("--procfs")
        .arg(fixture("proc"));
    let (_, out, _) = run(c, &["ps"]);
    assert!(!out.contains("ON-GPU-NODE"), "{out}");
}

#[cfg(feature = "serve")]
#[test]
fn serve_exports_the_gpus_node() {
    let (procfs, sysfs) = (fixture("proc"), fixture("sys"));
    let server = crate::util::serve::Server::start(
        FakeVariant::Modern,
        &scenario(),
        &[
            "--procfs",
            procfs.to_str().unwrap(),
            "--sysfs",
            sysfs.to_str().unwrap(),
        ],
    );
    let reply = server.get("/metrics");
    assert_eq!(reply.status, 200, "{}", server.stderr());
    let uuid = "GPU-9a200000-0000-4000-8000-000000000000";
    for (name, value) in [
        ("hypomnesis_gpu_numa_node_memory_total_bytes", 94 * GIB),
        ("hypomnesis_gpu_numa_node_memory_used_bytes", 16 * GIB),
    ] {
        let line = format!("{name}{{gpu=\"0\",uuid=\"{uuid}\"}} {value}");
        assert!(
            reply.body.lines().any(|l| l == line),
            "{line}:\n{}",
            reply.body
        );
    }
    assert!(
        reply
            .body
            .contains(r#"memory_model="coherent",numa_node="1"} 1"#),
        "{}",
        reply.body
    );
}
