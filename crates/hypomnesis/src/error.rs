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
/// may be reworded. Decided where the failure is seen (each backend maps its own return codes,
/// tokens and errno values), carried as a value from there on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// The driver is there and sees no GPU (`NVML_ERROR_GPU_NOT_FOUND`): what the public
    /// functions turn into [`HypomnesisError::NoGpuSource`], as they do `DriverNotLoaded`.
    NoGpu,
    /// Anything else.
    Other,
}

impl ErrorKind {
    /// Every kind, `Other` last.
    pub const ALL: [Self; 14] = [
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
        Self::NoGpu,
        Self::Other,
    ];

    /// The kind's name: the one table of names, read by JSON (`error_kind`), the exporter's
    /// `kind` label, Python's `HypomnesisError.kind` and the tag a 0.2.x message carries.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::DriverNotLoaded => "driver_not_loaded",
            Self::DriverVersionMismatch => "driver_version_mismatch",
            Self::NoPermission => "no_permission",
            Self::GpuLost => "gpu_lost",
            Self::NotSupported => "not_supported",
            Self::TimedOut => "timed_out",
            Self::Paused => "paused",
            Self::BadSetting => "bad_setting",
            Self::NotInstalled => "not_installed",
            Self::NotBuiltIn => "not_built_in",
            Self::NoSuchDevice => "no_such_device",
            Self::BadAnswer => "bad_answer",
            Self::NoGpu => "no_gpu",
            Self::Other => "other",
        }
    }

    /// The kind named `name` (see [`Self::as_str`]).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for ErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A failure as a value: what kind it is, decided where it was seen, and what the source said.
/// What a failed source, a refused figure, an unreadable part of a sample carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Failure {
    /// What the source said, for people (no tag).
    pub message: String,
    /// What kind of failure it is, for programs.
    pub kind: ErrorKind,
}

impl Failure {
    /// A failure of `kind` that says `message`.
    #[must_use]
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind,
        }
    }

    /// The failure `e` describes: its message as people read it, and its kind.
    #[must_use]
    pub fn of(e: &HypomnesisError) -> Self {
        Self {
            message: e.to_string(),
            kind: e.kind(),
        }
    }
}

/// A field holding a failure, in JSON as its message alone (where the JSON said the message
/// before failures were values, and a `…_kind` beside it says the kind).
#[cfg(feature = "serde")]
#[allow(clippy::ref_option)] // the signature serde's `serialize_with` calls
pub(crate) fn message_only<S: serde::Serializer>(
    f: &Option<Failure>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match f {
        Some(f) => s.serialize_some(&f.message),
        None => s.serialize_none(),
    }
}

/// A list of failures, in JSON as their messages (where the JSON said the messages before
/// failures were values).
#[cfg(feature = "serde")]
pub(crate) fn messages_only<S: serde::Serializer>(
    list: &[Failure],
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|f| f.message.as_str()))
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<&HypomnesisError> for Failure {
    fn from(e: &HypomnesisError) -> Self {
        Self::of(e)
    }
}

impl From<HypomnesisError> for Failure {
    fn from(e: HypomnesisError) -> Self {
        Self::of(&e)
    }
}

/// The words every message of a timed-out tool run carries (the runner writes them).
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) const TIMED_OUT: &str = "did not finish within";
/// The words every message of a run skipped after a timeout carries.
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) const PAUSED: &str = "not run again";
/// The words that start the reason of a source that is not compiled into this build.
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

/// How a 0.2.x variant that carries only a message (`Nvml(String)`, …) carries its kind too:
/// `text [name]`, the name from [`ErrorKind::as_str`] (none for `Other`). Made here alone, and
/// read back by [`HypomnesisError::kind`] alone; every other carrier holds a [`Failure`].
fn tagged(failure: Failure) -> String {
    match failure.kind {
        ErrorKind::Other => failure.message,
        kind => format!("{} [{}]", failure.message, kind.as_str()),
    }
}

/// A 0.2.x variant's message split into its text and the kind its tag names (`Other` without
/// a tag): the inverse of [`tagged`], used by [`HypomnesisError::kind`] and `Display` alone.
fn split_tag(message: &str) -> (&str, ErrorKind) {
    message
        .strip_suffix(']')
        .and_then(|m| m.rsplit_once(" ["))
        .and_then(|(text, name)| {
            ErrorKind::from_name(name)
                .filter(|k| *k != ErrorKind::Other)
                .map(|kind| (text, kind))
        })
        .unwrap_or((message, ErrorKind::Other))
}

/// A message as people read it: without the tag (the kind is said in other ways: `hmn`'s advice,
/// `error_kind` in JSON).
fn shown(message: &str) -> &str {
    split_tag(message).0
}

