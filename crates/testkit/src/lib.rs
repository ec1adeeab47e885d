#![allow(
    missing_docs,
    clippy::missing_panics_doc,
    clippy::must_use_candidate,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]
//! Helpers for the workspace's integration tests: build and locate the fake `libnvidia-ml` and
//! the fake `nvidia-smi`, find the recorded `nvidia-smi` captures and the fixture trees, write
//! NVML scenario files, and re-run a test binary on one child entry point.
//!
//! Each crate's `tests/tests.rs` brings it in as `support` (`extern crate hypomnesis_testkit as
//! support;`), so every test module reaches it as `support::…`.
//!
//! The fakes are built with a nested `cargo build` into their own target directories under
//! `<target dir>/fake-builds/` (one per variant), so the outer `cargo test` — which holds the lock on
//! the normal target directory while tests run — is never waited on, and variants never
//! overwrite each other. Each test binary builds each variant at most once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Which NVML generation the fake library imitates (decided by which symbols it exports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FakeVariant {
    /// R510 and later: `nvmlDeviceGetMemoryInfo_v2` and `_v3`/`_v2`/v1 process lists
    /// (default features).
    Modern,
    /// R450.66 – R470: no `nvmlDeviceGetMemoryInfo_v2`, no `_v3` process lists, but `_v2` ones
    /// (`--no-default-features --features v2-procs`).
    PreR510,
    /// R450.51: only the v1 process lists and v1 memory info (`--no-default-features`).
    R450,
    /// 535.43–535.86: `_v3` process lists with 32-byte elements, detectable by
    /// `nvmlDeviceGetConfComputeMemSizeInfo` without `nvmlDeviceGetRunningProcessDetailList`
    /// (`--no-default-features --features r535-wide`).
    R535Wide,
}

impl FakeVariant {
    /// Name of the variant's build directory under `<target dir>/fake-builds/`.
    fn dir_name(self) -> &'static str {
        match self {
            Self::Modern => "modern",
            Self::PreR510 => "pre-r510",
            Self::R450 => "r450",
            Self::R535Wide => "r535-wide",
        }
    }

    /// The cargo feature flags selecting the variant.
    fn feature_args(self) -> &'static [&'static str] {
        match self {
            Self::Modern => &[],
            Self::PreR510 => &["--no-default-features", "--features", "v2-procs"],
            Self::R450 => &["--no-default-features"],
            Self::R535Wide => &["--no-default-features", "--features", "r535-wide"],
        }
    }
}

/// Built artefacts, keyed by build-directory name. Holding the lock also serialises builds.
static BUILT: Mutex<Option<HashMap<&'static str, PathBuf>>> = Mutex::new(None);

fn built() -> MutexGuard<'static, Option<HashMap<&'static str, PathBuf>>> {
    BUILT.lock().unwrap_or_else(PoisonError::into_inner)
}

pub mod capture_reader;
pub mod layering;

/// The workspace root (two levels above this crate's manifest directory, `crates/testkit`).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

/// The checked-in fixtures: `crates/testkit/fixtures/<name>` (`nvidia-smi/recorded`, `drm`,
/// `cgroup`; provenance and licence in each folder's README).
pub fn fixtures(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// Cargo's target directory as the running test binary sits in it (`<target>/debug/deps/…`,
/// or `<target>/<triple>/debug/deps/…`): the nearest folder above it that cargo marked with its
/// `CACHEDIR.TAG`, so a `CARGO_TARGET_DIR` or `build.target-dir` is honoured as the scripts
/// honour it (`scripts/lib/common.sh`). `<workspace>/target` when none is found.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| workspace().join("target"))
}

/// `<target dir>/fake-builds/<dir>`: where the fakes are built, by the tests and the scripts
/// alike.
fn fake_build_dir(dir: &str) -> PathBuf {
    target_dir().join("fake-builds").join(dir)
}

