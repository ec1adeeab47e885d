//! Collecting, around the library's sampler (`hypomnesis::sampling`): the stop requests of
//! the loops, the command a run starts, and the contexts of the processes a frame lists.

pub mod child;
pub mod contexts;
#[cfg(feature = "serve")]
pub mod known;
pub mod stop;
