//! The heap of the long-running commands (`hmn serve`, `hmn top`) under glibc's malloc. A
//! measurement of thousands of GPU processes allocates a few megabytes that it frees at once;
//! glibc gives each thread that allocates an arena of its own (the exporter measures and
//! renders on the runtime's blocking threads, whichever is free; `hmn top` samples on a thread
//! of its own) and keeps what was freed in each for reuse. With 2,000 GPU processes that held
//! 10.7 MiB in the exporter threads' arenas between scrapes (`scripts/bench/serve_rss.py`), and
//! 2.4 MiB in `hmn top`'s sampling thread's. One arena for the process (these commands run one
//! measurement at a time, so their threads do not contend for it), and the free memory handed
//! back after a measurement, keep the resident set to what the last measurement keeps.
//! Elsewhere (musl, macOS, Windows) both are nothing.

#![allow(unsafe_code)]

/// One malloc arena for the whole process, and large blocks (a body, the rows of a
/// measurement) always in maps of their own; called before the runtime starts its threads.
///
/// glibc serves a block of 128 KiB or more with a map of its own, unmapped when freed, but
/// after the first such free it raises that threshold to the block's size, so that from then
/// on each scrape's body (250 KB with 2,000 GPU processes, twice that while it grows) came
/// from the heap and stayed resident after it was sent. A threshold set explicitly stays.
pub fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` takes two integers and only sets an option of the allocator; called
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// Hands the allocator's free pages back to the system (after a measurement or a render).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes a size and only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}
