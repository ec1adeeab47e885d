//! Collecting: the one sampler, the pace of its loops, and the command a run starts.

pub mod child;
pub mod contexts;
#[cfg(feature = "serve")]
pub mod known;
pub mod sampler;
pub mod stop;
pub mod ticker;
