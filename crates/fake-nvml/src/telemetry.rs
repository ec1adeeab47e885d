//! What monitors such as nvtop and nvitop ask besides memory and processes: clocks,
//! temperatures, fans, power, the PCIe link, encoder and decoder load, persistence and
//! performance state, display, ECC, per-process utilization. A scenario holds none of the
//! others' figures, so each answers `NVML_ERROR_NOT_SUPPORTED`, as a driver does for a sensor or a
//! feature a board lacks, after the usual checks (init, fail rules, handle, NULL out-pointers:
//! INVALID_ARGUMENT). A monitor that looks the symbols up at start (nvtop refuses to start
//! when one is missing) then runs and shows its "N/A".
//!
//! The exceptions, answered from what the scenario does have: the per-process utilization
//! samples (`process_samples`, NOT_SUPPORTED without them), `nvmlDeviceGetPciInfo` (the
//! original, 52-byte `nvmlPciInfo_t`) and `nvmlDeviceGetMinorNumber` (the GPU's index, as
//! `/dev/nvidia<index>` on a host whose GPUs were probed in order).

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

use crate::abi::{
    NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED, NVML_SUCCESS, NvmlReturn, ProcessUtilizationSample,
};
use crate::entry::{any_call, device_call, put};
use crate::handles::{NvmlDevice, Target};
use crate::scenario;

