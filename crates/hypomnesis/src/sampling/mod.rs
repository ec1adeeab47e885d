//! Building blocks for sampling memory over time (the `sampling` feature, off by default):
//! [`Timeline`], one span's samples in a fixed room (neighbouring samples folded, each figure
//! keeping its maximum), and [`Journal`], one record of samples shared by any number of
//! overlapping spans, each with its exact fold and a bounded timeline.

mod journal;
mod timeline;

pub use journal::{Fold, Journal, SpanId, Spanned};
pub use timeline::Timeline;
