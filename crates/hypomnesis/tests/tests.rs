//! The library's integration tests, one binary laid out by what a user of the library touches:
//!
//! - `api`: the public functions and types as a program calls them (RSS, process context and
//!   the Kubernetes names of a container, the builders of `test-helpers`, the examples);
//! - `backends`: each GPU source against its stand-in (`nvml`, `nvml_shapes`, `faults` through
//!   the fake NVML; `nvidia_smi` through the stand-in `nvidia-smi` replaying real captures;
//!   `live_gpu` on a real GPU, ignored elsewhere);
//! - `structure`: what the sources must not do (decide a failure's kind from its words; import
//!   back up: the library's layering);
//! - `properties`: the parsers on every capture and on arbitrary input, and the sampling
//!   journal against a plain fold of every span (proptest).
//!
//! `hmn`'s tests are in `crates/cli/tests`. Shared helpers (building the fakes, captures,
//! fixtures, child processes) are the `hypomnesis-testkit` crate, reached as `support`.

// Test code: a failed unwrap or index is a failed test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

extern crate hypomnesis_testkit as support;

mod structure {
    mod failures;
    mod layering;
}

mod api {
    mod builders;
    mod examples;
    mod kubelet;
    mod process_context;
    mod rss;
}

mod backends {
    mod faults;
    mod live_gpu;
    mod memory_model;
    mod nvidia_smi;
    mod nvml;
    mod nvml_shapes;
}

mod properties {
    mod captures;
    mod journal;
    mod parsers;
}
