//! The one error type of the crate.

/// Everything that can go wrong while measuring.
///
/// Every variant carries the reason the source gave (library path tried, NVML return-code name,
/// `nvidia-smi` exit status and stderr, the file that could not be parsed…): nothing is dropped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HypomnesisError {
    /// The process's resident set could not be read or made sense of.
    #[error("RAM measurement failed: {0}")]
    Ram(String),
    /// NVML could not be loaded, initialised, or answered a query with an error.
    #[error("NVML: {0}")]
    Nvml(String),
    /// DXGI (Windows) failed.
    #[error("DXGI: {0}")]
    Dxgi(String),
    /// PDH performance counters (Windows) failed.
    #[error("PDH: {0}")]
    Pdh(String),
    /// A Linux DRM source (sysfs device files, DRM fdinfo) failed or lacks a figure.
    #[error("DRM: {0}")]
    Drm(String),
    /// The `nvidia-smi` fallback could not be run, timed out, or printed something unusable.
    #[error("nvidia-smi: {0}")]
    NvidiaSmi(String),
    /// Apple's Metal / libSystem sources (macOS) failed.
    #[error("Metal: {0}")]
    Metal(String),
    /// What was asked is not measurable on this platform (spill outside Windows, for instance);
    /// the message says what and where.
    #[error("not measurable here: {0}")]
    Unsupported(String),
    /// A device index at or past the number of devices.
    #[error("GPU index {index} is out of range: {count} device(s) present")]
    DeviceIndexOutOfRange {
        /// The index that was asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// No GPU source exists on this host at all (no NVML library, no `nvidia-smi`, …).
    /// [`crate::sources`] (and `hmn doctor`) tell where each one was looked for.
    #[error(
        "no GPU source is available on this host (no GPU library or tool was found; `hmn doctor` lists where each was looked for)"
    )]
    NoGpuSource,
    /// An operating-system I/O call failed; the message names the path involved.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
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

