//! Reading the host's files with a cap suited to each kind: a procfs or sysfs root can be a
//! tree anyone made (`--procfs`, `HYPOMNESIS_SYSFS`), and a 1 GB `status` or `product_name`
//! must cost what a real one does. A file larger than its cap is an error naming it, never a
//! silent cut (a cut number would read as another number).

// Only Linux reads these files.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::io::{self, Read};
use std::path::Path;

/// `/proc/<pid>/stat`: one line, the command name at most 64 bytes (real ones: under 400).
pub(crate) const STAT: u64 = 4 << 10;
/// `/proc/<pid>/status` (real ones: about 1.5 KiB).
pub(crate) const STATUS: u64 = 64 << 10;
/// `/proc/self/mountinfo` (a node with thousands of container mounts: a few MiB).
pub(crate) const MOUNTINFO: u64 = 16 << 20;
/// `/proc/meminfo` (real ones: about 1.5 KiB).
pub(crate) const MEMINFO: u64 = 64 << 10;
/// `/proc/<pid>/task/<tid>/children`: pids of up to 7 digits and a space, 500,000 children.
pub(crate) const CHILDREN: u64 = 4 << 20;
/// One sysfs attribute: a number, `uevent`, `product_name` (the kernel's page is 4 KiB).
#[cfg_attr(not(feature = "drm"), allow(dead_code))]
pub(crate) const SYSFS: u64 = 4 << 10;
/// One DRM fdinfo file (real ones: a few hundred bytes).
#[cfg_attr(not(feature = "drm"), allow(dead_code))]
pub(crate) const FDINFO: u64 = 64 << 10;

/// How much of a file the first read asks for (most procfs files are smaller).
const FIRST_READ: u64 = 4096;

/// The text of `path`, whole, when it is at most `cap` bytes; at most `cap + 1` bytes are read.
pub(crate) fn read_capped(path: &Path, cap: u64) -> io::Result<String> {
    let _waiting = crate::inflight::reading(path);
    // Room for a page at once: procfs files give their size as 0, and from an empty string
    // `read_to_string` probes with 32 bytes and doubles, eight reads for a 1.5 KB `meminfo`.
    let mut text = String::with_capacity(usize::try_from(cap.min(FIRST_READ)).unwrap_or(0));
    std::fs::File::open(path)?
        .take(cap.saturating_add(1))
        .read_to_string(&mut text)?;
    if text.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {cap} bytes", path.display()),
        ));
    }
    Ok(text)
}

/// The text of the small file at `path` (a procfs `stat` or `statm`, a fixture's stand-in) read
/// into `buf`, without a heap buffer: procfs formats such a file whole into a read that has
/// room for it, so a short read is the whole file, and the read that would see its end (a
/// system call more per file) is not made. A file that fills `buf` is refused as larger than
/// it, as [`read_capped`] refuses one past its cap; text that is not UTF-8 is refused too.
pub(crate) fn read_into<'a>(path: &Path, buf: &'a mut [u8]) -> io::Result<&'a str> {
    let _waiting = crate::inflight::reading(path);
    let mut file = std::fs::File::open(path)?;
    let mut len = 0;
    loop {
        let Some(rest) = buf.get_mut(len..).filter(|r| !r.is_empty()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is larger than {} bytes", path.display(), buf.len()),
            ));
        };
        let asked = rest.len();
        let n = match file.read(rest) {
            Ok(n) => n,
            // A signal before anything was read (a FIFO put where a file was expected).
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        len += n;
        if n < asked {
            break;
        }
    }
    std::str::from_utf8(buf.get(..len).unwrap_or_default()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not UTF-8", path.display()),
        )
    })
}

/// `file`'s text read again at offset 0 into `buf` (a procfs file kept open is formatted
/// afresh at each such read): `None` when the read fails, comes back empty or fills `buf` (the
/// file may be longer), or is not UTF-8. The caller says which path it waits on, if any.
#[cfg(unix)]
pub(crate) fn pread_text<'a>(file: &std::fs::File, buf: &'a mut [u8]) -> Option<&'a str> {
    use std::os::unix::fs::FileExt as _;
    let n = file.read_at(buf, 0).ok()?;
    if n == 0 || n >= buf.len() {
        return None;
    }
    std::str::from_utf8(buf.get(..n)?).ok()
}

