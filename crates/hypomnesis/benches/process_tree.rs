//! What one `hmn run` sample pays to find the command's processes and read their resident
//! sets, with 100, 3,000 and 10,000 processes on the host (real `sleep` processes are started to
//! reach each count): the walk through `children` files against the scan of every process's
//! `stat` that it replaced. The walk should stay flat. `cargo bench --bench process_tree`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark code

#[cfg(target_os = "linux")]
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
#[cfg(target_os = "linux")]
use std::process::{Child, Command, Stdio};

#[cfg(target_os = "linux")]
fn host_processes() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count()
}

#[cfg(target_os = "linux")]
fn sleeper() -> Child {
    Command::new("sleep")
        .arg("3600")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

/// One sample as `hmn run` takes it: the tree, then each member's resident set.
#[cfg(target_os = "linux")]
fn sample(tree: &[u32]) -> u64 {
    tree.iter()
        .filter_map(|&p| hypomnesis::process_rss_of(p).ok())
        .sum()
}

#[cfg(target_os = "linux")]
fn tree_cost(c: &mut Criterion) {
    // The measured command: a shell with two children, like `sh -c 'a & b'`.
    let mut command = Command::new("sh")
        .args(["-c", "sleep 3600 & sleep 3600 & exec sleep 3600"])
        .spawn()
        .unwrap();
    let root = command.id();
    let proc = std::path::Path::new("/proc");
    while hypomnesis::process_tree(root).unwrap().len() < 3 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut sleepers: Vec<Child> = Vec::new();
    let mut group = c.benchmark_group("process_tree");
    group.sample_size(10);
    for n in [100_usize, 3_000, 10_000] {
        let have = host_processes();
        sleepers.extend((have..n).map(|_| sleeper()));
        let count = host_processes();
        eprintln!("process_tree: {count} processes on the host (target {n})");
        let walk = hypomnesis::__parsers::tree_by_children(proc, root).expect("children files");
        assert_eq!(walk.len(), 3, "{walk:?}");
        assert_eq!(
            hypomnesis::__parsers::tree_by_scan(proc, root)
                .unwrap()
                .len(),
            3
        );
        group.bench_with_input(BenchmarkId::new("walk", n), &root, |b, &root| {
            b.iter(|| sample(&hypomnesis::TreeWalker::new(root).pids()));
        });
        group.bench_with_input(BenchmarkId::new("scan", n), &root, |b, &root| {
            b.iter(|| sample(&hypomnesis::__parsers::tree_by_scan(proc, root).unwrap()));
        });
    }
    group.finish();
    let below = hypomnesis::process_tree(root).unwrap();
    let _ = Command::new("kill")
        .args(below.iter().map(u32::to_string))
        .status();
    let _ = command.wait();
    for mut s in sleepers {
        let _ = s.kill();
        let _ = s.wait();
    }
}

#[cfg(target_os = "linux")]
criterion_group!(benches, tree_cost);
#[cfg(target_os = "linux")]
criterion_main!(benches);

#[cfg(not(target_os = "linux"))]
fn main() {}
