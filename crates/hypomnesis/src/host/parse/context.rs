//! Pure parsers of who a process is: user names from `passwd`, the command line from
//! `cmdline`, the container from `cgroup` (no I/O: the readers are in `host::process::context`).

use std::collections::BTreeMap;

/// A container, as its cgroup path names it, and for a container in a Kubernetes pod the
/// names the kubelet's logs give it.
///
/// The names (`namespace`, `pod`, `name`) are read from the node's own files, no API server:
/// the kubelet's log directories `<rootfs>/var/log/pods/<namespace>_<pod>_<pod-uid>` and
/// links `<rootfs>/var/log/containers/<pod>_<namespace>_<container>-<id>.log`, under the
/// root filesystem in use (`/`, `HYPOMNESIS_ROOTFS`, [`crate::host::roots::set_rootfs`]). The process
/// context functions ([`crate::host::process::context::process_contexts_with`]) fill them in on Linux; [`parse_cgroup`]
/// leaves them `None`. Each is `None` where the layout is missing or unreadable, or does not
/// name this pod or container; never a guess.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Container {
    /// The container id (64 hex digits for docker, containerd, CRI-O and podman).
    pub id: String,
    /// The runtime that named it (`docker`, `containerd`, `crio`, `podman`), when the path says.
    pub runtime: Option<String>,
    /// The Kubernetes pod UID, when the container belongs to a pod.
    pub pod_uid: Option<String>,
    /// The pod's namespace, from the name of its log directory under `var/log/pods` (found by
    /// the pod UID).
    pub namespace: Option<String>,
    /// The pod's name, from the same directory.
    pub pod: Option<String>,
    /// The container's name in the pod's spec, from its log link under `var/log/containers`
    /// (found by the container id), when that link names the same pod.
    pub name: Option<String>,
}

/// User names by uid from the text of a `passwd` file (`name:password:uid:…`); malformed lines
/// are skipped, the first name of a uid is kept.
#[must_use]
pub fn parse_passwd(text: &str) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if let Some((uid, name)) = passwd_line(line) {
            out.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    out
}

/// One `passwd` line's uid and name; `None` for a comment or a malformed line.
pub(crate) fn passwd_line(line: &str) -> Option<(u32, &str)> {
    let mut fields = line.split(':');
    let (Some(name), Some(_), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
        return None;
    };
    let uid = uid.parse::<u32>().ok()?;
    (!name.is_empty() && !name.starts_with('#')).then_some((uid, name))
}

/// The command line from the bytes of `/proc/<pid>/cmdline` (arguments separated by NUL, maybe
/// ending with one); `None` when empty (a kernel thread, an exited process).
#[must_use]
pub fn parse_cmdline(bytes: &[u8]) -> Option<String> {
    let trimmed = bytes.strip_suffix(b"\0").unwrap_or(bytes);
    if trimmed.is_empty() {
        return None;
    }
    let args: Vec<String> = trimmed
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(args.join(" "))
}

/// The container a process runs in, from the text of `/proc/<pid>/cgroup` (cgroup v1 or v2).
/// Understands the cgroupfs and systemd path forms of docker (`/docker/<id>`,
/// `docker-<id>.scope`), containerd (`cri-containerd-<id>.scope`, `/kubepods/…/pod<uid>/<id>`),
/// CRI-O (`crio-<id>.scope`) and podman (`libpod-<id>.scope`); a runtime's own helper scopes
/// (`crio-conmon-…`) and plain systemd scopes (a login session, a service) are no container.
#[must_use]
pub fn parse_cgroup(text: &str) -> Option<Container> {
    text.lines().find_map(cgroup_line)
}

/// The container one `cgroup` line (`id:controllers:path`) names, if any.
pub(crate) fn cgroup_line(line: &str) -> Option<Container> {
    line.splitn(3, ':').nth(2).and_then(container_of_path)
}

