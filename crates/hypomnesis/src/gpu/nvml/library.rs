//! Finding and loading the NVML library, once per process.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use super::ffi::Nvml;
use super::session::{Loaded, Session};
use crate::gpu::backend::DroppedRows;

/// Where the library is looked for: `HYPOMNESIS_NVML_LIBRARY` alone when set (it must be an
/// absolute path), otherwise the platform's list. `Ok((paths, explicit))`.
fn candidates() -> std::result::Result<(Vec<PathBuf>, bool), String> {
    if let Some(v) = std::env::var_os("HYPOMNESIS_NVML_LIBRARY").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        if !p.is_absolute() {
            return Err(format!(
                "HYPOMNESIS_NVML_LIBRARY must be an absolute path to the NVML library, got {:?}",
                v.to_string_lossy()
            ));
        }
        // Only a regular file (or a link to one) is opened: a FIFO or a device there would
        // block the loader or feed it anything.
        if let Ok(meta) = std::fs::metadata(&p)
            && !meta.is_file()
        {
            return Err(format!(
                "HYPOMNESIS_NVML_LIBRARY is {} ({}), not a regular file",
                p.display(),
                if meta.is_dir() {
                    "a directory"
                } else {
                    "a FIFO, socket or device"
                }
            ));
        }
        return Ok((vec![p], true));
    }
    Ok((default_candidates(), false))
}

/// Where the library is looked for when `HYPOMNESIS_NVML_LIBRARY` is not set: the loader's
/// search path (and WSL's folder) on Linux; on Windows absolute paths only, never the current
/// directory or the DLL search path (DLL planting); nowhere elsewhere.
fn default_candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if cfg!(target_os = "linux") {
        out.extend(
            [
                "libnvidia-ml.so.1",
                "libnvidia-ml.so",
                "/usr/lib/wsl/lib/libnvidia-ml.so.1",
            ]
            .map(PathBuf::from),
        );
    } else if cfg!(windows) {
        if let Some(root) = std::env::var_os("SystemRoot").or_else(|| std::env::var_os("windir")) {
            out.push(PathBuf::from(root).join("System32").join("nvml.dll"));
        }
        if let Some(pf) = std::env::var_os("ProgramFiles") {
            out.push(
                PathBuf::from(pf)
                    .join("NVIDIA Corporation")
                    .join("NVSMI")
                    .join("nvml.dll"),
            );
        }
    }
    out
}

/// The process-wide outcome of loading the library.
pub(super) enum LoadOutcome {
    Loaded(Box<Loaded>),
    Failed {
        why: crate::error::Failure,
        explicit: bool,
    },
}

/// The library, loaded once per process.
static STATE: OnceLock<LoadOutcome> = OnceLock::new();

pub(super) fn outcome() -> &'static LoadOutcome {
    STATE.get_or_init(load)
}

/// The outcome of loading, when a load was already attempted (loads nothing).
pub(super) fn attempted() -> Option<&'static LoadOutcome> {
    STATE.get()
}

fn load() -> LoadOutcome {
    let (paths, explicit) = match candidates() {
        Ok(c) => c,
        Err(reason) => {
            return LoadOutcome::Failed {
                why: crate::error::Failure::new(crate::error::ErrorKind::BadSetting, reason),
                explicit: true,
            };
        }
    };
    if paths.is_empty() {
        return LoadOutcome::Failed {
            why: crate::error::Failure::new(
                crate::error::ErrorKind::Other,
                format!("NVML is not available on {}", std::env::consts::OS),
            ),
            explicit: false,
        };
    }
    let mut tried = Vec::new();
    for path in paths {
        match Nvml::load(&path) {
            Ok(nvml) => {
                return LoadOutcome::Loaded(Box::new(Loaded {
                    nvml,
                    path,
                    session: Mutex::new(Session::default()),
                    dropped_rows: DroppedRows::new(),
                }));
            }
            Err(why) => {
                let shown = path.display().to_string();
                tried.push(if why.starts_with(&shown) {
                    why
                } else {
                    format!("{shown}: {why}")
                });
            }
        }
    }
    LoadOutcome::Failed {
        why: crate::error::Failure::new(
            crate::error::ErrorKind::Other,
            format!(
                "could not load the NVML library (tried {})",
                tried.join("; ")
            ),
        ),
        explicit,
    }
}
