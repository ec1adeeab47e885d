//! The one way the tests start `hmn`.

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
