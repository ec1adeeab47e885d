//! Linux: resident set from procfs.

use std::fs;
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

/// How long the system whose procfs is `procfs` has been up: this system's boot clock when
/// `procfs` is its own `/proc` (what `/proc/uptime` shows, without opening it), else the
/// first figure of `procfs`'s `uptime`. `None` when it cannot be read.
pub(crate) fn uptime(procfs: &Path) -> Option<std::time::Duration> {
    if procfs == Path::new("/proc")
        && let Some(up) = ffi::boot_time()
    {
        return Some(up);
    }
    let text =
        crate::host::file::read_capped(&procfs.join("uptime"), crate::host::file::STAT).ok()?;
    let up: f64 = text.split_ascii_whitespace().next()?.parse().ok()?;
    std::time::Duration::try_from_secs_f64(up).ok()
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
    let generation = ffi::fork_generation()?;
    // Never waited for: another thread reading it now (or, in a child forked meanwhile, a
    // thread that no longer exists) sends this caller to the path instead.
    let mut slot = crate::host::file::lock_now(&OWN_STATM)?;
    if slot.as_ref().is_none_or(|(g, _)| *g != generation) {
        *slot = fs::File::open("/proc/self/statm")
            .ok()
            .map(|f| (generation, f));
    }
    let (_, file) = slot.as_ref()?;
    let mut buf = [0_u8; 256];
    // Not listed in `in_flight()`: this process's own statm waits on no other process (the
    // path read below, the fallback, is listed as every read of a file is).
    let text = crate::host::file::pread_text(file, &mut buf);
    if let Some(Ok(bytes)) = text.map(|t| parse::statm_resident_bytes(t, page_size())) {
        return Some(bytes);
    }
    // Opened anew next time; this time read from the path, with its error if it fails.
    *slot = None;
    None
}

/// The kernel's `meminfo` kept open, with the buffer it is read into: read again at offset
/// 0, procfs formats it afresh, so the host's memory at every refresh of a view costs one
/// `pread` where opening it by path costs an open, two reads and a close.
static KEPT_MEMINFO: Mutex<Option<(fs::File, Vec<u8>)>> = Mutex::new(None);

/// How much of `meminfo` a kept read takes (real ones: about 1.5 KiB); a longer one is read
/// by path, up to [`crate::host::file::MEMINFO`].
const KEPT_MEMINFO_CAP: usize = 16 << 10;

/// `parse` applied to the text of the `meminfo` at `path`. When `own` (the path is this
/// system's `/proc/meminfo`, not a file a caller may replace) the file is kept open and read
/// again; else, or when a kept read fails, it is read by path.
pub(crate) fn with_meminfo<T>(
    path: &Path,
    own: bool,
    parse: impl Fn(&str) -> T,
) -> std::io::Result<T> {
    // Never waited for: a caller on another thread sends this one to the path.
    let slot = if own {
        crate::host::file::lock_now(&KEPT_MEMINFO)
    } else {
        None
    };
    if let Some(mut slot) = slot {
        if slot.is_none() {
            let _waiting = crate::inflight::reading(path);
            *slot = fs::File::open(path)
                .ok()
                .map(|f| (f, vec![0; KEPT_MEMINFO_CAP]));
        }
        if let Some((file, buf)) = slot.as_mut() {
            let _waiting = crate::inflight::reading(path);
            if let Some(text) = crate::host::file::pread_text(file, buf) {
                return Ok(parse(text));
            }
        }
        // Opened anew next time; this time read by path, with its error if it fails.
        *slot = None;
    }
    let text = crate::host::file::read_capped(path, crate::host::file::MEMINFO)?;
    Ok(parse(&text))
}

/// RSS of the process whose procfs directory is `dir` (`/proc/self`, `/proc/1234`, or a fixture):
/// `statm` first, `status` (`VmRSS`) when `statm` is missing or malformed.
pub(crate) fn rss_at(dir: &Path) -> Result<u64> {
    let statm = dir.join("statm");
    // `statm` is under 100 bytes: read into the stack, once.
    let mut buf = [0_u8; 256];
    let first = match crate::host::file::read_into(&statm, &mut buf) {
        Ok(text) => match parse::statm_resident_bytes(text, page_size()) {
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

/// `(rss, pss)` of the process whose procfs directory is `dir`, from its `smaps_rollup` (Linux
/// 4.14 and later; reading it walks the process's page tables, and needs the right to trace
/// the process).
pub(crate) fn rss_pss_at(dir: &Path) -> Result<(u64, u64)> {
    let path = dir.join("smaps_rollup");
    // About 1 KiB: read into the stack, once.
    let mut buf = [0_u8; 4096];
    let text = crate::host::file::read_into(&path, &mut buf).map_err(|e| io_at(&path, &e))?;
    parse::smaps_rollup_rss_pss(text).map_err(|why| {
        HypomnesisError::ram(
            crate::error::ErrorKind::BadAnswer,
            format!("{}: {why}", path.display()),
        )
    })
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

    /// The boot clock is what `/proc/uptime` shows (to its hundredths, read around it); a
    /// fixture's `uptime` is read from the file.
    #[test]
    fn uptime_is_the_boot_clock_here_and_the_file_elsewhere() {
        let before = uptime(Path::new("/proc")).unwrap();
        let text = fs::read_to_string("/proc/uptime").unwrap();
        let after = uptime(Path::new("/proc")).unwrap();
        let file: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            before.as_secs_f64() - 0.01 <= file && file <= after.as_secs_f64() + 0.01,
            "{before:?} {file} {after:?}"
        );
        let dir = std::env::temp_dir().join(format!("hmn-uptime-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("uptime"), "12345.67 8.00\n").unwrap();
        assert_eq!(
            uptime(&dir),
            Some(std::time::Duration::from_millis(12_345_670))
        );
        fs::write(dir.join("uptime"), "soon\n").unwrap();
        assert_eq!(uptime(&dir), None);
        fs::remove_dir_all(&dir).unwrap();
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
