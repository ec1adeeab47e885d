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

/// The most bytes a process can hold on one node: 4 PiB, the largest physical address space
/// Linux maps (52 bits, on x86-64 with five-level paging and on arm64). A `numa_maps` that
/// adds up to more cannot be right.
pub const MAX_NODE_BYTES: u64 = 1 << 52;

/// The largest page any architecture Linux supports maps (16 GiB: POWER's gigantic pages,
/// arm64's contiguous PMDs with 64 KiB granules).
const MAX_PAGE_BYTES: u64 = 16 << 30;

/// The most nodes a kernel can have (`MAX_NUMNODES`: `CONFIG_NODES_SHIFT` is at most 10).
const MAX_NODES: u32 = 1 << 10;

/// A decimal number of the kernel's: digits only (no sign, no space), fitting in a `u64`.
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// What one line of `numa_maps` adds to each node, in bytes: its `N<node>=<pages>` counts
/// times its `kernelpagesize_kB` (`page_size` on kernels before 4.0, which do not print it).
///
/// A line is `<address> <policy> [key=value | flag]…`. It is refused, and nothing of it
/// added, when a count or a page size is not a plain decimal number, a token names a node as
/// `N<node>=` other than in digits or beyond the kernel's 1,024 nodes, a page size is zero,
/// not a power of two or larger than 16 GiB, or a node's bytes (this line's, or the sum in
/// `into`) would pass 4 PiB (`MAX_NODE_BYTES`): a figure no machine can hold is an error, never a
/// saturated or wrapped number.
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
            size = decimal(kib)
                .and_then(|k| k.checked_mul(1024))
                .filter(|&s| s.is_power_of_two() && s <= MAX_PAGE_BYTES)
                .ok_or_else(|| {
                    format!(
                        "numa_maps page size is not a page size (a power of two up to 16 GiB): {:?}",
                        clip(t)
                    )
                })?;
        } else if let Some((node, count)) = t.strip_prefix('N').and_then(|r| r.split_once('=')) {
            // No other key of numa_maps begins with `N`: this one must be a node's count.
            let node = decimal(node)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < MAX_NODES)
                .ok_or_else(|| format!("numa_maps node is not a node number: {:?}", clip(t)))?;
            let count = decimal(count)
                .ok_or_else(|| format!("numa_maps page count is not a number: {:?}", clip(t)))?;
            pages.push((node, count));
        }
        // Other tokens (file=, anon=, dirty=, mapped=, heap, stack, huge, …) say nothing of
        // where the pages are.
    }
    if !(size.is_power_of_two() && size <= MAX_PAGE_BYTES) {
        return Err(format!(
            "numa_maps: the page size {size} is not a page size"
        ));
    }
    // Every sum is checked before any is added: a refused line adds nothing.
    let mut sums: Vec<(u32, u64)> = Vec::with_capacity(pages.len());
    for (node, count) in pages {
        let before = sums
            .iter()
            .rev()
            .find(|(n, _)| *n == node)
            .map_or_else(|| into.get(&node).copied().unwrap_or(0), |(_, b)| *b);
        let sum = count
            .checked_mul(size)
            .and_then(|bytes| bytes.checked_add(before))
            .filter(|&b| b <= MAX_NODE_BYTES)
            .ok_or_else(|| {
                format!(
                    "numa_maps: {count} pages of {size} bytes put more than 4 PiB on node {node}, \
                     which no machine holds"
                )
            })?;
        sums.push((node, sum));
    }
    into.extend(sums);
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

