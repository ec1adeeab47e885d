//! macOS: the calling task's physical footprint from `task_info(TASK_VM_INFO)`.
//!
//! `phys_footprint` is what Activity Monitor shows as a process's "Memory": resident anonymous
//! memory plus its compressed pages plus `IOKit` / GPU memory charged to it. It is the figure the
//! kernel's memory limits act on, so it stands in for Linux's resident set size here.

#[path = "macos_ffi.rs"]
mod ffi;

use crate::{error::HypomnesisError, error::Result};

/// Physical footprint of the calling process, in bytes.
pub(crate) fn self_rss() -> Result<u64> {
    ffi::phys_footprint()
        .map_err(|f| HypomnesisError::ram(crate::error::ErrorKind::Other, describe(f)))
}

/// The message of a failed `task_info` call.
fn describe(f: ffi::Failure) -> String {
    match f {
        ffi::Failure::Kern(kr) => format!(
            "task_info(mach_task_self(), TASK_VM_INFO) failed: {} ({kr})",
            kern_return_name(kr)
        ),
        ffi::Failure::Short(words) => format!(
            "task_info(mach_task_self(), TASK_VM_INFO) filled {words} words, fewer than the {} \
             that include phys_footprint",
            ffi::WORDS_NEEDED
        ),
    }
}

/// The `<mach/kern_return.h>` name of the codes `task_info` is known to return.
fn kern_return_name(kr: libc::kern_return_t) -> &'static str {
    match kr {
        1 => "KERN_INVALID_ADDRESS",
        2 => "KERN_PROTECTION_FAILURE",
        4 => "KERN_INVALID_ARGUMENT",
        5 => "KERN_FAILURE",
        6 => "KERN_RESOURCE_SHORTAGE",
        15 => "KERN_INVALID_NAME",
        16 => "KERN_INVALID_TASK",
        17 => "KERN_INVALID_RIGHT",
        _ => "unknown kern_return_t",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn footprint_is_plausible_and_grows_with_touched_memory() {
        let before = self_rss().unwrap();
        assert!(before > 1 << 20, "{before}");
        let big = std::hint::black_box(vec![1_u8; 64 << 20]);
        let after = self_rss().unwrap();
        assert!(
            after >= before + (60 << 20),
            "before {before}, after {after}"
        );
        drop(big);
    }

    #[test]
    fn messages_name_the_call_and_code() {
        let m = describe(ffi::Failure::Kern(4));
        assert!(
            m.contains("TASK_VM_INFO") && m.contains("KERN_INVALID_ARGUMENT (4)"),
            "{m}"
        );
        assert!(describe(ffi::Failure::Short(36)).contains("36 words"));
    }
}
