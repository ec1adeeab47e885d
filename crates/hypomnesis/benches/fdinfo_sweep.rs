//! Cost of the DRM fdinfo sweep over synthetic procfs trees of 100 to 10,000 processes (four
//! ordinary fds each; one in ten also holds an amdgpu render node with realistic fdinfo).
//! The cost per process should stay flat. `cargo bench --bench fdinfo_sweep`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark code

#[cfg(target_os = "linux")]
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[cfg(target_os = "linux")]
const AMDGPU: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t27\nino:\t1073\ndrm-driver:\tamdgpu\ndrm-client-id:\t{ID}\ndrm-pdev:\t0000:03:00.0\npasid:\t32772\ndrm-total-vram:\t524288 KiB\ndrm-shared-vram:\t0\ndrm-active-vram:\t0\ndrm-resident-vram:\t524288 KiB\ndrm-purgeable-vram:\t0\ndrm-total-gtt:\t16384 KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t16384 KiB\ndrm-purgeable-gtt:\t0\ndrm-memory-vram:\t524288 KiB\ndrm-memory-gtt: \t16384 KiB\ndrm-memory-cpu: \t0 KiB\ndrm-engine-gfx:\t1392746000 ns\n";

#[cfg(target_os = "linux")]
/// A procfs-like tree of `n` processes under a temporary directory.
fn synthetic_tree(n: u32) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hmn-sweep-bench-{n}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for pid in 1..=n {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(d.join("fd")).unwrap();
        std::fs::create_dir_all(d.join("fdinfo")).unwrap();
        std::fs::write(d.join("comm"), "worker\n").unwrap();
        for (fd, target) in [
            (0, "/dev/null"),
            (1, "/dev/pts/0"),
            (2, "/dev/pts/0"),
            (3, "socket:[48213]"),
        ] {
            std::os::unix::fs::symlink(target, d.join("fd").join(fd.to_string())).unwrap();
            std::fs::write(
                d.join("fdinfo").join(fd.to_string()),
                "pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t5\n",
            )
            .unwrap();
        }
        if pid % 10 == 0 {
            std::os::unix::fs::symlink("/dev/dri/renderD128", d.join("fd/4")).unwrap();
            std::fs::write(d.join("fdinfo/4"), AMDGPU.replace("{ID}", &pid.to_string())).unwrap();
        }
    }
    root
}

#[cfg(target_os = "linux")]
fn sweep(c: &mut Criterion) {
    let mut group = c.benchmark_group("fdinfo_sweep");
    group.sample_size(10);
    for n in [100_u32, 1_000, 2_000, 10_000] {
        let root = synthetic_tree(n);
        let s = hypomnesis::__parsers::sweep_tree(&root);
        assert_eq!(s.pids, n as usize);
        assert_eq!(
            s.per_slot
                .get("0000:03:00.0")
                .map(std::collections::BTreeMap::len),
            Some((n / 10) as usize)
        );
        group.throughput(Throughput::Elements(u64::from(n)));
        group.bench_with_input(
            BenchmarkId::from_parameter(n),
            &root,
            |b, root: &PathBuf| {
                b.iter(|| hypomnesis::__parsers::sweep_tree(Path::new(root)));
            },
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
    group.finish();
}

#[cfg(target_os = "linux")]
criterion_group!(benches, sweep);
#[cfg(target_os = "linux")]
criterion_main!(benches);

#[cfg(not(target_os = "linux"))]
fn main() {}
