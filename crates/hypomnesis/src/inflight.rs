//! What the library is waiting on now, on any thread: each file read, driver call and tool run
//! that can block is listed from its start until it returns. A caller whose measurement is
//! late (a view whose figures grow old, a command past its deadline) asks [`in_flight`] and
//! names what did not return: `/proc/1000/cmdline` of a process in D state, an NVML call into
//! a hung driver, instead of blaming "the GPU".
//!
//! The cost is a lock, a clock read and, for a file, its path copied (in place when short: no
//! allocation): well under a microsecond next to the system call it wraps.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One operation of the library that has started and not yet returned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlight {
    /// What it waits on, for a person: a file's path (`/proc/1000/cmdline`), a driver call
    /// (`the NVIDIA driver (nvmlDeviceGetMemoryInfo)`), a tool's path (`/usr/bin/nvidia-smi`).
    pub what: String,
    /// When it started.
    pub since: Instant,
}

impl InFlight {
    /// How long it has been waiting.
    #[must_use]
    pub fn age(&self) -> Duration {
        self.since.elapsed()
    }
}

impl fmt::Display for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

/// Every operation in flight now, on any thread, the longest-waiting first.
///
/// ```
/// // Nothing is being read or called on this thread now; another thread may be measuring.
/// for op in hypomnesis::in_flight() {
///     println!("waiting {:?} for {}", op.age(), op);
/// }
/// ```
#[must_use]
pub fn in_flight() -> Vec<InFlight> {
    let table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
    let mut ops: Vec<InFlight> = table
        .iter()
        .map(|e| InFlight {
            what: e.what.to_string(),
            since: e.since,
        })
        .collect();
    drop(table);
    ops.sort_by_key(|o| o.since);
    ops
}

/// What an entry waits on, kept cheap to record; made into words only when asked.
enum What {
    File(Place),
    Call(&'static str),
    Run(PathBuf),
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(p) => p.fmt(f),
            Self::Run(p) => write!(f, "{}", p.display()),
            Self::Call(name) => write!(f, "the NVIDIA driver ({name})"),
        }
    }
}

/// The most bytes of a path kept in place (`/proc/4194304/statm` is 19).
const IN_PLACE: usize = 62;

/// A file's path as an entry keeps it: in place when short, as the procfs files read at every
/// refresh are, so that listing a read allocates nothing (a view of 2,000 processes reads
/// 4,000 files a refresh); on the heap when longer.
enum Place {
    Short { len: u8, bytes: [u8; IN_PLACE] },
    Long(PathBuf),
}

impl Place {
    fn of(path: &Path) -> Self {
        let raw = path.as_os_str().as_encoded_bytes();
        let mut bytes = [0; IN_PLACE];
        match (bytes.get_mut(..raw.len()), u8::try_from(raw.len())) {
            (Some(room), Ok(len)) => {
                room.copy_from_slice(raw);
                Self::Short { len, bytes }
            }
            _ => Self::Long(path.to_path_buf()),
        }
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // As `Path::display` shows it: what is not UTF-8 replaced.
            Self::Short { len, bytes } => {
                let raw = bytes.get(..usize::from(*len)).unwrap_or_default();
                f.write_str(&String::from_utf8_lossy(raw))
            }
            Self::Long(p) => write!(f, "{}", p.display()),
        }
    }
}

struct Entry {
    id: u64,
    what: What,
    since: Instant,
}

static TABLE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// An operation in flight: listed in [`in_flight`] while this lives (dropped on return, and
/// on unwinding). Made by [`in_flight_reading`] for a caller's own reads.
#[must_use = "the operation is listed only while the guard lives"]
#[derive(Debug)]
pub struct InFlightGuard(u64);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = table.iter().position(|e| e.id == self.0) {
            table.swap_remove(i);
        }
    }
}

fn begin(what: What) -> InFlightGuard {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let since = Instant::now();
    TABLE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Entry { id, what, since });
    InFlightGuard(id)
}

/// Opening or reading `path` (a FIFO, a D-state process's `cmdline`, a stuck filesystem).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn reading(path: &Path) -> InFlightGuard {
    begin(What::File(Place::of(path)))
}

