//! Kubernetes names of a container in a pod, read from the node's own files (no API server):
//! the kubelet names its log directories and links after the pod and the container,
//!
//! - `<rootfs>/var/log/pods/<namespace>_<pod>_<pod-uid>/<container>/<restart>.log`, and
//! - `<rootfs>/var/log/containers/<pod>_<namespace>_<container>-<container-id>.log`,
//!
//! so a pod UID (from a process's cgroup) gives the namespace and the pod's name, and a
//! container id the container's name. Only the names of the entries are read (a listing of
//! each directory), never the logs, and links are not followed.
//!
//! The names are kept, by pod UID and by container id, in one bounded cache for the process: a
//! pod's names are read once, whatever the number of its processes and of calls. A pod UID or
//! container id not known yet lists its directory again, at most once a second (a pod that has
//! just started has its directory a moment later; one without any stays unknown at the cost of
//! one listing a second). A complete listing replaces what was known from that directory, so
//! pods whose logs the kubelet has removed drop out; the cache never holds more than one
//! listing's cap of entries.
//!
//! A listing stops at [`MAX_ENTRIES`] entries or after [`LIST_TIME`], whichever comes first;
//! names not of the kubelet's form (`host::parse::kube`) are skipped. Two entries that give the
//! same pod UID or container id different names make it unknown rather than either name.

// Only Linux reads a process's container, and so names it; `kubelet_logs` serves every OS.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::host::parse::context::Container;
use crate::host::parse::kube::{parse_container_log_link, parse_pod_log_dir};
use crate::{error::Result, types::KubeletDirState, types::KubeletLogs};

/// The kubelet's directory of pod logs, under the rootfs.
const PODS: &str = "var/log/pods";
/// The kubelet's directory of container log links, under the rootfs.
const CONTAINERS: &str = "var/log/containers";
/// The most entries one listing looks at. A node runs a few hundred pods at most (110 by
/// default) and keeps a link per container and per previous run of one.
const MAX_ENTRIES: usize = 20_000;
/// How long one listing may take: a real one takes milliseconds.
const LIST_TIME: Duration = Duration::from_millis(500);
/// How often, at most, a directory is listed again for a pod or container not known yet.
const RELIST: Duration = Duration::from_secs(1);

/// What a listing saw besides the names it passed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    /// Names the caller took.
    taken: usize,
    /// Names the caller refused, and names that are not UTF-8.
    skipped: usize,
    /// Whether the listing reached the end of the directory.
    complete: bool,
}

/// Calls `take` on the name of each entry of `dir` (its answer: whether the name was of the
/// form wanted) until the directory ends, `max` entries were seen, or `time` has passed.
fn list(
    dir: &Path,
    max: usize,
    time: Duration,
    mut take: impl FnMut(&str) -> bool,
) -> io::Result<Seen> {
    let _waiting = crate::inflight::reading(dir);
    let start = Instant::now();
    let mut seen = Seen {
        taken: 0,
        skipped: 0,
        complete: true,
    };
    for (n, entry) in std::fs::read_dir(dir)?.enumerate() {
        if n >= max || start.elapsed() >= time {
            seen.complete = false;
            break;
        }
        let name = entry.ok().map(|e| e.file_name());
        if name
            .as_ref()
            .and_then(|n| n.to_str())
            .is_some_and(&mut take)
        {
            seen.taken += 1;
        } else {
            seen.skipped += 1;
        }
    }
    Ok(seen)
}

/// A pod's names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pod {
    namespace: String,
    name: String,
}

/// A container's names, as its log link gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Link {
    namespace: String,
    pod: String,
    container: String,
}

/// Entries by key from one listing: `None` where two entries disagree.
type Listed<T> = BTreeMap<String, Option<T>>;

/// Adds `value` under `key`, marking the key unknown when it already has another value.
fn add<T: PartialEq>(listed: &mut Listed<T>, key: &str, value: T) {
    match listed.get_mut(key) {
        Some(known) if known.as_ref() != Some(&value) => *known = None,
        Some(_) => {}
        None => {
            listed.insert(key.to_string(), Some(value));
        }
    }
}

/// One directory's entries as last listed, and when.
#[derive(Debug)]
struct Listing<T> {
    by_key: BTreeMap<String, T>,
    listed: Option<Instant>,
}

