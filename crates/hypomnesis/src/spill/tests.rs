//! The 0.2.x tracker over the state machine: labels, reports, thresholds, the one-sample rule.

use std::time::Duration;

use super::*;
use crate::types::{GIB, MIB};

fn sample(ms: u64, dedicated: u64, shared: u64) -> SpillSample {
    SpillSample::new(Duration::from_millis(ms), dedicated, shared)
}

/// A fed 8 GiB adapter through quiet, spilling, quiet, spilling-to-the-end.
fn two_episodes() -> SpillTracker {
    let full = 7 * GIB + 512 * MIB;
    let mut t = SpillTracker::fed(8 * GIB);
    for (label, s) in [
        ("load", sample(0, GIB, 100 * MIB)),
        ("step 1", sample(100, full, 200 * MIB)),
        ("step 2", sample(200, full, 400 * MIB)),
        ("step 3", sample(300, full, 900 * MIB)),
        ("eval", sample(700, GIB, 900 * MIB)),
        ("step 4", sample(800, full, 700 * MIB)),
        ("step 5", sample(1000, full, 800 * MIB)),
    ] {
        t.observe_sample(label, s);
    }
    t
}

#[test]
fn episodes_carry_the_labels_that_began_and_ended_them() {
    let t = two_episodes();
    assert!(t.is_spilling() && t.has_spilled() && t.is_measurable());
    let r = t.into_report();
    assert!(r.measurable && r.spilled());
    assert_eq!(r.observations, 7);
    assert_eq!(r.episodes.len(), 2);
    let (a, b) = (&r.episodes[0], &r.episodes[1]);
    assert_eq!(
        (a.start_label.as_str(), a.end_label.as_deref()),
        ("step 2", Some("eval"))
    );
    assert_eq!(
        (a.observations, a.duration),
        (2, Duration::from_millis(500))
    );
    assert_eq!(a.peak_shared_bytes, 900 * MIB);
    assert_eq!(a.start, Some(Duration::from_millis(200)));
    assert_eq!(a.peak_dedicated_bytes, Some(7 * GIB + 512 * MIB));
    // Still spilling at the last observation: no end label, duration to the last one.
    assert_eq!(
        (b.start_label.as_str(), b.end_label.as_deref()),
        ("step 4", None)
    );
    assert_eq!(
        (b.observations, b.duration),
        (2, Duration::from_millis(200))
    );
    assert_eq!(r.first_spill_label(), Some("step 2"));
    assert_eq!(r.total_spill_duration(), Duration::from_millis(700));
    assert_eq!(
        r.longest_episode().map(|e| e.start_label.as_str()),
        Some("step 2")
    );
    assert_eq!(r.baseline_shared_bytes, 100 * MIB);
    assert_eq!(r.peak_shared_bytes, 900 * MIB);
    assert_eq!(r.peak_dedicated_bytes, 7 * GIB + 512 * MIB);
    assert_eq!(r.dedicated_limit_bytes, 8 * GIB);
}

#[test]
fn thresholds_in_bytes_replace_the_defaults() {
    // 5 GiB of 8 (62%) is not full by default; with a 5 GiB dedicated threshold it is, and a
    // growth of 100 MiB spills with a 64 MiB growth threshold.
    let feed = |t: SpillTracker| {
        let mut t = t;
        t.observe_sample("a", sample(0, GIB, 0));
        t.observe_sample("b", sample(10, 5 * GIB, 100 * MIB));
        t.into_report()
    };
    assert!(!feed(SpillTracker::fed(8 * GIB)).spilled());
    assert!(!feed(SpillTracker::fed(8 * GIB).with_dedicated_threshold(5 * GIB)).spilled());
    let r = feed(
        SpillTracker::fed(8 * GIB)
            .with_dedicated_threshold(5 * GIB)
            .with_shared_growth_threshold(64 * MIB),
    );
    assert_eq!(r.first_spill_label(), Some("b"));
    assert_eq!(CONST_THRESHOLDS.dedicated_bytes, Some(1));
}

/// The builders are usable in a constant.
const CONST_THRESHOLDS: SpillThresholds = SpillThresholds {
    dedicated_fraction: 0.5,
    shared_margin_bytes: 0,
    dedicated_bytes: None,
}
.with_dedicated_bytes(1);

#[test]
fn the_defaults_are_85_percent_and_256_mib() {
    assert_eq!(DEFAULT_DEDICATED_THRESHOLD_PCT, 85);
    assert_eq!(DEFAULT_SHARED_GROWTH_BYTES, 256 * MIB);
    // 85 % of 8 GiB exactly is full; a byte less is not.
    let limit = 8 * GIB;
    let at = (limit * 85).div_ceil(100);
    assert!(is_spilling_now(at, 256 * MIB, limit));
    assert!(!is_spilling_now(at - 1, 256 * MIB, limit));
    assert!(!is_spilling_now(at, 256 * MIB - 1, limit));
    assert!(
        !is_spilling_now(u64::MAX, u64::MAX, 0),
        "an unknown limit never spills"
    );
    assert!(is_spilling_now(u64::MAX, u64::MAX, u64::MAX), "no overflow");
}

#[test]
fn an_empty_report_is_not_a_spill() {
    let r = SpillTracker::fed(8 * GIB).into_report();
    assert!(!r.spilled() && r.measurable);
    assert_eq!(r.first_spill_label(), None);
    assert_eq!(r.longest_episode(), None);
    assert_eq!(r.total_spill_duration(), Duration::ZERO);
}

#[cfg(not(all(windows, feature = "pdh")))]
#[test]
fn off_windows_a_tracker_is_made_and_measures_nothing() {
    let mut t = SpillTracker::new(0).unwrap();
    assert!(!t.is_measurable());
    t.observe("step 1");
    assert!(!t.observe_sample("step 2", sample(0, 8 * GIB, 8 * GIB)));
    assert!(!t.is_spilling() && !t.has_spilled());
    let r = t.into_report();
    assert!(!r.measurable);
    assert_eq!(r.observations, 0);
    assert!(SpillTracker::new(99).is_ok(), "no device is asked for");
    assert_eq!(snapshot_is_spilling(0), None);
}

#[cfg(feature = "test-helpers")]
#[test]
fn the_builder_makes_any_report() {
    let r = SpillReport::builder()
        .peak_dedicated_bytes(7)
        .dedicated_limit_bytes(8)
        .peak_shared_bytes(9)
        .baseline_shared_bytes(1)
        .observations(12)
        .measurable(true)
        .episode("a", Some("b"), 5, 3, Duration::from_secs(2))
        .episode("c", None, 9, 1, Duration::from_secs(3))
        .build();
    assert_eq!(r.episodes.len(), 2);
    assert_eq!(
        r.longest_episode().map(|e| e.start_label.as_str()),
        Some("c")
    );
    assert_eq!(r.total_spill_duration(), Duration::from_secs(5));
    assert_eq!(r.episodes[0].end_label.as_deref(), Some("b"));
    assert_eq!(r.episodes[0].start, None);
    assert!(r.measurable);
    assert_eq!(
        (
            r.peak_dedicated_bytes,
            r.dedicated_limit_bytes,
            r.peak_shared_bytes
        ),
        (7, 8, 9)
    );
    assert_eq!((r.baseline_shared_bytes, r.observations), (1, 12));
}
