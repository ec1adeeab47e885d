//! Running `nvidia-smi`: where it is, how long it may take, one run at a time, and the pause
//! after it hung.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::SmiBackend;
use super::runner::{self, RunError};
use crate::error::Failure;
use crate::{error::ErrorKind, error::HypomnesisError, error::Result};

/// Default limit of one run.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a source that timed out is left alone.
pub(crate) const COOLDOWN: Duration = Duration::from_secs(60);

/// Held for the length of each run: never two `nvidia-smi` of this process at once.
static ONE_RUN: Mutex<()> = Mutex::new(());

/// Where the executable is and how long it may run.
pub(super) struct Setup {
    pub(super) exe: std::result::Result<PathBuf, Failure>,
    pub(super) explicit: bool,
    pub(super) timeout: std::result::Result<Duration, Failure>,
}

impl SmiBackend {
    pub(super) fn setup(&self) -> &Setup {
        self.setup.get_or_init(|| {
            let timeout = match std::env::var("HYPOMNESIS_NVIDIA_SMI_TIMEOUT") {
                Ok(v) if !v.trim().is_empty() => {
                    crate::duration::parse_duration(&v).map_err(|why| {
                        Failure::new(
                            ErrorKind::BadSetting,
                            format!("HYPOMNESIS_NVIDIA_SMI_TIMEOUT: {why}"),
                        )
                    })
                }
                Ok(_) | Err(std::env::VarError::NotPresent) => Ok(DEFAULT_TIMEOUT),
                Err(std::env::VarError::NotUnicode(_)) => Err(Failure::new(
                    ErrorKind::BadSetting,
                    "HYPOMNESIS_NVIDIA_SMI_TIMEOUT is not valid UTF-8",
                )),
            };
            match std::env::var_os("HYPOMNESIS_NVIDIA_SMI").filter(|v| !v.is_empty()) {
                Some(p) => Setup {
                    exe: Ok(PathBuf::from(p)),
                    explicit: true,
                    timeout,
                },
                None => Setup {
                    exe: find_on_path().map_err(|why| Failure::new(ErrorKind::NotInstalled, why)),
                    explicit: false,
                    timeout,
                },
            }
        })
    }

    /// Run nvidia-smi with `args`; `Ok` only for exit status 0.
    pub(super) fn run(&self, args: &[&str]) -> Result<runner::Ran> {
        let setup = self.setup();
        let exe = setup
            .exe
            .as_ref()
            .map_err(|r| HypomnesisError::nvidia_smi(r.kind, r.message.clone()))?;
        let timeout = setup
            .timeout
            .clone()
            .map_err(|r| HypomnesisError::nvidia_smi(r.kind, r.message))?;
        // One run at a time in the whole process: callers on other threads (an exporter's
        // probe, its measurement of the devices alone) wait here rather than start a second
        // `nvidia-smi` beside a slow one; one that waited behind a run that hung is answered
        // by the pause below instead of starting another.
        let _one = ONE_RUN.lock().unwrap_or_else(PoisonError::into_inner);
        let mut guard = self
            .timed_out
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((at, why)) = guard.as_ref() {
            if at.elapsed() < COOLDOWN {
                return Err(HypomnesisError::nvidia_smi(
                    ErrorKind::Paused,
                    format!(
                        "{}: {why} {:.0} s ago (retried after {} s)",
                        crate::error::PAUSED,
                        at.elapsed().as_secs_f64(),
                        COOLDOWN.as_secs()
                    ),
                ));
            }
            *guard = None;
        }
        drop(guard);
        let shown = format!("`{} {}`", exe.display(), args.join(" "));
        match runner::run(exe, args, timeout) {
            Ok(ran) => Ok(ran),
            Err(e @ RunError::TimedOut(_)) => {
                let why = format!("{shown} {e}");
                *self
                    .timed_out
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), why.clone()));
                Err(HypomnesisError::nvidia_smi(ErrorKind::TimedOut, why))
            }
            Err(e) => Err(HypomnesisError::nvidia_smi(
                ErrorKind::Other,
                format!("{shown} {e}"),
            )),
        }
    }

    pub(super) fn failed_run(args: &[&str], exe: &Path, ran: &runner::Ran) -> HypomnesisError {
        let said = if ran.stderr.trim().is_empty() {
            &ran.stdout
        } else {
            &ran.stderr
        };
        let said: String = said.trim().lines().take(3).collect::<Vec<_>>().join(" / ");
        HypomnesisError::nvidia_smi(
            kind_of_failed_run(&said),
            format!(
                "`{} {}` exited with {}: {}",
                exe.display(),
                args.join(" "),
                ran.status,
                if said.is_empty() {
                    "(no output)"
                } else {
                    said.as_str()
                }
            ),
        )
    }

    pub(super) fn exe_path(&self) -> PathBuf {
        self.setup()
            .exe
            .clone()
            .unwrap_or_else(|_| PathBuf::from("nvidia-smi"))
    }

    /// Output of a run that must succeed.
    pub(super) fn run_ok(&self, args: &[&str]) -> Result<String> {
        let ran = self.run(args)?;
        if !ran.status.success() {
            return Err(Self::failed_run(args, &self.exe_path(), &ran));
        }
        Ok(ran.stdout)
    }
}

/// The kind of a run that exited non-zero, from what nvidia-smi printed: its own words for a
/// refusal and for a driver it cannot talk to (read here, where its output is, and written into
/// the error as its tag).
fn kind_of_failed_run(said: &str) -> ErrorKind {
    const SAID: &[(&str, ErrorKind)] = &[
        ("Insufficient Permissions", ErrorKind::NoPermission),
        (
            "Driver/library version mismatch",
            ErrorKind::DriverVersionMismatch,
        ),
        (
            "couldn't communicate with the NVIDIA driver",
            ErrorKind::DriverNotLoaded,
        ),
    ];
    SAID.iter()
        .find(|(words, _)| said.contains(words))
        .map_or(ErrorKind::Other, |(_, kind)| *kind)
}

fn find_on_path() -> std::result::Result<PathBuf, String> {
    let (name, dirs): (&str, Vec<PathBuf>) = if cfg!(windows) {
        let mut dirs = Vec::new();
        if let Some(root) = std::env::var_os("SystemRoot").or_else(|| std::env::var_os("windir")) {
            dirs.push(PathBuf::from(root).join("System32"));
        }
        if let Some(pf) = std::env::var_os("ProgramFiles") {
            dirs.push(PathBuf::from(pf).join("NVIDIA Corporation").join("NVSMI"));
        }
        ("nvidia-smi.exe", dirs)
    } else {
        let dirs = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .filter(|d| d.is_absolute())
                    .collect()
            })
            .unwrap_or_default();
        ("nvidia-smi", dirs)
    };
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| {
            if cfg!(windows) {
                let shown: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                format!(
                    "{name} was not found in {} (set HYPOMNESIS_NVIDIA_SMI to its path)",
                    shown.join(" or ")
                )
            } else {
                format!("{name} was not found on PATH (set HYPOMNESIS_NVIDIA_SMI to its path)")
            }
        })
}

/// A regular file that may be run: with an execute bit on Unix.
fn is_executable(p: &Path) -> bool {
    let Ok(m) = p.metadata() else {
        return false;
    };
    #[cfg(unix)]
    let runnable = {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o111 != 0
    };
    #[cfg(not(unix))]
    let runnable = true;
    m.is_file() && runnable
}
