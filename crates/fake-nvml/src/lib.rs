//! Test-only stand-in for `libnvidia-ml` (NVML).
//!
//! Built as a `cdylib` named `nvidia_ml`; tests copy `libnvidia_ml.so` to `libnvidia-ml.so.1`
//! (see `tests/support/mod.rs` of the main crate) and point the loader at it. Its behaviour
//! comes from the JSON file named by the environment variable `FAKE_NVML_SCENARIO`, read by the
//! first `nvmlInit*` call; the schema and semantics are documented in `scenario.rs`.
//!
//! Common rules: before a successful init (or after the matching number of `nvmlShutdown`s)
//! every function except `nvmlErrorString` and `nvmlSystemGetNVMLVersion` returns
//! UNINITIALIZED (1); then the scenario's `fail` rules are consulted; then NULL out-pointers and
//! unknown handles give INVALID_ARGUMENT (2). Every call (also uninitialised ones) is counted
//! for `fake_nvml_call_count`.
//!
//! Cargo features decide which symbols exist at all, to imitate older drivers:
//! `v2-procs` (R450.66+: `_v2` process lists) and `r510` (R510+: `nvmlDeviceGetMemoryInfo_v2`
//! and `_v3` process lists).
//!
//! No exported function unwinds: every body runs under `catch_unwind` and a panic becomes
//! `NVML_ERROR_UNKNOWN` (999).

#![allow(non_snake_case, unsafe_code, clippy::missing_safety_doc)]
// Older-driver variants compile out the symbols that use some of the ABI items.
#![cfg_attr(not(feature = "r510"), allow(dead_code, unused_imports))]

mod abi;
mod scenario;

use std::collections::BTreeMap;
use std::ffi::{CStr, OsString, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};

use abi::{
    MEMORY_V2_VERSION, Memory, MemoryV2, NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_UNINITIALIZED, NVML_ERROR_UNKNOWN, NVML_SUCCESS, PciInfo,
    ProcessInfoV1, ProcessInfoV2, ProcessInfoV3Wide, VALUE_NOT_AVAILABLE_U32,
    VALUE_NOT_AVAILABLE_U64,
};
use scenario::{GROW_PID_BASE, GROW_USED, MAX_DEVICES, MAX_MIG_DEVICES, Scenario};

/// `nvmlReturn_t`.
type NvmlReturn = c_uint;
/// `nvmlDevice_t`.
type NvmlDevice = *mut c_void;

/// Environment variable naming the scenario file.
const SCENARIO_ENV: &str = "FAKE_NVML_SCENARIO";

// ---------------------------------------------------------------------------------------------
// Global state
// ---------------------------------------------------------------------------------------------

/// A scenario in force, with its mutable parts (fail counters, growth).
struct Loaded {
    /// The `FAKE_NVML_SCENARIO` value it was read from.
    path: OsString,
    sc: Scenario,
    /// Per device: the first Compute process call has happened (growth applied).
    grown: Vec<bool>,
}

impl Loaded {
    fn new(path: OsString, sc: Scenario) -> Self {
        let grown = vec![false; sc.devices.len()];
        Self { path, sc, grown }
    }

    /// Consumes one use of the first `fail` rule matching `name` (and `device`, if the rule
    /// names one) and returns its code.
    fn take_failure(&mut self, name: &str, device: Option<usize>) -> Option<NvmlReturn> {
        self.take_failure_on(name, device, None)
    }

