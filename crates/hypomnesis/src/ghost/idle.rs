//! Idle holders: alive, holding memory, and no activity in the driver's per-process samples
//! for at least the options' `idle_after`.
//!
//! What one GPU's samples cover is kept here between looks: from the oldest sample the first
//! read returned (the driver keeps a buffer of recent ones; how far back it reaches is not
//! published, so the reading itself says), or from the first read when it returned none, to
//! the latest read. Each read asks for the samples newer than the newest one seen. A process
//! is idle when it started before the covered span's `idle_after` and no sample of it in the
//! span shows an engine at work; with less covered, or no samples to read, it is not known,
//! and the report says so instead of calling it idle or busy.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::types::ProcessActivity;

/// What the reads of one GPU's activity samples have covered.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeviceActivity {
    /// Where the covered span starts (µs since the epoch), once a read answered.
    from_us: Option<u64>,
    /// The newest sample's time: the next read asks for newer ones.
    newest_us: u64,
    /// When the last read was, and how many there were.
    last_read_us: Option<u64>,
    reads: u32,
    /// The longest time between two reads (samples older than the driver keeps are lost
    /// between reads further apart than its buffer reaches).
    widest_gap_us: u64,
    /// Each pid's newest sample with an engine at work.
    last_active_us: BTreeMap<u32, u64>,
    /// Why the samples cannot be read, when the last read could not.
    unknown: Option<String>,
}

/// What the samples say of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Idle, with the evidence.
    Idle(Vec<String>),
    /// At work within `idle_after`, or too young to be idle.
    Busy,
    /// Not known, and why (said once per GPU).
    Unknown(String),
}

impl DeviceActivity {
    /// The samples newer than those seen: what the next read asks for.
    pub(crate) fn since_us(&self) -> u64 {
        self.newest_us
    }

    /// Takes in one read's answer, made at `now_us`.
    pub(crate) fn take(&mut self, now_us: u64, answer: Result<ProcessActivity, String>) {
        let samples = match answer {
            Ok(ProcessActivity::Samples { samples }) => samples,
            Ok(ProcessActivity::Unknown { reason }) | Err(reason) => {
                // A gap in what is known: the span starts again at the next read that answers.
                *self = Self {
                    unknown: Some(reason),
                    ..Self::default()
                };
                return;
            }
        };
        let oldest = samples.iter().map(|s| s.timestamp_us).min();
        if self.from_us.is_none() {
            self.from_us = Some(oldest.unwrap_or(now_us).min(now_us));
        }
        for s in &samples {
            self.newest_us = self.newest_us.max(s.timestamp_us);
            if s.is_active() {
                let last = self.last_active_us.entry(s.pid).or_default();
                *last = (*last).max(s.timestamp_us);
            }
        }
        if let Some(prev) = self.last_read_us {
            self.widest_gap_us = self.widest_gap_us.max(now_us.saturating_sub(prev));
        }
        self.last_read_us = Some(now_us);
        self.reads = self.reads.saturating_add(1);
        self.unknown = None;
    }

    /// Forgets the pids not in `alive` (a pid reused later is another process).
    pub(crate) fn keep_only(&mut self, alive: impl Fn(u32) -> bool) {
        self.last_active_us.retain(|&pid, _| alive(pid));
    }

    /// Whether `pid`, `age()` old, is idle for `after` at `now_us`.
    pub(crate) fn verdict(
        &self,
        pid: u32,
        age: impl FnOnce() -> Option<Duration>,
        after: Duration,
        now_us: u64,
    ) -> Verdict {
        if let Some(why) = &self.unknown {
            return Verdict::Unknown(why.clone());
        }
        let Some(from) = self.from_us else {
            return Verdict::Unknown("its activity samples have not been read".into());
        };
        let after_us = micros(after);
        // Its age is read only when the samples can tell.
        let age = age();
        if age.is_some_and(|a| micros(a) < after_us) {
            return Verdict::Busy;
        }
        let covered = now_us.saturating_sub(from);
        if let Some(&last) = self.last_active_us.get(&pid) {
            let quiet = now_us.saturating_sub(last);
            if quiet < after_us {
                return Verdict::Busy;
            }
            return Verdict::Idle(vec![
                format!(
                    "its last activity sample with an engine at work is {} old",
                    shown(quiet)
                ),
                self.reads_line(),
            ]);
        }
        if covered < after_us {
            return Verdict::Unknown(format!(
                "the driver's activity samples read cover {}, less than the {} asked for",
                shown(covered),
                shown(after_us)
            ));
        }
        let mut evidence = vec![format!(
            "no activity sample with an engine at work in the {} the driver's samples cover",
            shown(covered)
        )];
        if let Some(a) = age {
            evidence.push(format!("started {} ago", shown(micros(a))));
        }
        evidence.push(self.reads_line());
        Verdict::Idle(evidence)
    }