/// Runs `cargo build -p <package> <extra> --target-dir <target_dir>` in the workspace and
/// panics with cargo's output if it fails.
fn cargo_build(package: &str, extra: &[&str], target_dir: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&cargo)
        .current_dir(workspace())
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace().join("Cargo.toml"))
        .arg("-p")
        .arg(package)
        .args(extra)
        .arg("--target-dir")
        .arg(target_dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} to build {package}: {e}", cargo.display()));
    assert!(
        output.status.success(),
        "building {package} {extra:?} into {} failed ({}):\n--- stderr ---\n{}\n--- stdout ---\n{}",
        target_dir.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout),
    );
}

/// Copies `from` to `to` unless `to` already has the same bytes. The copy goes to a temporary
/// name first and is renamed over `to`, so a process that has the old library loaded keeps a
/// consistent file.
fn install_copy(from: &Path, to: &Path) {
    let new = std::fs::read(from)
        .unwrap_or_else(|e| panic!("cannot read built artefact {}: {e}", from.display()));
    if std::fs::read(to).is_ok_and(|old| old == new) {
        return;
    }
    let tmp = to.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, &new).unwrap_or_else(|e| panic!("cannot write {}: {e}", tmp.display()));
    if let Err(e) = std::fs::rename(&tmp, to) {
        let _ = std::fs::remove_file(&tmp);
        // Windows refuses to replace a DLL that is loaded; an existing copy is then kept.
        assert!(to.exists(), "cannot install {}: {e}", to.display());
    }
}

/// File name cargo gives the `nvidia_ml` cdylib, and the name loaders look for.
#[cfg(windows)]
const LIB_NAMES: (&str, &str) = ("nvidia_ml.dll", "nvml.dll");
#[cfg(target_os = "macos")]
const LIB_NAMES: (&str, &str) = ("libnvidia_ml.dylib", "libnvidia-ml.dylib");
#[cfg(not(any(windows, target_os = "macos")))]
const LIB_NAMES: (&str, &str) = ("libnvidia_ml.so", "libnvidia-ml.so.1");

/// Builds the fake NVML library for `variant` (once per test binary) and returns the absolute
/// path of a copy named like the real library: `<target dir>/fake-builds/<variant>/
/// libnvidia-ml.so.1` (`nvml.dll` on Windows). Point the loader at it and set
/// `FAKE_NVML_SCENARIO` (see [`write_scenario`]) before the first `nvmlInit`.
///
/// # Panics
/// If cargo cannot be run or the build fails (the message includes cargo's output).
pub fn fake_nvml(variant: FakeVariant) -> PathBuf {
    let key = variant.dir_name();
    let mut cache = built();
    if let Some(path) = cache.as_ref().and_then(|m| m.get(key)) {
        return path.clone();
    }
    let dir = fake_build_dir(key);
    cargo_build("fake-nvml", variant.feature_args(), &dir);
    let (built_name, real_name) = LIB_NAMES;
    let dest = dir.join(real_name);
    install_copy(&dir.join("debug").join(built_name), &dest);
    cache
        .get_or_insert_with(HashMap::new)
        .insert(key, dest.clone());
    dest
}

/// Builds the fake `nvidia-smi` (once per test binary) into `<target dir>/fake-builds/smi`
/// and returns the absolute path of the binary. It answers from the capture named by
/// `FAKE_SMI_CAPTURE` (see [`capture`]), phase `FAKE_SMI_PHASE` (`idle` | `load`, default
/// `load`), misbehaving as `FAKE_SMI_MODE` says (`normal`, `hang`, `garbage`, `exit-fail`,
/// `reject-reserved`, `half-line`, `flood`, `sleep-ms:<n>`).
///
/// # Panics
/// If cargo cannot be run or the build fails (the message includes cargo's output).
pub fn fake_smi() -> PathBuf {
    let key = "smi";
    let mut cache = built();
    if let Some(path) = cache.as_ref().and_then(|m| m.get(key)) {
        return path.clone();
    }
    let dir = fake_build_dir(key);
    cargo_build("fake-nvidia-smi", &[], &dir);
    let exe = dir
        .join("debug")
        .join(format!("nvidia-smi{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.is_file(),
        "built fake nvidia-smi not found at {}",
        exe.display()
    );
    cache
        .get_or_insert_with(HashMap::new)
        .insert(key, exe.clone());
    exe
}

/// Builds example `name` of this crate with `features` (once per test binary) into
/// `<target dir>/fake-builds/examples` and returns the path of its executable.
///
/// # Panics
/// If cargo cannot be run or the build fails (the message includes cargo's output).
pub fn example(name: &'static str, features: &str) -> PathBuf {
    let mut cache = built();
    if let Some(path) = cache.as_ref().and_then(|m| m.get(name)) {
        return path.clone();
    }
    let dir = fake_build_dir("examples");
    cargo_build(
        "hypomnesis",
        &["--example", name, "--features", features],
        &dir,
    );
    let exe = dir
        .join("debug")
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.is_file(),
        "built example not found at {}",
        exe.display()
    );
    cache
        .get_or_insert_with(HashMap::new)
        .insert(name, exe.clone());
    exe
}

