//! What a serving engine says about its memory as it starts (`hmn run`): the lines vLLM,
//! SGLang, TensorRT-LLM and PyTorch print, recognised in the command's output as it passes
//! ([`crate::collect::output`]) and made timestamped events with the figures they carry.
//!
//! - `patterns`: the one table of what is recognised, each line with the versions it was seen
//!   in; a line that matches none (a format not known, a near miss) gives nothing, never a
//!   guess;
//! - `scan`: finding those lines in a stream of bytes, whatever its size or content, at the
//!   cost of a search for a few words;
//! - `ledger`: the engine's figures beside the driver's at each event, the phases, and what the
//!   neighbours did in each.

pub mod ledger;
pub mod patterns;
pub mod scan;

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use patterns::{Engine, Kind};

/// The most events a run keeps (a flood of matching lines is counted, not kept).
pub const EVENTS_KEPT: usize = 4096;

/// A figure an engine printed: bytes (from a size with its unit), or a plain number (tokens,
/// seconds, a fraction).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Figure {
    Bytes(u64),
    Number(f64),
}

impl Figure {
    pub fn bytes(self) -> Option<u64> {
        match self {
            Self::Bytes(b) => Some(b),
            Self::Number(_) => None,
        }
    }

    /// A plain number's value (`None` for bytes).
    #[cfg(test)]
    pub fn number(self) -> Option<f64> {
        match self {
            Self::Number(n) => Some(n),
            Self::Bytes(_) => None,
        }
    }
}

/// One line recognised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// When it was read, from the command's start.
    #[serde(rename = "at_s", serialize_with = "seconds")]
    pub at: Duration,
    pub engine: Engine,
    pub kind: Kind,
    /// The pattern's name in the table, and the engine versions it was seen in.
    pub pattern: &'static str,
    pub seen_in: &'static str,
    /// The figures it carries, by name (`weights_bytes`, `kv_cache_bytes`, `kv_tokens`…).
    pub figures: BTreeMap<&'static str, Figure>,
    /// The line, without its colours (at most [`scan::LINE_SHOWN`] characters).
    pub line: String,
}

impl Event {
    pub fn bytes(&self, name: &str) -> Option<u64> {
        self.figures.get(name).and_then(|f| f.bytes())
    }

    /// A plain number that is a small whole one (a device's ordinal).
    pub fn number_of(&self, name: &str) -> Option<usize> {
        match self.figures.get(name)? {
            Figure::Number(n) if n.fract() == 0.0 && (0.0..1024.0).contains(n) =>
            {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                Some(*n as usize)
            }
            _ => None,
        }
    }

    #[cfg(test)]
    pub fn number(&self, name: &str) -> Option<f64> {
        self.figures.get(name).and_then(|f| f.number())
    }
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// The events heard so far, shared by the output's pumps and the sampling loop.
#[derive(Debug)]
pub struct Heard {
    started: Instant,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    events: Vec<Event>,
    /// Events past [`EVENTS_KEPT`], counted.
    dropped: usize,
    /// Lines too long to look at, counted.
    overlong: usize,
    /// Channels that reached their end.
    ended: usize,
}

impl Heard {
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Time from the command's start.
    pub fn now(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn push(&self, event: Event) {
        let mut s = self.state();
        if s.events.len() < EVENTS_KEPT {
            s.events.push(event);
        } else {
            s.dropped += 1;
        }
    }

    pub fn overlong(&self) {
        self.state().overlong += 1;
    }

    pub fn end(&self) {
        self.state().ended += 1;
    }

    /// How many events were heard so far.
    pub fn count(&self) -> usize {
        self.state().events.len()
    }

    /// Every event, and the counts of those dropped and of the lines too long to look at.
    pub fn all(&self) -> (Vec<Event>, usize, usize) {
        let s = self.state();
        (s.events.clone(), s.dropped, s.overlong)
    }
}

#[cfg(test)]
mod ledger_tests;
#[cfg(test)]
mod tests;