    /// As [`Self::take_failure`], for a call on MIG device `mig` (its position in the GPU's
    /// `mig_devices`) when it is one: a rule naming a MIG device matches only calls on it.
    fn take_failure_on(
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

struct Global {
    /// `nvmlInit*` reference count.
    refcount: u32,
    loaded: Option<Loaded>,
    /// Successful `nvmlInit*` calls so far.
    init_count: u32,
    /// Calls per exported function so far.
    calls: BTreeMap<&'static str, u64>,
}

static GLOBAL: Mutex<Global> = Mutex::new(Global {
    refcount: 0,
    loaded: None,
    init_count: 0,
    calls: BTreeMap::new(),
});

fn lock() -> MutexGuard<'static, Global> {
    GLOBAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Makes sure a scenario is loaded. While initialised the loaded one stays; otherwise the file
/// named by `FAKE_NVML_SCENARIO` is (re)read when it names a different file than the loaded one.
fn ensure_loaded(g: &mut Global) -> Result<(), String> {
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

// ---------------------------------------------------------------------------------------------
// Device handles: addresses of the elements of a static table.
// ---------------------------------------------------------------------------------------------

static HANDLE_SLOTS: [u64; MAX_DEVICES] = [0; MAX_DEVICES];

fn handle_for(index: usize) -> NvmlDevice {
    HANDLE_SLOTS
        .as_ptr()
        .wrapping_add(index)
        .cast_mut()
        .cast::<c_void>()
}

/// Second handles of the GPUs, given as MIG devices' parents with `parent_handle_alias`.
static ALIAS_SLOTS: [u64; MAX_DEVICES] = [0; MAX_DEVICES];

fn alias_for(index: usize) -> NvmlDevice {
    ALIAS_SLOTS
        .as_ptr()
        .wrapping_add(index)
        .cast_mut()
        .cast::<c_void>()
}

/// The element of `table` that `handle` points at.
fn slot_in(table: &[u64], handle: NvmlDevice) -> Option<usize> {
    let offset = (handle as usize).checked_sub(table.as_ptr() as usize)?;
    let slot = size_of::<u64>();
    if offset % slot != 0 {
        return None;
    }
    let index = offset / slot;
    (index < table.len()).then_some(index)
}

/// The GPU a handle (its own or its alias) stands for.
fn index_of(handle: NvmlDevice) -> Option<usize> {
    slot_in(&HANDLE_SLOTS, handle).or_else(|| slot_in(&ALIAS_SLOTS, handle))
}

/// MIG device handles: one table row of `MAX_MIG_DEVICES` per GPU, indexed by the MIG device's
/// position in the scenario's `mig_devices` list.
static MIG_HANDLE_SLOTS: [u64; MAX_DEVICES * MAX_MIG_DEVICES] = [0; MAX_DEVICES * MAX_MIG_DEVICES];

fn mig_handle_for(gpu: usize, k: usize) -> NvmlDevice {
    MIG_HANDLE_SLOTS
        .as_ptr()
        .wrapping_add(gpu * MAX_MIG_DEVICES + k)
        .cast_mut()
        .cast::<c_void>()
}

fn mig_index_of(handle: NvmlDevice) -> Option<(usize, usize)> {
    let offset = (handle as usize).checked_sub(MIG_HANDLE_SLOTS.as_ptr() as usize)?;
    let slot = size_of::<u64>();
    if offset % slot != 0 {
        return None;
    }
    let n = offset / slot;
    (n < MAX_DEVICES * MAX_MIG_DEVICES).then_some((n / MAX_MIG_DEVICES, n % MAX_MIG_DEVICES))
}

/// What a handle stands for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    /// GPU `i`.
    Gpu(usize),
    /// MIG device `k` (position in `mig_devices`) of GPU `i`.
    Mig(usize, usize),
}

impl Target {
    /// The GPU index (the parent's for a MIG device), for fail rules.
    fn gpu(self) -> usize {
        match self {
            Self::Gpu(i) | Self::Mig(i, _) => i,
        }
    }
}

/// Decodes a GPU or MIG device handle of the loaded scenario (MIG handles only while MIG is on).
fn target_of(l: &Loaded, handle: NvmlDevice) -> Option<Target> {
    if let Some(i) = index_of(handle) {
        return (i < l.sc.devices.len()).then_some(Target::Gpu(i));
    }
    let (i, k) = mig_index_of(handle)?;
    let d = l.sc.devices.get(i)?;
    (d.mig_on() && k < d.mig_devices.len()).then_some(Target::Mig(i, k))
}

// ---------------------------------------------------------------------------------------------
// Entry helpers: counting, init check, fail injection, handle decoding, no unwinding.
// ---------------------------------------------------------------------------------------------

/// Runs `body` under the global lock after counting the call; a panic becomes 999.
fn entry(name: &'static str, body: impl FnOnce(&mut Global) -> NvmlReturn) -> NvmlReturn {
    catch_unwind(AssertUnwindSafe(|| {
        let delay = {
            let mut g = lock();
            *g.calls.entry(name).or_insert(0) += 1;
            g.loaded.as_ref().and_then(|l| {
                l.sc.slow
                    .iter()
                    .find(|r| r.function == name)
                    .map(|r| std::time::Duration::from_millis(r.ms))
            })
        };
        // A blocking driver call: the other functions answer meanwhile.
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        body(&mut lock())
    }))
    .unwrap_or(NVML_ERROR_UNKNOWN)
}

/// An initialised-only function; `device` is the device index the fail rules may match.
fn system_call(
    name: &'static str,
    device: Option<usize>,
    body: impl FnOnce(&mut Loaded) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        if let Some(code) = l.take_failure(name, device) {
            return code;
        }
        body(l)
    })
}

/// A function taking an `nvmlDevice_t`: invalid handles give INVALID_ARGUMENT (after fail rules).
fn device_call(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&mut Loaded, usize) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        let index = index_of(handle).filter(|&i| i < l.sc.devices.len());
        if let Some(code) = l.take_failure(name, index) {
            return code;
        }
        match index {
            Some(i) => body(l, i),
            None => NVML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// A function taking a GPU or a MIG device handle; the fail rules see the GPU's index.
fn any_call(
    name: &'static str,
    handle: NvmlDevice,
    body: impl FnOnce(&mut Loaded, Target) -> NvmlReturn,
) -> NvmlReturn {
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNINITIALIZED;
        };
        let target = target_of(l, handle);
        let mig = match target {
            Some(Target::Mig(_, k)) => Some(k),
            _ => None,
        };
        if let Some(code) = l.take_failure_on(name, target.map(Target::gpu), mig) {
            return code;
        }
        match target {
            Some(t) => body(l, t),
            None => NVML_ERROR_INVALID_ARGUMENT,
        }
    })
}

