//! Holders in a pod that no longer exists: a process whose cgroup names a pod UID (the
//! kubelet's `kubepods…pod<uid>` path) that the node no longer has.
//!
//! Two node-local sources tell, each only when it could be read whole:
//!
//! - the kubelet's log layout, `<rootfs>/var/log/pods/<namespace>_<pod>_<uid>`: the kubelet
//!   makes a pod's directory when the pod starts and removes it when the pod is deleted, so a
//!   UID without a directory, in a listing that reached its end, is a pod the kubelet dropped;
//! - the kubelet's pod-resources list, when the caller read it (`hmn` does, from the socket):
//!   it names the pods the kubelet runs, by namespace and name, so a pod whose directory is
//!   still there (logs not yet cleaned up) but that the list lacks is gone too.
//!
//! A process in no pod is none of this. A node without the layout (no kubelet, and no list
//! given) is not looked at, and no process's cgroup is read for it; a layout that cannot be
//! read whole is said once, in the report.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{ErrorKind, Failure};
use crate::host::kube::PodDirs;

/// The kind of a failed read of the kubelet's log layout.
fn io_kind(kind: std::io::ErrorKind) -> ErrorKind {
    match kind {
        std::io::ErrorKind::NotFound => ErrorKind::NotInstalled,
        std::io::ErrorKind::PermissionDenied => ErrorKind::NoPermission,
        _ => ErrorKind::Other,
    }
}

/// What the node says of its pods.
pub(crate) struct Pods<'a> {
    /// The log layout's pods by UID (`None`: the node has no layout, so no kubelet), or why it
    /// could not be read whole.
    logs: Result<Option<PodDirs>, Failure>,
    /// The pods the kubelet's pod-resources API listed (namespace, name), when read.
    live: Option<&'a BTreeSet<(String, String)>>,
}

impl<'a> Pods<'a> {
    /// The layout under `rootfs` (`None`: no rootfs setting could be read), and `live`.
    pub(crate) fn read(
        rootfs: Result<&Path, Failure>,
        live: Option<&'a BTreeSet<(String, String)>>,
    ) -> Self {
        let logs = rootfs.and_then(|root| {
            let dir = root.join("var/log/pods");
            match crate::host::kube::pod_dirs(root) {
                Ok((pods, true)) => Ok(Some(pods)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && live.is_none() => Ok(None),
                Ok((_, false)) => Err(Failure::new(
                    ErrorKind::Other,
                    format!(
                        "{} was not listed whole (its entry or time limit)",
                        dir.display()
                    ),
                )),
                Err(e) => Err(Failure::new(
                    io_kind(e.kind()),
                    format!("{}: {e}", dir.display()),
                )),
            }
        });
        Self { logs, live }
    }

    /// Given directly (tests).
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn given(
        logs: Result<PodDirs, Failure>,
        live: Option<&'a BTreeSet<(String, String)>>,
    ) -> Self {
        Self {
            logs: logs.map(Some),
            live,
        }
    }

    /// Whether `pid`'s pod is gone: `None` when it is in no pod, its pod is there, or the node
    /// cannot tell (then why goes to `unseen`). A pod in the kubelet's live list is never gone;
    /// a pod without a log directory is gone by the live list only when every pod the list
    /// names has its directory (a log cleaner, or a kubelet whose `podLogsDir` is elsewhere,
    /// leaves live pods without one), and without the list it rests on the layout alone, which
    /// the verdict says.
    pub(crate) fn gone(
        &self,
        procfs: &Path,
        pid: u32,
        unseen: &mut BTreeSet<Failure>,
    ) -> Option<GonePod> {
        if matches!(self.logs, Ok(None)) && self.live.is_none() {
            return None;
        }
        let path = procfs.join(pid.to_string()).join("cgroup");
        let text = crate::host::file::read_capped(&path, crate::host::file::STATUS).ok()?;
        let container = crate::host::parse::context::parse_cgroup(&text)?;
        let uid = container.pod_uid?;
        let named = format!("its cgroup names pod {uid}");
        let logs = match &self.logs {
            Ok(Some(logs)) => logs,
            Ok(None) => {
                unseen.insert(Failure::new(
                    ErrorKind::NotInstalled,
                    "whether pods of GPU processes still exist is not known: the kubelet's \
                     live list names pods, and without its log layout (var/log/pods) no pod \
                     UID can be matched to a name",
                ));
                return None;
            }
            Err(why) => {
                unseen.insert(Failure::new(
                    why.kind,
                    format!(
                        "whether pods of GPU processes still exist is not known: {}",
                        why.message
                    ),
                ));
                return None;
            }
        };
        if let Some((namespace, pod)) = logs.get(&uid) {
            let live = self.live?;
            let key = (namespace.clone(), pod.clone());
            return (!live.contains(&key)).then(|| GonePod {
                evidence: vec![
                    format!("{named} ({namespace}/{pod}, by its log directory)"),
                    format!(
                        "the kubelet's live list ({} pods, from its pod-resources socket) does \
                         not have {namespace}/{pod}",
                        live.len()
                    ),
                ],
                confirmed: true,
            });
        }
        self.without_directory(logs, &uid, pid, named, unseen)
    }

    /// [`Self::gone`] for pod `uid` (of `pid`), which has no directory in `logs`.
    fn without_directory(
        &self,
        logs: &PodDirs,
        uid: &str,
        pid: u32,
        named: String,
        unseen: &mut BTreeSet<Failure>,
    ) -> Option<GonePod> {
        let no_dir = format!(
            "the kubelet's log layout (var/log/pods, {} pods, listed whole) has no directory \
             for it",
            logs.len()
        );
        let Some(live) = self.live else {
            return Some(GonePod {
                evidence: vec![
                    named,
                    no_dir,
                    "the kubelet's live list was not read (no pod-resources socket), so its \
                     absence rests on the log layout alone"
                        .into(),
                ],
                confirmed: false,
            });
        };
        let with_dir: BTreeSet<(&str, &str)> = logs
            .values()
            .map(|(ns, pod)| (ns.as_str(), pod.as_str()))
            .collect();
        let without = live
            .iter()
            .filter(|(ns, pod)| !with_dir.contains(&(ns.as_str(), pod.as_str())))
            .count();
        if without > 0 {
            let s = if without == 1 { "" } else { "s" };
            unseen.insert(Failure::new(
                ErrorKind::Other,
                format!(
                    "pod {uid} (pid {pid}) has no log directory, and {without} pod{s} of the \
                     kubelet's live list have none either: whether it is one of them (running) \
                     is not known"
                ),
            ));
            return None;
        }
        Some(GonePod {
            evidence: vec![
                named,
                no_dir,
                format!(
                    "each of the {} pods of the kubelet's live list has its directory, so none \
                     of them is this pod",
                    live.len()
                ),
            ],
            confirmed: true,
        })
    }
}

/// A process's pod is gone: what shows it, and whether the kubelet's live list confirms it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GonePod {
    pub evidence: Vec<String>,
    pub confirmed: bool,
}
