//! The host's memory: how much RAM the machine has and how much is available.

use crate::{error::HypomnesisError, error::Result};

/// The host's RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct HostMemory {
    /// Physical memory the OS manages, bytes.
    pub total_bytes: u64,
    /// Memory available for new allocations without swapping (Linux `MemAvailable`, Windows
    /// `ullAvailPhys`), bytes; `None` where the OS does not say (macOS).
    pub available_bytes: Option<u64>,
}

impl HostMemory {
    /// Figures given by hand (a view's tests, a host measured elsewhere).
    #[must_use]
    pub const fn new(total_bytes: u64, available_bytes: Option<u64>) -> Self {
        Self {
            total_bytes,
            available_bytes,
        }
    }
}

/// The host's total and available RAM.
///
/// # Errors
///
/// [`HypomnesisError::Io`] when the source cannot be read, [`HypomnesisError::Ram`] when what
/// it gave makes no sense (no total, a malformed line) or the platform has no implementation.
///
/// # Platform-specific behaviour
///
/// Linux: `MemTotal` and `MemAvailable` of `<procfs>/meminfo` (the procfs root in use, so
/// `--procfs /host/proc` gives the host's); this system's own is kept open after the first
/// call and read again (procfs formats it afresh), one system call where opening it costs four. Windows: `GlobalMemoryStatusEx`. macOS: the
/// `hw.memsize` sysctl; `available_bytes` is `None`.
pub fn host_memory() -> Result<HostMemory> {
    #[cfg(target_os = "linux")]
    {
        let path = crate::host::roots::procfs()?.join("meminfo");
        let own = crate::host::roots::procfs_is_own();
        super::linux::with_meminfo(&path, own, crate::host::parse::memory::meminfo)
            .map_err(|e| crate::error::io_at(&path, &e))?
            .map(|(total_bytes, available_bytes)| HostMemory {
                total_bytes,
                available_bytes,
            })
            .map_err(|why| {
                HypomnesisError::ram(
                    crate::error::ErrorKind::Other,
                    format!("{}: {why}", path.display()),
                )
            })
    }
    #[cfg(windows)]
    {
        ffi::global_status()
            .map(|(total_bytes, avail)| HostMemory {
                total_bytes,
                available_bytes: Some(avail),
            })
            .map_err(|code| {
                HypomnesisError::ram(
                    crate::error::ErrorKind::Other,
                    format!("GlobalMemoryStatusEx failed (GetLastError {code})"),
                )
            })
    }
    #[cfg(target_os = "macos")]
    {
        ffi::memsize()
            .map(|total_bytes| HostMemory {
                total_bytes,
                available_bytes: None,
            })
            .ok_or_else(|| {
                HypomnesisError::ram(crate::error::ErrorKind::Other, "sysctl hw.memsize failed")
            })
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
    {
        Err(HypomnesisError::ram(
            crate::error::ErrorKind::Other,
            format!(
                "host memory is not implemented for this platform ({})",
                std::env::consts::OS
            ),
        ))
    }
}

#[cfg(any(windows, target_os = "macos"))]
mod ffi {
    //! The one foreign call of the host memory reader.
    #![allow(unsafe_code)]

    /// `(ullTotalPhys, ullAvailPhys)`, or the `GetLastError` code.
    #[cfg(windows)]
    pub(super) fn global_status() -> Result<(u64, u64), u32> {
        use windows::Win32::Foundation::GetLastError;
        use windows::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};
        let mut status = MEMORYSTATUSEX {
            dwLength: u32::try_from(size_of::<MEMORYSTATUSEX>()).unwrap_or(u32::MAX),
            ..MEMORYSTATUSEX::default()
        };
        // SAFETY: `status` is a writable MEMORYSTATUSEX whose dwLength says its size.
        match unsafe { GlobalMemoryStatusEx(&raw mut status) } {
            Ok(()) => Ok((status.ullTotalPhys, status.ullAvailPhys)),
            // SAFETY: GetLastError only reads this thread's last-error value.
            Err(_) => Err(unsafe { GetLastError() }.0),
        }
    }

    /// The `hw.memsize` sysctl, bytes.
    #[cfg(target_os = "macos")]
    pub(super) fn memsize() -> Option<u64> {
        let mut value = 0_u64;
        let mut len = size_of::<u64>();
        // SAFETY: the name is NUL-terminated; `value` is a writable u64 of `len` bytes.
        let rc = unsafe {
            libc::sysctlbyname(
                c"hw.memsize".as_ptr(),
                (&raw mut value).cast(),
                &raw mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0 && len == size_of::<u64>() && value > 0).then_some(value)
    }
}