    fn reads_line(&self) -> String {
        if self.reads <= 1 {
            "read once, from the driver's buffer of samples".into()
        } else {
            format!(
                "{} reads, at most {} apart",
                self.reads,
                shown(self.widest_gap_us)
            )
        }
    }
}

/// `d` in whole microseconds (saturating).
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Microseconds since the Unix epoch now (the driver's sample clock).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, micros)
}

/// `us` in whole seconds as a person reads a span: `40s`, `2m 30s`, `11m`, `1h 5m`.
pub(crate) fn shown(us: u64) -> String {
    let s = us / 1_000_000;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, 0, _) => format!("{h}h"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::types::ProcessActivitySample;

    const MIN: u64 = 60_000_000;

    #[allow(clippy::unnecessary_wraps)] // what a read gives
    fn samples(list: &[(u32, u64, u32)]) -> Result<ProcessActivity, String> {
        Ok(ProcessActivity::Samples {
            samples: list
                .iter()
                .map(|&(pid, t, sm)| ProcessActivitySample::new(pid, t, [sm, 0, 0, 0]))
                .collect(),
        })
    }

    const TEN: Duration = Duration::from_secs(600);

    #[test]
    fn idle_only_with_the_span_covered() {
        let now = 100 * MIN;
        let mut a = DeviceActivity::default();
        // The buffer reaches back 12 minutes: pid 7 worked 11 minutes ago, pid 8 2 minutes ago,
        // pid 9 is in it with engines idle only.
        a.take(
            now,
            samples(&[
                (7, now - 11 * MIN, 30),
                (8, now - 2 * MIN, 5),
                (9, now - 12 * MIN, 0),
            ]),
        );
        let old = Some(Duration::from_secs(3600));
        let Verdict::Idle(why) = a.verdict(7, || old, TEN, now) else {
            panic!("7 is idle")
        };
        assert!(why[0].contains("11m old"), "{why:?}");
        assert_eq!(a.verdict(8, || old, TEN, now), Verdict::Busy);
        let Verdict::Idle(why) = a.verdict(9, || old, TEN, now) else {
            panic!("9 is idle")
        };
        assert!(why[0].contains("12m"), "{why:?}");
        assert!(why[1].contains("1h"), "its age: {why:?}");
        // Younger than the threshold: not idle, whatever the samples.
        assert_eq!(
            a.verdict(9, || Some(Duration::from_secs(60)), TEN, now),
            Verdict::Busy
        );
        assert_eq!(
            a.since_us(),
            now - 2 * MIN,
            "the next read asks for newer ones"
        );
    }

    #[test]
    fn too_short_a_span_or_no_samples_is_unknown() {
        let now = 100 * MIN;
        let mut a = DeviceActivity::default();
        a.take(now, samples(&[]));
        let Verdict::Unknown(why) = a.verdict(7, || None, TEN, now) else {
            panic!("an empty first read covers nothing")
        };
        assert!(why.contains("cover 0s"), "{why}");
        // Watched from then on: eleven minutes later, with reads a minute apart, it is idle.
        for m in 1..=11 {
            a.take(now + m * MIN, samples(&[]));
        }
        let Verdict::Idle(why) = a.verdict(7, || None, TEN, now + 11 * MIN) else {
            panic!("watched long enough")
        };
        assert!(
            why.last().unwrap().contains("12 reads, at most 1m apart"),
            "{why:?}"
        );
        // A read that fails starts the span again.
        a.take(now + 12 * MIN, Err("NOT_SUPPORTED".into()));
        assert_eq!(
            a.verdict(7, || None, TEN, now + 12 * MIN),
            Verdict::Unknown("NOT_SUPPORTED".into())
        );
        a.take(now + 13 * MIN, samples(&[]));
        assert!(matches!(
            a.verdict(7, || None, TEN, now + 13 * MIN),
            Verdict::Unknown(_)
        ));
    }

    #[test]
    fn forgotten_pids_lose_their_activity() {
        let now = 100 * MIN;
        let mut a = DeviceActivity::default();
        a.take(now, samples(&[(7, now - MIN, 50), (8, now - 20 * MIN, 0)]));
        a.keep_only(|p| p != 7);
        let Verdict::Idle(_) = a.verdict(7, || None, TEN, now) else {
            panic!("a new process with pid 7 has no activity seen")
        };
    }
}
