//! The one error type of the crate.

/// Everything that can go wrong while measuring.
///
/// Every variant carries the reason the source gave (library path tried, NVML return-code name,
/// `nvidia-smi` exit status and stderr, the file that could not be parsed…): nothing is dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HypomnesisError {
    /// The process's resident set could not be read or made sense of.
    #[error("RAM measurement failed: {}", shown(.0))]
    Ram(String),
    /// NVML could not be loaded, initialised, or answered a query with an error.
    #[error("NVML: {}", shown(.0))]
    Nvml(String),
    /// DXGI (Windows) failed.
    #[error("DXGI: {}", shown(.0))]
    Dxgi(String),
    /// PDH performance counters (Windows) failed.
    #[error("PDH: {}", shown(.0))]
    Pdh(String),
    /// A Linux DRM source (sysfs device files, DRM fdinfo) failed or lacks a figure.
    #[error("DRM: {}", shown(.0))]
    Drm(String),
    /// The `nvidia-smi` fallback could not be run, timed out, or printed something unusable.
    #[error("nvidia-smi: {}", shown(.0))]
    NvidiaSmi(String),
    /// Apple's Metal / libSystem sources (macOS) failed.
    #[error("Metal: {}", shown(.0))]
    Metal(String),
    /// What was asked is not measurable on this platform (spill outside Windows, for instance);
    /// the message says what and where.
    #[error("not measurable here: {}", shown(.0))]
    Unsupported(String),
    /// A device index at or past the number of devices.
    #[error("GPU index {index} is out of range: {count} device(s) present")]
    DeviceIndexOutOfRange {
        /// The index that was asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// There is no GPU to measure here: no GPU source exists on this host (no NVML library,
    /// no `nvidia-smi`, …), or the ones that exist find no GPU (the NVIDIA driver is not
    /// loaded, `NVML_ERROR_GPU_NOT_FOUND`). [`crate::gpu::sources`] (and `hmn doctor`) tell where
    /// each one was looked for and what it said.
    #[error(
        "no GPU source is available on this host (no GPU library or tool was found, or none sees a GPU: the driver may not be loaded; `hmn doctor` says which)"
    )]
    NoGpuSource,
    /// The process table was enumerated but no process other than the caller's could be read
    /// (macOS: a sandbox, or a user who may read only their own processes), so no list of who
    /// holds GPU memory can be given. Returned by [`crate::gpu::gpu_processes`] and
    /// [`crate::gpu::gpu_process_listing`] alone (device figures report it as their source's
    /// error); its kind is [`ErrorKind::NoPermission`].
    #[error(
        "the system refused to list the processes holding GPU memory: {denied} process(es) could not be read"
    )]
    ProcessListDenied {
        /// How many of the listed processes could not be read.
        denied: u32,
    },
    /// An operating-system I/O call failed; the message names the path involved. One of kind
    /// `InvalidInput` is a setting that cannot be used (a root that is not an absolute
    /// directory), said as a bad setting.
    #[error("{}: {}", io_heading(.0), .0)]
    Io(#[from] std::io::Error),
}

/// How an I/O error is introduced: a bad setting (`InvalidInput`), else an I/O error.
fn io_heading(e: &std::io::Error) -> &'static str {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        "bad setting"
    } else {
        "I/O error"
    }
}

/// `Result` with [`HypomnesisError`].
pub type Result<T> = std::result::Result<T, HypomnesisError>;

