//! Live tests for a host with an NVIDIA GPU and driver. Run with
//! `cargo test --test live_gpu -- --ignored` (or `scripts/gpu/check.sh`).
//!
//! The per-process tests make CUDA contexts of their own through the CUDA driver API
//! (`libcuda.so.1`, which every NVIDIA driver installs): this process's, and a child's that
//! holds 1 GiB. `scripts/gpu/check.sh` also starts a `PyTorch` process and names its pid in
//! `HMN_LIVE_TORCH_PID`.
#![cfg(all(target_os = "linux", feature = "nvml", feature = "nvidia-smi-fallback"))]
#![allow(unsafe_code)] // the CUDA driver API, called through libloading

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use hypomnesis::__parsers::parse_q_memory;
use hypomnesis::{GpuContextKind, GpuQuerySource, Snapshot};

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

/// A CUDA context of this process on one GPU, made with the CUDA driver API, and memory
/// allocated in it. Dropping it frees the memory and releases the context.
struct Cuda {
    lib: libloading::Library,
    device: i32,
    allocation: u64,
}

type CuResult = i32;

impl Cuda {
    /// Retain CUDA device `ordinal`'s primary context, make it current, and allocate `bytes`.
    fn hold(ordinal: i32, bytes: usize) -> Self {
        // SAFETY: every call below is a CUDA driver API function with the prototype cuda.h
        // declares (CUresult is an int enum, CUdevice an int, CUcontext an opaque pointer,
        // CUdeviceptr a 64-bit integer); every pointer passed is a live local of that type, and
        // the library outlives the calls (it is kept in the returned value).
        unsafe {
            let lib = libloading::Library::new("libcuda.so.1")
                .expect("libcuda.so.1 (the CUDA driver library) loads");
            let init: libloading::Symbol<unsafe extern "C" fn(u32) -> CuResult> =
                lib.get(b"cuInit\0").unwrap();
            assert_eq!(init(0), 0, "cuInit");
            let get: libloading::Symbol<unsafe extern "C" fn(*mut i32, i32) -> CuResult> =
                lib.get(b"cuDeviceGet\0").unwrap();
            let mut device = 0_i32;
            assert_eq!(get(&raw mut device, ordinal), 0, "cuDeviceGet");
            let retain: libloading::Symbol<
                unsafe extern "C" fn(*mut *mut std::ffi::c_void, i32) -> CuResult,
            > = lib.get(b"cuDevicePrimaryCtxRetain\0").unwrap();
            let mut ctx = std::ptr::null_mut();
            assert_eq!(retain(&raw mut ctx, device), 0, "cuDevicePrimaryCtxRetain");
            let set: libloading::Symbol<unsafe extern "C" fn(*mut std::ffi::c_void) -> CuResult> =
                lib.get(b"cuCtxSetCurrent\0").unwrap();
            assert_eq!(set(ctx), 0, "cuCtxSetCurrent");
            let alloc: libloading::Symbol<unsafe extern "C" fn(*mut u64, usize) -> CuResult> =
                lib.get(b"cuMemAlloc_v2\0").unwrap();
            let mut allocation = 0_u64;
            assert_eq!(alloc(&raw mut allocation, bytes), 0, "cuMemAlloc_v2");
            Self {
                lib,
                device,
                allocation,
            }
        }
    }

