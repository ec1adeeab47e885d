//! Device handles: addresses of the elements of static tables, one table for the GPUs, one
//! for their alias handles and one for the MIG devices.

use std::ffi::c_void;

use crate::scenario::{MAX_DEVICES, MAX_MIG_DEVICES};
use crate::state::Loaded;

/// `nvmlDevice_t`.
pub(crate) type NvmlDevice = *mut c_void;

static HANDLE_SLOTS: [u64; MAX_DEVICES] = [0; MAX_DEVICES];

pub(crate) fn handle_for(index: usize) -> NvmlDevice {
    HANDLE_SLOTS
        .as_ptr()
        .wrapping_add(index)
        .cast_mut()
        .cast::<c_void>()
}

/// Second handles of the GPUs, given as MIG devices' parents with `parent_handle_alias`.
static ALIAS_SLOTS: [u64; MAX_DEVICES] = [0; MAX_DEVICES];

pub(crate) fn alias_for(index: usize) -> NvmlDevice {
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
pub(crate) fn index_of(handle: NvmlDevice) -> Option<usize> {
    slot_in(&HANDLE_SLOTS, handle).or_else(|| slot_in(&ALIAS_SLOTS, handle))
}

/// MIG device handles: one table row of `MAX_MIG_DEVICES` per GPU, indexed by the MIG device's
/// position in the scenario's `mig_devices` list.
static MIG_HANDLE_SLOTS: [u64; MAX_DEVICES * MAX_MIG_DEVICES] = [0; MAX_DEVICES * MAX_MIG_DEVICES];

pub(crate) fn mig_handle_for(gpu: usize, k: usize) -> NvmlDevice {
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
pub(crate) enum Target {
    /// GPU `i`.
    Gpu(usize),
    /// MIG device `k` (position in `mig_devices`) of GPU `i`.
    Mig(usize, usize),
}

impl Target {
    /// The GPU index (the parent's for a MIG device), for fail rules.
    pub(crate) fn gpu(self) -> usize {
        match self {
            Self::Gpu(i) | Self::Mig(i, _) => i,
        }
    }
}

/// Decodes a GPU or MIG device handle of the loaded scenario (MIG handles only while MIG is on).
pub(crate) fn target_of(l: &Loaded, handle: NvmlDevice) -> Option<Target> {
    if let Some(i) = index_of(handle) {
        return (i < l.sc.devices.len()).then_some(Target::Gpu(i));
    }
    let (i, k) = mig_index_of(handle)?;
    let d = l.sc.devices.get(i)?;
    (d.mig_on() && k < d.mig_devices.len()).then_some(Target::Mig(i, k))
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