/// What kind of failure an error (or a failed source, or a refused figure) is: what a program
/// reacts to (advice, a retry, an alert) without reading the message, which is for people and
/// may be reworded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum ErrorKind {
    /// The GPU driver's kernel module is not loaded (`NVML_ERROR_DRIVER_NOT_LOADED`).
    DriverNotLoaded,
    /// The driver's user-space library and the loaded kernel module differ in version, as after
    /// an upgrade without a reboot (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`).
    DriverVersionMismatch,
    /// This user or container may not read it (`NVML_ERROR_NO_PERMISSION`, nvidia-smi's
    /// `[Insufficient Permissions]`, an unreadable file).
    NoPermission,
    /// The GPU fell off the bus or needs a reset (`NVML_ERROR_GPU_IS_LOST`,
    /// `NVML_ERROR_RESET_REQUIRED`).
    GpuLost,
    /// This GPU, driver or platform does not provide it (`NVML_ERROR_NOT_SUPPORTED`).
    NotSupported,
    /// A tool did not finish within its time limit and was killed.
    TimedOut,
    /// A tool that timed out a moment ago is not run again yet.
    Paused,
    /// A setting is wrong: an environment variable or a root directory.
    BadSetting,
    /// The library, tool or file is not there.
    NotInstalled,
    /// The source is not compiled into this build (its cargo feature is off).
    NotBuiltIn,
    /// A device index past the last device, or a UUID no device has.
    NoSuchDevice,
    /// The source answered something that makes no sense (impossible figures, unparsable
    /// output).
    BadAnswer,
    /// Anything else.
    Other,
}

/// The tag a constructor writes at the end of a message for each kind (`… [no permission]`):
/// the one table that maps the fixed tags to kinds. `Other` has no tag. A message keeps its tag
/// wherever it goes (a source's failure, a MIG instance's unreadable reason, JSON), so the kind
/// is read back from the tag alone, never guessed from the wording.
const TAGS: &[(ErrorKind, &str)] = &[
    (ErrorKind::DriverNotLoaded, "driver not loaded"),
    (ErrorKind::DriverVersionMismatch, "driver version mismatch"),
    (ErrorKind::NoPermission, "no permission"),
    (ErrorKind::GpuLost, "GPU lost"),
    (ErrorKind::NotSupported, "not supported"),
    (ErrorKind::TimedOut, "timed out"),
    (ErrorKind::Paused, "paused"),
    (ErrorKind::BadSetting, "bad setting"),
    (ErrorKind::NotInstalled, "not installed"),
    (ErrorKind::NotBuiltIn, "not built in"),
    (ErrorKind::NoSuchDevice, "no such device"),
    (ErrorKind::BadAnswer, "bad answer"),
];

impl ErrorKind {
    /// Every kind, `Other` last (the round-trip test builds each).
    #[cfg(test)]
    pub(crate) const ALL: [Self; 13] = [
        Self::DriverNotLoaded,
        Self::DriverVersionMismatch,
        Self::NoPermission,
        Self::GpuLost,
        Self::NotSupported,
        Self::TimedOut,
        Self::Paused,
        Self::BadSetting,
        Self::NotInstalled,
        Self::NotBuiltIn,
        Self::NoSuchDevice,
        Self::BadAnswer,
        Self::Other,
    ];

    /// The tag of this kind in a message; `None` for `Other`.
    fn tag(self) -> Option<&'static str> {
        TAGS.iter().find(|(k, _)| *k == self).map(|(_, t)| *t)
    }
}

/// The words every message of a timed-out tool run carries (the runner writes them).
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) const TIMED_OUT: &str = "did not finish within";
/// The words every message of a run skipped after a timeout carries.
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) const PAUSED: &str = "not run again";
/// The words that start the reason of a source that is not compiled into this build: the fixed
/// tag of a source's absence (an absence is otherwise "not installed").
pub(crate) const NOT_BUILT_IN: &str = "not compiled in";
/// The words of figures that cannot be (free above total, a process holding more than its
/// device).
#[cfg_attr(not(any(feature = "nvml", feature = "drm")), allow(dead_code))]
pub(crate) const IMPOSSIBLE: &str = "impossible figures";
/// The words of a device whose driver does not publish its memory where this crate can read it.
#[cfg_attr(not(all(target_os = "linux", feature = "drm")), allow(dead_code))]
pub(crate) const NO_MEMORY_FIGURES: &str = "publishes no memory figures";
/// The words of a GPU index that nvidia-smi's list skips (the GPU fell off the bus).
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) const SMI_GPU_MISSING: &str = "is missing from nvidia-smi's list";

/// `text` with the tag of `kind` at its end (unchanged for `Other`): how every message of this
/// crate that becomes an error, a source's failure or an unreadable reason is made.
pub(crate) fn tagged(kind: ErrorKind, text: impl Into<String>) -> String {
    let text = text.into();
    match kind.tag() {
        Some(tag) => format!("{text} [{tag}]"),
        None => text,
    }
}

