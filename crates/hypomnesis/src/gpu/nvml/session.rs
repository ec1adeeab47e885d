//! The NVML session: initialisation (once, again only after the driver went away), device
//! handles, the driver version, and NVML return codes made into errors in one place.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::abi::{
    NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_UNINITIALIZED, NVML_SUCCESS, NvmlReturn,
};
use super::decode::{kind_of_return, return_name};
use super::ffi::{self, Device, Nvml};
use crate::error::Failure;
use crate::gpu::backend::DroppedRows;
use crate::{error::ErrorKind, error::HypomnesisError, error::Result};

/// How long a failed `nvmlInit` is remembered before it is tried again.
pub(crate) const INIT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// A device count above this is garbage (NVML hosts have at most a few dozen GPUs).
const MAX_GPUS: u32 = 1024;

/// Current and pending MIG mode; `None` when the GPU cannot be split.
pub(super) type MigMode = Option<(bool, bool)>;

/// What one initialisation of NVML knows; a new one starts empty.
#[derive(Default)]
pub(super) struct Session {
    pub(super) live: bool,
    pub(super) init_calls: u64,
    last_failure: Option<(Failure, Instant)>,
    handles: Vec<Option<Device>>,
    /// The driver version, asked once per session (unknown is `None`).
    driver_version: OnceLock<Option<String>>,
    /// MIG mode per device handle, with when it was read: the driver call costs ~150 µs on an
    /// H200, and a mode change only takes effect at a GPU reset.
    pub(super) mig_modes: Vec<(Device, Instant, MigMode)>,
    /// What does not change while a handle lives (name, UUID, PCI bus id, NUMA node,
    /// addressing mode), per device handle, asked once a session.
    pub(super) facts: Vec<(Device, Facts)>,
    /// The memory total of each device handle whose memory is its own, from its first valid
    /// answer: a process list's rows are bounded by it without asking again.
    pub(super) totals: Vec<(Device, u64)>,
}

impl Session {
    /// Forgets the device handles and all that is kept per handle (MIG modes, facts, memory
    /// totals): a handle names nothing once the session it came from has ended.
    fn forget_handles(&mut self) {
        self.handles.clear();
        self.mig_modes.clear();
        self.facts.clear();
        self.totals.clear();
    }
}

/// What does not change while a device handle lives (asked by `Loaded::facts`).
#[derive(Clone)]
pub(super) struct Facts {
    pub(super) name: Option<String>,
    pub(super) uuid: Option<String>,
    pub(super) pci_bus_id: Option<String>,
    /// `nvmlDeviceGetNumaNodeId`'s answer (`None`: no such symbol).
    pub(super) numa: Option<std::result::Result<u32, NvmlReturn>>,
    /// `nvmlDeviceGetAddressingMode`'s answer (`None`: no such symbol).
    pub(super) addressing: Option<std::result::Result<u32, NvmlReturn>>,
}

/// A loaded library with its session.
pub(super) struct Loaded {
    pub(super) nvml: Nvml,
    pub(super) path: PathBuf,
    pub(super) session: Mutex<Session>,
    /// Process-list rows left out (memory not available, larger than the device, pid 0).
    pub(super) dropped_rows: DroppedRows,
}

/// Why an NVML-backed operation failed.
pub(super) enum CallFailure {
    /// An NVML call returned a code.
    Call {
        function: &'static str,
        gpu: Option<u32>,
        code: NvmlReturn,
    },
    /// Anything else, already a finished error.
    Other(HypomnesisError),
}

impl CallFailure {
    fn driver_gone(&self) -> bool {
        matches!(self, Self::Call { code, .. } if *code == NVML_ERROR_UNINITIALIZED || *code == NVML_ERROR_DRIVER_NOT_LOADED)
    }
}

/// What a failed call of `function` (for GPU `gpu`, if any) becomes:
/// `.map_err(failed_call("nvmlDeviceGetMemoryInfo", Some(index)))`.
pub(super) fn failed_call(
    function: &'static str,
    gpu: Option<u32>,
) -> impl Fn(NvmlReturn) -> CallFailure {
    move |code| CallFailure::Call {
        function,
        gpu,
        code,
    }
}

