//! The one way the tests start `hmn`.
// The tests that take some of these builders are Linux's alone.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::process::{Command, Output};

/// The settings `hmn` reads from its environment; none is inherited from the test's.
const SETTINGS: [&str; 6] = [
    "HYPOMNESIS_NVML_LIBRARY",
    "HYPOMNESIS_NVIDIA_SMI",
    "HYPOMNESIS_NVIDIA_SMI_TIMEOUT",
    "HYPOMNESIS_PROCFS",
    "HYPOMNESIS_SYSFS",
    "HYPOMNESIS_ROOTFS",
];

/// The built `hmn` with none of its settings inherited from the test's environment: a test
/// sets the ones it means (a fake NVML, a procfs, sysfs or rootfs tree) and its own isolation (an empty
/// `PATH` or `LD_LIBRARY_PATH`) on top.
pub fn hmn() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hmn"));
    for name in SETTINGS {
        c.env_remove(name);
    }
    c
}

/// [`hmn`] kept from this machine's GPU sources, as most tests want it: an empty sysfs (no AMD
/// or Intel card), an empty `LD_LIBRARY_PATH` and `PATH` (no NVML, no `nvidia-smi`). A test
/// sets its fake NVML (or takes [`with_fake`]) on top; one whose `hmn` starts commands takes
/// [`isolated_with_path`].
pub fn isolated() -> Command {
    let mut c = hmn();
    c.env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("LD_LIBRARY_PATH", support::empty_dir())
        .env("PATH", support::empty_dir());
    c
}

/// [`isolated`], with the system's `/usr/bin` and `/bin` on `PATH` (for the shells a 0.2.x
/// script's call goes through; no `nvidia-smi` is there on a test machine).
pub fn isolated_with_path() -> Command {
    let mut c = isolated();
    c.env(
        "PATH",
        format!("/usr/bin:/bin:{}", support::empty_dir().display()),
    );
    c
}

/// [`isolated`], with the test's own `PATH`: for `hmn run` and `watch`, whose commands
/// (`python3`, `sh`) are found there.
pub fn isolated_with_test_path() -> Command {
    let mut c = isolated();
    c.env("PATH", std::env::var_os("PATH").unwrap_or_default());
    c
}

/// [`isolated`], its NVML the fake one (the modern driver's) answering `scenario`, a JSON
/// scenario.
pub fn with_fake(scenario: &str) -> Command {
    let mut c = isolated();
    c.env(
        "HYPOMNESIS_NVML_LIBRARY",
        support::fake_nvml(support::FakeVariant::Modern),
    )
    .env("FAKE_NVML_SCENARIO", support::write_scenario(scenario));
    c
}

/// Runs `c` with `args`: its exit code (-1 when a signal ended it), stdout and stderr, both
/// UTF-8, and no panic said on stderr.
pub fn run(mut c: Command, args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.args(args).output().unwrap();
    let (o, e) = (
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    );
    assert!(!e.contains("panicked"), "hmn panicked: {e}");
    (status.code().unwrap_or(-1), o, e)
}