/// Whole messages that are a source's own fixed token for a kind: `nvidia-smi` prints
/// `[Insufficient Permissions]` in place of a figure this user may not read, and that token is
/// kept as the reason (without the brackets); NVML's return-code names are kept as the reason
/// of a MIG instance's or GPU's figures, and are what an NVML failure's kind is decided by.
const TOKENS: &[(&str, ErrorKind)] = &[
    ("Insufficient Permissions", ErrorKind::NoPermission),
    ("NVML_ERROR_DRIVER_NOT_LOADED", ErrorKind::DriverNotLoaded),
    (
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        ErrorKind::DriverVersionMismatch,
    ),
    ("NVML_ERROR_NO_PERMISSION", ErrorKind::NoPermission),
    ("NVML_ERROR_GPU_IS_LOST", ErrorKind::GpuLost),
    ("NVML_ERROR_RESET_REQUIRED", ErrorKind::GpuLost),
    ("NVML_ERROR_NOT_SUPPORTED", ErrorKind::NotSupported),
    ("NVML_ERROR_LIBRARY_NOT_FOUND", ErrorKind::NotInstalled),
    ("NVML_ERROR_NOT_FOUND", ErrorKind::NoSuchDevice),
    ("NVML_ERROR_TIMEOUT", ErrorKind::TimedOut),
];

/// A reason kept for later (a source's setup, a load that failed) with the kind decided where
/// it was made.
#[cfg_attr(
    not(any(
        feature = "nvml",
        feature = "nvidia-smi-fallback",
        all(target_os = "linux", feature = "drm")
    )),
    allow(dead_code)
)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reason {
    pub(crate) kind: ErrorKind,
    pub(crate) text: String,
}

#[cfg_attr(
    not(any(
        feature = "nvml",
        feature = "nvidia-smi-fallback",
        all(target_os = "linux", feature = "drm")
    )),
    allow(dead_code)
)]
impl Reason {
    pub(crate) fn new(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self {
            kind,
            text: text.into(),
        }
    }

    /// The text with its kind's tag (see [`tagged`]).
    pub(crate) fn tagged(&self) -> String {
        tagged(self.kind, self.text.clone())
    }
}

/// A message as people read it: without the tag (the kind is said in other ways: `hmn`'s advice,
/// `error_kind` in JSON).
fn shown(message: &str) -> &str {
    split_tag(message).0
}

/// A message split into its text and the kind its tag names (`Other` without a known tag).
fn split_tag(message: &str) -> (&str, ErrorKind) {
    if let Some((_, kind)) = TOKENS.iter().find(|(t, _)| *t == message) {
        return (message, *kind);
    }
    message
        .strip_suffix(']')
        .and_then(|m| m.rsplit_once(" ["))
        .and_then(|(text, tag)| {
            TAGS.iter()
                .find(|(_, t)| *t == tag)
                .map(|(kind, _)| (text, *kind))
        })
        .unwrap_or((message, ErrorKind::Other))
}

/// The kind of a message made by [`tagged`]: read from its tag alone.
pub(crate) fn kind_of_message(message: &str) -> ErrorKind {
    split_tag(message).1
}

/// The same message with `note` added to its text, the tag kept at the end.
fn add_note(message: &str, note: &str) -> String {
    let (text, kind) = split_tag(message);
    tagged(kind, format!("{text}; {note}"))
}

