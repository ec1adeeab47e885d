//! A fleet's GPU memory through the Prometheus it already runs: which GPUs and MIG instances a
//! job fits on across every node, from the series `hmn serve` (or dcgm-exporter) puts there on
//! each node, in a fixed number of queries whatever the fleet's size. Prometheus is the
//! distributed engine; no server of our own.
//!
//! - [`client`]: Prometheus's HTTP API (instant queries), with timeouts, TLS, a bearer token or
//!   basic auth read from files, proxies from the environment, bounded answers;
//! - [`answer`]: an instant vector as the API gives it;
//! - [`error`]: what went wrong, naming the query;
//! - [`selector`]: PromQL label matchers, evaluated against each GPU's labels;
//! - [`fleet`]: the fleet's GPUs read from the series, stale targets named; node by node for a
//!   live view, and one node's GPUs, pods and processes;
//! - [`fit`]: each GPU's and node's verdict for a size, the fleet ranked.

pub mod answer;
pub mod client;
pub mod error;
pub mod fit;
pub mod fleet;
pub mod selector;

pub use client::{Client, Options};
pub use error::Error;
pub use fit::{NodeFit, Placement, Verdict, place};
pub use fleet::{
    Fleet, Gpu, Mig, Node, Nodes, Pod, Process, Read, Source, Stale, read, read_node, read_nodes,
};
pub use selector::Selector;
