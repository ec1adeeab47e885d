//! Where `/proc` and `/sys` are: `HYPOMNESIS_PROCFS` / `HYPOMNESIS_SYSFS`, or
//! [`set_roots`] called before the first measurement (what `hmn --procfs/--sysfs` does). A
//! container that mounts the host's at `/host/proc` and `/host/sys` sees the host's processes
//! and devices through them.

// Which readers a build uses depends on its platform and features.
#![cfg_attr(
    not(all(
        target_os = "linux",
        feature = "nvml",
        feature = "nvidia-smi-fallback",
        feature = "drm"
    )),
    allow(dead_code)
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{HypomnesisError, Result};

static PROCFS: OnceLock<PathBuf> = OnceLock::new();
static SYSFS: OnceLock<PathBuf> = OnceLock::new();

fn from_env(var: &str, default: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(default),
    }
}

/// The procfs root in use (default `/proc`).
pub(crate) fn procfs() -> &'static Path {
    PROCFS.get_or_init(|| from_env("HYPOMNESIS_PROCFS", "/proc"))
}

/// The sysfs root in use (default `/sys`).
pub(crate) fn sysfs() -> &'static Path {
    SYSFS.get_or_init(|| from_env("HYPOMNESIS_SYSFS", "/sys"))
}

/// Whether the procfs root is this process's own `/proc`.
pub(crate) fn procfs_is_own() -> bool {
    procfs() == Path::new("/proc")
}

/// Use `procfs` and `sysfs` (when given) instead of `/proc` and `/sys` and the environment
/// variables. The roots are fixed at their first use, so call this before any measurement.
///
/// # Errors
///
/// [`HypomnesisError::Io`] when a root is not a directory, or when a different root is already
/// in use (a measurement ran before this call).
pub fn set_roots(procfs: Option<&Path>, sysfs: Option<&Path>) -> Result<()> {
    for (cell, want, name) in [(&PROCFS, procfs, "procfs"), (&SYSFS, sysfs, "sysfs")] {
        let Some(want) = want else { continue };
        if !want.is_dir() {
            return Err(HypomnesisError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{name} root {} is not a directory", want.display()),
            )));
        }
        let got = cell.get_or_init(|| want.to_path_buf());
        if got != want {
            return Err(HypomnesisError::Io(std::io::Error::other(format!(
                "{name} root is already {} (set roots before the first measurement)",
                got.display()
            ))));
        }
    }
    Ok(())
}