/// Crafted `numa_maps` lines: each is refused with a reason, and adds nothing, never a node
/// figure of 16 EiB (a wrapped, saturated or impossible number).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod hostile {
    use super::*;

    use proptest::prelude::*;

    #[test]
    fn impossible_lines_are_refused_and_add_nothing() {
        for (line, why) in [
            // 2^52 - 1 pages of 4 KiB: 16 EiB less a page, no overflow.
            (
                "7f00 default N0=4503599627370495 kernelpagesize_kB=4",
                "4 PiB",
            ),
            (
                "7f00 default N0=18446744073709551615 kernelpagesize_kB=4",
                "4 PiB",
            ),
            (
                "7f00 default N0=1 kernelpagesize_kB=18014398509481983",
                "page size",
            ),
            ("7f00 default N0=1 kernelpagesize_kB=33554432", "page size"),
            ("7f00 default N0=1 kernelpagesize_kB=0", "page size"),
            ("7f00 default N0=1 kernelpagesize_kB=12", "page size"),
            ("7f00 default N0=1 kernelpagesize_kB=-4", "page size"),
            ("7f00 default N0=1 kernelpagesize_kB=+4", "page size"),
            ("7f00 default N0=1 kernelpagesize_kB=", "page size"),
            ("7f00 default N0=-1", "page count"),
            ("7f00 default N0=+5", "page count"),
            ("7f00 default N0= 5", "page count"),
            ("7f00 default N0=5x", "page count"),
            ("7f00 default N-1=5", "node"),
            ("7f00 default N+1=5", "node"),
            ("7f00 default N=5", "node"),
            ("7f00 default N1024=1", "node"),
            ("7f00 default N4294967296=1", "node"),
            ("7f00 default Nx=1", "node"),
            // One node too many, after one that fits: the line adds nothing.
            ("7f00 default N0=1 N1=4503599627370496", "4 PiB"),
            (
                "7f00 default N0=2251799813685248 N0=2251799813685248",
                "4 PiB",
            ),
        ] {
            let mut m = BTreeMap::from([(0, 4096)]);
            let e = numa_maps_line(line, 4096, &mut m).unwrap_err();
            assert!(e.contains(why), "{line:?}: {e}");
            assert_eq!(m, BTreeMap::from([(0, 4096)]), "{line:?} added to {m:?}");
        }
        // Lines that each fit, until their sum passes 4 PiB: refused there, not saturated.
        let mut m = BTreeMap::new();
        let half = "7f00 default N3=549755813888 kernelpagesize_kB=4"; // 2 PiB
        numa_maps_line(half, 4096, &mut m).unwrap();
        numa_maps_line(half, 4096, &mut m).unwrap();
        assert_eq!(m.get(&3), Some(&MAX_NODE_BYTES));
        let e = numa_maps_line("7f01 default N3=1", 4096, &mut m).unwrap_err();
        assert!(e.contains("4 PiB"), "{e}");
        assert_eq!(m.get(&3), Some(&MAX_NODE_BYTES));
        // The caller's page size is checked as the line's is.
        assert!(numa_maps_line("7f00 default N0=1", 0, &mut m).is_err());
        assert!(numa_maps_line("7f00 default N0=1", 3000, &mut m).is_err());
    }

    proptest! {
        /// Whatever the counts, nodes and page sizes, an accepted line adds exactly its pages
        /// (worked out in 128 bits) and leaves every node within 4 PiB; a refused one adds
        /// nothing.
        #[test]
        fn a_line_adds_its_pages_or_nothing(
            before in proptest::option::of(0_u64..=MAX_NODE_BYTES),
            counts in proptest::collection::vec((0_u32..1100, prop_oneof![0_u64..1 << 20, any::<u64>()]), 0..4),
            kib in proptest::option::of(prop_oneof![Just(4_u64), Just(64), Just(2048), Just(1 << 20), any::<u64>()]),
        ) {
            let mut words = vec!["7f4680000000 default anon=1".to_string()];
            words.extend(counts.iter().map(|(node, count)| format!("N{node}={count}")));
            words.extend(kib.map(|k| format!("kernelpagesize_kB={k}")));
            let line = words.join(" ");
            let start: BTreeMap<u32, u64> = before.map(|b| (0, b)).into_iter().collect();
            let mut m = start.clone();
            let size = u128::from(kib.map_or(4, |k| k)) * 1024;
            let mut want: BTreeMap<u32, u128> = start.iter().map(|(&n, &b)| (n, u128::from(b))).collect();
            for (node, count) in &counts {
                let w = want.entry(*node).or_insert(0);
                *w = w.saturating_add(u128::from(*count).saturating_mul(size));
            }
            let possible = size.is_power_of_two()
                && size <= u128::from(MAX_PAGE_BYTES)
                && counts.iter().all(|(n, _)| *n < MAX_NODES)
                && want.values().all(|&b| b <= u128::from(MAX_NODE_BYTES));
            match numa_maps_line(&line, 4096, &mut m) {
                Ok(()) => {
                    prop_assert!(possible, "{line}: accepted {m:?}");
                    let got: BTreeMap<u32, u128> = m.iter().map(|(&n, &b)| (n, u128::from(b))).collect();
                    prop_assert_eq!(got, want);
                }
                Err(e) => {
                    prop_assert!(!possible, "{line}: {e}");
                    prop_assert_eq!(m, start);
                }
            }
        }
    }
}
