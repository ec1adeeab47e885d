//! How each GPU source fared, and the procfs and sysfs roots in use.

use std::fmt;

use super::GpuQuerySource;

/// How a GPU source fared when asked.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "snake_case", tag = "state", content = "reason")
)]
#[non_exhaustive]
pub enum SourceState {
    /// The source exists and answered.
    Answered,
    /// The source exists but failed; the reason is what it said, ending with the tag of its
    /// kind when it has one (`… [driver not loaded]`, see [`SourceReport::kind`]).
    Failed(String),
    /// The source does not exist on this host (or was not compiled in); the reason says where it
    /// was looked for.
    Absent(String),
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
    /// The built-in default (`/proc`, `/sys`).
    Default,
    /// The environment variable (`HYPOMNESIS_PROCFS`, `HYPOMNESIS_SYSFS`).
    Environment,
    /// [`crate::set_roots`] (`hmn --procfs`, `hmn --sysfs`).
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
    /// The environment variable that sets it (`HYPOMNESIS_PROCFS` or `HYPOMNESIS_SYSFS`).
    pub variable: &'static str,
}

/// The procfs and sysfs roots in use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Roots {
    /// Where `/proc` is.
    pub procfs: Root,
    /// Where `/sys` is.
    pub sysfs: Root,
}

impl SourceReport {
    /// What kind of failure keeps this source from answering (see [`crate::ErrorKind`]):
    /// `None` when it answered, `NotInstalled` when it is not present (`NotBuiltIn` when its
    /// cargo feature is off: the reason starts with the fixed words its one constructor
    /// writes), the failure's kind otherwise (read from the tag at the end of the reason,
    /// `… [no permission]`; `Other` without one).
    #[must_use]
    pub fn kind(&self) -> Option<crate::ErrorKind> {
        match &self.state {
            SourceState::Answered => None,
            SourceState::Absent(why) if why.starts_with(crate::error::NOT_BUILT_IN) => {
                Some(crate::ErrorKind::NotBuiltIn)
            }
            SourceState::Absent(_) => Some(crate::ErrorKind::NotInstalled),
            SourceState::Failed(why) => Some(crate::error::kind_of_message(why)),
        }
    }
}