/// NVML return-code names, as every NVML error message carries them, and their kinds.
const NVML_KINDS: &[(&str, ErrorKind)] = &[
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

/// The words every message of a timed-out tool run carries (the runner writes them).
pub(crate) const TIMED_OUT: &str = "did not finish within";
/// The words every message of a run skipped after a timeout carries.
pub(crate) const PAUSED: &str = "not run again";
/// The words of a source that is not compiled into this build.
pub(crate) const NOT_BUILT_IN: &str = "not compiled in";
/// What nvidia-smi prints (in brackets) in place of a figure the user may not read.
pub(crate) const SMI_NO_PERMISSION: &str = "Insufficient Permissions";
/// The words of figures that cannot be (free above total, a process holding more than its
/// device).
pub(crate) const IMPOSSIBLE: &str = "impossible figures";
/// The words of a device whose driver does not publish its memory where this crate can read it.
pub(crate) const NO_MEMORY_FIGURES: &str = "publishes no memory figures";
/// The words of a GPU index that nvidia-smi's list skips (the GPU fell off the bus).
pub(crate) const SMI_GPU_MISSING: &str = "is missing from nvidia-smi's list";

/// The kind of an error message this crate wrote, from the machine-readable parts every such
/// message carries: an NVML return-code name, the environment variable a message about a
/// setting starts with, or the fixed words of the constants above (which the writers of those
/// messages use too).
pub(crate) fn kind_of_message(message: &str) -> ErrorKind {
    if let Some((_, kind)) = NVML_KINDS.iter().find(|(name, _)| message.contains(name)) {
        return *kind;
    }
    if message.starts_with(NOT_BUILT_IN) {
        ErrorKind::NotBuiltIn
    } else if message.contains(SMI_GPU_MISSING) {
        ErrorKind::GpuLost
    } else if message.contains(NO_MEMORY_FIGURES) {
        ErrorKind::NotSupported
    } else if message.contains(IMPOSSIBLE) || message.contains("unexpected `") {
        ErrorKind::BadAnswer
    } else if message.contains(SMI_NO_PERMISSION) {
        ErrorKind::NoPermission
    } else if message.contains(PAUSED) {
        ErrorKind::Paused
    } else if message.contains(TIMED_OUT) {
        ErrorKind::TimedOut
    } else if message.starts_with("HYPOMNESIS_") {
        // What is wrong with a setting is said first: `HYPOMNESIS_X must be…`, `HYPOMNESIS_X: …`.
        ErrorKind::BadSetting
    } else {
        ErrorKind::Other
    }
}

impl HypomnesisError {
    /// What kind of failure this is (see [`ErrorKind`]), for programs that react to it.
    ///
    /// Index and source errors are classified by their variant, I/O errors by their
    /// `std::io::ErrorKind`, and the sources' own errors by the NVML return code (or the
    /// `nvidia-smi` token, or the environment variable) their message carries.
    #[must_use]
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::DeviceIndexOutOfRange { .. } => ErrorKind::NoSuchDevice,
            Self::NoGpuSource => ErrorKind::NotInstalled,
            Self::Unsupported(_) => ErrorKind::NotSupported,
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

    /// The same error with `note` appended to its message (e.g. what a fallback source said).
    #[must_use]
    pub(crate) fn with_note(self, note: &str) -> Self {
        let add = |s: String| format!("{s}; {note}");
        match self {
            Self::Ram(s) => Self::Ram(add(s)),
            Self::Nvml(s) => Self::Nvml(add(s)),
            Self::Dxgi(s) => Self::Dxgi(add(s)),
            Self::Pdh(s) => Self::Pdh(add(s)),
            Self::NvidiaSmi(s) => Self::NvidiaSmi(add(s)),
            Self::Drm(s) => Self::Drm(add(s)),
            Self::Metal(s) => Self::Metal(add(s)),
            Self::Unsupported(s) => Self::Unsupported(add(s)),
            Self::Io(e) => Self::Io(std::io::Error::new(e.kind(), format!("{e}; {note}"))),
            other => other,
        }
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

    #[test]
    fn kinds() {
        let nvml = |m: &str| HypomnesisError::Nvml(m.into()).kind();
        assert_eq!(
            nvml("nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9) (library x)"),
            ErrorKind::DriverNotLoaded
        );
        assert_eq!(
            nvml("nvmlInit_v2 failed: NVML_ERROR_LIB_RM_VERSION_MISMATCH (18)"),
            ErrorKind::DriverVersionMismatch
        );
        assert_eq!(
            nvml("nvmlDeviceGetHandleByIndex_v2 for GPU 1 failed: NVML_ERROR_NO_PERMISSION (4)"),
            ErrorKind::NoPermission
        );
        assert_eq!(nvml("x: NVML_ERROR_GPU_IS_LOST (15)"), ErrorKind::GpuLost);
        assert_eq!(
            nvml("x: NVML_ERROR_NOT_SUPPORTED (3)"),
            ErrorKind::NotSupported
        );
        assert_eq!(nvml("something else"), ErrorKind::Other);
        let smi = |m: &str| HypomnesisError::NvidiaSmi(m.into()).kind();
        assert_eq!(
            smi(&format!("`nvidia-smi -q` {TIMED_OUT} 10s and was killed")),
            ErrorKind::TimedOut
        );
        assert_eq!(
            smi(&format!("{PAUSED}: `nvidia-smi` {TIMED_OUT} 10s 3 s ago")),
            ErrorKind::Paused
        );
        assert_eq!(
            smi("GPU 0: memory.total is [Insufficient Permissions], not a number"),
            ErrorKind::NoPermission
        );
        assert_eq!(
            smi(&format!(
                "GPU 2 {SMI_GPU_MISSING}: lost (it lists GPUs 0, 1, 3)"
            )),
            ErrorKind::GpuLost
        );
        assert_eq!(
            HypomnesisError::Drm(format!("xe {NO_MEMORY_FIGURES} in sysfs")).kind(),
            ErrorKind::NotSupported
        );
        assert_eq!(
            kind_of_message("Insufficient Permissions"),
            ErrorKind::NoPermission
        );
        assert_eq!(
            smi("HYPOMNESIS_NVIDIA_SMI_TIMEOUT: \"soon\" is not a duration"),
            ErrorKind::BadSetting
        );
        assert_eq!(
            HypomnesisError::DeviceIndexOutOfRange { index: 1, count: 1 }.kind(),
            ErrorKind::NoSuchDevice
        );
        assert_eq!(HypomnesisError::NoGpuSource.kind(), ErrorKind::NotInstalled);
        let io = |k| HypomnesisError::Io(std::io::Error::new(k, "x")).kind();
        assert_eq!(io(std::io::ErrorKind::InvalidInput), ErrorKind::BadSetting);
        assert_eq!(
            io(std::io::ErrorKind::PermissionDenied),
            ErrorKind::NoPermission
        );
        assert_eq!(io(std::io::ErrorKind::NotFound), ErrorKind::NotInstalled);
        assert_eq!(io(std::io::ErrorKind::TimedOut), ErrorKind::TimedOut);
        assert_eq!(io(std::io::ErrorKind::Other), ErrorKind::Other);
    }
}
