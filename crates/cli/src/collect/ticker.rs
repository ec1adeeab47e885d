//! The pace of a sampling loop: a tick every interval, until a deadline, a stop request
//! (Ctrl-C) or a condition of the caller's.

use std::time::{Duration, Instant};

use super::stop::Stop;

/// How long a wait sleeps at most before looking at the stop flag and the caller's condition.
const POLL: Duration = Duration::from_millis(10);

/// Why a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// The next tick is due.
    Due,
    /// A stop was requested (Ctrl-C, a signal).
    Stopped,
    /// The caller's condition became true (e.g. the command exited).
    Done,
    /// The next tick would fall after the deadline.
    Deadline,
}

/// Ticks at `start`, `start + interval`, `start + 2 × interval`, … up to the deadline, so a
/// loop of `--duration 3s --interval 1s` samples at 0, 1, 2 and 3 s and ends at 3 s.
#[derive(Debug)]
pub struct Ticker {
    interval: Duration,
    next: Instant,
    deadline: Option<Instant>,
    stop: Stop,
}

impl Ticker {
    /// A ticker whose first tick is now.
    pub fn new(interval: Duration, duration: Option<Duration>, stop: Stop) -> Self {
        let now = Instant::now();
        Self {
            interval,
            next: now,
            deadline: duration.map(|d| now + d),
            stop,
        }
    }

    /// Whether a stop was requested.
    pub fn stopped(&self) -> bool {
        self.stop.requested()
    }

    /// Waits for the next tick, a stop, the deadline, or `done()` (checked every few ms).
    pub fn wait(&mut self, mut done: impl FnMut() -> bool) -> Tick {
        self.next += self.interval;
        // Ticks missed while a slow sample ran are skipped, not run back to back.
        let now = Instant::now();
        while self.next + self.interval <= now {
            self.next += self.interval;
        }
        if self.deadline.is_some_and(|d| self.next > d + POLL) {
            return Tick::Deadline;
        }
        loop {
            if self.stopped() {
                return Tick::Stopped;
            }
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
        let mut t = Ticker::new(
            Duration::from_millis(30),
            Some(Duration::from_millis(90)),
            Stop::never(),
        );
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
    fn stop_and_done_end_the_wait() {
        let stop = Stop::never();
        let mut t = Ticker::new(Duration::from_secs(60), None, stop.clone());
        assert_eq!(t.wait(|| true), Tick::Done);
        stop.request(15);
        assert_eq!(t.wait(|| false), Tick::Stopped);
        assert!(t.stopped());
    }
}
