//! What kind of memory each GPU has, through the fake NVML: a GPU whose driver answers
//! `NOT_SUPPORTED` (or zeros) for its memory while it lists processes is unified, its figures the
//! host's pool (a procfs of the test's own with a `meminfo`); one with memory of its own is
//! coherent where the addressing mode is ATS, discrete where it is none or HMM, and not known
//! where the driver does not say.
#![cfg(feature = "nvml")]

use std::path::PathBuf;

use hypomnesis::MemoryModel;
use support::{FakeVariant, fake_nvml, write_scenario};

const GIB: u64 = 1 << 30;
/// The test host's RAM, as its `meminfo` says.
const HOST_TOTAL: u64 = 128 * GIB;
const HOST_AVAILABLE: u64 = 100 * GIB;
/// Above Linux's largest `pid_max`: never a process here.
const GHOST: u32 = 4_194_400;

/// A procfs holding only a `meminfo` (`available`: whether it has `MemAvailable`).
fn procfs(available: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "hmn-memory-model-{}-{available}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let available = if available {
        format!("MemAvailable:   {} kB\n", HOST_AVAILABLE / 1024)
    } else {
        String::new()
    };
    let text = format!(
        "MemTotal:       {} kB\nMemFree:        {} kB\n{available}Buffers:           1024 kB\n",
        HOST_TOTAL / 1024,
        HOST_AVAILABLE / 2048
    );
    std::fs::write(dir.join("meminfo"), text).unwrap();
    dir
}

/// One device with `extra` JSON fields, and a process of 4 GiB on it: 96 GiB of its own,
/// 90 GiB free, where the driver reports them.
fn device(extra: &str) -> String {
    sized(96 * GIB, 90 * GIB, extra)
}

/// [`device`] with the memory the driver reports.
fn sized(total: u64, free: u64, extra: &str) -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA GB10", "uuid": "GPU-0b100000-0000-4000-8000-000000000000",
            "total": {total}, "free": {free} {extra},
            "compute_processes": [{{"pid": {GHOST}, "used": {}}}]}}]}}"#,
        4 * GIB
    )
}

fn run_child(name: &str, scenario: &str, procfs: Option<PathBuf>) {
    run_child_on(name, scenario, procfs, support::empty_dir());
}

/// [`run_child`] with the sysfs root `sysfs`.
fn run_child_on(name: &str, scenario: &str, procfs: Option<PathBuf>, sysfs: PathBuf) {
    let lib = fake_nvml(FakeVariant::Modern);
    let scenario = write_scenario(scenario);
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", name)
        .env("HYPOMNESIS_NVML_LIBRARY", &lib)
        .env("FAKE_NVML_SCENARIO", &scenario)
        .env("PATH", support::empty_dir())
        .env_remove("HYPOMNESIS_NVIDIA_SMI")
        .env("HYPOMNESIS_SYSFS", sysfs);
    match procfs {
        Some(p) => cmd.env("HYPOMNESIS_PROCFS", p),
        None => cmd.env_remove("HYPOMNESIS_PROCFS"),
    };
    support::run_child_passing(&mut cmd, &format!("scenario {name}"));
}

