//! The global state: the scenario in force with its mutable parts (fail rules left, growth),
//! the `nvmlInit*` reference count, and the call counters the tests read back through the
//! `fake_nvml_*` introspection symbols.

use std::collections::BTreeMap;
use std::ffi::{OsString, c_char, c_uint, c_ulonglong};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::abi::NvmlReturn;
use crate::cstr::read_cstr;
use crate::scenario::Scenario;

/// Environment variable naming the scenario file.
const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";

/// A scenario in force, with its mutable parts (fail counters, growth).
pub(crate) struct Loaded {
    /// The `FAKE_NVML_SCENARIO` value it was read from.
    pub(crate) path: OsString,
    pub(crate) sc: Scenario,
    /// Per device: the first Compute process call has happened (growth applied).
    pub(crate) grown: Vec<bool>,
}

impl Loaded {
    pub(crate) fn new(path: OsString, sc: Scenario) -> Self {
        let grown = vec![false; sc.devices.len()];
        Self { path, sc, grown }
    }

    /// Consumes one use of the first `fail` rule matching `name` (and `device`, if the rule
    /// names one) and returns its code.
    pub(crate) fn take_failure(&mut self, name: &str, device: Option<usize>) -> Option<NvmlReturn> {
        self.take_failure_on(name, device, None)
    }

    /// As [`Self::take_failure`], for a call on MIG device `mig` (its position in the GPU's
    /// `mig_devices`) when it is one: a rule naming a MIG device matches only calls on it.
    pub(crate) fn take_failure_on(
        &mut self,
        name: &str,
        device: Option<usize>,
        mig: Option<usize>,
    ) -> Option<NvmlReturn> {
        let rule = self.sc.fail.iter_mut().find(|r| {
            r.times > 0
                && r.function == name
                && (r.device.is_none() || r.device == device)
                && (r.mig_device.is_none() || r.mig_device == mig)
        })?;
        rule.times -= 1;
        Some(rule.code)
    }
}

pub(crate) struct Global {
    /// `nvmlInit*` reference count.
    pub(crate) refcount: u32,
    pub(crate) loaded: Option<Loaded>,
    /// Successful `nvmlInit*` calls so far.
    pub(crate) init_count: u32,
    /// Calls per exported function so far.
    pub(crate) calls: BTreeMap<&'static str, u64>,
    /// When `FAKE_NVML_CALL_LOG`'s file was last written.
    pub(crate) logged_at: Option<Instant>,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    refcount: 0,
    loaded: None,
    init_count: 0,
    calls: BTreeMap::new(),
    logged_at: None,
});

/// Environment variable naming the file the call counts are written to (unset: none).
const CALL_LOG_ENV: &str = "FAKE_NVML_CALL_LOG";

/// The `FAKE_NVML_CALL_LOG` file, read once.
fn call_log() -> Option<&'static PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| std::env::var_os(CALL_LOG_ENV).map(PathBuf::from))
        .as_ref()
}

/// Writes the call counts to the `FAKE_NVML_CALL_LOG` file when one is named and a second
/// has passed since the last write (the first call writes at once). Errors are ignored: the
/// log is for a benchmark's eyes, never a reason for a call to fail.
pub(crate) fn log_calls(g: &mut Global) {
    let Some(path) = call_log() else {
        return;
    };
    let now = Instant::now();
    if g.logged_at
        .is_some_and(|t| now.duration_since(t) < Duration::from_secs(1))
    {
        return;
    }
    g.logged_at = Some(now);
    let text: String = g
        .calls
        .iter()
        .map(|(name, n)| format!("{name} {n}\n"))
        .collect();
    // Written aside and renamed, so a reader never sees half a file.
    let mut aside = path.clone().into_os_string();
    aside.push(".tmp");
    if std::fs::write(&aside, text).is_ok() {
        let _ = std::fs::rename(&aside, path);
    }
}

pub(crate) fn lock() -> MutexGuard<'static, Global> {
    GLOBAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes sure a scenario is loaded. While initialised the loaded one stays; otherwise the file
/// named by `FAKE_NVML_SCENARIO` is (re)read when it names a different file than the loaded one.
pub(crate) fn ensure_loaded(g: &mut Global) -> Result<(), String> {
    if g.refcount > 0 && g.loaded.is_some() {
        return Ok(());
    }
    let path =
        std::env::var_os(SCENARIO_ENV).ok_or_else(|| format!("{SCENARIO_ENV} is not set"))?;
    if g.loaded.as_ref().is_some_and(|l| l.path == path) {
        return Ok(());
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read scenario {}: {e}", path.to_string_lossy()))?;
    let sc = Scenario::parse(&text)
        .map_err(|e| format!("bad scenario {}: {e}", path.to_string_lossy()))?;
    g.loaded = Some(Loaded::new(path, sc));
    Ok(())
}

// Test introspection (not NVML)

/// Number of successful `nvmlInit*` calls so far in this process.
#[unsafe(no_mangle)]
pub extern "C" fn fake_nvml_init_count() -> c_uint {
    catch_unwind(|| lock().init_count).unwrap_or(0)
}

/// Number of calls of the named exported function so far (0 for unknown names or NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fake_nvml_call_count(name: *const c_char) -> c_ulonglong {
    // SAFETY: NULL or a NUL-terminated string, per this function's contract.
    let Some(name) = (unsafe { read_cstr(name) }) else {
        return 0;
    };
    catch_unwind(AssertUnwindSafe(|| {
        lock().calls.get(name.as_str()).copied().unwrap_or(0)
    }))
    .unwrap_or(0)
}