/// The lock of a kept file, never waited for: `None` while another thread holds it (that
/// caller goes to the path instead); a poisoned lock is taken all the same.
pub(crate) fn lock_now<T>(kept: &std::sync::Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    match kept.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sparse 1 GiB file: read up to the cap and refused, in a moment and without holding it.
    #[test]
    fn a_file_larger_than_its_cap_is_refused_after_cap_bytes() {
        let dir = std::env::temp_dir().join(format!("hmn-capped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("status");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let t = std::time::Instant::now();
        let e = read_capped(&big, STATUS).unwrap_err();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 65536 bytes"), "{e}");
        let small = dir.join("small");
        std::fs::write(&small, "x".repeat(4096)).unwrap();
        assert_eq!(
            read_capped(&small, SYSFS).unwrap().len(),
            4096,
            "exactly the cap is whole"
        );
        std::fs::write(&small, "x".repeat(4097)).unwrap();
        assert!(read_capped(&small, SYSFS).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A short file is read whole; one that fills the buffer, or is not UTF-8, is refused by
    /// name; a real `stat` reads as it does by path.
    #[test]
    fn a_file_read_into_a_buffer_is_whole_or_refused() {
        let dir = std::env::temp_dir().join(format!("hmn-into-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("stat");
        let mut buf = [0_u8; 64];
        std::fs::write(&f, "x".repeat(63)).unwrap();
        assert_eq!(read_into(&f, &mut buf).unwrap().len(), 63);
        std::fs::write(&f, "x".repeat(64)).unwrap();
        let e = read_into(&f, &mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 64 bytes"), "{e}");
        assert!(e.to_string().contains(&*f.to_string_lossy()), "{e}");
        std::fs::write(&f, b"1 (\xff) S").unwrap();
        let e = read_into(&f, &mut buf).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        assert_eq!(
            read_into(&dir.join("gone"), &mut buf).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let _ = std::fs::remove_dir_all(&dir);
        #[cfg(target_os = "linux")]
        {
            let mut page = [0_u8; 4096];
            let stat = read_into(Path::new("/proc/self/stat"), &mut page)
                .unwrap()
                .to_owned();
            let by_path = std::fs::read_to_string("/proc/self/stat").unwrap();
            // The same process, read twice: its pid, name and state agree.
            let head = |t: &str| t.split(' ').take(3).collect::<Vec<_>>().join(" ");
            assert_eq!(head(&stat), head(&by_path));
        }
    }

    /// A signal that lands while a read waits (a FIFO put where a file was expected, a
    /// handler installed without `SA_RESTART`) does not fail the read: it is made again.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    #[test]
    fn a_read_interrupted_by_a_signal_goes_on() {
        use std::io::Write;
        extern "C" fn nothing(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, for a signal no other test uses, installed
        // without SA_RESTART so that a blocked read returns EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &raw const sa, std::ptr::null_mut()),
                0
            );
        }
        let dir = std::env::temp_dir().join(format!("hmn-eintr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("stat");
        let _ = std::fs::remove_file(&fifo);
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a NUL-terminated path and a mode.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                // SAFETY: pthread_self has no preconditions.
                tx.send(unsafe { libc::pthread_self() }).unwrap();
                let mut buf = [0_u8; 64];
                read_into(&fifo, &mut buf).map(str::to_owned)
            })
        };
        let thread = rx.recv().unwrap();
        // Opening for writing lets the reader's open return; it then waits in read.
        let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        // SAFETY: the reader thread is alive (it waits for the write below).
        assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR2) }, 0);
        std::thread::sleep(std::time::Duration::from_millis(100));
        writer.write_all(b"1 (x) S").unwrap();
        drop(writer);
        assert_eq!(reader.join().unwrap().unwrap(), "1 (x) S");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
