//! Test-only stand-in for `libnvidia-ml` (NVML).
//!
//! Built as a `cdylib` named `nvidia_ml`; tests copy `libnvidia_ml.so` to `libnvidia-ml.so.1`
//! (see `crates/testkit`) and point the loader at it. Its behaviour
//! comes from the JSON file named by the environment variable `FAKE_NVML_SCENARIO`, read by the
//! first `nvmlInit*` call; the schema and semantics are documented in `scenario.rs`.
//!
//! Common rules: before a successful init (or after the matching number of `nvmlShutdown`s)
//! every function except `nvmlErrorString` and `nvmlSystemGetNVMLVersion` returns
//! UNINITIALIZED (1); then the scenario's `fail` rules are consulted; then NULL out-pointers and
//! unknown handles give INVALID_ARGUMENT (2). Every call (also uninitialised ones) is counted
//! for `fake_nvml_call_count`; with `FAKE_NVML_CALL_LOG=<file>` set, the counts are also written
//! to that file (`<function> <calls>` lines, rewritten at most once a second, at a call), so a
//! benchmark can count the NVML calls of a monitor it cannot link against.
//!
//! Cargo features decide which symbols exist at all, to imitate older drivers:
//! `v2-procs` (R450.66+: `_v2` process lists) and `r510` (R510+: `nvmlDeviceGetMemoryInfo_v2`
//! and `_v3` process lists).
//!
//! No exported function unwinds: every body runs under `catch_unwind` and a panic becomes
//! `NVML_ERROR_UNKNOWN` (999).
//!
//! The modules, by what they imitate:
//!
//! - `abi`: NVML's C ABI (return codes, `#[repr(C)]` layouts, constants): the library's own
//!   `gpu/nvml/abi.rs`, compiled here too, so the fake and the library share one declaration.
//! - `scenario`: the JSON scenario and its defaults.
//! - `state`: the global state (scenario in force, init count, call counters) and the
//!   `fake_nvml_*` introspection symbols.
//! - `cstr`: reading the callers' C strings.
//! - `handles`: device handles (GPUs, their aliases, MIG devices).
//! - `entry`: what every exported function goes through (counting, init check, fail rules,
//!   handle decoding, no unwinding) and the out-pointer helpers.
//! - `init`: init, shutdown, error strings.
//! - `system`: system queries (versions, process names).
//! - `devices`: enumeration and identity.
//! - `mig`: MIG mode, MIG device handles and instance ids.
//! - `memory`: memory info (v1, v2) and utilization.
//! - `processes`: process lists, and the symbols probed to pick their `_v3` layout.
//! - `telemetry`: what monitors (nvtop, nvitop) also ask: clocks, temperatures, fans, power,
//!   PCIe link, encoder/decoder, modes; NOT_SUPPORTED, as for a board without the sensor.

#![allow(non_snake_case, unsafe_code, clippy::missing_safety_doc)]
// Older-driver variants compile out the symbols that use some of the ABI items.
#![cfg_attr(not(feature = "r510"), allow(dead_code, unused_imports))]

#[path = "../../hypomnesis/src/gpu/nvml/abi.rs"]
mod abi;
mod cstr;
mod devices;
mod entry;
mod handles;
mod init;
mod memory;
mod mig;
mod processes;
mod scenario;
mod state;
mod system;
mod telemetry;
