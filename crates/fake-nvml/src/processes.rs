//! Process lists: the nine `nvmlDeviceGet*RunningProcesses*` functions and their element
//! layouts, and the presence-only symbols a loader probes to pick the `_v3` layout.

use std::ffi::{c_uint, c_void};

use crate::abi::{
    NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NOT_SUPPORTED,
    NVML_SUCCESS, NVML_VALUE_NOT_AVAILABLE, NVML_VALUE_NOT_AVAILABLE_U32, NvmlReturn,
    ProcessInfoV1, ProcessInfoV2, ProcessInfoV3Wide,
};
use crate::entry::any_call;
use crate::handles::{NvmlDevice, Target};
use crate::scenario::{self, GROW_PID_BASE, GROW_USED};
use crate::state::Loaded;

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
            // A figure that changes while the scenario runs: read at every call, the file's
            // number when it holds one, else `used`.
            let from_file = p
                .used_file
                .as_ref()
                .and_then(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok());
            Some(ProcessInfoV2 {
                pid,
                used_gpu_memory: from_file.or(p.used).unwrap_or(NVML_VALUE_NOT_AVAILABLE),
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
                Family::Mps => &d.mps_processes[..],
            };
            let mut out = list_rows(
                own,
                (NVML_VALUE_NOT_AVAILABLE_U32, NVML_VALUE_NOT_AVAILABLE_U32),
            );
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
            gpu_instance_id: NVML_VALUE_NOT_AVAILABLE_U32,
            compute_instance_id: NVML_VALUE_NOT_AVAILABLE_U32,
        }));
    }
    if l.sc.hide_other_namespaces {
        // The real driver lists only the processes of the caller's PID namespace.
        out.retain(|row| std::path::Path::new(&format!("/proc/{}", row.pid)).exists());
    }
    if l.sc.garbage.process_used_max {
        for row in &mut out {
            row.used_gpu_memory = NVML_VALUE_NOT_AVAILABLE;
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

// Presence-only symbols: what a loader probes to tell driver generations apart

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