impl HypomnesisError {
    /// What kind of failure this is (see [`ErrorKind`]), for programs that react to it.
    ///
    /// Index and source errors are classified by their variant, I/O errors by their
    /// `std::io::ErrorKind`, and the sources' own errors by the tag their constructor wrote at
    /// the end of the message (`… [no permission]`; none for `Other`).
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::DeviceIndexOutOfRange { .. } => ErrorKind::NoSuchDevice,
            Self::NoGpuSource => ErrorKind::NotInstalled,
            Self::Unsupported(_) => ErrorKind::NotSupported,
            Self::ProcessListDenied { .. } => ErrorKind::NoPermission,
            Self::Io(e) => match e.kind() {
                std::io::ErrorKind::InvalidInput => ErrorKind::BadSetting,
                std::io::ErrorKind::NotFound => ErrorKind::NotInstalled,
                std::io::ErrorKind::PermissionDenied => ErrorKind::NoPermission,
                std::io::ErrorKind::TimedOut => ErrorKind::TimedOut,
                _ => ErrorKind::Other,
            },
            Self::Ram(m)
            | Self::Nvml(m)
            | Self::Dxgi(m)
            | Self::Pdh(m)
            | Self::Drm(m)
            | Self::NvidiaSmi(m)
            | Self::Metal(m) => kind_of_message(m),
        }
    }

    /// The error as text that keeps its kind's tag (`Display` leaves the tag out), for a reason
    /// stored as text: a source's failure, a MIG instance's unreadable figures.
    #[cfg_attr(
        not(any(
            feature = "nvml",
            feature = "nvidia-smi-fallback",
            feature = "drm",
            feature = "metal"
        )),
        allow(dead_code)
    )]
    pub(crate) fn tagged_text(&self) -> String {
        tagged(self.kind(), self.to_string())
    }

    /// The same error with `note` appended to its message (e.g. what a fallback source said),
    /// its kind unchanged.
    #[must_use]
    pub(crate) fn with_note(self, note: &str) -> Self {
        match self {
            Self::Io(e) => Self::Io(std::io::Error::new(e.kind(), format!("{e}; {note}"))),
            other => other.map_message(|m| add_note(&m, note)),
        }
    }

    /// The error of the source asked first with what the fallbacks said after it: their
    /// messages as a note, and the kind of the first one that has one when this error's own is
    /// `Other` (a library that could not load, then an `nvidia-smi` paused after a timeout:
    /// paused).
    #[must_use]
    pub(crate) fn with_fallback_notes(self, notes: &[(ErrorKind, String)]) -> Self {
        let said: Vec<&str> = notes.iter().map(|(_, t)| t.as_str()).collect();
        let own = self.kind();
        let combined = self.with_note(&said.join("; "));
        if own != ErrorKind::Other {
            return combined;
        }
        match notes
            .iter()
            .map(|(k, _)| *k)
            .find(|k| *k != ErrorKind::Other)
        {
            Some(kind) => combined.map_message(|m| tagged(kind, split_tag(&m).0)),
            None => combined,
        }
    }

    /// The same variant with its message replaced by `f(message)` (the variants without one
    /// unchanged).
    fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::Ram(s) => Self::Ram(f(s)),
            Self::Nvml(s) => Self::Nvml(f(s)),
            Self::Dxgi(s) => Self::Dxgi(f(s)),
            Self::Pdh(s) => Self::Pdh(f(s)),
            Self::NvidiaSmi(s) => Self::NvidiaSmi(f(s)),
            Self::Drm(s) => Self::Drm(f(s)),
            Self::Metal(s) => Self::Metal(f(s)),
            Self::Unsupported(s) => Self::Unsupported(f(s)),
            other => other,
        }
    }

    /// An error of `source` of `kind`: the constructor every GPU source's error goes through.
    pub(crate) fn of_source(
        source: crate::types::GpuQuerySource,
        kind: ErrorKind,
        text: impl Into<String>,
    ) -> Self {
        use crate::types::GpuQuerySource as S;
        let m = tagged(kind, text);
        match source {
            S::Nvml => Self::Nvml(m),
            S::NvidiaSmi => Self::NvidiaSmi(m),
            S::Dxgi => Self::Dxgi(m),
            S::Pdh => Self::Pdh(m),
            S::Metal => Self::Metal(m),
            S::Drm => Self::Drm(m),
        }
    }

    /// An NVML error of `kind`.
    #[cfg_attr(not(feature = "nvml"), allow(dead_code))]
    pub(crate) fn nvml(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::Nvml, kind, text)
    }

    /// An `nvidia-smi` error of `kind`.
    #[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
    pub(crate) fn nvidia_smi(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::NvidiaSmi, kind, text)
    }

    /// A DRM (sysfs, fdinfo) error of `kind`.
    #[cfg_attr(not(all(target_os = "linux", feature = "drm")), allow(dead_code))]
    pub(crate) fn drm(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::Drm, kind, text)
    }

    /// A DXGI error of `kind`.
    #[cfg_attr(not(all(windows, feature = "dxgi")), allow(dead_code))]
    pub(crate) fn dxgi(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::Dxgi, kind, text)
    }

    /// A PDH error of `kind`.
    #[cfg_attr(not(all(windows, feature = "pdh")), allow(dead_code))]
    pub(crate) fn pdh(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::Pdh, kind, text)
    }

    /// A Metal error of `kind`.
    #[cfg_attr(not(all(target_os = "macos", feature = "metal")), allow(dead_code))]
    pub(crate) fn metal(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::of_source(crate::types::GpuQuerySource::Metal, kind, text)
    }

    /// A RAM measurement error of `kind`.
    pub(crate) fn ram(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Ram(tagged(kind, text))
    }

    /// Something not measurable here (its kind is the variant's: `NotSupported`).
    #[cfg_attr(all(windows, feature = "pdh"), allow(dead_code))]
    pub(crate) fn unsupported(text: impl Into<String>) -> Self {
        Self::Unsupported(text.into())
    }
}

