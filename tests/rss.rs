//! Self-consistency of the RAM measurement on any host.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)] // test code

#[test]
fn touching_256_mib_raises_rss_by_at_least_that() {
    const SIZE: usize = 256 << 20;
    let before = hypomnesis::process_rss().unwrap();
    let mut block = vec![0_u8; SIZE];
    // Write one byte per page so every page is resident (vec![0; n] may map untouched zero pages).
    for i in (0..SIZE).step_by(4096) {
        block[i] = 1;
    }
    let block = std::hint::black_box(block);
    let after = hypomnesis::process_rss().unwrap();
    assert!(
        after >= before + SIZE as u64,
        "RSS went from {before} to {after}, less than the 256 MiB touched"
    );
    drop(block);
}

#[test]
fn snapshot_ram_is_the_process_rss() {
    let a = hypomnesis::process_rss().unwrap();
    let s = hypomnesis::Snapshot::now(0).unwrap();
    let b = hypomnesis::process_rss().unwrap();
    assert!(s.ram_bytes > 0);
    assert!(s.ram_bytes.abs_diff(a) < 64 << 20 && s.ram_bytes.abs_diff(b) < 64 << 20);
}
