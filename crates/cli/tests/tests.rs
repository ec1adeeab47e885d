//! `hmn`'s integration tests, one binary laid out by what a user touches:
//!
//! - `cli`: each command end to end through the built `hmn` (`basics`: devices against both
//!   fakes; `ps`: its table, JSON and filters, and the memory no visible process accounts for;
//!   `run_watch`, `run_signals`, `run_tree_ram` (a tree's RAM, shared pages counted once),
//!   `watch_edges`, `serve`, `fleet`, `top` in tmux, `stalls`,
//!   `hidepid` (a real procfs mount with `hidepid`), `hostile_names`,
//!   `impossible_figures`, `kubelet` (pod names from a node's log layout), `dra` (a node whose GPUs are allocated
//!   through resource claims: the first scrape and `ps --group-by claim`), `pid_namespace` (a
//!   driver pid that a local process also has, in a PID namespace of its own), the first-contact
//!   `surface`, the README's transcripts, `advice` (no kill or GPU reset without proof: a GPU
//!   node stood in by a private mount namespace, `util::gpunode`), `top_keys` (selecting, inspecting and signalling in
//!   `hmn top`), and how often `nvidia-smi` runs while NVML answers: `fallback_probe` for serve,
//!   `quiet_fallback` for the other long-running commands; `compat`, the commands as scripts
//!   written for 0.2.x call them);
//! - `backends`: the sources `hmn` and the library share, end to end (`drm` fixture trees, `mig`);
//! - `deploy`: the deploy kit against hmn (manifests, alert rules, the Grafana dashboard);
//! - `platform`: Windows checks, run under Wine in CI;
//! - `layering`: the module graph of `hmn` (the library tests its own).
//!
//! `util` holds what these share (`hmn()`, the one way they start `hmn`; a running `hmn serve`;
//! the deploy folder); helpers shared with
//! the library's tests are the `hypomnesis-testkit` crate, reached as `support`.

// Test code: a failed unwrap or index is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

extern crate hypomnesis_testkit as support;

mod util {
    #[cfg(all(feature = "serve", target_os = "linux"))]
    pub mod deploy;
    #[cfg(target_os = "linux")]
    pub mod gpunode;
    pub mod hmn;
    #[cfg(all(feature = "serve", target_os = "linux"))]
    pub mod serve;
    #[cfg(target_os = "linux")]
    pub mod smi;
}

/// The kubelet's pod-resources stand-in, shared with `hmn`'s unit tests.
#[cfg(all(feature = "serve", target_os = "linux"))]
#[path = "support/kubelet.rs"]
mod kubelet_standin;

mod cli {
    mod advice;
    mod basics;
    mod compat;
    pub(crate) mod dra;
    mod engines;
    mod fallback_probe;
    mod fits_fleet;
    mod fleet;
    mod ghost_zoo;
    mod ghosts;
    mod hidepid;
    mod hostile_names;
    mod impossible_figures;
    mod kubelet;
    mod neighbours;
    mod numa;
    mod pid_namespace;
    mod ps;
    mod quiet_fallback;
    mod readme;
    mod run_output;
    mod run_signals;
    mod run_tree_ram;
    mod run_watch;
    mod serve;
    mod serve_stalls;
    mod stalls;
    mod surface;
    mod top;
    mod top_keys;
    mod watch_edges;
}

mod backends {
    mod drm;
    mod mig;
}

mod deploy {
    mod alerts;
    mod grafana;
    mod manifests;
}

mod platform {
    mod windows;
}

mod layering;
