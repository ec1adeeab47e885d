//! A GPU node as far as `hmn` reads one, stood in by a private mount namespace (root only):
//! `/proc/devices` (a file bind-mounted over it) names major 1 (`/dev/null`'s, the kernel's
//! memory devices) as NVIDIA's `nvidia-frontend`, the driver's information file (a tmpfs over
//! `/proc/driver`) says GPU 0 has minor 7, and `/dev` (a tmpfs) holds `/dev/nvidia7` as the
//! character device 1:7, which opens as `/dev/full` does. So a process holding `/dev/nvidia7`
//! holds the GPU by its device number, as on a real node, and nothing else on this host does
//! (no other process keeps `/dev/full` open).
//!
//! [`script`] runs shell lines there, with `hmn` against the fake NVML: `$HMN` is hmn, and the
//! fake's scenario is the caller's, whose GPU 0 must have the UUID [`UUID`].

use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, PoisonError};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

/// GPU 0's UUID, which the driver's information file gives.
pub const UUID: &str = "GPU-fa4e0000-0000-4000-8000-000000000000";

/// The exit status of the script when this host cannot stand a node in (no mount).
pub const NO_MOUNT: i32 = 97;

/// The lines that make the mount namespace a GPU node's.
const NODE: &str = r#"set -e
mount --make-rprivate / || exit 97
node=$(mktemp -d)
printf 'Character devices:\n  1 nvidia-frontend\n\nBlock devices:\n  7 loop\n' > "$node/devices"
mount --bind "$node/devices" /proc/devices || exit 97
mount -t tmpfs hmn-driver /proc/driver || exit 97
mkdir -p /proc/driver/nvidia/gpus/0000:01:00.0
printf 'Model: \t NVIDIA H200\nGPU UUID: \t %s\nBus Location: \t 0000:01:00.0\nDevice Minor: \t 7\n' "$UUID" > /proc/driver/nvidia/gpus/0000:01:00.0/information
mount -t tmpfs hmn-dev /dev || exit 97
mknod -m 666 /dev/nvidia7 c 1 7
mknod -m 666 /dev/null c 1 3
"#;

/// Whether this test may stand a node in: root, with util-linux's `unshare`. `false` (after
/// saying so) where it may skip; a failure under `HYPOMNESIS_REQUIRE_EXTERNAL=1`.
pub fn can_stand_in() -> bool {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let unshare = Command::new("unshare")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if root && unshare {
        return true;
    }
    assert!(
        std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
        "a GPU node stand-in needs root and util-linux's unshare, and \
         HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it"
    );
    eprintln!("skipped: not root, or no unshare");
    false
}

/// One node stand-in at a time: each scans every process of the host for holders of 1:7, and
/// would find the others' (the tests of one binary run beside each other).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `lines` on the node stand-in with the fake NVML answering `scenario`; `None` (after
/// saying so) where the mounts cannot be made.
pub fn script(scenario: &str, lines: &str) -> Option<Output> {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let o = Command::new("unshare")
        .args(["--mount", "sh", "-c", &format!("{NODE}{lines}")])
        .env("HMN", env!("CARGO_BIN_EXE_hmn"))
        .env("UUID", UUID)
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if o.status.code() == Some(NO_MOUNT) {
        assert!(
            std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "the node's mounts could not be made: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        eprintln!("skipped: the node's mounts could not be made");
        return None;
    }
    Some(o)
}
