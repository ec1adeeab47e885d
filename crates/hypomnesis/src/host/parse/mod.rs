//! Pure parsers of the host's files, apart from the I/O that reads them (as in procfs-core):
//! `stat` (one parser for every field taken from it), the memory files (`statm`, `status`,
//! `meminfo`) and who a process is (`passwd`, `cmdline`, `cgroup`).

pub(crate) mod context;
pub(crate) mod memory;
pub(crate) mod stat;
