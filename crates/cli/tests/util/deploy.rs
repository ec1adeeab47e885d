#![allow(dead_code)]
//! Helpers of the deploy-kit tests (`deploy::manifests`, `deploy::alerts`): the `deploy/`
//! folder, files and scratch paths, and the one-node scenario they scrape.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};

const MIB: u64 = 1 << 20;

pub fn deploy() -> PathBuf {
    support::workspace().join("deploy")
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A new path in the temp directory, `name` its last part.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("hmn-deploy-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A one-GPU scenario of the fake NVML: an H200 with a reservation, this test process holding
/// 1 GiB on it, and a second GPU that cannot be read.
pub fn scenario() -> String {
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "GPU-11111111-2222-3333-4444-555555555555",
            "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid": {}, "used": {}}}]}},
            {{"name": "Broken", "memory_error": 999}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB,
        std::process::id(),
        1024 * MIB
    )
}
