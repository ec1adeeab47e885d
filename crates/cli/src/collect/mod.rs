//! Collecting, around the library's sampler (`hypomnesis::sampling`): the stop requests of
//! the loops, the command a run starts, the contexts of the processes a frame lists, the other
//! processes on the GPUs a run uses, and whether a free figure has held steady (`hmn fits
//! --settle`).

pub mod child;
pub mod contexts;
#[cfg(feature = "serve")]
pub mod known;
pub mod neighbours;
pub mod output;
pub mod settle;
pub mod stop;
