//! This host: where `/proc`, `/sys` and `/` are (`roots`), its memory and the calling process's
//! resident set (`memory`), a process on it (`process`: another pid's resident set, start time,
//! name, tree, visibility in this PID namespace, and who it is), the Kubernetes names of a
//! container from the kubelet's logs under the rootfs (`kube`), and the pure parsers of what
//! those read (`parse`, no I/O, tested on every OS).
//!
//! The GPU backends read processes through `process` (names, visibility); nothing here reads a
//! backend.

pub(crate) mod file;
pub(crate) mod kube;
pub(crate) mod memory;
pub(crate) mod numa;
pub(crate) mod parse;
pub(crate) mod process;
pub(crate) mod roots;
