//! Pure parsers of the host's files, apart from the I/O that reads them (as in procfs-core):
//! `stat` (one parser for every field taken from it), the memory files (`statm`, `status`,
//! `meminfo`), the mounts (`mountinfo`: a procfs mount's `hidepid`), who a process is
//! (`passwd`, `cmdline`, `cgroup`), the drivers' device majors (`devices`) and the names of the kubelet's log directories and links
//! (the Kubernetes names of a container).

pub(crate) mod context;
pub(crate) mod devices;
pub(crate) mod kube;
pub(crate) mod memory;
pub(crate) mod mountinfo;
pub(crate) mod numa;
pub(crate) mod stat;
