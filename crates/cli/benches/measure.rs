//! Side-by-side costs, one run (ratios matter, not absolute times; `scripts/bench/bench.sh` prints
//! the table). Against the fake NVML (`crates/fake-nvml`), whose calls are nearly free, so what is
//! measured is this crate's own overhead.
//!
//! - `rss`: `process_rss()` vs the cheapest read+parse of `/proc/self/statm` (the floor: a
//!   stack buffer, no allocation) vs the `memory-stats` and `sysinfo` crates.
//! - `device_info`, `snapshot`: the library vs the raw FFI calls it makes (the floor), and vs
//!   loading + initialising NVML on every call (what one peer does). The per-call loads read a
//!   one-GPU, one-process scenario, so the fake does no more work at load than it must.
//! - `gpu_processes`: 1, 100, 1,000 and 10,000 NVML processes.
//! - `process`: `hmn` as a process (fake NVML) vs a stand-in `nvidia-smi` answering the same
//!   question from a capture.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    unsafe_code,
    missing_docs,
    clippy::undocumented_unsafe_blocks,
    clippy::cast_sign_loss,
    clippy::cast_possible_truncation
)] // benchmark code: it calls the fake library directly to measure the floor

#[cfg(target_os = "linux")]
extern crate hypomnesis_testkit as support;