impl Loaded {
    pub(super) fn lock(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn describe(&self, code: NvmlReturn) -> String {
        match self.nvml.error_string(code) {
            Some(s) if !s.is_empty() => format!("{} ({code}, \"{s}\")", return_name(code)),
            _ => format!("{} ({code})", return_name(code)),
        }
    }

    pub(super) fn to_error(&self, f: CallFailure) -> HypomnesisError {
        match f {
            CallFailure::Other(e) => e,
            CallFailure::Call {
                function,
                gpu,
                code,
            } => {
                let what = match gpu {
                    Some(i) => format!("{function} for GPU {i}"),
                    None => function.to_string(),
                };
                if code == ffi::UNTERMINATED {
                    HypomnesisError::nvml(
                        ErrorKind::BadAnswer,
                        format!("{what} returned a string without a terminating NUL"),
                    )
                } else {
                    HypomnesisError::nvml(
                        kind_of_return(code),
                        format!("{what} failed: {}", self.describe(code)),
                    )
                }
            }
        }
    }

    /// Make sure a session is live; `force` ignores the retry delay after a failure.
    pub(super) fn ensure(&self, force: bool) -> Result<()> {
        let mut s = self.lock();
        if s.live {
            return Ok(());
        }
        if let Some((why, at)) = &s.last_failure
            && !force
            && at.elapsed() < INIT_RETRY_AFTER
        {
            return Err(HypomnesisError::nvml(why.kind, why.message.clone()));
        }
        s.init_calls += 1;
        let rc = self.nvml.init();
        if rc == NVML_SUCCESS {
            s.live = true;
            s.last_failure = None;
            s.forget_handles();
            s.driver_version = OnceLock::new();
            Ok(())
        } else {
            let why = Failure::new(
                kind_of_return(rc),
                format!(
                    "{} failed: {} (library {})",
                    self.nvml.init_name,
                    self.describe(rc),
                    self.path.display()
                ),
            );
            s.last_failure = Some((why.clone(), Instant::now()));
            Err(HypomnesisError::nvml(why.kind, why.message))
        }
    }

    /// Drop the session after the driver went away (the next `ensure` initialises again).
    pub(super) fn drop_session(&self) {
        let mut s = self.lock();
        if s.live {
            let _ = self.nvml.shutdown();
            s.live = false;
            s.forget_handles();
        }
    }

    /// Run `f` in a live session; after an error meaning the driver went away, re-initialise
    /// once and run it again.
    pub(super) fn run<T>(
        &self,
        f: impl Fn(&Self) -> std::result::Result<T, CallFailure>,
    ) -> Result<T> {
        self.ensure(false)?;
        match f(self) {
            Ok(v) => Ok(v),
            Err(e) if e.driver_gone() => {
                crate::debug_log!("NVML: {}; re-initialising", self.to_error(e));
                self.drop_session();
                self.ensure(true)?;
                f(self).map_err(|e| self.to_error(e))
            }
            Err(e) => Err(self.to_error(e)),
        }
    }

    /// Process rows left out of the devices' latest lists.
    pub(super) fn dropped_rows(&self) -> u64 {
        self.dropped_rows.total()
    }

    /// [`Self::dropped_rows`], and how many of them had no process's pid.
    pub(super) fn dropped_parts(&self) -> crate::gpu::backend::Dropped {
        self.dropped_rows.parts()
    }

    pub(super) fn device_count(&self) -> std::result::Result<u32, CallFailure> {
        let n = self
            .nvml
            .device_count()
            .map_err(failed_call(self.nvml.count_name, None))?;
        if n > MAX_GPUS {
            return Err(CallFailure::Other(HypomnesisError::nvml(
                ErrorKind::Other,
                format!(
                    "{} returned {n}, more GPUs than any host has (at most {MAX_GPUS} are believed)",
                    self.nvml.count_name
                ),
            )));
        }
        Ok(n)
    }

    /// The handle of device `index` (cached for the session).
    pub(super) fn device(&self, index: u32) -> std::result::Result<Device, CallFailure> {
        let slot = usize::try_from(index).unwrap_or(usize::MAX);
        if let Some(Some(h)) = self.lock().handles.get(slot) {
            return Ok(*h);
        }
        let count = self.device_count()?;
        if index >= count {
            return Err(CallFailure::Other(HypomnesisError::DeviceIndexOutOfRange {
                index,
                count,
            }));
        }
        let h = self
            .nvml
            .handle(index)
            .map_err(failed_call(self.nvml.handle_name, Some(index)))?;
        let mut s = self.lock();
        if s.handles.len() <= slot {
            s.handles.resize(slot.saturating_add(1), None);
        }
        if let Some(cell) = s.handles.get_mut(slot) {
            *cell = Some(h);
        }
        Ok(h)
    }

    pub(super) fn driver_version(&self) -> Option<String> {
        self.lock()
            .driver_version
            .get_or_init(|| {
                self.nvml
                    .driver_version()
                    .and_then(std::result::Result::ok)
                    .and_then(|b| super::decode::text(&b))
            })
            .clone()
    }
}