impl<T> Listing<T> {
    const fn new() -> Self {
        Self {
            by_key: BTreeMap::new(),
            listed: None,
        }
    }

    /// The entry of `key`, listing the directory again first when `key` is not known and the
    /// last listing is [`RELIST`] old (or there was none). `relist` lists it.
    fn get_or_relist(
        &mut self,
        key: &str,
        now: Instant,
        listings: &mut u64,
        relist: impl FnOnce() -> Option<(Listed<T>, bool)>,
    ) -> Option<&T> {
        let due = self
            .listed
            .is_none_or(|t| now.saturating_duration_since(t) >= RELIST);
        if !self.by_key.contains_key(key) && due {
            self.listed = Some(now);
            *listings += 1;
            if let Some((listed, complete)) = relist() {
                self.update(listed, complete);
            }
        }
        self.by_key.get(key)
    }

    /// What a listing found replaces what was known when it is complete; a cut one (its cap or
    /// time reached) adds to it, within one listing's cap.
    fn update(&mut self, listed: Listed<T>, complete: bool) {
        let fresh = listed.into_iter().filter_map(|(k, v)| Some((k, v?)));
        if complete {
            self.by_key = fresh.collect();
            return;
        }
        let fresh: BTreeMap<String, T> = fresh.collect();
        if self.by_key.len().saturating_add(fresh.len()) > MAX_ENTRIES {
            self.by_key = fresh;
        } else {
            self.by_key.extend(fresh);
        }
    }
}

/// The names known, by pod UID and by container id, and how many listings it took.
#[derive(Debug)]
pub(crate) struct Names {
    pods: Listing<Pod>,
    links: Listing<Link>,
    /// Directory listings made (each a `read_dir`), for the tests.
    listings: u64,
}

impl Names {
    pub(crate) const fn new() -> Self {
        Self {
            pods: Listing::new(),
            links: Listing::new(),
            listings: 0,
        }
    }

    /// Gives `c`, when it is in a pod, the pod's namespace and name and the container's name,
    /// from the kubelet's logs under `rootfs` (or what is known of them), as of `now`. What
    /// cannot be read stays `None`; the container's name only where its link names the same
    /// pod as the pod's directory.
    pub(crate) fn name(&mut self, rootfs: &Path, c: &mut Container, now: Instant) {
        let Some(uid) = c.pod_uid.as_deref() else {
            return;
        };
        let pod = self
            .pods
            .get_or_relist(uid, now, &mut self.listings, || read_pods(rootfs));
        let Some(pod) = pod.cloned() else {
            return;
        };
        let link = self
            .links
            .get_or_relist(&c.id, now, &mut self.listings, || read_links(rootfs));
        c.name = link
            .filter(|l| l.namespace == pod.namespace && l.pod == pod.name)
            .map(|l| l.container.clone());
        c.namespace = Some(pod.namespace);
        c.pod = Some(pod.name);
    }
}

/// The pods of `<rootfs>/var/log/pods` by UID, and whether the listing was complete.
fn read_pods(rootfs: &Path) -> Option<(Listed<Pod>, bool)> {
    let mut listed = Listed::new();
    let seen = list(&rootfs.join(PODS), MAX_ENTRIES, LIST_TIME, |name| {
        parse_pod_log_dir(name)
            .map(|p| {
                let pod = Pod {
                    namespace: p.namespace.to_string(),
                    name: p.pod.to_string(),
                };
                add(&mut listed, p.uid, pod);
            })
            .is_some()
    })
    .ok()?;
    Some((listed, seen.complete))
}

/// The container links of `<rootfs>/var/log/containers` by container id, and whether the
/// listing was complete.
fn read_links(rootfs: &Path) -> Option<(Listed<Link>, bool)> {
    let mut listed = Listed::new();
    let seen = list(&rootfs.join(CONTAINERS), MAX_ENTRIES, LIST_TIME, |name| {
        parse_container_log_link(name)
            .map(|l| {
                let link = Link {
                    namespace: l.namespace.to_string(),
                    pod: l.pod.to_string(),
                    container: l.container.to_string(),
                };
                add(&mut listed, l.id, link);
            })
            .is_some()
    })
    .ok()?;
    Some((listed, seen.complete))
}

/// The names known to this process (see the module's notes).
static NAMES: Mutex<Names> = Mutex::new(Names::new());

