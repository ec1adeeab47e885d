//! A file of the node's that a measurement reads (a CDI spec, the NVIDIA DRA driver's
//! checkpoint), read as one that anything may have been put in place of:
//!
//! - opened without waiting (`O_NONBLOCK`: a FIFO named `x.yaml` with no writer held the open,
//!   and every measurement after it, forever) and taken only when the opened descriptor is a
//!   regular file (`fstat`), else refused, naming what it is;
//! - read up to a cap, a larger one refused before it is read;
//! - listed in [`hypomnesis::in_flight`] while it is opened, read and parsed, so a measurement
//!   stalled on it (a stuck filesystem) names it;
//! - kept, parsed, by what tells its versions apart (device, inode, size, modification and
//!   change times): a file that has not changed is neither read nor parsed again.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, Metadata};
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

/// What tells one version of a file from another without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    #[cfg(unix)]
    fn of(m: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            device: m.dev(),
            inode: m.ino(),
            size: m.size(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Where there is no inode: the size and the modification time.
    #[cfg(not(unix))]
    fn of(m: &Metadata) -> Self {
        let modified = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or((0, 0), |d| {
                (
                    i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    i64::from(d.subsec_nanos()),
                )
            });
        Self {
            device: 0,
            inode: 0,
            size: m.len(),
            modified,
            changed: (0, 0),
        }
    }
}

/// Why a file gave nothing.
#[derive(Debug)]
pub enum ReadError {
    /// It could not be opened (absent, not permitted, …).
    Open(io::Error),
    /// It is not a regular file, is too large, could not be read, or its text was refused by
    /// the parse: why.
    Content(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Open(e) => e.fmt(f),
            Self::Content(why) => f.write_str(why),
        }
    }
}

/// What files gave, parsed, by path, with the version each was read at; and how many parses
/// were made (what a test sees to know a file was not parsed again).
#[derive(Debug)]
pub struct Cache<T> {
    kept: BTreeMap<PathBuf, (Stamp, Result<Arc<T>, String>)>,
    parses: u64,
}

impl<T> Cache<T> {
    pub const fn new() -> Self {
        Self {
            kept: BTreeMap::new(),
            parses: 0,
        }
    }

    /// How many times a file's text was parsed into what is kept.
    #[cfg(test)]
    pub const fn parses(&self) -> u64 {
        self.parses
    }

