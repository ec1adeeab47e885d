//! The holders of a GPU's device file, judged as suspects for memory the driver charges to a
//! process that is not here: related to the charged pid (its child, in its process group or
//! session: a descriptor inherited from it), exempt (hmn itself, and the clients that keep the
//! device files open without a context: persistenced, NVML monitors, or any process without
//! the unified-memory device every CUDA context holds), or unrelated (named as holding the
//! file, with nothing read tying it to this memory).

use std::path::Path;

use super::holders::Scanned;
use super::rule::{Standing, Suspect};

/// Programs that keep NVIDIA's device files open while holding no GPU memory of their own:
/// the persistence daemon, the management tools and monitors (NVML clients), the device
/// plugin and MPS's control daemon. Matched against a process's name.
pub(crate) const CONTEXTLESS: [&str; 12] = [
    "nvidia-persistenced",
    "nvidia-smi",
    "nv-hostengine",
    "dcgm-exporter",
    "dcgmi",
    "nvidia-device-plugin",
    "nvidia-cuda-mps-control",
    "nvtop",
    "nvitop",
    "gpustat",
    "all-smi",
    "hmn",
];

/// What a look needs to know of a ghost to judge the holders of its GPU's file.
pub(crate) struct Charged {
    /// The pid the driver charges; `None` for memory no listed process accounts for.
    pub pid: Option<u32>,
    /// Whether its context is a compute one only (a holder without the unified-memory device
    /// then holds none of it); `false` when not known.
    pub compute_only: bool,
}

/// The holders of GPU `minor` in `scanned` (less `skip`: the processes the driver lists, not
/// related to the charged one), each judged; those gone since the scan left out.
pub(crate) fn judge(
    procfs: &Path,
    scanned: &Scanned,
    minor: u32,
    charged: &Charged,
    listed: &dyn Fn(u32) -> bool,
) -> Vec<Suspect> {
    let Some(pids) = scanned.held.get(&minor) else {
        return Vec::new();
    };
    pids.iter()
        .filter_map(|&pid| {
            let (ids, start) = super::look::stat(procfs, pid)?;
            // A pid that started after the scan is another process than the one it saw.
            if scanned.starts.get(&pid).is_some_and(|&t| t != start) {
                return None;
            }
            let name = crate::host::process::procfs::comm(procfs, pid);
            let relation = charged.pid.and_then(|c| relation(c, pid, &ids));
            // A listed process the charged one has no tie to is another tenant of the GPU.
            if listed(pid) && relation.is_none() {
                return None;
            }
            let standing = if let Some(why) = exempt(
                name.as_deref(),
                scanned.majors.uvm.is_some(),
                scanned.uvm.contains(&pid),
                charged.compute_only,
            ) {
                Standing::Exempt(why)
            } else if let Some(r) = relation {
                Standing::Related(r)
            } else {
                Standing::Unrelated
            };
            let context = scanned
                .majors
                .uvm
                .is_some()
                .then(|| scanned.uvm.contains(&pid));
            Some(Suspect {
                pid,
                name,
                standing,
                context,
            })
        })
        .collect()
}

/// How `pid` (with `ids`) is related to the charged pid `charged`, in words; `None` when not.
fn relation(charged: u32, pid: u32, ids: &crate::host::parse::stat::StatIds) -> Option<String> {
    if pid == charged {
        return None;
    }
    if ids.ppid == charged {
        Some(format!("a child of {charged}"))
    } else if ids.pgrp == charged {
        Some(format!("in the process group {charged} leads"))
    } else if ids.session == charged {
        Some(format!("in the session {charged} leads"))
    } else {
        None
    }
}

/// Why a holder is never a suspect, if it is not: one of the [`CONTEXTLESS`] clients, or one
/// without the unified-memory device (when its major is known) for memory of a compute context.
pub(crate) fn exempt(
    name: Option<&str>,
    uvm_known: bool,
    holds_uvm: bool,
    compute_only: bool,
) -> Option<String> {
    if let Some(n) = name
        && CONTEXTLESS.contains(&n)
    {
        return Some(format!(
            "{n}, a client that keeps the device files open with no context of its own"
        ));
    }
    (uvm_known && !holds_uvm && compute_only).then(|| {
        "holds no descriptor of nvidia-uvm, which every CUDA context holds: no compute context"
            .to_owned()
    })
}

/// The evidence line for each suspect, by standing.
pub(crate) fn lines(file: &str, suspects: &[Suspect]) -> Vec<String> {
    suspects
        .iter()
        .map(|s| {
            let who = match &s.name {
                Some(n) => format!("{} ({n})", s.pid),
                None => s.pid.to_string(),
            };
            let context = if s.context == Some(true) {
                " and nvidia-uvm (a CUDA context)"
            } else {
                ""
            };
            match &s.standing {
                Standing::Related(r) => format!(
                    "{who} holds {file}{context} and is {r}: the memory stays while a \
                     descriptor inherited from it is open"
                ),
                Standing::Exempt(why) => format!("{who} holds {file}: {why}; not a suspect"),
                Standing::Unrelated => {
                    format!(
                        "{who} holds {file}{context}; whether it holds this memory is not known"
                    )
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::parse::stat::StatIds;

    #[test]
    fn relations_and_exemptions() {
        let ids = |ppid, pgrp, session| StatIds {
            state: 'S',
            ppid,
            pgrp,
            session,
        };
        assert_eq!(relation(40, 41, &ids(40, 30, 30)).unwrap(), "a child of 40");
        assert!(
            relation(40, 41, &ids(1, 40, 30))
                .unwrap()
                .contains("process group")
        );
        assert!(
            relation(40, 41, &ids(1, 41, 40))
                .unwrap()
                .contains("session")
        );
        assert_eq!(relation(40, 41, &ids(1, 41, 41)), None);
        assert_eq!(relation(40, 40, &ids(40, 40, 40)), None, "itself");
        assert!(exempt(Some("nvidia-persistenced"), true, false, true).is_some());
        assert!(exempt(Some("hmn"), false, true, false).is_some());
        assert!(
            exempt(Some("python3"), true, false, true).is_some(),
            "no uvm, compute"
        );
        assert!(exempt(Some("python3"), true, true, true).is_none());
        assert!(
            exempt(Some("python3"), false, false, true).is_none(),
            "uvm major unknown"
        );
        assert!(
            exempt(Some("Xorg"), true, false, false).is_none(),
            "graphics memory"
        );
        assert!(exempt(None, true, true, true).is_none());
    }
}
