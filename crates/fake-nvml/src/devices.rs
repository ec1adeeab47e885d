//! Device enumeration (count, handles by index, UUID and PCI bus id) and identity (name,
//! UUID, PCI info).

use std::ffi::{c_char, c_uint};

use crate::abi::{
    NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND, NVML_SUCCESS, NvmlReturn, PciInfo,
};
use crate::cstr::read_cstr;
use crate::entry::{any_call, device_call, put, system_call, write_str};
use crate::handles::{NvmlDevice, Target, handle_for, mig_handle_for};
use crate::scenario;
use crate::state::Loaded;

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

// Identity

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
/// (`c_char` is `i8` or `u8` by platform; each byte keeps its bit pattern.)
fn fixed<const N: usize>(text: &str) -> [c_char; N] {
    let mut out: [c_char; N] = [0; N];
    for (slot, &byte) in out
        .iter_mut()
        .zip(text.as_bytes().iter().take(N.saturating_sub(1)))
    {
        *slot = c_char::from_ne_bytes([byte]);
    }
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
            pci_subsystem_id: d.pci_subsystem_id,
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
