//! `hmn`: GPU and RAM memory from the shell. See `hmn --help`.
//!
//! - `cli`: the command line and dispatch; `args`, `help`, `outcome`: what it is made of;
//! - `collect`: around the library's sampler (`hypomnesis::sampling`): the loops' stop
//!   requests, the command a run starts, the contexts of the processes a frame lists;
//! - `cmd`: one module per subcommand, folding what was collected into a result;
//! - `engine`: what a serving engine prints about its memory, recognised, and its ledger;
//! - `view`: pure renderers of those results (text, JSON, CSV, SVG, roff);
//! - `top`: the full-screen view (its model, state and drawing), behind the `top` feature;
//! - `kube`: which pod the kubelet allocated each GPU to, behind the `kubernetes` feature.
//!
//! Arrows point one way: cli → cmd and top → collect and view; view and collect → the library.

mod args;
mod cli;
mod cmd;
mod collect;
mod engine;
#[cfg(any(feature = "serve", feature = "top"))]
mod heap;
mod help;
// Off Unix there is no pod-resources socket to ask: the parsers and the mapping go unused.
#[cfg(feature = "kubernetes")]
#[cfg_attr(not(unix), allow(dead_code))]
mod kube;
mod outcome;
#[cfg(feature = "fleet")]
mod prometheus;
#[cfg(feature = "top")]
mod top;
mod view;

fn main() -> std::process::ExitCode {
    cli::main()
}
