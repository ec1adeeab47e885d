//! The device number of the file behind each of a process's descriptors, never its path:
//! `statx(2)` of each `<procfs>/<pid>/fd/<n>`, relative to the open `fd` directory (no path
//! walk from the root for each), following the link to the opened file itself, with
//! `AT_STATX_DONT_SYNC`, so that a file on a network or FUSE filesystem is answered from what
//! the kernel has cached rather than by its server (which may not answer). A path's text says
//! nothing here: a regular file named `/dev/nvidia0` in another mount namespace is not a GPU,
//! and a GPU's node under another name is one.
// statx(2) has no wrapper in std, and libc's needs glibc 2.28; it is called by number.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;

/// A process's open `fd` directory.
pub(crate) struct FdDir(OwnedFd);

impl FdDir {
    /// Opens `path` (`<procfs>/<pid>/fd`) as a directory.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)?;
        Ok(Self(f.into()))
    }

    /// The `(major, minor)` of the character device descriptor `name` (its number, as the
    /// directory lists it) is open on; `None` for any other file, or one gone meanwhile.
    pub(crate) fn char_device(&self, name: &CStr) -> Option<(u32, u32)> {
        // SAFETY: all-zero bytes are a valid `statx` (integers and arrays of them).
        let mut st: libc::statx = unsafe { std::mem::zeroed() };
        // SAFETY: the directory descriptor is open for the life of `self`; `name` is a valid
        // NUL-terminated string for the call; `st` is a writable `statx` the kernel fills.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_statx,
                self.0.as_raw_fd(),
                name.as_ptr(),
                libc::AT_STATX_DONT_SYNC,
                libc::STATX_TYPE,
                &raw mut st,
            )
        };
        if rc != 0 || u32::from(st.stx_mode) & libc::S_IFMT != libc::S_IFCHR {
            return None;
        }
        Some((st.stx_rdev_major, st.stx_rdev_minor))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// This process's own descriptors: `/dev/null` (1:3, a character device) by its number,
    /// a regular file and a pipe as none.
    #[test]
    fn a_descriptor_is_told_by_its_device_number() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let file = std::fs::File::open("/proc/self/stat").unwrap();
        let (r, w) = std::io::pipe().unwrap();
        let dir = FdDir::open(Path::new("/proc/self/fd")).unwrap();
        let of = |fd: &dyn std::os::fd::AsRawFd| {
            let name = std::ffi::CString::new(fd.as_raw_fd().to_string()).unwrap();
            dir.char_device(&name)
        };
        assert_eq!(of(&null), Some((1, 3)));
        assert_eq!(of(&file), None);
        assert_eq!(of(&r), None);
        assert_eq!(dir.char_device(c"999999"), None, "no such descriptor");
        drop((w, r));
    }
}
