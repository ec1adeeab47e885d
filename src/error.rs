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

impl HypomnesisError {
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
}
