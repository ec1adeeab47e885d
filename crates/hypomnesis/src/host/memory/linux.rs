//! Linux: resident set from procfs.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use super::ffi;
use crate::error::io_at;
use crate::host::parse::memory as parse;
use crate::{error::HypomnesisError, error::Result};

pub(crate) fn page_size() -> u64 {
    static PAGE: OnceLock<u64> = OnceLock::new();
    // 4096 is only used if sysconf itself fails, which Linux never does for _SC_PAGESIZE.
    *PAGE.get_or_init(|| ffi::page_size().unwrap_or(4096))
}

/// Clock ticks per second, asked once; `None` if the system cannot tell.
pub(crate) fn clock_ticks_per_second() -> Option<u64> {
    static TICKS: OnceLock<Option<u64>> = OnceLock::new();
    *TICKS.get_or_init(ffi::clock_ticks)
}

/// This process's `statm`, kept open with the fork generation it was opened in: read again
/// at offset 0 it costs one system call instead of three. A forked child opens its own.
static OWN_STATM: Mutex<Option<(u64, fs::File)>> = Mutex::new(None);

/// RSS of the calling process from `/proc/self`: its `statm` kept open, read again; opened
/// anew (and `status` asked) when that fails.
pub(crate) fn self_rss() -> Result<u64> {
    if let Some(bytes) = kept_statm() {
        return Ok(bytes);
    }
    rss_at(Path::new("/proc/self"))
}

/// The resident bytes from this process's kept `statm`, opening it when it is not kept (or
/// kept from before a fork: the parent's file, in a forked child).
fn kept_statm() -> Option<u64> {
    use std::os::unix::fs::FileExt as _;
    let generation = ffi::fork_generation()?;
    // Never waited for: another thread reading it now (or, in a child forked meanwhile, a
    // thread that no longer exists) sends this caller to the path instead.
    let mut slot = match OWN_STATM.try_lock() {
        Ok(slot) => slot,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    if slot.as_ref().is_none_or(|(g, _)| *g != generation) {
        *slot = fs::File::open("/proc/self/statm")
            .ok()
            .map(|f| (generation, f));
    }
    let (_, file) = slot.as_ref()?;
    let mut buf = [0_u8; 256];
    // Not listed in `in_flight()`: this process's own statm waits on no other process (the
    // path read below, the fallback, is listed as every read of a file is).
    let n = file.read_at(&mut buf, 0);
    let text = n
        .ok()
        .and_then(|n| buf.get(..n))
        .and_then(|b| std::str::from_utf8(b).ok());
    if let Some(Ok(bytes)) = text.map(|t| parse::statm_resident_bytes(t, page_size())) {
        return Some(bytes);
    }
    // Opened anew next time; this time read from the path, with its error if it fails.
    *slot = None;
    None
}

/// RSS of the process whose procfs directory is `dir` (`/proc/self`, `/proc/1234`, or a fixture):
/// `statm` first, `status` (`VmRSS`) when `statm` is missing or malformed.
pub(crate) fn rss_at(dir: &Path) -> Result<u64> {
    let statm = dir.join("statm");
    let first = match read_small(&statm) {
        Ok(text) => match parse::statm_resident_bytes(&text, page_size()) {
            Ok(bytes) => return Ok(bytes),
            Err(why) => HypomnesisError::ram(
                crate::error::ErrorKind::Other,
                format!("{}: {why}", statm.display()),
            ),
        },
        Err(e) => io_at(&statm, &e),
    };
    let status = dir.join("status");
    match crate::host::file::read_capped(&status, crate::host::file::STATUS) {
        Ok(text) => parse::status_vmrss_bytes(&text).map_err(|why| {
            HypomnesisError::ram(
                crate::error::ErrorKind::Other,
                format!("{first}; and {}: {why}", status.display()),
            )
        }),
        Err(_) => Err(first),
    }
}

/// Read a small procfs file (statm is under 100 bytes) without a heap-growing loop.
fn read_small(path: &Path) -> std::io::Result<String> {
    let mut buf = [0_u8; 256];
    let _waiting = crate::inflight::reading(path);
    let mut file = fs::File::open(path)?;
    let mut len = 0;
    while let Some(rest) = buf.get_mut(len..) {
        if rest.is_empty() {
            break;
        }
        let asked = rest.len();
        let n = file.read(rest)?;
        len += n;
        // procfs fills a read as far as the file goes: a short read is the whole file, and
        // a second read to see the end would cost a system call more per process.
        if n < asked {
            break;
        }
    }
    let bytes = buf.get(..len).unwrap_or_default();
    String::from_utf8(bytes.to_vec())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn clock_ticks_are_user_hz() {
        // USER_HZ, the unit of `stat`'s CPU times, is 100 on every architecture Linux still
        // ships (x86, arm64, ppc64le, s390x, riscv): 250 ticks are 2.5 s.
        assert_eq!(clock_ticks_per_second(), Some(100));
    }

    #[test]
    fn fixture_root_statm_then_status() {
        let dir = std::env::temp_dir().join(format!("hmn-rss-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("statm"), "100 25 3 1 0 20 0\n").unwrap();
        assert_eq!(rss_at(&dir).unwrap(), 25 * page_size());
        fs::write(dir.join("statm"), "garbage").unwrap();
        fs::write(dir.join("status"), "Name:\tx\nVmRSS:\t  512 kB\n").unwrap();
        assert_eq!(rss_at(&dir).unwrap(), 512 * 1024);
        fs::write(dir.join("status"), "Name:\tx\n").unwrap();
        let err = rss_at(&dir).unwrap_err().to_string();
        assert!(err.contains("statm") && err.contains("VmRSS"), "{err}");
        fs::remove_file(dir.join("status")).unwrap();
        fs::remove_file(dir.join("statm")).unwrap();
        let err = rss_at(&dir).unwrap_err();
        assert!(matches!(err, HypomnesisError::Io(_)), "{err}");
        assert!(err.to_string().contains("statm"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn self_rss_is_positive_and_matches_status() {
        let rss = self_rss().unwrap();
        assert!(rss > 0);
        let status =
            parse::status_vmrss_bytes(&fs::read_to_string("/proc/self/status").unwrap()).unwrap();
        // Both are the same counter; allow for pages touched between the two reads.
        assert!(
            rss.abs_diff(status) < 64 * 1024 * 1024,
            "statm {rss} vs status {status}"
        );
    }
}
