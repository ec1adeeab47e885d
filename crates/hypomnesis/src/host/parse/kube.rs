//! Pure parsers of the names the kubelet gives its log files (no I/O: the reader is
//! `host::kube`). The kubelet writes each container's output under
//!
//! - `/var/log/pods/<namespace>_<pod>_<pod-uid>/<container>/<restart>.log` (directories), and
//! - `/var/log/containers/<pod>_<namespace>_<container>-<container-id>.log` (symlinks into the
//!   above),
//!
//! so the names of those entries tie a pod UID to its namespace and name, and a container id to
//! its container's name. Namespaces and container names are DNS-1123 labels and pod names
//! DNS-1123 subdomains: none can hold `_`, which splits the fields. A name that is not of that
//! form (no `_`, too long, upper case, control characters) is no entry: `None`, never a guess.

/// A pod, from the name of its directory under `/var/log/pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogDir<'a> {
    /// The pod's namespace.
    pub namespace: &'a str,
    /// The pod's name.
    pub pod: &'a str,
    /// The pod's UID (a UUID; a static pod's is a hash of its manifest).
    pub uid: &'a str,
}

/// A container, from the name of its link under `/var/log/containers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerLogLink<'a> {
    /// The name of the pod it runs in.
    pub pod: &'a str,
    /// That pod's namespace.
    pub namespace: &'a str,
    /// The container's name in the pod's spec.
    pub container: &'a str,
    /// The runtime's id of the container (64 lowercase hex digits).
    pub id: &'a str,
}

/// `<namespace>_<pod>_<uid>`: the name of a pod's log directory; `None` when it is not of that
/// form.
#[must_use]
pub fn parse_pod_log_dir(name: &str) -> Option<PodLogDir<'_>> {
    let mut fields = name.split('_');
    let (Some(namespace), Some(pod), Some(uid), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return None;
    };
    (is_label(namespace) && is_subdomain(pod) && is_uid(uid)).then_some(PodLogDir {
        namespace,
        pod,
        uid,
    })
}

/// `<pod>_<namespace>_<container>-<id>.log`: the name of a container's log link; `None` when
/// it is not of that form.
#[must_use]
pub fn parse_container_log_link(name: &str) -> Option<ContainerLogLink<'_>> {
    let stem = name.strip_suffix(".log")?;
    let (rest, id) = stem.rsplit_once('-')?;
    let mut fields = rest.split('_');
    let (Some(pod), Some(namespace), Some(container), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return None;
    };
    (is_subdomain(pod) && is_label(namespace) && is_label(container) && is_container_id(id))
        .then_some(ContainerLogLink {
            pod,
            namespace,
            container,
            id,
        })
}

/// A lowercase letter or a digit.
fn alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// A DNS-1123 label: 1 to 63 of `a-z`, `0-9` and `-`, a letter or digit at each end (the form
/// of namespaces and container names).
#[must_use]
pub fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.first().copied().is_some_and(alnum)
        && b.last().copied().is_some_and(alnum)
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// A DNS-1123 subdomain: at most 253 characters, labels joined by `.` (the form of pod names).
#[must_use]
pub fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

/// A pod UID as the kubelet writes it: 1 to 64 of lowercase hex digits and `-`.
fn is_uid(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'-')
}

/// 64 lowercase hex digits: a container id of docker, containerd and CRI-O.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";

    fn id() -> String {
        "9e8d7c6b5a4938271605f4e3d2c1b0a9".repeat(2)
    }

    #[test]
    fn pod_log_directories() {
        assert_eq!(
            parse_pod_log_dir(&format!("ml-team_trainer-0_{UID}")),
            Some(PodLogDir {
                namespace: "ml-team",
                pod: "trainer-0",
                uid: UID
            })
        );
        // A pod name may hold dots; a static pod's UID is a hash.
        let hash = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
        assert_eq!(
            parse_pod_log_dir(&format!("kube-system_etcd-node-1.example.com_{hash}")),
            Some(PodLogDir {
                namespace: "kube-system",
                pod: "etcd-node-1.example.com",
                uid: hash
            })
        );
        for bad in [
            String::new(),
            "no-underscores".into(),
            format!("ns_{UID}"),
            format!("ns_pod_{UID}_extra"),
            format!("_pod_{UID}"),
            format!("ns__{UID}"),
            "ns_pod_".into(),
            format!("NS_pod_{UID}"),
            format!("ns_pod\n_{UID}"),
            format!("ns_po\x1b[2Jd_{UID}"),
            format!("ns_-pod_{UID}"),
            format!("ns_pod-_{UID}"),
            format!("ns_pod..x_{UID}"),
            format!("{}_pod_{UID}", "n".repeat(64)),
            format!("ns_{}_{UID}", "p".repeat(254)),
            "ns_pod_6A2B5C3D".into(),
            format!("ns_pod_{}", "a".repeat(65)),
            format!("ns_pod_{UID}.log"),
            format!("ns_pód_{UID}"),
        ] {
            assert_eq!(parse_pod_log_dir(&bad), None, "{bad:?}");
        }
        // The longest names that are allowed.
        let ns = "n".repeat(63);
        let pod = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(pod.len(), 253);
        assert!(parse_pod_log_dir(&format!("{ns}_{pod}_{UID}")).is_some());
    }

    #[test]
    fn container_log_links() {
        let id = id();
        assert_eq!(
            parse_container_log_link(&format!("trainer-0_ml-team_cuda-worker-{id}.log")),
            Some(ContainerLogLink {
                pod: "trainer-0",
                namespace: "ml-team",
                container: "cuda-worker",
                id: &id,
            })
        );
        for bad in [
            format!("trainer-0_ml-team_cuda-worker-{id}"),
            format!("trainer-0_ml-team_cuda-worker_{id}.log"),
            format!("trainer-0_ml-team-{id}.log"),
            format!("trainer-0_ml-team_cuda_worker-{id}.log"),
            format!("trainer-0_ml-team_cuda-worker-{}.log", &id[1..]),
            format!("trainer-0_ml-team_cuda-worker-{}.log", id.to_uppercase()),
            format!("trainer-0_ml-team_-{id}.log"),
            format!("trainer-0_ml-team_w\nx-{id}.log"),
            format!("trainer-0_ml-team_{}-{id}.log", "c".repeat(64)),
            format!("trainer-0__w-{id}.log"),
            "-.log".into(),
            ".log".into(),
        ] {
            assert_eq!(parse_container_log_link(&bad), None, "{bad:?}");
        }
    }
}
