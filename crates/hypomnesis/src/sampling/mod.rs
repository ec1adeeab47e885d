//! Sampling memory over time (the `sampling` feature, off by default): [`Sampler`] reads a
//! [`Frame`] (every device once, for what the caller asked, and the RSS of the processes it
//! follows; for a tree of them, their PSS as often as a [`PssPacer`] allows, so that
//! [`Frame::tree_ram`] counts shared pages once) at each tick of a [`Ticker`]; [`Timeline`]
//! keeps one span's samples in a fixed room (neighbouring samples folded, each figure keeping
//! its maximum), and [`Journal`] one record of samples shared by any number of overlapping
//! spans, each with its exact fold and a bounded timeline. [`ContextReader`] reads the
//! changing parts of processes' contexts (CPU time, RSS) again and again through their files
//! kept open, and [`Identities`] keeps who each process is (owner, command line, container,
//! name) for its lifetime, read once.

mod frame;
mod identity;
mod journal;
mod pss;
mod ticker;
mod timeline;

pub use crate::host::process::context::ContextReader;
pub use frame::{DeviceFrame, Failure, Frame, Sampler, Want, max_opt};
pub use identity::{Identities, Identity, IdentityParts};
pub use journal::{Fold, Journal, SpanId, Spanned};
pub use pss::{PSS_DUTY, PssPacer, TreeRam};
pub use ticker::{Tick, Ticker};
pub use timeline::Timeline;
