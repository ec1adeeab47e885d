//! The only foreign calls of the macOS RSS reader.
#![allow(unsafe_code)]

use std::mem::size_of;

/// The `TASK_VM_INFO` flavor of `task_info` (`<mach/task_info.h>`).
const TASK_VM_INFO: libc::task_flavor_t = 22;

/// `struct task_vm_info` of `<mach/task_info.h>` up to and including `phys_footprint` (what the
/// header calls revision 1). The kernel fills as many words as the count it is given allows, so
/// this prefix is all that is asked for. The header packs the struct to 4 bytes; every field here
/// already sits at a naturally aligned offset, so `repr(C)` gives the same offsets and size.
#[allow(dead_code)] // the kernel fills every field; only phys_footprint is read
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct TaskVmInfoRev1 {
    virtual_size: u64,
    region_count: i32,
    page_size: i32,
    resident_size: u64,
    resident_size_peak: u64,
    device: u64,
    device_peak: u64,
    internal: u64,
    internal_peak: u64,
    external: u64,
    external_peak: u64,
    reusable: u64,
    reusable_peak: u64,
    purgeable_volatile_pmap: u64,
    purgeable_volatile_resident: u64,
    purgeable_volatile_virtual: u64,
    compressed: u64,
    compressed_peak: u64,
    compressed_lifetime: u64,
    phys_footprint: u64,
}

// 2 × 4 + 18 × 8 bytes, i.e. 38 `natural_t` words: `TASK_VM_INFO_REV1_COUNT`.
const _: () = assert!(size_of::<TaskVmInfoRev1>() == 152);

/// `TASK_VM_INFO_REV1_COUNT`: the size of [`TaskVmInfoRev1`] in `natural_t` words (38).
#[allow(clippy::cast_possible_truncation)] // 38, checked at compile time above
const REV1_COUNT: libc::mach_msg_type_number_t =
    (size_of::<TaskVmInfoRev1>() / size_of::<libc::natural_t>()) as libc::mach_msg_type_number_t;

/// Why `task_info(TASK_VM_INFO)` gave no footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The call returned this `kern_return_t`.
    Kern(libc::kern_return_t),
    /// The call succeeded but filled only this many words, too few to include `phys_footprint`.
    Short(libc::mach_msg_type_number_t),
}

/// Words `task_info` must fill for `phys_footprint` to be present.
pub(crate) const WORDS_NEEDED: libc::mach_msg_type_number_t = REV1_COUNT;

/// The calling task's port (`mach_task_self()`).
#[allow(deprecated)] // libc points at the mach2 crate for this; the libSystem symbol is stable.
fn task_self() -> libc::mach_port_t {
    // SAFETY: reads libSystem's `mach_task_self_` global, set before `main` runs; the send
    // right it names belongs to the process and is not consumed by `task_info`.
    unsafe { libc::mach_task_self() }
}

/// `phys_footprint` of the calling task, in bytes.
pub(crate) fn phys_footprint() -> Result<u64, Failure> {
    let mut info = TaskVmInfoRev1::default();
    let mut count = REV1_COUNT;
    let task = task_self();
    // SAFETY: `info` is a live, writable, 8-aligned `TaskVmInfoRev1` of exactly `count` (38)
    // `natural_t` words; the kernel writes at most `count` words into it and stores the number
    // it wrote in `count`, which is a live `u32`. Both outlive the call.
    let kr = unsafe {
        libc::task_info(
            task,
            TASK_VM_INFO,
            (&raw mut info).cast::<libc::integer_t>(),
            &raw mut count,
        )
    };
    if kr != libc::KERN_SUCCESS {
        return Err(Failure::Kern(kr));
    }
    if count < REV1_COUNT {
        return Err(Failure::Short(count));
    }
    Ok(info.phys_footprint)
}