    /// Forgets the files not among `paths` (gone from their directory).
    pub fn keep_only(&mut self, paths: &BTreeSet<PathBuf>) {
        self.kept.retain(|p, _| paths.contains(p));
    }
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// `path`'s text, at most `cap` bytes, made into `T` by `parse`: from `cache` while the file
/// is the version it was read at, else read and parsed (and kept, what the parse refused too).
pub fn read<T>(
    cache: &Mutex<Cache<T>>,
    path: &Path,
    cap: u64,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Arc<T>, ReadError> {
    let _waiting = hypomnesis::in_flight_reading(path);
    let (file, meta) = open(path).map_err(ReadError::Open)?;
    if !meta.is_file() {
        return Err(ReadError::Content(format!(
            "{}, not a regular file",
            what(&meta)
        )));
    }
    if meta.len() > cap {
        return Err(ReadError::Content(format!("larger than {cap} bytes")));
    }
    let stamp = Stamp::of(&meta);
    let lock = || cache.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((at, kept)) = lock().kept.get(path)
        && *at == stamp
    {
        return kept.clone().map_err(ReadError::Content);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::Content(e.to_string()))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > cap {
        // It grew while read: refused, and not kept (its next version is another).
        return Err(ReadError::Content(format!("larger than {cap} bytes")));
    }
    let parsed = match std::str::from_utf8(&bytes) {
        Ok(text) => parse(text).map(Arc::new),
        Err(e) => Err(format!("not UTF-8: {e}")),
    };
    let mut cache = lock();
    cache.parses += 1;
    cache
        .kept
        .insert(path.to_path_buf(), (stamp, parsed.clone()));
    drop(cache);
    parsed.map_err(ReadError::Content)
}

/// `path` opened for reading without waiting for a writer or a device (`O_NONBLOCK`) and
/// without taking a terminal for this process's own (`O_NOCTTY`), with what the opened
/// descriptor is (`fstat`: no name swapped between a look and the open).
fn open(path: &Path) -> io::Result<(File, Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// What a file that is not a regular one is, in words.
fn what(meta: &Metadata) -> &'static str {
    let kind = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device file";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

#[cfg(all(test, unix))]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hmn-nodefile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[allow(clippy::unnecessary_wraps)] // a parse, which may refuse
    fn words(text: &str) -> Result<Vec<String>, String> {
        Ok(text.split_whitespace().map(str::to_owned).collect())
    }

    /// A FIFO with no writer is refused at once as a FIFO (the open waited for a writer
    /// forever); so is a directory.
    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = scratch("fifo");
        let fifo = dir.join("x.yaml");
        hypomnesis_testkit::mkfifo(&fifo);
        let cache = Mutex::new(Cache::new());
        let t = Instant::now();
        let got = read(&cache, &fifo, 1 << 20, words);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(
            matches!(&got, Err(ReadError::Content(why)) if why == "a FIFO, not a regular file"),
            "{got:?}"
        );
        let got = read(&cache, &dir, 1 << 20, words);
        assert!(
            matches!(&got, Err(ReadError::Content(why)) if why.starts_with("a directory")),
            "{got:?}"
        );
        assert_eq!(cache.lock().unwrap().parses(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// An unchanged file is not read or parsed again; a changed one is, and a file past the
    /// cap is refused unread.
    #[test]
    fn an_unchanged_file_is_parsed_once() {
        let dir = scratch("cache");
        let f = dir.join("spec.yaml");
        std::fs::write(&f, "a b").unwrap();
        let cache = Mutex::new(Cache::new());
        for _ in 0..3 {
            assert_eq!(*read(&cache, &f, 64, words).unwrap(), ["a", "b"]);
        }
        assert_eq!(cache.lock().unwrap().parses(), 1);
        std::fs::write(&f, "a b c").unwrap();
        assert_eq!(read(&cache, &f, 64, words).unwrap().len(), 3);
        assert_eq!(cache.lock().unwrap().parses(), 2);
        // A refusal of the parse is kept as well.
        let refuse = |_: &str| -> Result<Vec<String>, String> { Err("no".into()) };
        std::fs::write(&f, "x").unwrap();
        for _ in 0..2 {
            assert!(
                matches!(read(&cache, &f, 64, refuse), Err(ReadError::Content(w)) if w == "no")
            );
        }
        assert_eq!(cache.lock().unwrap().parses(), 3);
        std::fs::write(&f, "y".repeat(65)).unwrap();
        let got = read(&cache, &f, 64, words);
        assert!(
            matches!(&got, Err(ReadError::Content(w)) if w == "larger than 64 bytes"),
            "{got:?}"
        );
        assert_eq!(cache.lock().unwrap().parses(), 3);
        cache.lock().unwrap().keep_only(&BTreeSet::new());
        assert!(cache.lock().unwrap().kept.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The read, and the parse of what was read, are listed as waiting on the file.
    #[test]
    fn the_read_is_listed_in_flight() {
        let dir = scratch("inflight");
        let f = dir.join("spec.yaml");
        std::fs::write(&f, "a").unwrap();
        let cache = Mutex::new(Cache::new());
        let shown = f.display().to_string();
        let listed = read(&cache, &f, 64, |_| {
            Ok(hypomnesis::in_flight().iter().any(|op| op.what == shown))
        })
        .unwrap();
        assert!(*listed, "{:?}", hypomnesis::in_flight());
        assert!(!hypomnesis::in_flight().iter().any(|op| op.what == shown));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
