//! Where `/proc` and `/sys` are: `HYPOMNESIS_PROCFS` / `HYPOMNESIS_SYSFS`, or
//! [`set_roots`] called before the first measurement (what `hmn --procfs/--sysfs` does). A
//! container that mounts the host's at `/host/proc` and `/host/sys` sees the host's processes
//! and devices through them. Where the node's root filesystem is (for the kubelet's logs under
//! `var/log`): `HYPOMNESIS_ROOTFS`, or [`set_rootfs`] (`hmn --rootfs`), `/` by default, as
//! the Prometheus node exporter's `--path.rootfs`.
//!
//! A root is checked once, when it is first used: it must be an absolute path to an existing
//! directory, whether it comes from the environment or from [`set_roots`]. A bad root from the
//! environment makes every measurement that reads it fail with the same error (naming the
//! variable and what is wrong with it), rather than reading nothing and reporting processes as
//! invisible. A bad rootfs leaves the Kubernetes names of containers unknown (a process's
//! context has no error to carry) and makes [`roots`] and [`crate::host::kube::kubelet_logs`] fail.

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

use crate::{error::HypomnesisError, error::Result, types::Root, types::RootOrigin, types::Roots};

/// One of the roots: its name in messages, its variable and its default.
struct Kind {
    name: &'static str,
    variable: &'static str,
    default: &'static str,
    cell: OnceLock<std::result::Result<Root, String>>,
}

static PROCFS: Kind = Kind {
    name: "procfs",
    variable: "HYPOMNESIS_PROCFS",
    default: "/proc",
    cell: OnceLock::new(),
};
static SYSFS: Kind = Kind {
    name: "sysfs",
    variable: "HYPOMNESIS_SYSFS",
    default: "/sys",
    cell: OnceLock::new(),
};
static ROOTFS: Kind = Kind {
    name: "rootfs",
    variable: "HYPOMNESIS_ROOTFS",
    default: "/",
    cell: OnceLock::new(),
};

/// Why `path` cannot be a root, if it cannot.
fn check(path: &Path) -> Option<&'static str> {
    if !path.is_absolute() {
        Some("is not an absolute path")
    } else if !path.exists() {
        Some("does not exist")
    } else if !path.is_dir() {
        Some("is not a directory")
    } else {
        None
    }
}

impl Kind {
    /// The root from the environment, or the default.
    fn read_env(&self) -> std::result::Result<Root, String> {
        match std::env::var_os(self.variable) {
            Some(v) if !v.is_empty() => {
                let path = PathBuf::from(&v);
                match check(&path) {
                    Some(why) => Err(format!(
                        "{} root {:?} (from {}) {why}; it must be an absolute path to a directory",
                        self.name,
                        v.to_string_lossy(),
                        self.variable
                    )),
                    None => Ok(Root {
                        path,
                        origin: RootOrigin::Environment,
                        variable: self.variable,
                    }),
                }
            }
            _ => Ok(Root {
                path: PathBuf::from(self.default),
                origin: RootOrigin::Default,
                variable: self.variable,
            }),
        }
    }

    fn get(&self) -> &std::result::Result<Root, String> {
        self.cell.get_or_init(|| self.read_env())
    }

    fn path(&'static self) -> Result<&'static Path> {
        match self.get() {
            Ok(root) => Ok(&root.path),
            Err(why) => Err(invalid(why.clone())),
        }
    }

    /// Use `want` (made absolute against the working directory) unless another root is in use.
    fn set(&self, want: &Path) -> Result<()> {
        let path = std::path::absolute(want).unwrap_or_else(|_| want.to_path_buf());
        if let Some(why) = check(&path) {
            return Err(invalid(format!(
                "{} root {} {why}",
                self.name,
                want.display()
            )));
        }
        let got = self.cell.get_or_init(|| {
            Ok(Root {
                path: path.clone(),
                origin: RootOrigin::SetRoots,
                variable: self.variable,
            })
        });
        match got {
            Ok(root) if root.path == path => Ok(()),
            Ok(root) => Err(HypomnesisError::Io(std::io::Error::other(format!(
                "{} root is already {} (set roots before the first measurement)",
                self.name,
                root.path.display()
            )))),
            Err(why) => Err(invalid(why.clone())),
        }
    }
}

fn invalid(message: String) -> HypomnesisError {
    HypomnesisError::Io(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        message,
    ))
}

/// The procfs root in use (default `/proc`).
pub(crate) fn procfs() -> Result<&'static Path> {
    PROCFS.path()
}

/// The sysfs root in use (default `/sys`).
pub(crate) fn sysfs() -> Result<&'static Path> {
    SYSFS.path()
}

/// The root filesystem in use (default `/`): where the kubelet's `var/log` is.
pub(crate) fn rootfs() -> Result<&'static Path> {
    ROOTFS.path()
}

/// Whether the procfs root in use is this system's own `/proc`, where a pid read there names
/// a process that this process can signal (not a host's procfs mounted in a container).
#[must_use]
pub fn procfs_is_own() -> bool {
    procfs().is_ok_and(|p| p == Path::new("/proc"))
}

/// Use `procfs` and `sysfs` (when given) instead of `/proc` and `/sys` and the environment
/// variables. The roots are fixed at their first use, so call this before any measurement. A
/// relative path is taken relative to the working directory.
///
/// # Errors
///
/// [`HypomnesisError::Io`] when a root is not an existing directory, or when a different root
/// is already in use (a measurement ran before this call).
pub fn set_roots(procfs: Option<&Path>, sysfs: Option<&Path>) -> Result<()> {
    if let Some(p) = procfs {
        PROCFS.set(p)?;
    }
    if let Some(s) = sysfs {
        SYSFS.set(s)?;
    }
    Ok(())
}

/// Use `rootfs` instead of `/` and `HYPOMNESIS_ROOTFS` as the node's root filesystem: where
/// the kubelet's logs (`<rootfs>/var/log/pods`, `<rootfs>/var/log/containers`) give a
/// container in a pod its namespace, pod and container names (a host's `/` mounted in a
/// container at `/host`, as the Prometheus node exporter's `--path.rootfs`). Fixed at its first
/// use like the other roots, so call this before any measurement. A relative path is taken
/// relative to the working directory.
///
/// # Errors
///
/// [`HypomnesisError::Io`] when `rootfs` is not an existing directory, or when a different
/// root filesystem is already in use.
pub fn set_rootfs(rootfs: &Path) -> Result<()> {
    ROOTFS.set(rootfs)
}

/// The procfs, sysfs and root filesystem roots in use, and where each came from (the default,
/// the environment, or [`set_roots`] and [`set_rootfs`]). Fixes the roots, as a measurement
/// would.
///
/// # Errors
///
/// [`HypomnesisError::Io`] (kind `InvalidInput`) when `HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS` or
/// `HYPOMNESIS_ROOTFS` is set to a relative path, a missing path or a file; the message names
/// the variable.
pub fn roots() -> Result<Roots> {
    let take = |k: &'static Kind| k.get().clone().map_err(invalid);
    Ok(Roots {
        procfs: take(&PROCFS)?,
        sysfs: take(&SYSFS)?,
        rootfs: take(&ROOTFS)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_makes_a_root() {
        assert_eq!(
            check(Path::new("relative/dir")),
            Some("is not an absolute path")
        );
        assert_eq!(
            check(&std::env::temp_dir().join("hmn-no-such-root")),
            Some("does not exist")
        );
        let file = std::env::current_exe().unwrap_or_default();
        assert_eq!(check(&file), Some("is not a directory"));
        assert_eq!(check(&std::env::temp_dir()), None);
    }
}
