//! The rule, in one place: what frees a ghost's memory is decided here, from the evidence
//! read for it, and nowhere else. A remedy that destroys work (a kill, a GPU reset) is given
//! only from positive evidence read on this host, which the ghost's evidence lines show; every
//! other case is [`Remedy::Unknown`], saying what was not seen.
//!
//! - **kill** the charged process: only when it is here (a process, not a thread's number),
//!   idle by the driver's activity samples for the threshold, and none of the clients that
//!   hold no memory of their own; or when its pod is gone by the kubelet's live list;
//! - **kill** holders of the GPU's device file for memory charged to a process that is not
//!   here: only those related to the charged pid (its child, its process group or session)
//!   that hold a context; a holder nothing ties to the memory is named, never given;
//! - **GPU reset**: only when a scan that saw every process of the host, and every one's
//!   descriptors, found no holder a signal could reach; or for a process continuously in
//!   uninterruptible sleep whose wait is in the NVIDIA driver;
//! - **reap**: a zombie whose threads are all gone, which its parent has not waited for
//!   (nothing is destroyed by it).

use super::Remedy;

/// Whether a process was idle by the driver's samples for the threshold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Activity {
    /// Idle for the threshold, the samples said.
    Idle,
    /// At work within it (or too young to tell idle).
    Busy,
    /// Not known, and why.
    Unknown(String),
}

/// Where a process in uninterruptible sleep waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wait {
    /// In the NVIDIA driver (its `wchan` or a frame of its stack), as said.
    InDriver(String),
    /// Elsewhere (storage, `vfork`), as said.
    Elsewhere(String),
    /// Where cannot be read.
    Unknown,
}

/// What a holder of the GPU's device file is to the charged process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Never advised to be killed, and why (hmn itself, a client without a context).
    Exempt(String),
    /// Related to the charged pid, in words (`its child`, `in its process group`).
    Related(String),
    /// Holds the device file; nothing read ties it to this memory.
    Unrelated,
}

/// One holder of the device file the driver does not list (or lists and is related).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suspect {
    pub pid: u32,
    pub name: Option<String>,
    pub standing: Standing,
    /// Whether it holds the unified-memory device (a CUDA context); `None`: not known.
    pub context: Option<bool>,
}

/// Who holds the device file of memory charged to a process that is not here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holders {
    /// The GPU's device file, as `/dev/nvidia<minor>`, or why it is not known.
    pub file: Result<String, String>,
    /// What the scan did not see (empty: it saw every process and its descriptors); `None`
    /// when no scan has answered yet, with why.
    pub not_seen: Result<Vec<String>, String>,
    pub suspects: Vec<Suspect>,
}

/// The evidence a remedy is decided from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Evidence {
    /// The charged process is not here (exited, a number no process has, memory no listed
    /// process accounts for, a pid here that holds no descriptor of the GPU).
    NotHere(Holders),
    /// The charged process is here, with its activity.
    Here { pid: u32, activity: Activity },
    /// A zombie with no live thread, not reaped by `parent`.
    Unreaped { parent: u32 },
    /// Continuously in uninterruptible sleep for the threshold.
    Stuck { wait: Wait },
    /// In a pod the node no longer has: by the kubelet's live list (`confirmed`), or by its
    /// log layout alone (the list not read).
    GonePod { pid: u32, confirmed: bool },
}

