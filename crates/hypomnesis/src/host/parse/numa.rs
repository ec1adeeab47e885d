//! Pure parsers of the kernel's NUMA files: a node's `meminfo` and `cpulist`
//! (`/sys/devices/system/node/node<N>/`), and a process's `/proc/<pid>/numa_maps`.

use std::collections::BTreeMap;

use crate::error::clip;

/// A node's memory from the text of its `meminfo` (`Node 1 MemTotal:  98304000 kB`):
/// `(MemTotal, MemFree)` in bytes. Each line must name `node`, so that one node's file read
/// as another's is refused, not taken.
pub fn node_meminfo(text: &str, node: u32) -> Result<(u64, u64), String> {
    let prefix = format!("Node {node} ");
    let field = |name: &str| -> Result<u64, String> {
        let line = text
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .find_map(|l| l.strip_prefix(name))
            .ok_or_else(|| format!("node {node}'s meminfo has no {name} line"))?;
        let mut parts = line.split_ascii_whitespace();
        let kib: u64 = parts
            .next()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("node {node}'s {name} is not a number: {:?}", clip(line)))?;
        if parts.next() != Some("kB") {
            return Err(format!(
                "node {node}'s {name} is not in kB: {:?}",
                clip(line)
            ));
        }
        kib.checked_mul(1024)
            .ok_or_else(|| format!("node {node}'s {name} {kib} kB overflows in bytes"))
    };
    let total = field("MemTotal:")?;
    let free = field("MemFree:")?;
    if free > total {
        return Err(format!(
            "node {node}'s MemFree ({free} bytes) is larger than its MemTotal ({total} bytes)"
        ));
    }
    Ok((total, free))
}

/// Whether a node's `cpulist` (`0-71`, `0,2-5`, or an empty line for a node of memory only)
/// names any CPU.
pub fn cpulist_has_cpus(text: &str) -> Result<bool, String> {
    let list = text.trim();
    if list.is_empty() {
        return Ok(false);
    }
    for part in list.split(',') {
        let ok = part
            .split('-')
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !ok || part.split('-').count() > 2 {
            return Err(format!("cpulist is not a CPU list: {:?}", clip(list)));
        }
    }
    Ok(true)
}

