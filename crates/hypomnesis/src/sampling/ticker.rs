//! The pace of a sampling loop: a tick every interval, until a deadline or a condition of the
//! caller's (a stop request, the command it follows having exited).

use std::time::{Duration, Instant};

/// How long a wait sleeps at most before looking at the caller's condition again.
const POLL: Duration = Duration::from_millis(10);

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tick {
    /// The next tick is due.
    Due,
    /// The caller's condition became true (a stop was asked, the command exited).
    Done,
    /// The next tick would fall after the deadline.
    Deadline,
}

/// Ticks at `start`, `start + interval`, `start + 2 × interval`, … up to the deadline, so a
/// loop of a 3 s duration at a 1 s interval samples at 0, 1, 2 and 3 s and ends at 3 s. Ticks
/// missed while a slow sample ran are skipped, not run back to back.
#[derive(Debug, Clone)]
pub struct Ticker {
    interval: Duration,
    next: Instant,
    deadline: Option<Instant>,
}

impl Ticker {
    /// A ticker whose first tick is now, and whose last is at most `duration` from now (`None`:
    /// no end).
    #[must_use]
    pub fn new(interval: Duration, duration: Option<Duration>) -> Self {
        let now = Instant::now();
        Self {
            interval,
            next: now,
            deadline: duration.and_then(|d| now.checked_add(d)),
        }
    }

    /// Waits for the next tick, the deadline, or `done()` (asked every few milliseconds).
    pub fn wait(&mut self, mut done: impl FnMut() -> bool) -> Tick {
        self.next += self.interval;
        let now = Instant::now();
        while self.next + self.interval <= now {
            self.next += self.interval;
        }
        if self.deadline.is_some_and(|d| self.next > d + POLL) {
            return Tick::Deadline;
        }
        loop {
            if done() {
                return Tick::Done;
            }
            let now = Instant::now();
            if now >= self.next {
                return Tick::Due;
            }
            std::thread::sleep((self.next - now).min(POLL));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_up_to_and_including_the_deadline() {
        let started = Instant::now();
        let mut t = Ticker::new(Duration::from_millis(30), Some(Duration::from_millis(90)));
        let mut ticks = 1; // the first one is now
        while t.wait(|| false) == Tick::Due {
            ticks += 1;
        }
        assert_eq!(ticks, 4, "0, 30, 60 and 90 ms");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(90) && took < Duration::from_millis(400),
            "{took:?}"
        );
    }

    #[test]
    fn done_ends_the_wait() {
        let mut t = Ticker::new(Duration::from_secs(60), None);
        assert_eq!(t.wait(|| true), Tick::Done);
    }

    #[test]
    fn missed_ticks_are_skipped_not_run_back_to_back() {
        // Ticks due at 0, 100, 200, 300 and 400 ms; the loop slept 250 ms after the first. The
        // missed one (100) is skipped: the next waits return at 200 (at once), 300 and 400. Run
        // back to back instead, they would return at once, at once and at 300.
        let started = Instant::now();
        let mut t = Ticker::new(Duration::from_millis(100), None);
        std::thread::sleep(Duration::from_millis(250));
        for _ in 0..3 {
            assert_eq!(t.wait(|| false), Tick::Due);
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(400), "{took:?}");
    }
}
