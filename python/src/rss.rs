//! This process's RSS for the entry and exit samples of every tracked block, made cheap: on
//! Linux `/proc/self/statm` is opened once and read again at offset 0 each time (the library's
//! `process_rss` opens it every time, most of its cost); elsewhere, and whenever that fails,
//! the library's `process_rss`. A forked child reopens it ([`after_fork`]): the parent's file
//! describes the parent.

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::os::unix::fs::FileExt;
    use std::sync::{Mutex, OnceLock, PoisonError};

    static STATM: Mutex<Option<File>> = Mutex::new(None);

    /// The page size from the auxiliary vector (`AT_PAGESZ`); 4096 if it cannot be read.
    fn page_size() -> u64 {
        static PAGE: OnceLock<u64> = OnceLock::new();
        *PAGE.get_or_init(|| {
            const AT_PAGESZ: u64 = 6;
            let word = std::mem::size_of::<usize>();
            let Ok(auxv) = std::fs::read("/proc/self/auxv") else {
                return 4096;
            };
            let value = |chunk: &[u8]| -> Option<u64> {
                let bytes: [u8; 8] = match word {
                    8 => chunk.try_into().ok()?,
                    _ => return None,
                };
                Some(u64::from_ne_bytes(bytes))
            };
            let mut entries = auxv.chunks_exact(word);
            while let (Some(k), Some(v)) = (entries.next(), entries.next()) {
                if value(k) == Some(AT_PAGESZ) {
                    return value(v).filter(|&p| p > 0).unwrap_or(4096);
                }
            }
            4096
        })
    }

    /// Resident pages × page size from an open `statm`, if it reads and parses.
    pub fn rss() -> Option<u64> {
        let mut slot = STATM.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = File::open("/proc/self/statm").ok();
        }
        let file = slot.as_ref()?;
        let mut buf = [0u8; 128];
        let n = file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(buf.get(..n)?).ok()?;
        let pages: u64 = text.split_ascii_whitespace().nth(1)?.parse().ok()?;
        pages.checked_mul(page_size())
    }

    pub fn after_fork() {
        // The forking thread held the GIL, and this file is only read with it held.
        *STATM.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// This process's resident set size, bytes. Call with the GIL held.
pub fn rss() -> hypomnesis::Result<u64> {
    #[cfg(target_os = "linux")]
    if let Some(bytes) = linux::rss() {
        return Ok(bytes);
    }
    hypomnesis::process_rss()
}

/// Forgets the parent's open file in a forked child.
pub fn after_fork() {
    #[cfg(target_os = "linux")]
    linux::after_fork();
}