#[test]
#[ignore = "entry point for the scenario child processes; the other tests run it"]
fn child() {
    let name = std::env::var("HMN_CHILD").expect("HMN_CHILD names the scenario");
    let d = hypomnesis::device_info(0);
    match name.as_str() {
        "unified" | "unified_zeros" => {
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Unified), "{d:?}");
            assert_eq!(
                (d.total_bytes, d.free_bytes, d.used_bytes),
                (HOST_TOTAL, HOST_AVAILABLE, HOST_TOTAL - HOST_AVAILABLE),
                "the host's pool, never the device's own: {d:?}"
            );
            assert_eq!(d.reserved_bytes, None, "no reservation known: {d:?}");
            assert_eq!(d.allocated_bytes(), None);
            let why = d.memory_model_evidence.clone().unwrap();
            let said = if name == "unified" {
                "NOT_SUPPORTED and the addressing mode is ATS"
            } else {
                "reports 0 bytes of device memory"
            };
            assert!(why.contains(said) && why.contains("MemAvailable"), "{why}");
            // The processes are still the driver's, and add up to no more than the pool.
            let rows = hypomnesis::gpu_processes(0).unwrap();
            assert_eq!(rows.len(), 1, "{rows:?}");
            assert_eq!(rows[0].used_bytes, 4 * GIB);
            assert!(rows.iter().map(|r| r.used_bytes).sum::<u64>() <= d.total_bytes);
            let s = hypomnesis::Snapshot::now(0).unwrap();
            assert_eq!(
                s.gpu_device.as_ref().map(|g| g.total_bytes),
                Some(HOST_TOTAL)
            );
        }
        "unified_without_available" => {
            let e = d.unwrap_err().to_string();
            assert!(
                e.contains("NOT_SUPPORTED") && e.contains("no MemAvailable"),
                "{e}"
            );
        }
        "coherent" => {
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Coherent), "{d:?}");
            assert_eq!((d.total_bytes, d.free_bytes), (96 * GIB, 90 * GIB));
            assert!(d.memory_model_evidence.unwrap().contains("ATS"));
        }
        "discrete" | "discrete_hmm" => {
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Discrete), "{d:?}");
            let why = d.memory_model_evidence.unwrap();
            let mode = if name == "discrete" {
                "mode none"
            } else {
                "mode HMM"
            };
            assert!(why.contains(mode), "{why}");
        }
        "coherent_node" | "node_with_cpus" | "node_unread" => numa_child(&name, d),
        "unknown" => {
            let d = d.unwrap();
            assert_eq!((d.memory_model, d.memory_model_evidence), (None, None));
            assert_eq!(d.total_bytes, 96 * GIB);
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// The scenarios of a GPU whose memory NVML names as a NUMA node.
fn numa_child(name: &str, d: hypomnesis::Result<hypomnesis::GpuDeviceInfo>) {
    match name {
        "coherent_node" => {
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Coherent), "{d:?}");
            let why = d.memory_model_evidence.clone().unwrap();
            assert!(why.contains("ATS") && why.contains("NUMA node 1"), "{why}");
            // The driver's figures are the GPU's own; the node's are the kernel's.
            assert_eq!((d.total_bytes, d.free_bytes), (96 * GIB, 90 * GIB));
            assert_eq!(d.numa_node, Some(1));
            assert_eq!(d.numa_node_total_bytes, Some(94 * GIB));
            assert_eq!(d.numa_node_used_bytes, Some(16 * GIB));
            let node = hypomnesis::numa_node(1).unwrap();
            assert!(!node.has_cpus && node.free_bytes == 78 * GIB, "{node:?}");
            assert!(hypomnesis::numa_node(0).unwrap().has_cpus);
            assert!(hypomnesis::numa_node(7).is_err(), "no such node");
            // Where the serving process's pages lie: 10 GiB in the GPU's memory.
            let placed = hypomnesis::process_numa_bytes(5100).unwrap();
            assert_eq!(placed.get(&1), Some(&(10 * GIB)), "{placed:?}");
            assert_eq!(placed.get(&0), Some(&(GIB + 4 * (1 << 20) + 128 * 1024)));
            // One whose numa_maps is not there: an error naming the file, never 0.
            let e = hypomnesis::process_numa_bytes(5200)
                .unwrap_err()
                .to_string();
            assert!(e.contains("5200/numa_maps"), "{e}");
        }
        "node_with_cpus" => {
            // NVML naming a node with CPUs names the CPU's memory near the GPU: no GPU node.
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Discrete), "{d:?}");
            assert_eq!(
                (d.numa_node, d.numa_node_total_bytes, d.numa_node_used_bytes),
                (None, None, None)
            );
        }
        "node_unread" => {
            // Named, but its files are not under this sysfs root: coherent, figures unknown.
            let d = d.unwrap();
            assert_eq!(d.memory_model, Some(MemoryModel::Coherent), "{d:?}");
            assert_eq!(d.numa_node, Some(1));
            assert_eq!(
                (d.numa_node_total_bytes, d.numa_node_used_bytes),
                (None, None)
            );
            let why = d.memory_model_evidence.unwrap();
            assert!(why.contains("cannot be read here"), "{why}");
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// GB10 as its owners report it: `NOT_SUPPORTED` for the memory, a process listed.
#[test]
fn memory_not_supported_is_the_hosts_pool() {
    run_child(
        "unified",
        &device(r#", "memory_error": 3, "addressing_mode": 2"#),
        Some(procfs(true)),
    );
}

/// The other flavour some drivers give: zeros.
#[test]
fn memory_of_zero_bytes_is_the_hosts_pool() {
    run_child("unified_zeros", &sized(0, 0, ""), Some(procfs(true)));
}

/// Without `MemAvailable`, the pool's free memory is not known: said, not made up.
#[test]
fn a_pool_without_available_memory_is_an_error_naming_it() {
    run_child(
        "unified_without_available",
        &device(r#", "memory_error": 3"#),
        Some(procfs(false)),
    );
}

#[test]
fn memory_of_its_own_with_ats_is_coherent() {
    run_child("coherent", &device(r#", "addressing_mode": 2"#), None);
}

#[test]
fn memory_of_its_own_without_ats_is_discrete() {
    run_child("discrete", &device(r#", "addressing_mode": 0"#), None);
    run_child("discrete_hmm", &device(r#", "addressing_mode": 1"#), None);
}

/// A driver without the addressing-mode call: not known, never guessed.
#[test]
fn without_an_addressing_mode_the_model_is_not_known() {
    run_child("unknown", &device(""), None);
}

/// The fixture's Grace Hopper in NUMA mode (`fixtures/numa/gh200`): NVML names node 1, a node of
/// memory only, as the GPU's; its figures and a process's pages there are read.
#[test]
fn a_gpu_whose_memory_is_a_numa_node() {
    let root = support::fixtures("numa/gh200");
    run_child_on(
        "coherent_node",
        &device(r#", "addressing_mode": 2, "numa_node": 1"#),
        Some(root.join("proc")),
        root.join("sys"),
    );
    run_child_on(
        "node_with_cpus",
        &device(r#", "addressing_mode": 0, "numa_node": 0"#),
        None,
        root.join("sys"),
    );
    run_child_on(
        "node_unread",
        &device(r#", "numa_node": 1"#),
        None,
        support::empty_dir(),
    );
}