/// Writes `text` NUL-terminated into a caller buffer of `length` bytes.
///
/// # Safety
/// `buf` is NULL or valid for `length` bytes of writes.
unsafe fn write_str(buf: *mut c_char, length: c_uint, text: &str) -> NvmlReturn {
    if buf.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let bytes = text.as_bytes();
    if (length as usize) < bytes.len() + 1 {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller's buffer holds `length` >= len + 1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), bytes.len());
        buf.add(bytes.len()).write(0);
    }
    NVML_SUCCESS
}

/// Writes `value` through an out-pointer, or returns INVALID_ARGUMENT for NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> NvmlReturn {
    if out.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    // SAFETY: non-null and valid per the caller's contract; unaligned is tolerated.
    unsafe { out.write_unaligned(value) };
    NVML_SUCCESS
}

/// Reads a caller's C string (NULL gives None).
///
/// # Safety
/// `text` is NULL or points to a NUL-terminated string.
unsafe fn read_cstr(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null, NUL-terminated per the caller's contract.
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}

// ---------------------------------------------------------------------------------------------
// Init / shutdown / error strings
// ---------------------------------------------------------------------------------------------

fn init(name: &'static str) -> NvmlReturn {
    entry(name, |g| {
        if let Err(msg) = ensure_loaded(g) {
            eprintln!("fake-nvml: {name}: {msg}");
            return NVML_ERROR_UNKNOWN;
        }
        let Some(l) = g.loaded.as_mut() else {
            return NVML_ERROR_UNKNOWN;
        };
        if let Some(code) = l.take_failure(name, None) {
            return code;
        }
        if let Some(code) = l.sc.init_error {
            return code;
        }
        g.refcount += 1;
        g.init_count += 1;
        NVML_SUCCESS
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> NvmlReturn {
    init("nvmlInit_v2")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit() -> NvmlReturn {
    init("nvmlInit")
}

/// Flags (NO_GPUS = 1, NO_ATTACH = 2, FORCE_INIT = 4) are accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> NvmlReturn {
    init("nvmlInitWithFlags")
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> NvmlReturn {
    let name = "nvmlShutdown";
    entry(name, |g| {
        if g.refcount == 0 {
            return NVML_ERROR_UNINITIALIZED;
        }
        if let Some(code) = g.loaded.as_mut().and_then(|l| l.take_failure(name, None)) {
            return code;
        }
        g.refcount -= 1;
        NVML_SUCCESS
    })
}

/// Never NULL; works without init; not subject to fail rules (it returns a string).
#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: NvmlReturn) -> *const c_char {
    let empty = catch_unwind(|| {
        let mut g = lock();
        *g.calls.entry("nvmlErrorString").or_insert(0) += 1;
        let _ = ensure_loaded(&mut g);
        g.loaded
            .as_ref()
            .is_some_and(|l| l.sc.garbage.empty_error_strings)
    })
    .unwrap_or(false);
    if empty {
        return c"".as_ptr();
    }
    abi::error_string(result).as_ptr()
}

// ---------------------------------------------------------------------------------------------
// System queries
// ---------------------------------------------------------------------------------------------

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    system_call("nvmlSystemGetDriverVersion", None, |l| {
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(version, length, &l.sc.driver_version) }
    })
}

/// Works without init (as in real NVML): the scenario is read if possible, else the default.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    let name = "nvmlSystemGetNVMLVersion";
    entry(name, |g| {
        let _ = ensure_loaded(g);
        let text = match g.loaded.as_mut() {
            Some(l) => {
                if let Some(code) = l.take_failure(name, None) {
                    return code;
                }
                l.sc.nvml_version.clone()
            }
            None => scenario::DEFAULT_NVML_VERSION.to_owned(),
        };
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(version, length, &text) }
    })
}