/// Defines device functions (the device handle comes first, then the arguments written) that
/// check the out-pointers listed in brackets and answer NOT_SUPPORTED.
macro_rules! not_supported {
    ($($(#[$attr:meta])* $name:ident($($arg:ident: $ty:ty),+) [$($out:ident),+];)+) => {$(
        $(#[$attr])*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(device: NvmlDevice, $($arg: $ty),+) -> NvmlReturn {
            $(let _ = $arg;)+
            any_call(stringify!($name), device, |_, _| {
                if $($out.is_null())||+ {
                    return NVML_ERROR_INVALID_ARGUMENT;
                }
                NVML_ERROR_NOT_SUPPORTED
            })
        }
    )+};
}

not_supported! {
    /// `unsigned int *speed` (percent of the fan's maximum).
    nvmlDeviceGetFanSpeed(speed: *mut c_uint) [speed];
    /// `(unsigned int fan, unsigned int *speed)`.
    nvmlDeviceGetFanSpeed_v2(fan: c_uint, speed: *mut c_uint) [speed];
    nvmlDeviceGetNumFans(count: *mut c_uint) [count];
    /// `(nvmlTemperatureSensors_t sensor, unsigned int *celsius)`.
    nvmlDeviceGetTemperature(sensor: c_uint, temp: *mut c_uint) [temp];
    /// `nvmlTemperature_t *` (version, sensor, value): the versioned form of the above.
    nvmlDeviceGetTemperatureV(temp: *mut c_void) [temp];
    /// `(nvmlTemperatureThresholds_t kind, unsigned int *celsius)`.
    nvmlDeviceGetTemperatureThreshold(kind: c_uint, temp: *mut c_uint) [temp];
    /// `(nvmlClockType_t kind, unsigned int *mhz)`.
    nvmlDeviceGetClockInfo(kind: c_uint, mhz: *mut c_uint) [mhz];
    nvmlDeviceGetMaxClockInfo(kind: c_uint, mhz: *mut c_uint) [mhz];
    nvmlDeviceGetMaxCustomerBoostClock(kind: c_uint, mhz: *mut c_uint) [mhz];
    nvmlDeviceGetApplicationsClock(kind: c_uint, mhz: *mut c_uint) [mhz];
    /// `(nvmlClockType_t kind, nvmlClockId_t id, unsigned int *mhz)`.
    nvmlDeviceGetClock(kind: c_uint, id: c_uint, mhz: *mut c_uint) [mhz];
    /// `unsigned int *milliwatts`.
    nvmlDeviceGetPowerUsage(milliwatts: *mut c_uint) [milliwatts];
    nvmlDeviceGetEnforcedPowerLimit(milliwatts: *mut c_uint) [milliwatts];
    nvmlDeviceGetPowerManagementLimit(milliwatts: *mut c_uint) [milliwatts];
    nvmlDeviceGetPowerManagementDefaultLimit(milliwatts: *mut c_uint) [milliwatts];
    nvmlDeviceGetPowerManagementLimitConstraints(min: *mut c_uint, max: *mut c_uint) [min, max];
    /// `nvmlEnableState_t *`.
    nvmlDeviceGetPowerManagementMode(mode: *mut c_uint) [mode];
    /// `nvmlPstates_t *`.
    nvmlDeviceGetPowerState(state: *mut c_uint) [state];
    nvmlDeviceGetPerformanceState(state: *mut c_uint) [state];
    /// `unsigned long long *millijoules` since the driver loaded.
    nvmlDeviceGetTotalEnergyConsumption(millijoules: *mut c_ulonglong) [millijoules];
    nvmlDeviceGetCurrPcieLinkGeneration(generation: *mut c_uint) [generation];
    nvmlDeviceGetCurrPcieLinkWidth(width: *mut c_uint) [width];
    nvmlDeviceGetMaxPcieLinkGeneration(generation: *mut c_uint) [generation];
    nvmlDeviceGetMaxPcieLinkWidth(width: *mut c_uint) [width];
    /// `(nvmlPcieUtilCounter_t counter, unsigned int *kib_per_second)`.
    nvmlDeviceGetPcieThroughput(counter: c_uint, value: *mut c_uint) [value];
    nvmlDeviceGetPcieReplayCounter(value: *mut c_uint) [value];
    /// `(unsigned int *percent, unsigned int *sampling_period_us)`.
    nvmlDeviceGetEncoderUtilization(percent: *mut c_uint, period: *mut c_uint) [percent, period];
    nvmlDeviceGetDecoderUtilization(percent: *mut c_uint, period: *mut c_uint) [percent, period];
    /// `nvmlEnableState_t *`.
    nvmlDeviceGetPersistenceMode(mode: *mut c_uint) [mode];
    nvmlDeviceGetDisplayMode(mode: *mut c_uint) [mode];
    nvmlDeviceGetDisplayActive(mode: *mut c_uint) [mode];
    /// `nvmlComputeMode_t *`.
    nvmlDeviceGetComputeMode(mode: *mut c_uint) [mode];
    /// `(nvmlEnableState_t *current, nvmlEnableState_t *pending)`.
    nvmlDeviceGetEccMode(current: *mut c_uint, pending: *mut c_uint) [current, pending];
    /// `(nvmlMemoryErrorType_t, nvmlEccCounterType_t, unsigned long long *count)`.
    nvmlDeviceGetTotalEccErrors(kind: c_uint, counter: c_uint, count: *mut c_ulonglong) [count];
    /// `(nvmlDriverModel_t *current, nvmlDriverModel_t *pending)`: Windows only.
    nvmlDeviceGetDriverModel(current: *mut c_uint, pending: *mut c_uint) [current, pending];
    nvmlDeviceGetDriverModel_v2(current: *mut c_uint, pending: *mut c_uint) [current, pending];
    /// `(int *major, int *minor)`.
    nvmlDeviceGetCudaComputeCapability(major: *mut c_int, minor: *mut c_int) [major, minor];
    /// `nvmlDeviceArchitecture_t *`.
    nvmlDeviceGetArchitecture(arch: *mut c_uint) [arch];
    /// `nvmlBAR1Memory_t *` (total, free, used).
    nvmlDeviceGetBAR1MemoryInfo(bar1: *mut c_void) [bar1];
    /// `(char *serial, unsigned int length)`: boards without a serial answer NOT_SUPPORTED.
    nvmlDeviceGetSerial(serial: *mut c_char, length: c_uint) [serial];
    /// `(unsigned int count, nvmlFieldValue_t *values)`.
    nvmlDeviceGetFieldValues(count: c_int, values: *mut c_void) [values];
}

/// The scenario's `process_samples` newer than `last_seen` (CPU microseconds): the sizing call
/// (NULL samples) and a short buffer answer INSUFFICIENT_SIZE with the count needed, none is
/// NOT_FOUND; NOT_SUPPORTED without any (and on MIG devices, as the driver does).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: NvmlDevice,
    samples: *mut ProcessUtilizationSample,
    count: *mut c_uint,
    last_seen: c_ulonglong,
) -> NvmlReturn {
    any_call("nvmlDeviceGetProcessUtilization", device, |l, t| {
        if count.is_null() {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        let listed = match t {
            Target::Gpu(i) => l.sc.devices[i].process_samples.as_deref(),
            Target::Mig(..) => None,
        };
        let Some(listed) = listed else {
            return NVML_ERROR_NOT_SUPPORTED;
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let rows: Vec<ProcessUtilizationSample> = listed
            .iter()
            .map(|s| ProcessUtilizationSample {
                pid: s.pid,
                time_stamp: now.saturating_sub((s.age_s * 1e6) as u64),
                sm_util: s.sm,
                mem_util: s.mem,
                enc_util: s.enc,
                dec_util: s.dec,
            })
            .filter(|s| s.time_stamp > last_seen)
            .collect();
        if rows.is_empty() {
            return NVML_ERROR_NOT_FOUND;
        }
        let needed = c_uint::try_from(rows.len()).unwrap_or(c_uint::MAX);
        // SAFETY: `count` is non-null (checked) and points to the caller's capacity.
        let room = unsafe { *count };
        if samples.is_null() || room < needed {
            // SAFETY: as above.
            unsafe { *count = needed };
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        for (k, row) in rows.into_iter().enumerate() {
            // SAFETY: the caller gave room for `room` >= `needed` samples.
            unsafe { samples.add(k).write(row) };
        }
        // SAFETY: as above.
        unsafe { *count = needed };
        NVML_SUCCESS
    })
}

/// The original `nvmlPciInfo_t` (before NVML 2.285 widened the bus id): 52 bytes, the bus id
/// in 16 characters, four reserved words at the end.
#[repr(C)]
struct PciInfoV1 {
    bus_id: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_subsystem_id: c_uint,
    reserved: [c_uint; 4],
}

/// The first PCI-info function: `domain:bus:device.function` in the short 16-character form.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo(device: NvmlDevice, pci: *mut c_void) -> NvmlReturn {
    device_call("nvmlDeviceGetPciInfo", device, |l, i| {
        let d = &l.sc.devices[i];
        let (domain, bus, dev, _function) =
            scenario::parse_bus_id(&d.pci_bus_id).unwrap_or((0, 0, 0, 0));
        let legacy = format!("{:04X}:{bus:02X}:{dev:02X}.0", domain & 0xFFFF);
        let mut bus_id: [c_char; 16] = [0; 16];
        for (slot, &byte) in bus_id.iter_mut().zip(legacy.as_bytes().iter().take(15)) {
            *slot = c_char::from_ne_bytes([byte]);
        }
        let info = PciInfoV1 {
            bus_id,
            domain,
            bus,
            device: dev,
            pci_device_id: d.pci_device_id,
            pci_subsystem_id: d.pci_subsystem_id,
            reserved: [0; 4],
        };
        // SAFETY: out-pointer to an nvmlPciInfo_t (v1) per the NVML contract.
        unsafe { put(pci.cast::<PciInfoV1>(), info) }
    })
}

/// The GPU's index; NOT_SUPPORTED on a MIG device (which has no `/dev/nvidia<N>` node).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(
    device: NvmlDevice,
    minor: *mut c_uint,
) -> NvmlReturn {
    any_call("nvmlDeviceGetMinorNumber", device, |_, t| match t {
        #[allow(clippy::cast_possible_truncation)] // at most MAX_DEVICES
        // SAFETY: out-pointer per the NVML contract.
        Target::Gpu(i) => unsafe { put(minor, i as c_uint) },
        Target::Mig(..) if minor.is_null() => NVML_ERROR_INVALID_ARGUMENT,
        Target::Mig(..) => NVML_ERROR_NOT_SUPPORTED,
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::c_void;
    use std::ptr::{null_mut, with_exposed_provenance_mut};

    use super::*;
    use crate::abi::NVML_ERROR_UNINITIALIZED;
    use crate::devices::nvmlDeviceGetHandleByIndex_v2;
    use crate::init::{nvmlInit_v2, nvmlShutdown};

    /// The only test of this crate that initialises the fake (the others parse scenarios), so
    /// the process-wide state and `FAKE_NVML_SCENARIO` are its own.
    #[test]
    fn monitor_entry_points_answer_like_a_driver() {
        let path =
            std::env::temp_dir().join(format!("fake-nvml-telemetry-{}.json", std::process::id()));
        std::fs::write(
            &path,
            r#"{"devices": [{"pci_bus_id": "00000001:18:00.0", "pci_device_id": 590483678},
                            {"mig_mode": 1, "mig_devices": [{}]}]}"#,
        )
        .unwrap();
        let mut v: c_uint = 7;
        // SAFETY: every call below passes valid out-pointers or deliberately NULL ones.
        unsafe {
            assert_eq!(
                nvmlDeviceGetFanSpeed(with_exposed_provenance_mut(8), &raw mut v),
                NVML_ERROR_UNINITIALIZED
            );
            std::env::set_var("FAKE_NVML_SCENARIO", &path);
            assert_eq!(nvmlInit_v2(), NVML_SUCCESS);
            let mut dev: NvmlDevice = null_mut();
            assert_eq!(nvmlDeviceGetHandleByIndex_v2(0, &raw mut dev), NVML_SUCCESS);

            assert_eq!(
                nvmlDeviceGetFanSpeed(dev, &raw mut v),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(
                nvmlDeviceGetTemperature(dev, 0, &raw mut v),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(
                nvmlDeviceGetClockInfo(dev, 1, &raw mut v),
                NVML_ERROR_NOT_SUPPORTED
            );
            let (mut a, mut b) = (0, 0);
            assert_eq!(
                nvmlDeviceGetEncoderUtilization(dev, &raw mut a, &raw mut b),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(
                nvmlDeviceGetProcessUtilization(dev, null_mut(), &raw mut a, 0),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(v, 7, "nothing is written");
            assert_eq!(
                nvmlDeviceGetPowerUsage(dev, null_mut()),
                NVML_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                nvmlDeviceGetPowerUsage(with_exposed_provenance_mut(8), &raw mut v),
                NVML_ERROR_INVALID_ARGUMENT,
                "an unknown handle"
            );

            let mut pci = [0xAAu8; 60];
            assert_eq!(
                nvmlDeviceGetPciInfo(dev, pci.as_mut_ptr().cast::<c_void>()),
                NVML_SUCCESS
            );
            assert_eq!(&pci[..13], b"0001:18:00.0\0");
            let word =
                |k: usize| u32::from_ne_bytes(pci[16 + 4 * k..20 + 4 * k].try_into().unwrap());
            assert_eq!(
                (word(0), word(1), word(2), word(3)),
                (1, 0x18, 0, 590_483_678)
            );
            assert!(pci[36..52].iter().all(|&b| b == 0), "reserved words zeroed");
            assert!(
                pci[52..].iter().all(|&b| b == 0xAA),
                "52 bytes written, no more"
            );

            let mut other: NvmlDevice = null_mut();
            assert_eq!(
                nvmlDeviceGetHandleByIndex_v2(1, &raw mut other),
                NVML_SUCCESS
            );
            assert_eq!(nvmlDeviceGetMinorNumber(other, &raw mut v), NVML_SUCCESS);
            assert_eq!(v, 1);
            let mut mig: NvmlDevice = null_mut();
            assert_eq!(
                crate::mig::nvmlDeviceGetMigDeviceHandleByIndex(other, 0, &raw mut mig),
                NVML_SUCCESS
            );
            assert_eq!(
                nvmlDeviceGetMinorNumber(mig, &raw mut v),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(
                nvmlDeviceGetTemperature(mig, 0, &raw mut v),
                NVML_ERROR_NOT_SUPPORTED
            );
            assert_eq!(nvmlShutdown(), NVML_SUCCESS);
        }
        let _ = std::fs::remove_file(&path);
    }
}
