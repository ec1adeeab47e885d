//! How each GPU source fared, the procfs, sysfs and root filesystem roots in use, and whether
//! the kubelet's log layout is readable there.

use std::fmt;

use super::GpuQuerySource;

/// How a GPU source fared when asked.
///
/// In JSON: `{"state": "answered"}`, or `{"state": "failed" | "absent", "reason": "…",
/// "kind": "no_permission"}` (the kind's name, see [`crate::error::ErrorKind::as_str`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceState {
    /// The source exists and answered.
    Answered,
    /// The source exists but failed: what it said, and the kind of failure.
    Failed(crate::error::Failure),
    /// The source does not exist on this host (kind `NotInstalled`), or was not compiled in
    /// (kind `NotBuiltIn`); the reason says where it was looked for.
    Absent(crate::error::Failure),
}

#[cfg(feature = "serde")]
impl serde::Serialize for SourceState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (state, failure) = match self {
            Self::Answered => ("answered", None),
            Self::Failed(f) => ("failed", Some(f)),
            Self::Absent(f) => ("absent", Some(f)),
        };
        let mut m = s.serialize_map(Some(if failure.is_some() { 3 } else { 1 }))?;
        m.serialize_entry("state", state)?;
        if let Some(f) = failure {
            m.serialize_entry("reason", &f.message)?;
            m.serialize_entry("kind", &f.kind)?;
        }
        m.end()
    }
}

impl SourceState {
    /// A source that failed with `kind`, saying `message`.
    #[must_use]
    pub fn failed(kind: crate::error::ErrorKind, message: impl Into<String>) -> Self {
        Self::Failed(crate::error::Failure::new(kind, message))
    }

    /// A source that is not here (`NotInstalled`) or not built in (`NotBuiltIn`), saying where
    /// it was looked for.
    #[must_use]
    pub fn absent(kind: crate::error::ErrorKind, message: impl Into<String>) -> Self {
        Self::Absent(crate::error::Failure::new(kind, message))
    }

    /// Why the source did not answer; `None` when it did.
    #[must_use]
    pub fn failure(&self) -> Option<&crate::error::Failure> {
        match self {
            Self::Answered => None,
            Self::Failed(f) | Self::Absent(f) => Some(f),
        }
    }
}

/// One GPU source, whether it answered, and what it said about itself (library path, driver and
/// library versions, optional features…). What `hmn doctor` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SourceReport {
    /// The source.
    pub source: GpuQuerySource,
    /// Answered, failed (why), or absent (why).
    pub state: SourceState,
    /// Facts the source gave, as (label, value) pairs in a stable order.
    pub details: Vec<(String, String)>,
    /// Process rows the source left out of its latest lists (no memory figure, pid 0, more
    /// memory than the device has), summed over the devices.
    pub dropped_process_rows: u64,
}

/// Where a root in use came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum RootOrigin {
    /// The built-in default (`/proc`, `/sys`, `/`).
    Default,
    /// The environment variable (`HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS`, `HYPOMNESIS_ROOTFS`).
    Environment,
    /// [`crate::host::roots::set_roots`] or [`crate::host::roots::set_rootfs`] (`hmn --procfs`, `--sysfs`, `--rootfs`).
    SetRoots,
}

impl fmt::Display for RootOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Default => "default",
            Self::Environment => "environment",
            Self::SetRoots => "set_roots",
        })
    }
}

/// One root in use: its path and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Root {
    /// The directory (absolute).
    pub path: std::path::PathBuf,
    /// Where the path came from.
    pub origin: RootOrigin,
    /// The environment variable that sets it (`HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS` or
    /// `HYPOMNESIS_ROOTFS`).
    pub variable: &'static str,
}

/// The procfs, sysfs and root filesystem roots in use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Roots {
    /// Where `/proc` is.
    pub procfs: Root,
    /// Where `/sys` is.
    pub sysfs: Root,
    /// Where the node's root filesystem is (`/`, or a host's mounted at e.g. `/host`): where
    /// the kubelet's logs (`var/log/pods`, `var/log/containers`) name the pods and containers.
    pub rootfs: Root,
}

/// Whether the kubelet's log layout can be read under the rootfs in use: what gives a
/// [`crate::host::process::context::Container`] in a pod its namespace, pod and container names
/// ([`crate::host::kube::kubelet_logs`], `hmn doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct KubeletLogs {
    /// `<rootfs>/var/log/pods`: a directory `<namespace>_<pod>_<uid>` per pod.
    pub pods_dir: std::path::PathBuf,
    /// What listing it found.
    pub pods: KubeletDirState,
    /// `<rootfs>/var/log/containers`: a link `<pod>_<namespace>_<container>-<id>.log` per
    /// container.
    pub containers_dir: std::path::PathBuf,
    /// What listing it found.
    pub containers: KubeletDirState,
}

/// What listing one of the kubelet's log directories found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "state"))]
#[non_exhaustive]
pub enum KubeletDirState {
    /// It was listed.
    Found {
        /// Entries named as the kubelet names them (a pod, or a container).
        entries: usize,
        /// Other entries, left out (not of the kubelet's form, or not UTF-8).
        skipped: usize,
        /// `false` when the listing stopped at its limit of entries or time before the end.
        complete: bool,
    },
    /// It does not exist: no kubelet on this node, or the node's root filesystem is not
    /// mounted at the rootfs in use.
    Missing,
    /// This user may not list it.
    PermissionDenied,
    /// It could not be listed for another reason (it is a file, an I/O error).
    Failed {
        /// What the system said.
        reason: String,
    },
}

impl SourceReport {
    /// What kind of failure keeps this source from answering (see [`crate::error::ErrorKind`]):
    /// `None` when it answered, `NotInstalled` when it is not present (`NotBuiltIn` when its
    /// cargo feature is off), the failure's kind otherwise.
    #[must_use]
    pub fn kind(&self) -> Option<crate::error::ErrorKind> {
        match &self.state {
            SourceState::Answered => None,
            SourceState::Failed(f) | SourceState::Absent(f) => Some(f.kind),
        }
    }
}