/// What frees the memory, by the rule above.
pub(crate) fn remedy(evidence: &Evidence) -> Remedy {
    match evidence {
        Evidence::NotHere(h) => of_holders(h),
        Evidence::Here {
            pid,
            activity: Activity::Idle,
        }
        | Evidence::GonePod {
            pid,
            confirmed: true,
        } => Remedy::Kill { pids: vec![*pid] },
        Evidence::Here {
            activity: Activity::Busy,
            ..
        } => unknown("it is at work by the driver's activity samples"),
        Evidence::Here {
            activity: Activity::Unknown(why),
            ..
        } => unknown(&format!("whether it is idle is not known: {why}")),
        Evidence::Unreaped { parent } => Remedy::Reap { parent: *parent },
        Evidence::Stuck {
            wait: Wait::InDriver(_),
        } => Remedy::GpuReset,
        Evidence::Stuck {
            wait: Wait::Elsewhere(place),
        } => unknown(&format!(
            "it waits in {place}, not in the NVIDIA driver: a GPU reset would not free it"
        )),
        Evidence::Stuck {
            wait: Wait::Unknown,
        } => unknown("where it waits could not be read"),
        Evidence::GonePod {
            confirmed: false, ..
        } => unknown(
            "the kubelet's live list of pods was not read, so the pod's absence rests on its \
             log directory alone",
        ),
    }
}

fn of_holders(h: &Holders) -> Remedy {
    let Ok(file) = &h.file else {
        // Why, at length, is the ghost's evidence.
        return unknown("who holds it cannot be told: the GPU's device file is not known here");
    };
    let related: Vec<u32> = h
        .suspects
        .iter()
        .filter(|s| matches!(s.standing, Standing::Related(_)))
        .map(|s| s.pid)
        .collect();
    if !related.is_empty() {
        return Remedy::Kill { pids: related };
    }
    let unrelated = h
        .suspects
        .iter()
        .filter(|s| s.standing == Standing::Unrelated)
        .count();
    if unrelated > 0 {
        let s = if unrelated == 1 { "" } else { "es" };
        return unknown(&format!(
            "{unrelated} process{s} hold{} {file}; whether {} this memory is not known",
            if unrelated == 1 { "s" } else { "" },
            if unrelated == 1 {
                "it holds"
            } else {
                "they hold"
            }
        ));
    }
    match &h.not_seen {
        Err(why) => unknown(why),
        Ok(gaps) if gaps.is_empty() => Remedy::GpuReset,
        Ok(gaps) => unknown(&format!(
            "no holder of {file} was found, but {}",
            gaps.join("; ")
        )),
    }
}

