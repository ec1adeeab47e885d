//! The one way the tests start `hmn`.

use std::process::Command;

/// The settings `hmn` reads from its environment; none is inherited from the test's.
const SETTINGS: [&str; 5] = [
    "HYPOMNESIS_NVML_LIBRARY",
    "HYPOMNESIS_NVIDIA_SMI",
    "HYPOMNESIS_NVIDIA_SMI_TIMEOUT",
    "HYPOMNESIS_PROCFS",
    "HYPOMNESIS_SYSFS",
];

/// The built `hmn` with none of its settings inherited from the test's environment: a test
/// sets the ones it means (a fake NVML, a procfs or sysfs tree) and its own isolation (an empty
/// `PATH` or `LD_LIBRARY_PATH`) on top.
pub fn hmn() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hmn"));
    for name in SETTINGS {
        c.env_remove(name);
    }
    c
}