/// Lists a read of `path` in [`in_flight`] until the returned guard is dropped: for a caller
/// that reads a file of its own that can block as the library's own reads can (a FIFO put
/// where a file was expected, a stuck network filesystem), so that a measurement waiting on it
/// names it as it names the library's reads. Hold the guard over the opening, the reading and
/// whatever else may take long (the parse of what was read).
///
/// ```
/// use std::path::Path;
/// let path = Path::new("/etc/cdi/vendor.yaml");
/// let waiting = hypomnesis::in_flight_reading(path);
/// assert!(hypomnesis::in_flight().iter().any(|op| op.what == path.display().to_string()));
/// drop(waiting);
/// ```
pub fn in_flight_reading(path: &Path) -> InFlightGuard {
    reading(path)
}

/// A call of the NVML function `name`.
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
pub(crate) fn calling(name: &'static str) -> InFlightGuard {
    begin(What::Call(name))
}

/// A run of the tool at `exe` (it has its own time limit too).
#[cfg_attr(not(feature = "nvidia-smi-fallback"), allow(dead_code))]
pub(crate) fn running(exe: &Path) -> InFlightGuard {
    begin(What::Run(exe.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(what: &str) -> Option<InFlight> {
        in_flight().into_iter().find(|o| o.what == what)
    }

    #[test]
    fn an_operation_is_listed_until_it_returns_oldest_first() {
        let path = Path::new("/nonexistent/hmn-inflight-test/cmdline");
        let first = reading(path);
        std::thread::sleep(Duration::from_millis(5));
        let second = calling("nvmlDeviceGetMemoryInfo");
        let ops = in_flight();
        let a = ops
            .iter()
            .position(|o| o.what == path.display().to_string());
        let b = ops
            .iter()
            .position(|o| o.what == "the NVIDIA driver (nvmlDeviceGetMemoryInfo)");
        assert!(matches!((a, b), (Some(a), Some(b)) if a < b), "{ops:?}");
        assert!(ops[a.unwrap()].age() >= Duration::from_millis(5));
        drop(first);
        assert!(listed(&path.display().to_string()).is_none());
        drop(second);
        let run = running(Path::new("/opt/hmn-inflight-test/nvidia-smi"));
        assert_eq!(
            listed("/opt/hmn-inflight-test/nvidia-smi").map(|o| o.to_string()),
            Some("/opt/hmn-inflight-test/nvidia-smi".into())
        );
        drop(run);
        assert!(listed("/opt/hmn-inflight-test/nvidia-smi").is_none());
    }

    /// A path that is not UTF-8 (Unix); elsewhere one that is.
    fn not_utf8() -> PathBuf {
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt as _;
            PathBuf::from(std::ffi::OsStr::from_bytes(b"/proc/1/\xff\xfecomm"))
        }
        #[cfg(not(unix))]
        PathBuf::from("/proc/1/comm")
    }

    /// A path is shown as `Path::display` shows it, kept in place or not: the longest kept in
    /// place, one byte longer, and (on Unix) one that is not UTF-8.
    #[test]
    fn paths_short_and_long_show_as_they_display() {
        let paths = [
            PathBuf::from("/proc/4194304/statm"),
            PathBuf::from(format!("/{}", "a".repeat(IN_PLACE - 1))),
            PathBuf::from(format!("/{}", "b".repeat(IN_PLACE))),
            not_utf8(),
        ];
        let kinds: Vec<bool> = paths
            .iter()
            .map(|p| matches!(Place::of(p), Place::Short { .. }))
            .collect();
        assert_eq!(kinds.get(..3), Some(&[true, true, false][..]));
        for p in &paths {
            assert_eq!(Place::of(p).to_string(), p.display().to_string());
        }
    }

    /// A thread stuck opening a FIFO is seen from another thread, and gone once it returns.
    #[cfg(unix)]
    #[test]
    fn a_blocked_read_on_another_thread_is_seen() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("hmn-inflight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("cmdline");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || crate::host::file::read_capped(&fifo, 64))
        };
        let shown = fifo.display().to_string();
        let start = Instant::now();
        while listed(&shown).is_none() {
            assert!(start.elapsed() < Duration::from_secs(10), "never listed");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&fifo)
            .unwrap()
            .write_all(b"sleep\0infinity\0")
            .unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), "sleep\0infinity\0");
        assert!(listed(&shown).is_none(), "{:?}", in_flight());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