fn cuda_version(name: &'static str, out: *mut c_int) -> NvmlReturn {
    system_call(name, None, |l| {
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, l.sc.cuda_driver_version) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> NvmlReturn {
    cuda_version("nvmlSystemGetCudaDriverVersion", version)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> NvmlReturn {
    cuda_version("nvmlSystemGetCudaDriverVersion_v2", version)
}

/// Unknown pid gives NOT_FOUND.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    system_call("nvmlSystemGetProcessName", None, |l| {
        if name.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        match l.sc.process_names.get(&pid) {
            // SAFETY: caller buffer of `length` bytes (NVML contract).
            Some(text) => unsafe { write_str(name, length, text) },
            None => NVML_ERROR_NOT_FOUND,
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Device enumeration
// ---------------------------------------------------------------------------------------------

fn device_count(name: &'static str, count: *mut c_uint) -> NvmlReturn {
    system_call(name, None, |l| {
        #[allow(clippy::cast_possible_truncation)] // at most MAX_DEVICES
        let n =
            l.sc.garbage
                .device_count
                .unwrap_or(l.sc.devices.len() as c_uint);
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(count, n) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> NvmlReturn {
    device_count("nvmlDeviceGetCount_v2", count)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount(count: *mut c_uint) -> NvmlReturn {
    device_count("nvmlDeviceGetCount", count)
}

/// Hands out the handle of device `index`, honouring its `handle_error`.
///
/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn give_handle(l: &Loaded, index: usize, out: *mut NvmlDevice) -> NvmlReturn {
    if out.is_null() {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    let Some(device) = l.sc.devices.get(index) else {
        return NVML_ERROR_INVALID_ARGUMENT;
    };
    if let Some(code) = device.handle_error {
        return code;
    }
    // SAFETY: non-null out-pointer per the NVML contract.
    unsafe { put(out, handle_for(index)) }
}

fn handle_by_index(name: &'static str, index: c_uint, out: *mut NvmlDevice) -> NvmlReturn {
    let index = index as usize;
    system_call(name, Some(index), |l| {
        // SAFETY: out-pointer per the NVML contract.
        unsafe { give_handle(l, index, out) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex(
    index: c_uint,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    handle_by_index("nvmlDeviceGetHandleByIndex", index, device)
}

/// Exact UUID match (a GPU's, or a MIG device's while MIG is on); NOT_FOUND if none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    system_call("nvmlDeviceGetHandleByUUID", None, |l| {
        // SAFETY: NUL-terminated string per the NVML contract.
        let Some(uuid) = (unsafe { read_cstr(uuid) }) else {
            return NVML_ERROR_INVALID_ARGUMENT;
        };
        if device.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        if let Some(i) = l.sc.devices.iter().position(|d| d.uuid == uuid) {
            // SAFETY: out-pointer per the NVML contract.
            return unsafe { give_handle(l, i, device) };
        }
        // A MIG UUID gives that MIG device's handle (while MIG is on).
        for (i, d) in l.sc.devices.iter().enumerate() {
            if !d.mig_on() {
                continue;
            }
            if let Some(k) = d.mig_devices.iter().position(|m| m.uuid == uuid) {
                // SAFETY: out-pointer per the NVML contract.
                return unsafe { put(device, mig_handle_for(i, k)) };
            }
        }
        NVML_ERROR_NOT_FOUND
    })
}

/// Accepts `domain:bus:device.function` (4- or 8-digit domain), `domain:bus:device`,
/// `bus:device.function`; compared numerically. Malformed gives INVALID_ARGUMENT, no match
/// NOT_FOUND.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    pci_bus_id: *const c_char,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    system_call("nvmlDeviceGetHandleByPciBusId_v2", None, |l| {
        // SAFETY: NUL-terminated string per the NVML contract.
        let Some(wanted) = (unsafe { read_cstr(pci_bus_id) }) else {
            return NVML_ERROR_INVALID_ARGUMENT;
        };
        let Some(wanted) = scenario::parse_bus_id(&wanted) else {
            return NVML_ERROR_INVALID_ARGUMENT;
        };
        if device.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        match l
            .sc
            .devices
            .iter()
            .position(|d| scenario::parse_bus_id(&d.pci_bus_id) == Some(wanted))
        {
            // SAFETY: out-pointer per the NVML contract.
            Some(i) => unsafe { give_handle(l, i, device) },
            None => NVML_ERROR_NOT_FOUND,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetIndex(device: NvmlDevice, index: *mut c_uint) -> NvmlReturn {
    device_call("nvmlDeviceGetIndex", device, |_, i| {
        #[allow(clippy::cast_possible_truncation)] // at most MAX_DEVICES
        let i = i as c_uint;
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(index, i) }
    })
}

// ---------------------------------------------------------------------------------------------
// Device identity
// ---------------------------------------------------------------------------------------------

/// With `garbage.name_without_nul` the whole buffer is filled with `A` and no NUL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: NvmlDevice,
    name: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceGetName", device, |l, t| {
        if l.sc.garbage.name_without_nul && !name.is_null() {
            // SAFETY: caller buffer of `length` bytes (NVML contract).
            unsafe { std::ptr::write_bytes(name.cast::<u8>(), b'A', length as usize) };
            return NVML_SUCCESS;
        }
        let text = match t {
            Target::Gpu(i) => &l.sc.devices[i].name,
            Target::Mig(i, k) => &l.sc.devices[i].mig_devices[k].name,
        };
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(name, length, text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: NvmlDevice,
    uuid: *mut c_char,
    length: c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceGetUUID", device, |l, t| {
        let text = match t {
            Target::Gpu(i) => &l.sc.devices[i].uuid,
            Target::Mig(i, k) => &l.sc.devices[i].mig_devices[k].uuid,
        };
        // SAFETY: caller buffer of `length` bytes (NVML contract).
        unsafe { write_str(uuid, length, text) }
    })
}

/// Copies `text` into a fixed C char array, truncating so a NUL always fits.
fn fixed<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = text.len().min(N.saturating_sub(1));
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

fn pci_info(name: &'static str, device: NvmlDevice, pci: *mut PciInfo) -> NvmlReturn {
    device_call(name, device, |l, i| {
        let d = &l.sc.devices[i];
        let (domain, bus, dev, _function) =
            scenario::parse_bus_id(&d.pci_bus_id).unwrap_or((0, 0, 0, 0));
        let legacy = format!("{:04X}:{bus:02X}:{dev:02X}.0", domain & 0xFFFF);
        let info = PciInfo {
            bus_id_legacy: fixed(&legacy),
            domain,
            bus,
            device: dev,
            pci_device_id: d.pci_device_id,
            pci_sub_system_id: d.pci_subsystem_id,
            bus_id: fixed(&d.pci_bus_id),
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(pci, info) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: NvmlDevice,
    pci: *mut PciInfo,
) -> NvmlReturn {
    pci_info("nvmlDeviceGetPciInfo_v3", device, pci)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v2(
    device: NvmlDevice,
    pci: *mut PciInfo,
) -> NvmlReturn {
    pci_info("nvmlDeviceGetPciInfo_v2", device, pci)
}

// ---------------------------------------------------------------------------------------------
// MIG (all present since R450.51)
// ---------------------------------------------------------------------------------------------

/// The scenario's `mig_mode`/`mig_pending`; NOT_SUPPORTED for a GPU without `mig_mode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: NvmlDevice,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMigMode", device, |l, i| {
        if current_mode.is_null() || pending_mode.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let d = &l.sc.devices[i];
        let Some(current) = d.mig_mode else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        // SAFETY: both out-pointers are non-null (checked above), per the NVML contract.
        unsafe {
            put(current_mode, current);
            put(pending_mode, d.mig_pending.unwrap_or(current))
        }
    })
}

/// `max_mig_devices` for a GPU that supports MIG; NOT_SUPPORTED otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(
    device: NvmlDevice,
    count: *mut c_uint,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMaxMigDeviceCount", device, |l, i| {
        let d = &l.sc.devices[i];
        if d.mig_mode.is_none() {
            return NVML_ERROR_NOT_SUPPORTED;
        }
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(count, d.max_mig_devices) }
    })
}

/// The MIG device at `index`: NOT_FOUND for an empty slot below the maximum, INVALID_ARGUMENT
/// at or past it, NOT_SUPPORTED while MIG is off.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: NvmlDevice,
    index: c_uint,
    mig_device: *mut NvmlDevice,
) -> NvmlReturn {
    device_call("nvmlDeviceGetMigDeviceHandleByIndex", device, |l, i| {
        if mig_device.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let d = &l.sc.devices[i];
        if !d.mig_on() {
            return NVML_ERROR_NOT_SUPPORTED;
        }
        if index >= d.max_mig_devices {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        match d.mig_devices.iter().position(|m| m.slot == index) {
            // SAFETY: out-pointer per the NVML contract.
            Some(k) => unsafe { put(mig_device, mig_handle_for(i, k)) },
            None => NVML_ERROR_NOT_FOUND,
        }
    })
}

/// A MIG device's id (`pick` chooses which); NOT_SUPPORTED on a GPU handle.
fn instance_id(
    name: &'static str,
    device: NvmlDevice,
    id: *mut c_uint,
    pick: fn(&scenario::MigDevice) -> u32,
) -> NvmlReturn {
    any_call(name, device, |l, t| match t {
        Target::Gpu(_) => NVML_ERROR_NOT_SUPPORTED,
        // SAFETY: out-pointer per the NVML contract.
        Target::Mig(i, k) => unsafe { put(id, pick(&l.sc.devices[i].mig_devices[k])) },
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> NvmlReturn {
    instance_id("nvmlDeviceGetGpuInstanceId", device, id, |m| {
        m.gpu_instance_id
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(
    device: NvmlDevice,
    id: *mut c_uint,
) -> NvmlReturn {
    instance_id("nvmlDeviceGetComputeInstanceId", device, id, |m| {
        m.compute_instance_id
    })
}

/// 1 for a MIG device handle, 0 for a GPU's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(
    device: NvmlDevice,
    is_mig: *mut c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceIsMigDeviceHandle", device, |_, t| {
        let v = c_uint::from(matches!(t, Target::Mig(..)));
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(is_mig, v) }
    })
}

/// The GPU of a MIG device handle; INVALID_ARGUMENT for a GPU handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: NvmlDevice,
    device: *mut NvmlDevice,
) -> NvmlReturn {
    any_call(
        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
        mig_device,
        |l, t| match t {
            Target::Gpu(_) => NVML_ERROR_INVALID_ARGUMENT,
            Target::Mig(i, _) => {
                let parent = if l.sc.garbage.parent_handle_alias {
                    alias_for(i)
                } else {
                    handle_for(i)
                };
                // SAFETY: out-pointer per the NVML contract.
                unsafe { put(device, parent) }
            }
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------

/// The figures a handle's memory functions give: (total, free, reserved), or an error code.
/// A GPU in MIG mode with `aggregate_error` refuses; a MIG device gives its own.
fn memory_of(l: &Loaded, t: Target) -> Result<(u64, u64, u64), NvmlReturn> {
    match t {
        Target::Gpu(i) => {
            let d = &l.sc.devices[i];
            if let Some(code) = d.aggregate_error.filter(|_| d.mig_on()) {
                return Err(code);
            }
            match d.memory_error {
                Some(code) => Err(code),
                None => Ok((d.total, d.free, d.reserved)),
            }
        }
        Target::Mig(i, k) => {
            let m = &l.sc.devices[i].mig_devices[k];
            match m.memory_error {
                Some(code) => Err(code),
                None => Ok((m.total, m.free, m.reserved)),
            }
        }
    }
}

/// The scenario's `utilization`, NOT_SUPPORTED without one (and on MIG devices, as the
/// driver does).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    device: NvmlDevice,
    out: *mut abi::Utilization,
) -> NvmlReturn {
    any_call("nvmlDeviceGetUtilizationRates", device, |l, t| {
        if out.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let u = match t {
            Target::Gpu(i) => l.sc.devices[i].utilization,
            Target::Mig(..) => None,
        };
        let Some(u) = u else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        let value = abi::Utilization {
            gpu: u.gpu,
            memory: u.memory,
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(out, value) }
    })
}

/// v1: `used = total - free` (includes reserved).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo(
    device: NvmlDevice,
    memory: *mut Memory,
) -> NvmlReturn {
    any_call("nvmlDeviceGetMemoryInfo", device, |l, t| {
        if memory.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let (total, free, _) = match memory_of(l, t) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let value = Memory {
            total,
            free,
            used: total.saturating_sub(free),
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(memory, value) }
    })
}

/// v2: only `version == 0x0200_0028` is accepted (else FUNCTION_NOT_FOUND, as real drivers do);
/// `used = total - reserved - free` (allocated only).
#[cfg(feature = "r510")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: NvmlDevice,
    memory: *mut MemoryV2,
) -> NvmlReturn {
    any_call("nvmlDeviceGetMemoryInfo_v2", device, |l, t| {
        if memory.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: non-null; the caller passes an nvmlMemory_v2_t (version is its first field).
        let version = unsafe { memory.cast::<u32>().read_unaligned() };
        if version != MEMORY_V2_VERSION {
            return NVML_ERROR_FUNCTION_NOT_FOUND;
        }
        let (total, free, reserved) = match memory_of(l, t) {
            Ok(m) => m,
            Err(code) => return code,
        };
        let v2_total = match t {
            Target::Gpu(i) => l.sc.devices[i].v2_total.unwrap_or(total),
            Target::Mig(..) => total,
        };
        let value = MemoryV2 {
            version,
            total: v2_total,
            reserved,
            free,
            used: total.saturating_sub(reserved).saturating_sub(free),
        };
        // SAFETY: out-pointer per the NVML contract.
        unsafe { put(memory, value) }
    })
}

// ---------------------------------------------------------------------------------------------
// Process lists
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Compute,
    Graphics,
    Mps,
}

/// Element layout: v1 = 16-byte `nvmlProcessInfo_v1_t`, Wide = 24-byte `nvmlProcessInfo_t`
/// (`_v2` and `_v3`), V3Wide = the 32-byte element of `_v3` in drivers 535.43–535.86.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    V1,
    Wide,
    #[cfg_attr(not(feature = "r535-wide"), allow(dead_code))]
    V3Wide,
}

/// The `_v3` element layout of this build.
#[cfg(feature = "r535-wide")]
const V3_LAYOUT: Layout = Layout::V3Wide;
#[cfg(not(feature = "r535-wide"))]
const V3_LAYOUT: Layout = Layout::Wide;

/// Rows of a scenario process list; `ids` fills instance ids the rows leave out.
fn list_rows(list: &[scenario::Process], ids: (u32, u32)) -> Vec<ProcessInfoV2> {
    list.iter()
        .filter_map(|p| {
            let pid = match &p.pid_file {
                Some(f) => std::fs::read_to_string(f).ok()?.trim().parse().ok()?,
                None => p.pid,
            };
            Some(ProcessInfoV2 {
                pid,
                used_gpu_memory: p.used.unwrap_or(VALUE_NOT_AVAILABLE_U64),
                gpu_instance_id: p.gpu_instance_id.unwrap_or(ids.0),
                compute_instance_id: p.compute_instance_id.unwrap_or(ids.1),
            })
        })
        .collect()
}

/// The rows of a MIG device's list, with its instance ids.
fn mig_rows(m: &scenario::MigDevice, family: Family) -> Vec<ProcessInfoV2> {
    let list = match family {
        Family::Compute => &m.compute_processes[..],
        Family::Graphics => &m.graphics_processes[..],
        Family::Mps => &[],
    };
    list_rows(list, (m.gpu_instance_id, m.compute_instance_id))
}

/// The rows a list currently holds. A GPU in MIG mode adds every MIG device's rows.
fn rows(l: &Loaded, t: Target, family: Family) -> Vec<ProcessInfoV2> {
    let index = t.gpu();
    let d = &l.sc.devices[index];
    let mut out: Vec<ProcessInfoV2> = match t {
        Target::Mig(_, k) => mig_rows(&d.mig_devices[k], family),
        Target::Gpu(_) => {
            let own = match family {
                Family::Compute => &d.compute_processes[..],
                Family::Graphics => &d.graphics_processes[..],
                Family::Mps => &[],
            };
            let mut out = list_rows(own, (VALUE_NOT_AVAILABLE_U32, VALUE_NOT_AVAILABLE_U32));
            if d.mig_on() {
                for m in &d.mig_devices {
                    out.extend(mig_rows(m, family));
                }
            }
            out
        }
    };
    if family == Family::Compute
        && t == Target::Gpu(index)
        && l.grown.get(index).copied().unwrap_or(false)
    {
        out.extend((0..d.grow_between_calls).map(|k| ProcessInfoV2 {
            pid: GROW_PID_BASE + k,
            used_gpu_memory: GROW_USED,
            gpu_instance_id: VALUE_NOT_AVAILABLE_U32,
            compute_instance_id: VALUE_NOT_AVAILABLE_U32,
        }));
    }
    if l.sc.hide_other_namespaces {
        // The real driver lists only the processes of the caller's PID namespace.
        out.retain(|row| std::path::Path::new(&format!("/proc/{}", row.pid)).exists());
    }
    if l.sc.garbage.process_used_max {
        for row in &mut out {
            row.used_gpu_memory = VALUE_NOT_AVAILABLE_U64;
        }
    }
    out
}

/// Writes `rows` into the caller's array with the element stride of `layout`.
///
/// # Safety
/// `infos` is valid for `rows.len()` elements of the layout's type.
unsafe fn write_rows(infos: *mut c_void, layout: Layout, rows: &[ProcessInfoV2]) {
    for (k, row) in rows.iter().enumerate() {
        // SAFETY: k < capacity, per the caller's contract.
        unsafe {
            match layout {
                Layout::V1 => infos
                    .cast::<ProcessInfoV1>()
                    .add(k)
                    .write_unaligned(ProcessInfoV1 {
                        pid: row.pid,
                        used_gpu_memory: row.used_gpu_memory,
                    }),
                Layout::Wide => infos.cast::<ProcessInfoV2>().add(k).write_unaligned(*row),
                Layout::V3Wide => {
                    infos
                        .cast::<ProcessInfoV3Wide>()
                        .add(k)
                        .write_unaligned(ProcessInfoV3Wide {
                            pid: row.pid,
                            used_gpu_memory: row.used_gpu_memory,
                            gpu_instance_id: row.gpu_instance_id,
                            compute_instance_id: row.compute_instance_id,
                            used_gpu_cc_protected_memory: 0,
                        })
                }
            }
        }
    }
}

/// The two-call `*infoCount` protocol shared by all nine process-list functions.
fn process_list(
    name: &'static str,
    device: NvmlDevice,
    info_count: *mut c_uint,
    infos: *mut c_void,
    family: Family,
    layout: Layout,
) -> NvmlReturn {
    any_call(name, device, |l, t| {
        if info_count.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let d = &l.sc.devices[t.gpu()];
        if let (Target::Gpu(_), Some(code)) = (t, d.aggregate_error.filter(|_| d.mig_on())) {
            return code;
        }
        let i = t.gpu();
        // SAFETY: non-null in/out count per the NVML contract.
        let capacity = unsafe { info_count.read_unaligned() };
        let current = rows(l, t, family);
        #[allow(clippy::cast_possible_truncation)]
        let needed = current.len().min(u32::MAX as usize) as c_uint;

        let code = if let Some(ask) = l.sc.garbage.ask_for_rows.filter(|&n| capacity < n) {
            // SAFETY: non-null out count.
            unsafe { info_count.write_unaligned(ask) };
            NVML_ERROR_INSUFFICIENT_SIZE
        } else if d.grow_past_every_resize
            && family == Family::Compute
            && matches!(t, Target::Gpu(_))
        {
            // However large the buffer, the list has meanwhile outgrown it.
            let needed = capacity.max(needed).saturating_mul(3) / 2 + 16;
            // SAFETY: non-null out count.
            unsafe { info_count.write_unaligned(needed) };
            NVML_ERROR_INSUFFICIENT_SIZE
        } else if l.sc.garbage.count_larger_than_buffer && capacity > 0 && !infos.is_null() {
            let n = needed.min(capacity) as usize;
            // SAFETY: n <= capacity elements; out count non-null.
            unsafe {
                write_rows(infos, layout, &current[..n]);
                info_count.write_unaligned(capacity.saturating_add(10));
            }
            NVML_SUCCESS
        } else if needed == 0 {
            // SAFETY: non-null out count.
            unsafe { info_count.write_unaligned(0) };
            NVML_SUCCESS
        } else if capacity < needed {
            // SAFETY: non-null out count.
            unsafe { info_count.write_unaligned(needed) };
            NVML_ERROR_INSUFFICIENT_SIZE
        } else if infos.is_null() {
            NVML_ERROR_INVALID_ARGUMENT
        } else {
            // SAFETY: the caller's array holds `capacity` >= needed elements.
            unsafe {
                write_rows(infos, layout, &current);
                info_count.write_unaligned(needed);
            }
            NVML_SUCCESS
        };

        // `grow_between_calls`: after the first Compute call on this device returns, the list
        // gains the synthetic processes (seen from the next call on).
        if family == Family::Compute
            && t == Target::Gpu(i)
            && let Some(grown) = l.grown.get_mut(i)
        {
            *grown = true;
        }
        code
    })
}

macro_rules! process_fn {
    ($(#[$attr:meta])* $name:ident, $family:expr, $layout:expr, $elem:ty) => {
        $(#[$attr])*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(
            device: NvmlDevice,
            info_count: *mut c_uint,
            infos: *mut $elem,
        ) -> NvmlReturn {
            process_list(
                stringify!($name),
                device,
                info_count,
                infos.cast::<c_void>(),
                $family,
                $layout,
            )
        }
    };
}

process_fn!(
    nvmlDeviceGetComputeRunningProcesses,
    Family::Compute,
    Layout::V1,
    ProcessInfoV1
);
process_fn!(
    nvmlDeviceGetGraphicsRunningProcesses,
    Family::Graphics,
    Layout::V1,
    ProcessInfoV1
);
process_fn!(
    nvmlDeviceGetMPSComputeRunningProcesses,
    Family::Mps,
    Layout::V1,
    ProcessInfoV1
);
process_fn!(
    #[cfg(feature = "v2-procs")]
    nvmlDeviceGetComputeRunningProcesses_v2,
    Family::Compute,
    Layout::Wide,
    ProcessInfoV2
);
process_fn!(
    #[cfg(feature = "v2-procs")]
    nvmlDeviceGetGraphicsRunningProcesses_v2,
    Family::Graphics,
    Layout::Wide,
    ProcessInfoV2
);
process_fn!(
    #[cfg(feature = "v2-procs")]
    nvmlDeviceGetMPSComputeRunningProcesses_v2,
    Family::Mps,
    Layout::Wide,
    ProcessInfoV2
);
process_fn!(
    #[cfg(feature = "r510")]
    nvmlDeviceGetComputeRunningProcesses_v3,
    Family::Compute,
    V3_LAYOUT,
    ProcessInfoV2
);
process_fn!(
    #[cfg(feature = "r510")]
    nvmlDeviceGetGraphicsRunningProcesses_v3,
    Family::Graphics,
    V3_LAYOUT,
    ProcessInfoV2
);
process_fn!(
    #[cfg(feature = "r510")]
    nvmlDeviceGetMPSComputeRunningProcesses_v3,
    Family::Mps,
    V3_LAYOUT,
    ProcessInfoV2
);

// ---------------------------------------------------------------------------------------------
// Presence-only symbols: what a loader probes to tell driver generations apart
// ---------------------------------------------------------------------------------------------

/// Confidential-computing memory sizes (R535 and later). The fake has no such memory.
#[cfg(feature = "r510")]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetConfComputeMemSizeInfo(
    device: NvmlDevice,
    _info: *mut c_void,
) -> NvmlReturn {
    any_call("nvmlDeviceGetConfComputeMemSizeInfo", device, |_, _| {
        NVML_ERROR_NOT_SUPPORTED
    })
}

/// The detailed process list (535.104.05 and later, where the 32-byte data moved). The fake
/// lists processes through the classic functions only.
#[cfg(all(feature = "r510", not(feature = "r535-wide")))]
#[unsafe(no_mangle)]
pub extern "C" fn nvmlDeviceGetRunningProcessDetailList(
    device: NvmlDevice,
    _list: *mut c_void,
) -> NvmlReturn {
    any_call("nvmlDeviceGetRunningProcessDetailList", device, |_, _| {
        NVML_ERROR_NOT_SUPPORTED
    })
}

// ---------------------------------------------------------------------------------------------
// Test introspection (not NVML)
// ---------------------------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip() {
        for i in [0, 1, MAX_DEVICES - 1] {
            assert!(!handle_for(i).is_null());
            assert_eq!(index_of(handle_for(i)), Some(i));
        }
        assert_eq!(index_of(std::ptr::null_mut()), None);
        assert_eq!(index_of(handle_for(MAX_DEVICES)), None);
        assert_eq!(
            index_of(handle_for(1).cast::<u8>().wrapping_add(1).cast()),
            None
        );
        for (i, k) in [(0, 0), (3, 5), (MAX_DEVICES - 1, MAX_MIG_DEVICES - 1)] {
            assert_eq!(mig_index_of(mig_handle_for(i, k)), Some((i, k)));
            assert_eq!(index_of(mig_handle_for(i, k)), None);
        }
        assert_eq!(mig_index_of(handle_for(0)), None);
    }
}
