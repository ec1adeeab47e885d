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

use crate::host::kube::PodDirs;

/// What the node says of its pods.
pub(crate) struct Pods<'a> {
    /// The log layout's pods by UID (`None`: the node has no layout, so no kubelet), or why it
    /// could not be read whole.
    logs: Result<Option<PodDirs>, String>,
    /// The pods the kubelet's pod-resources API listed (namespace, name), when read.
    live: Option<&'a BTreeSet<(String, String)>>,
}

impl<'a> Pods<'a> {
    /// The layout under `rootfs` (`None`: no rootfs setting could be read), and `live`.
    pub(crate) fn read(
        rootfs: Result<&Path, String>,
        live: Option<&'a BTreeSet<(String, String)>>,
    ) -> Self {
        let logs = rootfs.and_then(|root| {
            let dir = root.join("var/log/pods");
            match crate::host::kube::pod_dirs(root) {
                Ok((pods, true)) => Ok(Some(pods)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && live.is_none() => Ok(None),
                Ok((_, false)) => Err(format!(
                    "{} was not listed whole (its entry or time limit)",
                    dir.display()
                )),
                Err(e) => Err(format!("{}: {e}", dir.display())),
            }
        });
        Self { logs, live }
    }

    /// Given directly (tests).
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn given(
        logs: Result<PodDirs, String>,
        live: Option<&'a BTreeSet<(String, String)>>,
    ) -> Self {
        Self {
            logs: logs.map(Some),
            live,
        }
    }

    /// The evidence that `pid`'s pod is gone; `None` when it is in no pod, its pod is there,
    /// or the node cannot tell (then why goes to `unseen`).
    pub(crate) fn gone(
        &self,
        procfs: &Path,
        pid: u32,
        unseen: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if matches!(self.logs, Ok(None)) {
            return None;
        }
        let path = procfs.join(pid.to_string()).join("cgroup");
        let text = crate::host::file::read_capped(&path, crate::host::file::STATUS).ok()?;
        let container = crate::host::parse::context::parse_cgroup(&text)?;
        let uid = container.pod_uid?;
        let named = format!("its cgroup names pod {uid}");
        let logs = match &self.logs {
            Ok(Some(logs)) => logs,
            Ok(None) => return None,
            Err(why) => {
                unseen.insert(format!(
                    "whether pods of GPU processes still exist is not known: {why}"
                ));
                return None;
            }
        };
        let Some((namespace, pod)) = logs.get(&uid) else {
            return Some(vec![
                named,
                format!(
                    "the kubelet's log layout (var/log/pods, {} pods, listed whole) has no \
                     directory for it: the kubelet removed the pod",
                    logs.len()
                ),
            ]);
        };
        let live = self.live?;
        let key = (namespace.clone(), pod.clone());
        (!live.contains(&key)).then(|| {
            vec![
                format!("{named} ({namespace}/{pod}, by its log directory)"),
                format!(
                    "the kubelet's pod-resources list ({} pods) does not have {namespace}/{pod}",
                    live.len()
                ),
            ]
        })
    }
}
