//! Self-consistency of the RAM measurement on any host.

/// The tests that allocate and free hundreds of MiB in this process take turns: one's free
/// would otherwise fall inside another's before-and-after (a CI run saw 245 MiB of 256).
static BIG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_big_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    BIG.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn touching_256_mib_raises_rss_by_at_least_that() {
    const SIZE: usize = 256 << 20;
    let _turn = one_big_at_a_time();
    let before = hypomnesis::process_rss().unwrap();
    let mut block = vec![0_u8; SIZE];
    // Write one byte per page so every page is resident (vec![0; n] may map untouched zero pages).
    for i in (0..SIZE).step_by(4096) {
        block[i] = 1;
    }
    let block = std::hint::black_box(block);
    let after = hypomnesis::process_rss().unwrap();
    // The other tests of this binary run on other threads and may free a page or two meanwhile.
    let slack = 1 << 20;
    assert!(
        after + slack >= before + SIZE as u64,
        "RSS went from {before} to {after}, less than the 256 MiB touched"
    );
    drop(block);
}

#[test]
fn snapshot_ram_is_the_process_rss() {
    // Not while another test touches or frees hundreds of MiB (a CI run saw it differ by more
    // than 64 MiB from the reads around it).
    let _turn = one_big_at_a_time();
    let a = hypomnesis::process_rss().unwrap();
    let s = hypomnesis::Snapshot::now(0).unwrap();
    let b = hypomnesis::process_rss().unwrap();
    assert!(s.ram_bytes > 0);
    assert!(s.ram_bytes.abs_diff(a) < 64 << 20 && s.ram_bytes.abs_diff(b) < 64 << 20);
}

/// A child that exited but is not yet reaped has no resident set: an error, not 0 bytes.
#[cfg(target_os = "linux")]
#[test]
fn a_zombie_has_no_resident_set() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = || std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let zombie = |s: String| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    };
    while !zombie(stat()) {
        assert!(std::time::Instant::now() < until, "true never exited");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let e = hypomnesis::process_rss_of(pid).unwrap_err().to_string();
    assert!(e.contains(&format!("process {pid} has exited")), "{e}");
    child.wait().unwrap();
    assert!(hypomnesis::process_rss_of(pid).is_err(), "reaped: gone");
    assert!(hypomnesis::process_rss_of(std::process::id()).unwrap() > 0);
}

/// `process_rss` keeps this process's `statm` open. A forked child reads its own, not the
/// parent's file: it touches 512 MiB that the parent does not have, and sees them.
#[cfg(target_os = "linux")]
#[test]
#[allow(unsafe_code)] // fork(2), waitpid(2) and _exit(2) have no safe wrapper
fn a_forked_child_reads_its_own_rss() {
    const SIZE: usize = 512 << 20;
    let parent = hypomnesis::process_rss().unwrap(); // the file is kept open now
    // SAFETY: the child allocates, reads a file and leaves with _exit, running no handler.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let mut block = vec![0_u8; SIZE];
        for i in (0..SIZE).step_by(4096) {
            block[i] = 1;
        }
        let block = std::hint::black_box(block);
        let mine = hypomnesis::process_rss().unwrap_or(0);
        let own = mine >= parent + (400 << 20);
        drop(block);
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(i32::from(!own)) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is a valid int.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child did not see the 512 MiB it touched (it read the parent's statm?)"
    );
}

/// Pages shared copy on write count in the RSS of each process that maps them and once in
/// their PSS summed: a child forked after this process touched 128 MiB has them in its RSS,
/// half of them in its PSS, and the two PSS together are about 128 MiB less than the two RSS.
#[cfg(target_os = "linux")]
#[test]
#[allow(unsafe_code)] // fork(2), kill(2), waitpid(2) and _exit(2) have no safe wrapper
fn pages_shared_copy_on_write_count_once_in_pss() {
    const LEN: usize = 128 << 20;
    let _turn = one_big_at_a_time();
    let size = u64::try_from(LEN).unwrap();
    let mut block = vec![0_u8; LEN];
    for i in (0..block.len()).step_by(4096) {
        block[i] = 1;
    }
    let block = std::hint::black_box(block);
    // SAFETY: the child only sleeps and leaves with _exit, running no handler.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: sleep(3) and _exit(2) are async-signal-safe.
        unsafe {
            libc::sleep(30);
            libc::_exit(0);
        }
    }
    let child = pid.unsigned_abs();
    let me = std::process::id();
    let (rss_me, rss_child) = (
        hypomnesis::process_rss_of(me).unwrap(),
        hypomnesis::process_rss_of(child).unwrap(),
    );
    let (pss_me, pss_child) = (
        hypomnesis::process_pss_of(me).unwrap(),
        hypomnesis::process_pss_of(child).unwrap(),
    );
    // SAFETY: ends and reaps the child just forked; `status` is a valid int.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut status = 0;
        libc::waitpid(pid, &raw mut status, 0);
    }
    drop(block);
    let mib = |b: u64| b >> 20;
    let figures = format!(
        "RSS {} + {} MiB, PSS {} + {} MiB",
        mib(rss_me),
        mib(rss_child),
        mib(pss_me),
        mib(pss_child)
    );
    assert!(rss_child >= size && pss_child <= rss_child, "{figures}");
    assert!(pss_child >= size / 2 - (8 << 20), "{figures}");
    assert!(
        pss_me + pss_child + size - (16 << 20) <= rss_me + rss_child,
        "the shared pages counted once: {figures}"
    );
    assert!(hypomnesis::process_pss_of(child).is_err(), "reaped: gone");
}