impl HypomnesisError {
    /// What kind of failure this is (see [`ErrorKind`]), for programs that react to it.
    ///
    /// Index and source errors are classified by their variant, I/O errors by their
    /// `std::io::ErrorKind`. The 0.2.x variants that carry only a message (`Nvml(String)`, …)
    /// carry the kind their constructor was given at the message's end (`… [no_permission]`,
    /// none for `Other`; `Display` leaves it out): the one place a kind travels inside text,
    /// because those variants have no other field to hold it.
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
            | Self::Metal(m) => split_tag(m).1,
        }
    }

    /// The same error with `note` appended to its message (e.g. what a fallback source said),
    /// its kind unchanged.
    #[must_use]
    pub(crate) fn with_note(self, note: &str) -> Self {
        match self {
            Self::Io(e) => Self::Io(std::io::Error::new(e.kind(), format!("{e}; {note}"))),
            other => {
                let kind = other.kind();
                other.map_message(|m| {
                    tagged(Failure::new(kind, format!("{}; {note}", split_tag(&m).0)))
                })
            }
        }
    }

    /// The error of the source asked first with what the fallbacks said after it: their
    /// messages as a note, and the kind of the first one that has one when this error's own is
    /// `Other` (a library that could not load, then an `nvidia-smi` paused after a timeout:
    /// paused).
    #[must_use]
    pub(crate) fn with_fallback_notes(self, notes: &[Failure]) -> Self {
        let said: Vec<&str> = notes.iter().map(|f| f.message.as_str()).collect();
        let own = self.kind();
        let combined = self.with_note(&said.join("; "));
        if own != ErrorKind::Other {
            return combined;
        }
        match notes
            .iter()
            .map(|f| f.kind)
            .find(|k| *k != ErrorKind::Other)
        {
            Some(kind) => combined.map_message(|m| tagged(Failure::new(kind, split_tag(&m).0))),
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

    /// An NVML error of `kind`.
    #[cfg_attr(not(feature = "nvml"), allow(dead_code))]
    pub(crate) fn nvml(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Nvml(tagged(Failure::new(kind, text)))
    }

    /// An `nvidia-smi` error of `kind`.
    #[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
    pub(crate) fn nvidia_smi(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::NvidiaSmi(tagged(Failure::new(kind, text)))
    }

    /// A DRM (sysfs, fdinfo) error of `kind`.
    #[cfg_attr(not(all(target_os = "linux", feature = "drm")), allow(dead_code))]
    pub(crate) fn drm(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Drm(tagged(Failure::new(kind, text)))
    }

    /// A DXGI error of `kind`.
    #[cfg_attr(not(all(windows, feature = "dxgi")), allow(dead_code))]
    pub(crate) fn dxgi(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Dxgi(tagged(Failure::new(kind, text)))
    }

    /// A PDH error of `kind`.
    #[cfg_attr(not(all(windows, feature = "pdh")), allow(dead_code))]
    pub(crate) fn pdh(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Pdh(tagged(Failure::new(kind, text)))
    }

    /// A Metal error of `kind`.
    #[cfg_attr(not(all(target_os = "macos", feature = "metal")), allow(dead_code))]
    pub(crate) fn metal(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Metal(tagged(Failure::new(kind, text)))
    }

    /// A RAM measurement error of `kind`.
    pub(crate) fn ram(kind: ErrorKind, text: impl Into<String>) -> Self {
        Self::Ram(tagged(Failure::new(kind, text)))
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

    /// Every kind, through every constructor, comes back from the error and from the failure
    /// made of it; through a note added later; and the kinds that are the variant's own.
    #[test]
    fn every_kind_made_by_a_constructor_comes_back() {
        for kind in ErrorKind::ALL {
            let made = [
                HypomnesisError::nvml(kind, "a"),
                HypomnesisError::nvidia_smi(kind, "b"),
                HypomnesisError::drm(kind, "c"),
                HypomnesisError::dxgi(kind, "d"),
                HypomnesisError::pdh(kind, "e"),
                HypomnesisError::metal(kind, "f"),
                HypomnesisError::ram(kind, "g"),
            ];
            for e in made {
                assert_eq!(e.kind(), kind, "{e}");
                let noted = e.with_note("and the fallback said [sic]; no");
                assert_eq!(noted.kind(), kind, "{noted}");
                // As people read it: no tag.
                let shown = noted.to_string();
                assert!(
                    shown.ends_with("and the fallback said [sic]; no"),
                    "{shown}"
                );
                let f = Failure::of(&noted);
                assert_eq!(f.kind, kind);
                assert!(!f.message.ends_with(']'), "{f}");
            }
        }
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

    /// The names are one table: each kind's name is distinct, snake case, and names it back;
    /// JSON says the same name.
    #[test]
    fn each_kind_has_one_name() {
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        for (k, n) in ErrorKind::ALL.iter().zip(&names) {
            assert_eq!(ErrorKind::from_name(n), Some(*k));
            assert_eq!(k.to_string(), *n);
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{n}"
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        assert_eq!(ErrorKind::ALL.last(), Some(&ErrorKind::Other));
        assert_eq!(ErrorKind::from_name("frobnicated"), None);
    }

    /// The wording decides nothing: a message that only mentions a code name, a phrase or a
    /// setting is `Other`; only what a constructor was given counts.
    #[test]
    fn free_text_decides_no_kind() {
        for text in [
            "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)",
            "Insufficient Permissions",
            "GPU 0: memory.total is [Insufficient Permissions], not a number",
            "`nvidia-smi -q` did not finish within 10s and was killed",
            "HYPOMNESIS_NVIDIA_SMI_TIMEOUT: \"soon\" is not a duration",
            "xe publishes no memory figures in sysfs",
            "an unknown tag at the end [frobnicated]",
            "",
        ] {
            assert_eq!(HypomnesisError::Nvml(text.into()).kind(), ErrorKind::Other);
            assert_eq!(
                HypomnesisError::nvml(ErrorKind::Other, text).to_string(),
                format!("NVML: {text}")
            );
        }
        // The first source's kind stands; when it has none, the first fallback's that has one.
        let notes = [
            Failure::new(ErrorKind::Other, "x fallback: plain"),
            Failure::new(ErrorKind::Paused, "nvidia-smi fallback: not run again"),
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
    }
}