// SAFETY (for every unsafe block below): the symbols are resolved from the fake NVML with the
// prototypes nvml.h declares; every pointer passed is a live local of the right size.
#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{c_char, c_uint, c_void};
    use std::hint::black_box;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use criterion::{BenchmarkId, Criterion};
    use libloading::Library;

    use super::support;

    const MIB: u64 = 1 << 20;

    pub struct Setup {
        pub lib: PathBuf,
        pub smi: PathBuf,
        pub real: bool,
        /// A one-GPU scenario for the process comparison and the per-call loads.
        pub small: PathBuf,
        /// The four-GPU scenario (1 to 10,000 processes) the steady-state benchmarks read.
        pub large: PathBuf,
    }

    /// Build the fakes and point this process (and its children) at them. Runs before any
    /// thread is started.
    pub fn setup() -> Setup {
        if std::env::var_os("HMN_BENCH_REAL").is_some() {
            // scripts/gpu/bench.sh: the real driver's NVML and nvidia-smi.
            return Setup {
                lib: PathBuf::from("libnvidia-ml.so.1"),
                smi: PathBuf::from("nvidia-smi"),
                real: true,
                small: PathBuf::new(),
                large: PathBuf::new(),
            };
        }
        let lib = support::fake_nvml(support::FakeVariant::Modern);
        let smi = support::fake_smi();
        let devices: Vec<String> = [1_u32, 100, 1_000, 10_000]
            .iter()
            .enumerate()
            .map(|(d, &n)| {
                let rows: Vec<String> =
                    (0..n).map(|k| format!(r#"{{"pid": {}, "used": {}}}"#, 4_194_400 + k, MIB)).collect();
                format!(
                    r#"{{"name": "NVIDIA H200", "pci_bus_id": "00000000:{:02X}:00.0", "total": {}, "reserved": {}, "free": {},
                        "compute_processes": [{}]}}"#,
                    d + 1,
                    143_771 * MIB,
                    614 * MIB,
                    110_796 * MIB,
                    rows.join(",")
                )
            })
            .collect();
        let large = support::write_scenario(&format!(r#"{{"devices": [{}]}}"#, devices.join(",")));
        // SAFETY: called first thing in main, before any other thread exists.
        unsafe {
            std::env::set_var("HYPOMNESIS_NVML_LIBRARY", &lib);
            std::env::set_var("FAKE_NVML_SCENARIO", &large);
            std::env::set_var("HYPOMNESIS_SYSFS", support::empty_dir());
            std::env::set_var(
                "FAKE_SMI_CAPTURE",
                support::capture("linux-x86_64__nvidia-l40s__595.80.txt"),
            );
        }
        let small = support::write_scenario(&format!(
            r#"{{"devices": [{{"name": "NVIDIA L40S", "pci_bus_id": "00000000:01:00.0", "total": {}, "reserved": {}, "free": {},
                "compute_processes": [{{"pid": 20037, "used": {}}}, {{"pid": 20038, "used": {}}}]}}]}}"#,
            46_068 * MIB,
            609 * MIB,
            44_225 * MIB,
            538 * MIB,
            681 * MIB
        ));
        Setup {
            lib,
            smi,
            real: false,
            small,
            large,
        }
    }

    #[repr(C)]
    #[derive(Default)]
    struct Memory {
        total: u64,
        free: u64,
        used: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct MemoryV2 {
        version: u32,
        total: u64,
        reserved: u64,
        free: u64,
        used: u64,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct ProcessInfo {
        pid: u32,
        used: u64,
        gi: u32,
        ci: u32,
    }

    type Init = unsafe extern "C" fn() -> u32;
    type Handle = unsafe extern "C" fn(c_uint, *mut *mut c_void) -> u32;
    type Mem = unsafe extern "C" fn(*mut c_void, *mut Memory) -> u32;
    type MemV2 = unsafe extern "C" fn(*mut c_void, *mut MemoryV2) -> u32;
    type Str = unsafe extern "C" fn(*mut c_void, *mut c_char, c_uint) -> u32;
    type Pci = unsafe extern "C" fn(*mut c_void, *mut [u8; 68]) -> u32;
    type Procs = unsafe extern "C" fn(*mut c_void, *mut c_uint, *mut ProcessInfo) -> u32;

    /// The raw calls, resolved once: the floor.
    struct Raw {
        _lib: Library,
        dev: *mut c_void,
        mem: Mem,
        mem2: MemV2,
        name: Str,
        uuid: Str,
        pci: Pci,
        compute: Procs,
        graphics: Procs,
    }

    impl Raw {
        fn open(path: &Path) -> Self {
            unsafe {
                let lib = Library::new(path).unwrap();
                let init: Init = *lib.get(b"nvmlInit_v2\0").unwrap();
                assert_eq!(init(), 0);
                let handle: Handle = *lib.get(b"nvmlDeviceGetHandleByIndex_v2\0").unwrap();
                let mut dev = std::ptr::null_mut();
                assert_eq!(handle(0, &raw mut dev), 0);
                Self {
                    mem: *lib.get(b"nvmlDeviceGetMemoryInfo\0").unwrap(),
                    mem2: *lib.get(b"nvmlDeviceGetMemoryInfo_v2\0").unwrap(),
                    name: *lib.get(b"nvmlDeviceGetName\0").unwrap(),
                    uuid: *lib.get(b"nvmlDeviceGetUUID\0").unwrap(),
                    pci: *lib.get(b"nvmlDeviceGetPciInfo_v3\0").unwrap(),
                    compute: *lib
                        .get(b"nvmlDeviceGetComputeRunningProcesses_v3\0")
                        .unwrap(),
                    graphics: *lib
                        .get(b"nvmlDeviceGetGraphicsRunningProcesses_v3\0")
                        .unwrap(),
                    dev,
                    _lib: lib,
                }
            }
        }

        /// What `device_info` asks NVML for.
        fn device(&self) -> u64 {
            unsafe {
                let mut m = Memory::default();
                (self.mem)(self.dev, &raw mut m);
                let mut m2 = MemoryV2 {
                    version: 0x0200_0028,
                    ..MemoryV2::default()
                };
                (self.mem2)(self.dev, &raw mut m2);
                let mut name = [0 as c_char; 96];
                (self.name)(self.dev, name.as_mut_ptr(), 96);
                let mut uuid = [0 as c_char; 96];
                (self.uuid)(self.dev, uuid.as_mut_ptr(), 96);
                let mut pci = [0_u8; 68];
                (self.pci)(self.dev, &raw mut pci);
                m.total - m.free
                    + m2.reserved
                    + u64::from(name[0] as u8)
                    + u64::from(uuid[0] as u8)
                    + u64::from(pci[0])
            }
        }

        /// What a process list costs: compute and graphics lists into a buffer.
        fn processes(&self) -> usize {
            unsafe {
                let mut buf = [ProcessInfo::default(); 64];
                let mut n: c_uint = 64;
                (self.compute)(self.dev, &raw mut n, buf.as_mut_ptr());
                let mut g: c_uint = 64;
                (self.graphics)(self.dev, &raw mut g, buf.as_mut_ptr());
                n as usize + g as usize
            }
        }
    }

    /// The peer approach: load, initialise, ask, shut down, unload — every call.
    fn load_init_per_call(path: &Path) -> u64 {
        unsafe {
            let lib = Library::new(path).unwrap();
            let init: Init = *lib.get(b"nvmlInit_v2\0").unwrap();
            let shutdown: Init = *lib.get(b"nvmlShutdown\0").unwrap();
            let handle: Handle = *lib.get(b"nvmlDeviceGetHandleByIndex_v2\0").unwrap();
            let mem: Mem = *lib.get(b"nvmlDeviceGetMemoryInfo\0").unwrap();
            init();
            let mut dev = std::ptr::null_mut();
            handle(0, &raw mut dev);
            let mut m = Memory::default();
            mem(dev, &raw mut m);
            shutdown();
            m.total
        }
    }

    /// The cheapest read + parse of the resident pages: one `read` into a stack buffer, the
    /// second field's digits summed in place, no allocation.
    fn statm_floor() -> u64 {
        use std::io::Read;
        let mut buf = [0_u8; 128];
        let n = std::fs::File::open("/proc/self/statm")
            .unwrap()
            .read(&mut buf)
            .unwrap();
        let mut field = 0;
        let mut pages = 0_u64;
        for &b in &buf[..n] {
            if b == b' ' {
                field += 1;
                if field == 2 {
                    break;
                }
            } else if field == 1 {
                pages = pages * 10 + u64::from(b - b'0');
            }
        }
        pages * 4096
    }

    pub fn rss(c: &mut Criterion) {
        let mut g = c.benchmark_group("rss");
        g.bench_function("floor_statm", |b| b.iter(|| black_box(statm_floor())));
        g.bench_function("hypomnesis_process_rss", |b| {
            b.iter(|| black_box(hypomnesis::process_rss().unwrap()));
        });
        g.bench_function("memory_stats", |b| {
            b.iter(|| black_box(memory_stats::memory_stats().unwrap().physical_mem));
        });
        let pid = sysinfo::get_current_pid().unwrap();
        let mut sys = sysinfo::System::new();
        g.bench_function("sysinfo", |b| {
            b.iter(|| {
                sys.refresh_processes_specifics(
                    sysinfo::ProcessesToUpdate::Some(&[pid]),
                    false,
                    sysinfo::ProcessRefreshKind::nothing().with_memory(),
                );
                black_box(sys.process(pid).unwrap().memory())
            });
        });
        g.finish();
    }

    pub fn nvml(c: &mut Criterion, s: &Setup) {
        // First, while nothing else in this process holds the library: load, initialise, query,
        // shut down and unload on every call (so each call really starts NVML). The fake reads
        // its scenario at each load, so it is given the one-GPU, one-process one here.
        if !s.real {
            // SAFETY: criterion runs benchmarks on this thread; no other thread reads the
            // environment meanwhile.
            unsafe { std::env::set_var("FAKE_NVML_SCENARIO", &s.small) };
        }
        let mut g = c.benchmark_group("device_info");
        g.sample_size(20);
        g.bench_function("load_init_per_call", |b| {
            b.iter(|| black_box(load_init_per_call(&s.lib)));
        });
        g.finish();
        if !s.real {
            // SAFETY: as above.
            unsafe { std::env::set_var("FAKE_NVML_SCENARIO", &s.large) };
        }
        // Then warm the library's process-wide state, as a training loop would.
        hypomnesis::device_info(0).unwrap();
        let raw = Raw::open(&s.lib);
        let mut g = c.benchmark_group("device_info");
        g.bench_function("floor_raw_ffi", |b| b.iter(|| black_box(raw.device())));
        g.bench_function("hypomnesis_device_info", |b| {
            b.iter(|| black_box(hypomnesis::device_info(0).unwrap()));
        });
        g.finish();
        let mut g = c.benchmark_group("snapshot");
        g.bench_function("floor_raw_ffi", |b| {
            b.iter(|| black_box(statm_floor() + raw.processes() as u64 + raw.device()));
        });
        g.bench_function("hypomnesis_snapshot_now", |b| {
            b.iter(|| black_box(hypomnesis::Snapshot::now(0).unwrap()));
        });
        g.finish();
        let mut g = c.benchmark_group("gpu_processes");
        g.sample_size(20);
        if s.real {
            g.bench_function("live", |b| {
                b.iter(|| black_box(hypomnesis::gpu_processes(0).unwrap()));
            });
            g.finish();
            return;
        }
        for (d, n) in [(0_u32, 1_u32), (1, 100), (2, 1_000), (3, 10_000)] {
            assert_eq!(hypomnesis::gpu_processes(d).unwrap().len(), n as usize);
            g.bench_with_input(BenchmarkId::from_parameter(n), &d, |b, &d| {
                b.iter(|| black_box(hypomnesis::gpu_processes(d).unwrap()));
            });
        }
        g.finish();
    }

    pub fn processes(c: &mut Criterion, s: &Setup) {
        if s.real {
            return; // a GPU host may have no build tree; compare processes with the fakes here
        }
        let hmn = env!("CARGO_BIN_EXE_hmn");
        let mut g = c.benchmark_group("process");
        g.sample_size(20);
        g.bench_function("hmn_fake_nvml", |b| {
            b.iter(|| {
                let o = Command::new(hmn)
                    .env("FAKE_NVML_SCENARIO", &s.small)
                    .output()
                    .unwrap();
                assert!(o.status.success());
            });
        });
        let query = "--query-gpu=index,uuid,driver_version,pci.bus_id,memory.total,memory.free,memory.reserved,name";
        g.bench_function("stand_in_nvidia_smi", |b| {
            b.iter(|| {
                let o = Command::new(&s.smi)
                    .args([query, "--format=csv,noheader,nounits"])
                    .output()
                    .unwrap();
                assert!(o.status.success());
            });
        });
        g.finish();
    }
}

#[cfg(target_os = "linux")]
fn main() {
    let setup = linux::setup();
    let mut c = criterion::Criterion::default().configure_from_args();
    linux::rss(&mut c);
    linux::nvml(&mut c, &setup);
    linux::processes(&mut c, &setup);
    c.final_summary();
}

#[cfg(not(target_os = "linux"))]
fn main() {}
