//! A consumer of hypomnesis 0.2.14, written the way the published crate's users write one: the
//! paths of its public modules, the spill tracker with labels, the process listing with the
//! pids the platform refused, and the error variants matched by their fields. `tests/` runs it.
//!
//! Nothing here may use a name that 0.2.14 did not have: it is the proof that a program
//! written for 0.2.x builds and behaves the same against this library.

use std::time::Duration;

use hypomnesis::error::HypomnesisError;
use hypomnesis::snapshot::{GpuDeviceInfo, GpuProcessEntry, Snapshot};
use hypomnesis::spill::{DEFAULT_DEDICATED_THRESHOLD_PCT, DEFAULT_SHARED_GROWTH_BYTES};
use hypomnesis::{GpuProcessListing, SpillEpisode, SpillReport, SpillTracker};

/// A training loop's spill check: a tracker for GPU `device`, one labelled observation per
/// step, the report at the end.
///
/// # Errors
///
/// The tracker's (Windows: the adapter's counters cannot be read).
pub fn train_with_spill_check(device: u32, steps: u32) -> hypomnesis::Result<SpillReport> {
    let mut tracker = SpillTracker::new(device)?
        .with_dedicated_threshold(tuned_threshold(8 << 30))
        .with_shared_growth_threshold(DEFAULT_SHARED_GROWTH_BYTES);
    for step in 0..steps {
        tracker.observe(format!("step {step}"));
        if tracker.is_spilling() {
            eprintln!("step {step}: spilling");
        }
    }
    tracker.observe("done");
    let _latched: bool = tracker.has_spilled();
    let _live: bool = tracker.is_measurable();
    Ok(tracker.into_report())
}

/// 85 % of a limit, from the published constant.
#[must_use]
pub const fn tuned_threshold(limit: u64) -> u64 {
    limit / 100 * DEFAULT_DEDICATED_THRESHOLD_PCT
}

/// The builder-style setters are `const fn`: this compiles only if they are.
#[must_use]
pub const fn tighten(t: SpillTracker) -> SpillTracker {
    t.with_dedicated_threshold(1 << 30)
        .with_shared_growth_threshold(64 << 20)
}

/// `Snapshot::ram_mb` is `const fn` (0.2.12): this compiles only if it is.
#[must_use]
pub const fn ram_of(s: &Snapshot) -> f64 {
    s.ram_mb()
}

/// A test helper's setters are `const fn` (0.2.12) where their values are plain.
pub const fn sized(b: hypomnesis::GpuDeviceInfoBuilder) -> hypomnesis::GpuDeviceInfoBuilder {
    b.index(0)
        .total_bytes(16 << 30)
        .free_bytes(12 << 30)
        .used_bytes(4 << 30)
}

/// What a report says, in one line, through every method 0.2.x gives it.
#[must_use]
pub fn describe(r: &SpillReport) -> String {
    if !r.measurable {
        return format!("spill not measurable ({} observations)", r.observations);
    }
    let longest = r
        .longest_episode()
        .map(|e: &SpillEpisode| {
            format!(
                "{}..{} {} ms {} obs {} B",
                e.start_label,
                e.end_label.as_deref().unwrap_or("end"),
                e.duration.as_millis(),
                e.observations,
                e.peak_shared_bytes
            )
        })
        .unwrap_or_default();
    format!(
        "spilled={} first={:?} total={:?} longest=[{longest}] peak_ded={} limit={} peak_shared={} base={}",
        r.spilled(),
        r.first_spill_label(),
        r.total_spill_duration(),
        r.peak_dedicated_bytes,
        r.dedicated_limit_bytes,
        r.peak_shared_bytes,
        r.baseline_shared_bytes,
    )
}

/// Who holds GPU `device`, and how many processes could not be read.
///
/// # Errors
///
/// The listing's; a refused list is counted, not an error, as 0.2.x users write it.
pub fn holders(device: u32) -> hypomnesis::Result<(Vec<GpuProcessEntry>, usize)> {
    match hypomnesis::gpu_process_listing(device) {
        Ok(listing) => {
            let l: GpuProcessListing = listing.clone();
            Ok((l.entries, listing.denied_pids.len()))
        }
        Err(HypomnesisError::ProcessListDenied { denied }) => {
            Ok((Vec::new(), usize::try_from(denied).unwrap_or(usize::MAX)))
        }
        Err(e) => Err(e),
    }
}

/// Whether `pid` is still there, as a supervisor asks.
#[must_use]
pub fn still_running(pid: u32) -> &'static str {
    match hypomnesis::process_exists(pid) {
        Some(true) => "running",
        Some(false) => "gone",
        None => "unknown",
    }
}

/// The 0.2.x module paths, each named as its users name it.
///
/// # Errors
///
/// The RAM reading's.
pub fn by_module_paths() -> hypomnesis::Result<(u64, Option<GpuDeviceInfo>, usize)> {
    let rss = hypomnesis::ram::process_rss()?;
    let count = hypomnesis::gpu::device_count().unwrap_or(0);
    let first = (count > 0)
        .then(|| hypomnesis::gpu::device_info(0).ok())
        .flatten();
    let all: Vec<Snapshot> = Snapshot::all()?;
    if let (Some(before), Some(after)) = (all.first(), all.last()) {
        let r = hypomnesis::report::MemoryReport::new(before.clone(), after.clone());
        let _ = r.format_delta("step");
    }
    Ok((rss, first, all.len()))
}

/// The one-sample spill verdict, as a log line.
#[must_use]
pub fn spill_now(device: u32) -> String {
    match hypomnesis::snapshot_is_spilling(device) {
        Some(true) => "spilling".into(),
        Some(false) => "not spilling".into(),
        None => "not measurable".into(),
    }
}

/// A report made by hand for a consumer's tests (`test-helpers`).
#[must_use]
pub fn fabricated() -> SpillReport {
    SpillReport::builder()
        .peak_dedicated_bytes(15 << 30)
        .dedicated_limit_bytes(16 << 30)
        .peak_shared_bytes(3 << 30)
        .baseline_shared_bytes(1 << 30)
        .observations(40)
        .measurable(true)
        .episode(
            "step 12",
            Some("step 20"),
            3 << 30,
            8,
            Duration::from_secs(8),
        )
        .episode("step 31", None, 2 << 30, 3, Duration::from_secs(3))
        .build()
}