/// What one line of `numa_maps` adds to each node, in bytes: its `N<node>=<pages>` counts
/// times its `kernelpagesize_kB` (`page_size` on kernels before 4.0, which do not print it).
///
/// A line is `<address> <policy> [key=value | flag]…`; a token that is neither is refused, as
/// is a count that is not a number.
pub fn numa_maps_line(
    line: &str,
    page_size: u64,
    into: &mut BTreeMap<u32, u64>,
) -> Result<(), String> {
    let mut tokens = line.split_ascii_whitespace();
    let address = tokens.next();
    if address.is_none_or(|a| !a.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(format!(
            "numa_maps line does not start with an address: {:?}",
            clip(line)
        ));
    }
    let _policy = tokens.next();
    let mut pages: Vec<(u32, u64)> = Vec::new();
    let mut size = page_size;
    for t in tokens {
        if let Some(kib) = t.strip_prefix("kernelpagesize_kB=") {
            size = kib
                .parse::<u64>()
                .ok()
                .and_then(|k| k.checked_mul(1024))
                .filter(|&s| s > 0)
                .ok_or_else(|| format!("numa_maps page size is not a size: {:?}", clip(t)))?;
        } else if let Some((node, count)) = t.strip_prefix('N').and_then(|r| r.split_once('='))
            && node.bytes().all(|b| b.is_ascii_digit())
        {
            let node: u32 = node
                .parse()
                .map_err(|_| format!("numa_maps node is not a number: {:?}", clip(t)))?;
            let count: u64 = count
                .parse()
                .map_err(|_| format!("numa_maps page count is not a number: {:?}", clip(t)))?;
            pages.push((node, count));
        }
        // Other tokens (file=, anon=, dirty=, mapped=, heap, stack, huge, …) say nothing of
        // where the pages are.
    }
    for (node, count) in pages {
        let bytes = count
            .checked_mul(size)
            .ok_or_else(|| format!("numa_maps: {count} pages of {size} bytes overflow"))?;
        let sum = into.entry(node).or_insert(0);
        *sum = sum.saturating_add(bytes);
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_meminfo() {
        let text = "Node 1 MemTotal:       100663296 kB\nNode 1 MemFree:         83886080 kB\n\
                    Node 1 MemUsed:         16777216 kB\n";
        assert_eq!(node_meminfo(text, 1), Ok((96 << 30, 80 << 30)));
        // Another node's file is not this node's.
        assert!(node_meminfo(text, 2).unwrap_err().contains("node 2"));
        assert!(node_meminfo("Node 1 MemTotal: 5 MB\nNode 1 MemFree: 1 kB\n", 1).is_err());
        assert!(node_meminfo("Node 1 MemTotal: 1 kB\nNode 1 MemFree: 2 kB\n", 1).is_err());
        assert!(node_meminfo("Node 1 MemTotal: x kB\n", 1).is_err());
        // A node with no memory online (on GH200 the nodes kept for MIG partitions have none
        // until one is made) reads 0 of 0.
        assert_eq!(
            node_meminfo("Node 3 MemTotal: 0 kB\nNode 3 MemFree: 0 kB\n", 3),
            Ok((0, 0))
        );
    }

    #[test]
    fn cpulists() {
        assert_eq!(cpulist_has_cpus("0-71\n"), Ok(true));
        assert_eq!(cpulist_has_cpus("0,2-5,9\n"), Ok(true));
        assert_eq!(cpulist_has_cpus("\n"), Ok(false));
        assert_eq!(cpulist_has_cpus(""), Ok(false));
        assert!(cpulist_has_cpus("cpu0").is_err());
        assert!(cpulist_has_cpus("1-2-3").is_err());
        assert!(cpulist_has_cpus("1,,2").is_err());
    }

    #[test]
    fn numa_maps_lines_add_up_per_node() {
        let mut by_node = BTreeMap::new();
        for line in [
            "5651f53f8000 default file=/usr/bin/head mapped=2 N0=2 kernelpagesize_kB=4",
            "7f0000000000 bind:1 anon=262144 dirty=262144 N1=262144 kernelpagesize_kB=4",
            "7f4680000000 default file=/hugetlb/big huge anon=2 dirty=2 N1=1 N0=1 kernelpagesize_kB=2048",
            "7fff8d425000 default stack anon=3 dirty=3 N0=3",
        ] {
            numa_maps_line(line, 4096, &mut by_node).unwrap();
        }
        assert_eq!(by_node.get(&0), Some(&((2 + 3) * 4096 + (2 << 20))));
        assert_eq!(by_node.get(&1), Some(&((1 << 30) + (2 << 20))));
        // A mapping with no page present names no node.
        numa_maps_line("7f00 default file=/x", 4096, &mut by_node).unwrap();
        assert_eq!(by_node.len(), 2);
    }

    #[test]
    fn numa_maps_lines_that_are_not() {
        let mut m = BTreeMap::new();
        assert!(numa_maps_line("hello world", 4096, &mut m).is_err());
        assert!(numa_maps_line("", 4096, &mut m).is_err());
        assert!(numa_maps_line("7f00 default N1=x", 4096, &mut m).is_err());
        assert!(numa_maps_line("7f00 default N1=1 kernelpagesize_kB=0", 4096, &mut m).is_err());
        assert!(
            numa_maps_line(
                "7f00 default N1=18446744073709551615 kernelpagesize_kB=4",
                4096,
                &mut m
            )
            .is_err()
        );
        assert!(m.is_empty(), "nothing added from a refused line: {m:?}");
    }
}