fn unknown(why: &str) -> Remedy {
    Remedy::Unknown {
        why: why.to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn suspect(pid: u32, standing: Standing) -> Suspect {
        Suspect {
            pid,
            name: Some("python3".into()),
            standing,
            context: Some(true),
        }
    }

    fn holders(not_seen: Result<Vec<String>, String>, suspects: Vec<Suspect>) -> Evidence {
        Evidence::NotHere(Holders {
            file: Ok("/dev/nvidia0".into()),
            not_seen,
            suspects,
        })
    }

    fn is_destructive(r: &Remedy) -> bool {
        matches!(r, Remedy::Kill { .. } | Remedy::GpuReset)
    }

    /// Every kind of evidence, with the remedy the rule gives and whether that remedy may
    /// destroy work; a kill or a reset appears only against the evidence the rule names.
    #[test]
    #[allow(clippy::too_many_lines)] // one table
    fn every_kind_of_evidence_and_its_remedy() {
        let seen_all = || Ok(Vec::new());
        let gap = || {
            Ok(vec![
                "the scan of descriptors stopped at its deadline".to_owned(),
            ])
        };
        let exempt = || suspect(812, Standing::Exempt("nvidia-persistenced".into()));
        let related = || suspect(901, Standing::Related("in its process group".into()));
        let unrelated = || suspect(950, Standing::Unrelated);
        let table: Vec<(&str, Evidence, Option<Remedy>)> = vec![
            (
                "no device file known",
                Evidence::NotHere(Holders {
                    file: Err("no driver information file".into()),
                    not_seen: seen_all(),
                    suspects: vec![related()],
                }),
                None,
            ),
            (
                "whole scan, no holder",
                holders(seen_all(), vec![]),
                Some(Remedy::GpuReset),
            ),
            (
                "whole scan, only exempt holders",
                holders(seen_all(), vec![exempt()]),
                Some(Remedy::GpuReset),
            ),
            ("scan cut short, no holder", holders(gap(), vec![]), None),
            (
                "scan not run yet",
                holders(Err("scanning".into()), vec![]),
                None,
            ),
            (
                "an unrelated holder",
                holders(seen_all(), vec![unrelated(), exempt()]),
                None,
            ),
            (
                "a related holder",
                holders(gap(), vec![related(), unrelated(), exempt()]),
                Some(Remedy::Kill { pids: vec![901] }),
            ),
            (
                "here, idle",
                Evidence::Here {
                    pid: 7,
                    activity: Activity::Idle,
                },
                Some(Remedy::Kill { pids: vec![7] }),
            ),
            (
                "here, busy",
                Evidence::Here {
                    pid: 7,
                    activity: Activity::Busy,
                },
                None,
            ),
            (
                "here, activity unknown",
                Evidence::Here {
                    pid: 7,
                    activity: Activity::Unknown("no samples".into()),
                },
                None,
            ),
            (
                "unreaped zombie",
                Evidence::Unreaped { parent: 1 },
                Some(Remedy::Reap { parent: 1 }),
            ),
            (
                "stuck in the driver",
                Evidence::Stuck {
                    wait: Wait::InDriver("uvm_va_space_destroy".into()),
                },
                Some(Remedy::GpuReset),
            ),
            (
                "stuck elsewhere",
                Evidence::Stuck {
                    wait: Wait::Elsewhere("kernel_clone".into()),
                },
                None,
            ),
            (
                "stuck, wait unknown",
                Evidence::Stuck {
                    wait: Wait::Unknown,
                },
                None,
            ),
            (
                "pod gone by the live list",
                Evidence::GonePod {
                    pid: 9,
                    confirmed: true,
                },
                Some(Remedy::Kill { pids: vec![9] }),
            ),
            (
                "pod gone by its logs alone",
                Evidence::GonePod {
                    pid: 9,
                    confirmed: false,
                },
                None,
            ),
        ];
        for (case, evidence, want) in &table {
            let got = remedy(evidence);
            match want {
                Some(w) => assert_eq!(&got, w, "{case}"),
                None => assert!(
                    matches!(&got, Remedy::Unknown { why } if !why.is_empty()),
                    "{case}: {got:?}"
                ),
            }
            // The rule's own words: a destructive remedy only from the evidence named.
            let allowed = matches!(
                evidence,
                Evidence::Here {
                    activity: Activity::Idle,
                    ..
                } | Evidence::Stuck {
                    wait: Wait::InDriver(_)
                } | Evidence::GonePod {
                    confirmed: true,
                    ..
                }
            ) || matches!(evidence, Evidence::NotHere(h)
                if h.file.is_ok()
                    && (h.suspects.iter().any(|s| matches!(s.standing, Standing::Related(_)))
                        || (h.not_seen.as_ref().is_ok_and(Vec::is_empty)
                            && h.suspects.iter().all(|s| matches!(s.standing, Standing::Exempt(_))))));
            assert_eq!(is_destructive(&got), allowed, "{case}: {got:?}");
        }
        // An exempt holder is never among the pids to kill.
        let r = remedy(&holders(seen_all(), vec![exempt(), related()]));
        assert_eq!(r, Remedy::Kill { pids: vec![901] });
        // The words for an unrelated holder, and for a scan with gaps.
        let r = remedy(&holders(seen_all(), vec![unrelated()]));
        assert_eq!(
            r.to_string(),
            "unknown: 1 process holds /dev/nvidia0; whether it holds this memory is not known"
        );
        let r = remedy(&holders(gap(), vec![]));
        assert!(
            r.to_string()
                .starts_with("unknown: no holder of /dev/nvidia0 was found, but the scan"),
            "{r}"
        );
    }
}
