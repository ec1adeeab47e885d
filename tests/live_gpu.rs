//! Live tests for a host with an NVIDIA GPU and driver. Run with
//! `cargo test --test live_gpu -- --ignored` (or `scripts/gpu-check.sh`).
#![cfg(all(feature = "nvml", feature = "nvidia-smi-fallback"))]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)] // test code

use std::process::Command;

use hypomnesis::__parsers::parse_q_memory;
use hypomnesis::{GpuQuerySource, Snapshot};

const MIB: u64 = 1 << 20;
const TIB: u64 = 1 << 40;

fn nvidia_smi_q_memory() -> Vec<hypomnesis::__parsers::QMemory> {
    let exe = std::env::var("HYPOMNESIS_NVIDIA_SMI").unwrap_or_else(|_| "nvidia-smi".into());
    let out = Command::new(exe)
        .args(["-q", "-d", "MEMORY"])
        .output()
        .expect("nvidia-smi runs");
    assert!(
        out.status.success(),
        "nvidia-smi -q -d MEMORY failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_q_memory(&String::from_utf8_lossy(&out.stdout)).expect("nvidia-smi -q output parses")
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn device_info_reserved_bytes_is_plausible_when_present() {
    let n = hypomnesis::device_count().unwrap();
    assert!(n > 0);
    for i in 0..n {
        let d = hypomnesis::device_info(i).unwrap();
        println!("GPU {i}: {d:?}");
        assert!(
            d.total_bytes > 0 && d.total_bytes < TIB,
            "total within the 1 TiB sanity bound"
        );
        assert_eq!(d.free_bytes + d.used_bytes, d.total_bytes);
        if let Some(r) = d.reserved_bytes {
            assert!(r > 0, "a real carve-out is non-zero");
            assert!(r < d.total_bytes, "a small slice of the card");
            assert!(r <= d.used_bytes);
        }
    }
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn total_and_reserved_match_nvidia_smi_q() {
    let q = nvidia_smi_q_memory();
    for (i, m) in q.iter().enumerate() {
        let d = hypomnesis::device_info(u32::try_from(i).unwrap()).unwrap();
        let total = m.total_mib.clone().unwrap();
        assert!(
            (d.total_bytes / MIB).abs_diff(total) <= 1,
            "GPU {i}: total {} MiB vs nvidia-smi {total}",
            d.total_bytes / MIB
        );
        if let Some(Ok(r)) = m.reserved_mib.clone() {
            let ours = d
                .reserved_bytes
                .expect("nvidia-smi shows Reserved, so NVML v2 should too")
                / MIB;
            assert!(
                ours.abs_diff(r) <= 1,
                "GPU {i}: reserved {ours} MiB vs nvidia-smi {r}"
            );
        }
        println!(
            "GPU {i} ({}): total {} MiB, reserved {:?} MiB; nvidia-smi -q: Total {total}, Reserved {:?}",
            m.pci_bus_id,
            d.total_bytes / MIB,
            d.reserved_bytes.map(|r| r / MIB),
            m.reserved_mib
        );
    }
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn nvml_is_the_source_and_reports_itself() {
    let d = hypomnesis::device_info(0).unwrap();
    assert_eq!(d.source, GpuQuerySource::Nvml);
    assert!(
        d.name.is_some()
            && d.uuid.is_some()
            && d.pci_bus_id.is_some()
            && d.driver_version.is_some()
    );
    for r in hypomnesis::sources() {
        println!("{:?}: {:?}", r.source, r.state);
        for (k, v) in &r.details {
            println!("    {k}: {v}");
        }
    }
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn gpu_processes_succeeds_on_live_host() {
    for i in 0..hypomnesis::device_count().unwrap() {
        let total = hypomnesis::device_info(i).unwrap().total_bytes;
        let p = hypomnesis::gpu_processes(i).unwrap();
        assert!(p.windows(2).all(|w| w[0].pid < w[1].pid));
        for e in &p {
            assert!(e.used_bytes <= total);
            assert_eq!(e.device_index, i);
            println!(
                "GPU {i}: pid {} {:?} {} MiB {:?}",
                e.pid,
                e.name,
                e.used_bytes / MIB,
                e.context
            );
        }
    }
    let g = hypomnesis::process_gpu_info(0).unwrap();
    println!("this process: {g:?}");
    let s = Snapshot::now(0).unwrap();
    assert!(s.ram_bytes > 0 && s.gpu_device.is_some());
}

#[test]
#[ignore = "requires an NVIDIA GPU and nvidia-smi"]
fn nvidia_smi_fallback_matches_nvml() {
    // Run ourselves with NVML made unavailable, so the nvidia-smi fallback answers.
    if std::env::var("HMN_LIVE_CHILD").is_ok() {
        let d = hypomnesis::device_info(0).unwrap();
        assert_eq!(d.source, GpuQuerySource::NvidiaSmi);
        println!(
            "HMN_SMI {} {}",
            d.total_bytes,
            d.reserved_bytes.unwrap_or(0)
        );
        return;
    }
    let nvml = hypomnesis::device_info(0).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "nvidia_smi_fallback_matches_nvml",
            "--include-ignored",
            "--nocapture",
        ])
        .env("HMN_LIVE_CHILD", "1")
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text.lines().find(|l| l.starts_with("HMN_SMI ")).unwrap();
    let v: Vec<u64> = line
        .split(' ')
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(
        v[0],
        nvml.total_bytes / MIB * MIB,
        "nvidia-smi total in whole MiB"
    );
    if let Some(r) = nvml.reserved_bytes {
        assert!((v[1] / MIB).abs_diff(r / MIB) <= 1);
    }
}
