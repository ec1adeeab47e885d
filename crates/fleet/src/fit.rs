//! Where a job fits: each GPU's verdict for a size, the fleet ranked by free memory, and for a
//! job of several GPUs on one node (tensor parallel), each node's verdict.

use std::collections::BTreeMap;

use crate::fleet::{Fleet, Gpu};

/// What a GPU or a node says to a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Its free memory holds it now.
    Fits,
    /// Its free memory and its ghosts' together would.
    OnceGhostsFreed,
    /// It does not.
    No,
}

impl Verdict {
    /// Its name in JSON.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fits => "fits",
            Self::OnceGhostsFreed => "fits_once_ghosts_freed",
            Self::No => "does_not_fit",
        }
    }
}

/// `g`'s verdict for `size` bytes.
#[must_use]
pub fn verdict(g: &Gpu, size: u64) -> Verdict {
    let ghosts = g.ghost_bytes();
    if g.free >= size {
        Verdict::Fits
    } else if g.free.saturating_add(ghosts) >= size {
        Verdict::OnceGhostsFreed
    } else {
        Verdict::No
    }
}

/// A node's answer to a job of `count` GPUs of `size` bytes each.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFit {
    /// The node.
    pub node: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// The GPUs it would use (indices into the ranked list), the most free first: `count` of
    /// them where it fits, else as many as would.
    pub gpus: Vec<usize>,
    /// How many whole GPUs (not MIG instances) it has.
    pub whole: usize,
}

/// The answer to "where does `count` × `size` fit".
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Every GPU counted, the most free first, with its verdict for `size`.
    pub ranked: Vec<(Gpu, Verdict)>,
    /// With `count` > 1: every node with its verdict, fitting nodes first (then by free memory).
    pub nodes: Vec<NodeFit>,
    /// The size asked for, bytes (per GPU).
    pub size: u64,
    /// How many GPUs, on one node.
    pub count: u32,
}

impl Placement {
    /// The overall verdict: fits somewhere now, fits once ghosts are freed, or not.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        let best = if self.count > 1 {
            self.nodes.iter().map(|n| n.verdict).min()
        } else {
            self.ranked.iter().map(|(_, v)| *v).min()
        };
        best.unwrap_or(Verdict::No)
    }
}

/// Where `count` GPUs of `size` bytes each fit in `fleet` (`count` 1: any one GPU or MIG
/// instance; more: that many whole GPUs of one node).
#[must_use]
pub fn place(fleet: &Fleet, size: u64, count: u32) -> Placement {
    let mut ranked: Vec<(Gpu, Verdict)> = fleet
        .gpus
        .iter()
        .map(|g| (g.clone(), verdict(g, size)))
        .collect();
    ranked.sort_by(|(a, _), (b, _)| {
        b.free
            .cmp(&a.free)
            .then_with(|| a.node.cmp(&b.node))
            .then_with(|| a.index.cmp(&b.index))
    });
    let mut nodes = Vec::new();
    if count > 1 {
        let mut by_node: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (g, _)) in ranked.iter().enumerate() {
            if g.mig.is_none() {
                by_node.entry(g.node.as_str()).or_default().push(i);
            }
        }
        let want = usize::try_from(count).unwrap_or(usize::MAX);
        for (node, gpus) in by_node {
            let at = |v: Verdict| -> Vec<usize> {
                gpus.iter()
                    .copied()
                    .filter(|&i| ranked.get(i).is_some_and(|(_, x)| *x <= v))
                    .take(want)
                    .collect()
            };
            let now = at(Verdict::Fits);
            let freed = at(Verdict::OnceGhostsFreed);
            let (verdict, chosen) = if now.len() == want {
                (Verdict::Fits, now)
            } else if freed.len() == want {
                (Verdict::OnceGhostsFreed, freed)
            } else {
                (Verdict::No, now)
            };
            nodes.push(NodeFit {
                node: node.to_string(),
                verdict,
                gpus: chosen,
                whole: gpus.len(),
            });
        }
        let free_of = |n: &NodeFit| -> u64 {
            n.gpus
                .iter()
                .filter_map(|&i| ranked.get(i).map(|(g, _)| g.free))
                .sum()
        };
        nodes.sort_by(|a, b| {
            a.verdict
                .cmp(&b.verdict)
                .then_with(|| free_of(b).cmp(&free_of(a)))
                .then_with(|| a.node.cmp(&b.node))
        });
    }
    Placement {
        ranked,
        nodes,
        size,
        count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_named_and_ordered() {
        assert_eq!(Verdict::Fits.as_str(), "fits");
        assert_eq!(Verdict::OnceGhostsFreed.as_str(), "fits_once_ghosts_freed");
        assert_eq!(Verdict::No.as_str(), "does_not_fit");
        assert!(Verdict::Fits < Verdict::OnceGhostsFreed && Verdict::OnceGhostsFreed < Verdict::No);
        let none = place(&Fleet::default(), 1, 1);
        assert_eq!(none.verdict(), Verdict::No, "nowhere to fit");
        assert!(none.nodes.is_empty());
    }
}