/// The container named by one cgroup path.
fn container_of_path(path: &str) -> Option<Container> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // The container's own component is usually the last; podman may nest one below it.
    let (runtime, id, parents) = (1..=parts.len()).rev().find_map(|n| {
        let (last, parents) = parts.get(..n)?.split_last()?;
        container_id(last, parents).map(|(runtime, id)| (runtime, id, parents))
    })?;
    let pod_uid = parents.iter().rev().find_map(|p| pod_uid(p));
    Some(Container {
        id: id.to_string(),
        runtime: runtime.map(String::from),
        pod_uid,
        namespace: None,
        pod: None,
        name: None,
    })
}

/// `(runtime, id)` from the last component of a cgroup path, its parents telling the runtime
/// of the cgroupfs forms.
fn container_id<'a>(last: &'a str, parents: &[&str]) -> Option<(Option<&'static str>, &'a str)> {
    const SCOPES: [(&str, &str); 5] = [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "crio"),
        ("libpod-", "podman"),
        ("containerd-", "containerd"),
    ];
    if let Some(stem) = last.strip_suffix(".scope") {
        return SCOPES.iter().find_map(|(prefix, runtime)| {
            stem.strip_prefix(prefix)
                .filter(|id| is_container_id(id))
                .map(|id| (Some(*runtime), id))
        });
    }
    if !is_container_id(last) {
        return None;
    }
    let runtime = if parents.contains(&"docker") {
        Some("docker")
    } else if parents.first().is_some_and(|p| p.starts_with("kubepods")) {
        None // cgroupfs Kubernetes paths do not say which runtime
    } else if parents.contains(&"libpod_parent") || parents.contains(&"machine.slice") {
        Some("podman")
    } else {
        return None;
    };
    Some((runtime, last))
}

/// 64 lowercase hex digits: the ids docker, containerd, CRI-O and podman give containers.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The pod UID of a Kubernetes cgroup path component: `pod<uid>` (cgroupfs) or
/// `kubepods-<qos>-pod<uid with _ for ->.slice` (systemd).
fn pod_uid(component: &str) -> Option<String> {
    let stem = component.strip_suffix(".slice").unwrap_or(component);
    let (before, uid) = stem.rsplit_once("pod")?;
    if !(before.is_empty() || before.ends_with('-')) {
        return None;
    }
    let uid = uid.replace('_', "-");
    let shape = uid.len() == 36 && uid.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit());
    shape.then_some(uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_status_and_cmdline() {
        let names = parse_passwd(
            "root:x:0:0:root:/root:/bin/bash\n# comment:x:5\nbad line\nalice:x:1000:1000::/home/alice:/bin/sh\nalias:x:1000:1000::/:/bin/sh\n:x:7:7::/:\n",
        );
        assert_eq!(names.get(&0).map(String::as_str), Some("root"));
        assert_eq!(
            names.get(&1000).map(String::as_str),
            Some("alice"),
            "first name wins"
        );
        assert_eq!(names.len(), 2);
        assert_eq!(
            parse_cmdline(b"python3\0train.py\0--lr\x001e-4\0").as_deref(),
            Some("python3 train.py --lr 1e-4")
        );
        assert_eq!(parse_cmdline(b"sleep\x0060").as_deref(), Some("sleep 60"));
        assert_eq!(parse_cmdline(b""), None);
        assert_eq!(parse_cmdline(b"\0"), None);
    }

    #[test]
    fn pod_uids_and_ids() {
        assert!(is_container_id(&"a".repeat(64)));
        assert!(!is_container_id(&"A".repeat(64)));
        assert!(!is_container_id(&"a".repeat(63)));
        assert_eq!(
            pod_uid("pod6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d").as_deref(),
            Some("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        );
        assert_eq!(
            pod_uid("kubepods-besteffort-pod6a2b5c3d_1e2f_4a5b_8c9d_0e1f2a3b4c5d.slice").as_deref(),
            Some("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d")
        );
        assert_eq!(pod_uid("kubepods-besteffort.slice"), None);
        assert_eq!(pod_uid("ipod6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"), None);
        assert_eq!(pod_uid("pod123"), None);
    }
}
