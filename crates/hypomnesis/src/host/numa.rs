//! The host's NUMA nodes (`<sysfs>/devices/system/node/node<N>/`) and where a process's pages
//! lie among them (`<procfs>/<pid>/numa_maps`). On a coherent machine whose GPU memory is a
//! node of the kernel's (Grace Hopper, Grace Blackwell in NUMA mode), these say what the kernel
//! has placed in the GPU's memory, which the GPU's own memory query does not count.

use std::collections::BTreeMap;

use crate::error::{HypomnesisError, Result};
use crate::types::NumaNode;

/// The largest `numa_maps` read: a line per mapping, and a process may have 65,530 mappings
/// (`vm.max_map_count`'s default) with long file names; anything larger is not a real one.
#[cfg(target_os = "linux")]
const NUMA_MAPS: u64 = 64 << 20;

/// NUMA node `id` of this host: its memory (`meminfo`) and whether it has CPUs (`cpulist`),
/// under the sysfs root in use.
///
/// # Errors
///
/// The node does not exist or its files cannot be read or make no sense (the error names the
/// file); not Linux.
pub fn numa_node(id: u32) -> Result<NumaNode> {
    #[cfg(target_os = "linux")]
    {
        use crate::error::{ErrorKind, io_at};
        use crate::host::file::{SYSFS, read_capped};
        use crate::host::parse::numa::{cpulist_has_cpus, node_meminfo};
        let dir = crate::host::roots::sysfs()?
            .join("devices/system/node")
            .join(format!("node{id}"));
        let bad = |path: &std::path::Path, why: String| {
            HypomnesisError::ram(ErrorKind::BadAnswer, format!("{}: {why}", path.display()))
        };
        let meminfo = dir.join("meminfo");
        // A node's meminfo is about 30 lines, well under a sysfs page.
        let text = read_capped(&meminfo, SYSFS).map_err(|e| io_at(&meminfo, &e))?;
        let (total, free) = node_meminfo(&text, id).map_err(|why| bad(&meminfo, why))?;
        let cpulist = dir.join("cpulist");
        let text = read_capped(&cpulist, SYSFS).map_err(|e| io_at(&cpulist, &e))?;
        let has_cpus = cpulist_has_cpus(&text).map_err(|why| bad(&cpulist, why))?;
        Ok(NumaNode {
            id,
            total_bytes: total,
            free_bytes: free,
            used_bytes: total - free,
            has_cpus,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(HypomnesisError::unsupported(format!(
            "NUMA node {id}: NUMA nodes are read from Linux's sysfs"
        )))
    }
}

/// Where the pages of process `pid` lie: its resident bytes on each NUMA node, from
/// `<procfs>/<pid>/numa_maps` (each mapping's `N<node>=<pages>` times its page size). These
/// pages are part of its RSS. Reading it walks every mapping of the process: a few
/// milliseconds for a large one, so ask for the processes that need it, not every tick.
///
/// # Errors
///
/// The file cannot be read (no such process, another user's without the right to trace it, a
/// kernel without NUMA) or is malformed; not Linux.
pub fn process_numa_bytes(pid: u32) -> Result<BTreeMap<u32, u64>> {
    #[cfg(target_os = "linux")]
    {
        use std::io::{BufRead, BufReader, Read};

        use crate::error::{ErrorKind, io_at};
        use crate::host::parse::numa::numa_maps_line;
        let path = crate::host::roots::procfs()?
            .join(pid.to_string())
            .join("numa_maps");
        let _waiting = crate::inflight::reading(&path);
        let file = std::fs::File::open(&path).map_err(|e| io_at(&path, &e))?;
        let mut reader = BufReader::new(file.take(NUMA_MAPS + 1));
        let page = crate::host::memory::linux::page_size();
        let mut by_node = BTreeMap::new();
        let mut line = String::new();
        let mut read: u64 = 0;
        loop {
            line.clear();
            let n = reader.read_line(&mut line).map_err(|e| io_at(&path, &e))?;
            if n == 0 {
                break;
            }
            read += n as u64;
            if read > NUMA_MAPS {
                return Err(HypomnesisError::ram(
                    ErrorKind::BadAnswer,
                    format!("{} is larger than {NUMA_MAPS} bytes", path.display()),
                ));
            }
            numa_maps_line(line.trim_end(), page, &mut by_node).map_err(|why| {
                HypomnesisError::ram(ErrorKind::BadAnswer, format!("{}: {why}", path.display()))
            })?;
        }
        Ok(by_node)
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(HypomnesisError::unsupported(format!(
            "process {pid}'s NUMA placement: numa_maps is Linux's"
        )))
    }
}

#[cfg(all(test, target_os = "linux"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// This test's own pages: some on a node, all of them a part of its RSS.
    #[test]
    fn this_process_has_pages_on_a_node() {
        let Ok(by_node) = process_numa_bytes(std::process::id()) else {
            // A kernel built without NUMA has no numa_maps: nothing to check here.
            assert!(
                !std::path::Path::new("/proc/self/numa_maps").exists(),
                "numa_maps exists but was not read"
            );
            return;
        };
        let total: u64 = by_node.values().sum();
        assert!(total > 0, "{by_node:?}");
    }
}