/// Gives each container in a pod among `containers` its Kubernetes names, from the kubelet's
/// logs under the rootfs in use; nothing when that root is not valid.
pub(crate) fn name_all<'a>(containers: impl IntoIterator<Item = &'a mut Container>) {
    let mut in_pods = containers
        .into_iter()
        .filter(|c| c.pod_uid.is_some())
        .peekable();
    if in_pods.peek().is_none() {
        return;
    }
    let Ok(rootfs) = crate::host::roots::rootfs() else {
        return;
    };
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    for c in in_pods {
        names.name(rootfs, c, now);
    }
}

/// Whether `name` is a Kubernetes DNS-1123 label, as a namespace's and a container's name must
/// be: 1 to 63 lowercase letters, digits and `-`, starting and ending with a letter or digit.
///
/// ```
/// assert!(hypomnesis::is_dns1123_label("kube-system"));
/// assert!(!hypomnesis::is_dns1123_label("Kube_System"));
/// assert!(hypomnesis::is_dns1123_subdomain("train-0.ml"));
/// ```
#[must_use]
pub fn is_dns1123_label(name: &str) -> bool {
    crate::host::parse::kube::is_label(name)
}

/// Whether `name` is a Kubernetes DNS-1123 subdomain, as a pod's and a resource claim's name
/// must be: at most 253 characters of DNS-1123 labels joined by `.`.
#[must_use]
pub fn is_dns1123_subdomain(name: &str) -> bool {
    crate::host::parse::kube::is_subdomain(name)
}

/// Whether the kubelet's log layout can be read under the rootfs in use: each of
/// `var/log/pods` and `var/log/containers` listed (bounded, as the names are read), with how
/// many of its entries are of the kubelet's form, or why it could not be (missing, permission
/// denied). What `hmn doctor` shows.
///
/// ```
/// let logs = hypomnesis::kubelet_logs()?;
/// println!("{}: {:?}", logs.pods_dir.display(), logs.pods);
/// # Ok::<(), hypomnesis::HypomnesisError>(())
/// ```
///
/// # Errors
///
/// [`crate::error::HypomnesisError::Io`] (kind `InvalidInput`) when `HYPOMNESIS_ROOTFS` is not an
/// absolute path to a directory.
pub fn kubelet_logs() -> Result<KubeletLogs> {
    let rootfs = crate::host::roots::rootfs()?;
    Ok(layout(rootfs, MAX_ENTRIES, LIST_TIME))
}

/// Pods by UID: namespace and name.
pub(crate) type PodDirs = BTreeMap<String, (String, String)>;

/// The pods the kubelet's log layout under `rootfs` has, by UID (namespace and name), and
/// whether the listing reached the end of the directory.
///
/// # Errors
///
/// As reading `<rootfs>/var/log/pods` (missing, permission denied).
pub(crate) fn pod_dirs(rootfs: &Path) -> io::Result<(PodDirs, bool)> {
    let mut pods = BTreeMap::new();
    let seen = list(&rootfs.join(PODS), MAX_ENTRIES, LIST_TIME, |n| {
        parse_pod_log_dir(n).is_some_and(|d| {
            pods.insert(d.uid.to_owned(), (d.namespace.to_owned(), d.pod.to_owned()));
            true
        })
    })?;
    Ok((pods, seen.complete))
}

/// [`kubelet_logs`] under `rootfs`, with a listing's caps.
fn layout(rootfs: &Path, max: usize, time: Duration) -> KubeletLogs {
    let pods_dir = rootfs.join(PODS);
    let containers_dir = rootfs.join(CONTAINERS);
    KubeletLogs {
        pods: dir_state(list(&pods_dir, max, time, |n| {
            parse_pod_log_dir(n).is_some()
        })),
        pods_dir,
        containers: dir_state(list(&containers_dir, max, time, |n| {
            parse_container_log_link(n).is_some()
        })),
        containers_dir,
    }
}

fn dir_state(listed: io::Result<Seen>) -> KubeletDirState {
    match listed {
        Ok(s) => KubeletDirState::Found {
            entries: s.taken,
            skipped: s.skipped,
            complete: s.complete,
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => KubeletDirState::Missing,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => KubeletDirState::PermissionDenied,
        Err(e) => KubeletDirState::Failed {
            reason: e.to_string(),
        },
    }
}

#[cfg(all(test, unix))]
mod tests;
