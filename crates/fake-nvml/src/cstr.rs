//! The callers' C strings, read by the entry points and by the state (a library name).

use std::ffi::{CStr, c_char};

/// Reads a caller's C string (NULL gives None).
///
/// # Safety
/// `text` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn read_cstr(text: *const c_char) -> Option<String> {
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