/// Build an `Io` error whose message names the path that failed.
#[cfg(target_os = "linux")]
pub(crate) fn io_at(path: &std::path::Path, err: &std::io::Error) -> HypomnesisError {
    HypomnesisError::Io(std::io::Error::new(
        err.kind(),
        format!("{}: {err}", path.display()),
    ))
}

/// At most 60 characters of `s`, for error messages about hostile input.
pub(crate) fn clip(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => s.get(..i).unwrap_or(s),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_and_names_reasons() {
        assert_send_sync::<HypomnesisError>();
        assert!(
            HypomnesisError::NoGpuSource
                .to_string()
                .contains("hmn doctor")
        );
        let e = HypomnesisError::DeviceIndexOutOfRange { index: 3, count: 2 };
        assert_eq!(
            e.to_string(),
            "GPU index 3 is out of range: 2 device(s) present"
        );
        #[cfg(target_os = "linux")]
        let io = io_at(
            std::path::Path::new("/proc/self/statm"),
            &std::io::Error::from(std::io::ErrorKind::NotFound),
        );
        #[cfg(target_os = "linux")]
        assert!(io.to_string().contains("/proc/self/statm"), "{io}");
    }

    /// Every kind, through every constructor, comes back from the error; through a note added
    /// later; through the message alone (a source's failure, a MIG reason); and the kinds that
    /// are the variant's own.
    #[test]
    fn every_kind_made_by_a_constructor_comes_back() {
        use crate::types::GpuQuerySource as S;
        let sources = [S::Nvml, S::NvidiaSmi, S::Dxgi, S::Pdh, S::Metal, S::Drm];
        for kind in ErrorKind::ALL {
            let mut made: Vec<HypomnesisError> = sources
                .iter()
                .map(|s| HypomnesisError::of_source(*s, kind, "nvmlX failed: something"))
                .collect();
            made.push(HypomnesisError::nvml(kind, "a"));
            made.push(HypomnesisError::nvidia_smi(kind, "b"));
            made.push(HypomnesisError::drm(kind, "c"));
            made.push(HypomnesisError::dxgi(kind, "d"));
            made.push(HypomnesisError::pdh(kind, "e"));
            made.push(HypomnesisError::metal(kind, "f"));
            made.push(HypomnesisError::ram(kind, "g"));
            for e in made {
                assert_eq!(e.kind(), kind, "{e}");
                let noted = e.with_note("and the fallback said [sic]; no");
                assert_eq!(noted.kind(), kind, "{noted}");
                assert!(
                    noted
                        .to_string()
                        .contains("and the fallback said [sic]; no")
                );
                // The message alone, as a failed source or a MIG reason keeps it.
                let message = match &noted {
                    HypomnesisError::Nvml(m)
                    | HypomnesisError::NvidiaSmi(m)
                    | HypomnesisError::Dxgi(m)
                    | HypomnesisError::Pdh(m)
                    | HypomnesisError::Metal(m)
                    | HypomnesisError::Drm(m)
                    | HypomnesisError::Ram(m) => m.clone(),
                    other => panic!("a constructor made {other:?}"),
                };
                assert_eq!(kind_of_message(&message), kind, "{message}");
                // As people read it: no tag; as a reason stored as text: the tag kept.
                let shown = noted.to_string();
                assert!(!shown.ends_with(']'), "{shown}");
                assert_eq!(kind_of_message(&noted.tagged_text()), kind, "{noted}");
            }
            let kept = Reason::new(kind, "kept for later");
            assert_eq!(kind_of_message(&kept.tagged()), kind);
        }
        // Every kind but `Other` has a tag, and no two share one.
        let tags: Vec<_> = ErrorKind::ALL.iter().filter_map(|k| k.tag()).collect();
        assert_eq!(tags.len(), ErrorKind::ALL.len() - 1);
        let mut unique = tags.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), tags.len());
        assert_eq!(
            HypomnesisError::unsupported("x").kind(),
            ErrorKind::NotSupported
        );
        assert_eq!(
            HypomnesisError::DeviceIndexOutOfRange { index: 1, count: 1 }.kind(),
            ErrorKind::NoSuchDevice
        );
        assert_eq!(HypomnesisError::NoGpuSource.kind(), ErrorKind::NotInstalled);
        let io = |k| HypomnesisError::Io(std::io::Error::new(k, "x")).kind();
        assert_eq!(io(std::io::ErrorKind::InvalidInput), ErrorKind::BadSetting);
        // Said as what it is: a setting that cannot be used, or an I/O error.
        let said = |k| HypomnesisError::Io(std::io::Error::new(k, "x")).to_string();
        assert_eq!(said(std::io::ErrorKind::InvalidInput), "bad setting: x");
        assert_eq!(said(std::io::ErrorKind::NotFound), "I/O error: x");
        assert_eq!(
            io(std::io::ErrorKind::PermissionDenied),
            ErrorKind::NoPermission
        );
        assert_eq!(io(std::io::ErrorKind::NotFound), ErrorKind::NotInstalled);
        assert_eq!(io(std::io::ErrorKind::TimedOut), ErrorKind::TimedOut);
        assert_eq!(io(std::io::ErrorKind::Other), ErrorKind::Other);
    }

    /// The wording decides nothing: a message that only mentions a code name, a phrase or a
    /// setting is `Other`; only the tag (or nvidia-smi's whole token) counts.
    #[test]
    fn free_text_decides_no_kind() {
        for text in [
            "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)",
            "GPU 0: memory.total is [Insufficient Permissions], not a number",
            "`nvidia-smi -q` did not finish within 10s and was killed",
            "HYPOMNESIS_NVIDIA_SMI_TIMEOUT: \"soon\" is not a duration",
            "xe publishes no memory figures in sysfs",
            "a tag in the middle [no permission] is no tag",
            "an unknown tag at the end [frobnicated]",
            "",
        ] {
            assert_eq!(kind_of_message(text), ErrorKind::Other, "{text}");
            assert_eq!(HypomnesisError::Nvml(text.into()).kind(), ErrorKind::Other);
        }
        assert_eq!(
            kind_of_message("Insufficient Permissions"),
            ErrorKind::NoPermission
        );
        assert_eq!(
            kind_of_message("x [no permission]"),
            ErrorKind::NoPermission
        );
        assert_eq!(tagged(ErrorKind::Other, "plain"), "plain");
        // The first source's kind stands; when it has none, the first fallback's that has one.
        let notes = [
            (ErrorKind::Other, "x fallback: plain".to_string()),
            (
                ErrorKind::Paused,
                "nvidia-smi fallback: not run again".to_string(),
            ),
        ];
        let e =
            HypomnesisError::nvml(ErrorKind::Other, "could not load").with_fallback_notes(&notes);
        assert_eq!(e.kind(), ErrorKind::Paused, "{e}");
        assert!(
            e.to_string()
                .contains("could not load; x fallback: plain; nvidia-smi"),
            "{e}"
        );
        let e =
            HypomnesisError::nvml(ErrorKind::NoPermission, "refused").with_fallback_notes(&notes);
        assert_eq!(e.kind(), ErrorKind::NoPermission, "{e}");
        assert_eq!(tagged(ErrorKind::GpuLost, "gone"), "gone [GPU lost]");
    }
}