/// The directory of recorded `nvidia-smi` captures, checked into the repository:
/// `<workspace>/crates/testkit/fixtures/nvidia-smi/recorded` (provenance and licence in its
/// README).
fn captures_dir() -> PathBuf {
    fixtures("nvidia-smi/recorded")
}

/// Path of the capture file `name` (e.g. `linux-x86_64__nvidia-l40s__595.80.txt`).
///
/// # Panics
/// If the file does not exist.
pub fn capture(name: &str) -> PathBuf {
    let path = captures_dir().join(name);
    assert!(
        path.is_file(),
        "nvidia-smi capture {name:?} not found at {}",
        path.display()
    );
    path
}

/// Every `*.txt` capture, sorted by path.
///
/// # Panics
/// If the captures directory cannot be read.
pub fn all_captures() -> Vec<PathBuf> {
    let dir = captures_dir();
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list captures in {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "txt"))
        .collect();
    out.sort();
    out
}

/// Writes an NVML scenario (JSON) to a new file in the temp directory and returns its path;
/// give it to the fake through `FAKE_NVML_SCENARIO`. Each call makes a new file.
///
/// # Panics
/// If the file cannot be written.
pub fn write_scenario(json: &str) -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "fake-nvml-scenario-{}-{n}.json",
        std::process::id()
    ));
    std::fs::write(&path, json).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// A FIFO at `path` (made with `mkfifo`, replacing nothing): opening it for reading blocks until
/// a writer comes, as reading a D-state process's `cmdline` does.
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(
        made.as_ref().is_ok_and(std::process::ExitStatus::success),
        "mkfifo {}: {made:?}",
        path.display()
    );
}

/// The pids named by the files of `dir` (the fake `nvidia-smi` writes one file a run there,
/// named by its pid, when `FAKE_SMI_PID_DIR` says where).
pub fn pids_in(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether process `pid` runs: it exists and is not a zombie (one whose parent has not reaped
/// it yet has ended). Linux (reads `/proc/<pid>/stat`).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Whether process `pid` still [`running`] after waiting up to `grace` for it to end: killed,
/// a process takes a moment to exit on a loaded machine.
pub fn still_running_after(pid: u32, grace: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + grace;
    while running(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running(pid)
}

/// An empty directory (for `PATH` / `LD_LIBRARY_PATH`, so no real GPU tool or library is found).
pub fn empty_dir() -> PathBuf {
    let d = std::env::temp_dir().join("hmn-empty-path");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `cmd` (this test binary re-run on one ignored child entry point) and asserts that the
/// child passed; returns its stdout and stderr together. `what` names the case in the failure.
pub fn run_child_passing(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{what} failed:\n{text}"
    );
    text
}

/// The name the test harness gives test `name` of the module whose `module_path!()` is `module`
/// (the path without the test crate's own name), for `--exact`.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// This test binary, set to re-run only the ignored `child` entry point of the module whose
/// `module_path!()` is `module` (the scenario child processes: NVML and the roots are
/// process-wide, so each scenario needs its own process).
pub fn child_command(module: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        &test_name(module, "child"),
        "--include-ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    c
}

/// The path of an external tool on PATH; `None` (after saying so) when it is not installed and
/// the tests may skip it, a failure when `HYPOMNESIS_REQUIRE_EXTERNAL=1`.
pub fn external(tool: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "{tool} is not installed, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it (Debian: apt-get install prometheus)"
        );
        eprintln!("skipped: {tool} not installed");
    }
    found
}