    /// The PCI bus id CUDA gives the device (`0000:18:00.0`), to find NVML's index for it.
    fn pci_bus_id(&self) -> String {
        let mut buf = [0_u8; 64];
        // SAFETY: cuDeviceGetPCIBusId(char*, int, CUdevice) writes a NUL-terminated string of at
        // most `len` bytes into the live buffer.
        unsafe {
            let f: libloading::Symbol<unsafe extern "C" fn(*mut u8, i32, i32) -> CuResult> =
                self.lib.get(b"cuDeviceGetPCIBusId\0").unwrap();
            assert_eq!(
                f(buf.as_mut_ptr(), 64, self.device),
                0,
                "cuDeviceGetPCIBusId"
            );
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: as in `hold`; the allocation and the retained context are this value's.
        unsafe {
            if let Ok(free) = self
                .lib
                .get::<unsafe extern "C" fn(u64) -> CuResult>(b"cuMemFree_v2\0")
            {
                free(self.allocation);
            }
            if let Ok(release) = self
                .lib
                .get::<unsafe extern "C" fn(i32) -> CuResult>(b"cuDevicePrimaryCtxRelease_v2\0")
            {
                release(self.device);
            }
        }
    }
}

/// NVML's index of the GPU whose PCI bus id is `bus` (CUDA's `0000:18:00.0`, NVML's
/// `00000000:18:00.0`): the device order of the two APIs may differ.
fn nvml_index_of(bus: &str) -> u32 {
    let tail = |b: &str| {
        b.rsplit_once(':')
            .map(|(head, dev)| {
                let bus = head.rsplit(':').next().unwrap_or(head);
                format!("{bus}:{dev}").to_ascii_lowercase()
            })
            .unwrap_or_default()
    };
    (0..hypomnesis::device_count().unwrap())
        .find(|&i| {
            hypomnesis::device_info(i)
                .unwrap()
                .pci_bus_id
                .is_some_and(|b| tail(&b) == tail(bus))
        })
        .unwrap_or_else(|| panic!("no NVML device has PCI bus id {bus}"))
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn this_process_with_a_cuda_context_of_its_own_is_measured_per_process() {
    let before = hypomnesis::process_gpu_info(0).unwrap();
    println!("before any CUDA context: {before:?}");
    let cuda = Cuda::hold(0, 256 << 20);
    let index = nvml_index_of(&cuda.pci_bus_id());
    let g = hypomnesis::process_gpu_info(index).unwrap();
    println!("with a context and 256 MiB on GPU {index}: {g:?}");
    assert!(g.is_per_process, "this process is listed by NVML: {g:?}");
    assert_eq!(g.source, GpuQuerySource::Nvml);
    assert!(
        g.used_bytes >= 256 << 20,
        "at least the allocation (plus the context): {g:?}"
    );
    let d = hypomnesis::device_info(index).unwrap();
    assert!(g.used_bytes < d.used_bytes, "a part of the device's use");
    let me = std::process::id();
    let row = hypomnesis::gpu_processes(index)
        .unwrap()
        .into_iter()
        .find(|e| e.pid == me)
        .expect("this process is in the process list");
    assert_eq!(row.used_bytes, g.used_bytes);
    assert!(matches!(
        row.context,
        Some(GpuContextKind::Compute | GpuContextKind::ComputeAndGraphics)
    ));
    drop(cuda);
}

#[test]
#[ignore = "requires an NVIDIA GPU"]
fn another_process_holding_a_gibibyte_is_listed_with_it() {
    if std::env::var("HMN_LIVE_HOLDER").is_ok() {
        // The child: hold 1 GiB until the parent closes our stdin.
        let cuda = Cuda::hold(0, 1 << 30);
        println!("HMN_READY {}", cuda.pci_bus_id());
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        drop(cuda);
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &support::test_name(
                module_path!(),
                "another_process_holding_a_gibibyte_is_listed_with_it",
            ),
            "--include-ignored",
            "--nocapture",
        ])
        .env("HMN_LIVE_HOLDER", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let bus = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the holder ended early"
        );
        if let Some(b) = line.trim().strip_prefix("HMN_READY ") {
            break b.to_string();
        }
    };
    let index = nvml_index_of(&bus);
    let rows = hypomnesis::gpu_processes(index).unwrap();
    drop(child.stdin.take());
    let _ = child.wait();
    let row = rows
        .iter()
        .find(|e| e.pid == child.id())
        .unwrap_or_else(|| panic!("pid {} not in {rows:?}", child.id()));
    println!("holder: {row:?}");
    assert!(row.used_bytes >= 1 << 30, "{row:?}");
    assert!(row.name.is_some(), "a visible process is named: {row:?}");
    assert!(!row.outside_pid_namespace);
}

#[test]
#[ignore = "requires an NVIDIA GPU and the PyTorch process scripts/gpu/check.sh starts"]
fn the_torch_process_of_gpu_check_is_listed() {
    let pid: u32 = std::env::var("HMN_LIVE_TORCH_PID")
        .expect("scripts/gpu/check.sh sets HMN_LIVE_TORCH_PID")
        .parse()
        .unwrap();
    let rows: Vec<_> = (0..hypomnesis::device_count().unwrap())
        .flat_map(|i| hypomnesis::gpu_processes(i).unwrap())
        .filter(|e| e.pid == pid)
        .collect();
    println!("torch: {rows:?}");
    let total: u64 = rows.iter().map(|e| e.used_bytes).sum();
    assert!(
        total >= 3 << 30,
        "the 3 GiB tensor plus its context: {rows:?}"
    );
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
            &support::test_name(module_path!(), "nvidia_smi_fallback_matches_nvml"),
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
