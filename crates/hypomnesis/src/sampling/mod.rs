//! Building blocks for sampling memory over time (the `sampling` feature, off by default):
//! [`Journal`], one record of samples shared by any number of overlapping spans, each with
//! its exact fold and a bounded timeline.

mod journal;

pub use journal::{Fold, Journal, SpanId, Spanned};
