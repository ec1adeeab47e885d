//! `hmn doctor`: the roots in use, each source's state and details, and what to do about a
//! source that did not answer (chosen by the kind of its failure, never by its wording).

use std::fmt::Write as _;
use std::io::{self, Write};

use hypomnesis::{
    ErrorKind, GpuQuerySource, Hidepid, KubeletDirState, KubeletLogs, ProcfsMount, Root,
    RootOrigin, Roots, SourceReport, SourceState,
};
use serde::Serialize;

use super::{MIB, json};

pub fn source_name(s: GpuQuerySource) -> &'static str {
    match s {
        GpuQuerySource::Nvml => "NVML",
        GpuQuerySource::NvidiaSmi => "nvidia-smi",
        GpuQuerySource::Dxgi => "DXGI",
        GpuQuerySource::Pdh => "PDH",
        GpuQuerySource::Metal => "Metal",
        GpuQuerySource::Drm => "DRM",
        _ => "other",
    }
}

/// What a user can do about a source that did not answer, by the kind of its failure.
pub fn hint(r: &SourceReport) -> Option<&'static str> {
    Some(match r.kind()? {
        ErrorKind::NotBuiltIn => "rebuild hmn with that cargo feature",
        ErrorKind::NotInstalled => match r.source {
            GpuQuerySource::Nvml if cfg!(windows) => {
                "install the NVIDIA driver (it provides nvml.dll), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path"
            }
            GpuQuerySource::Nvml => {
                "install the NVIDIA driver (it provides libnvidia-ml.so.1), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path"
            }
            GpuQuerySource::NvidiaSmi => {
                "install the NVIDIA driver utilities, or set HYPOMNESIS_NVIDIA_SMI to nvidia-smi's path"
            }
            _ => return None,
        },
        ErrorKind::DriverNotLoaded => {
            "the NVIDIA kernel driver is not loaded: install the driver, or load it (`sudo modprobe nvidia`)"
        }
        ErrorKind::DriverVersionMismatch => {
            "the driver was upgraded but the old kernel module is still loaded: reboot, or reload the nvidia modules"
        }
        ErrorKind::NoPermission => {
            "this user may not query that GPU (a container or cgroup restricts it)"
        }
        ErrorKind::TimedOut | ErrorKind::Paused => {
            "nvidia-smi hangs on this host: run it by hand to see, and consider enabling persistence mode"
        }
        ErrorKind::BadSetting => "fix or unset the environment variable named above",
        _ => return None,
    })
}

/// `/host/proc (from --procfs)`: a root and where it came from, as `hmn` users set it.
pub fn root_line(r: &Root) -> String {
    let flag = if r.variable.ends_with("PROCFS") {
        "--procfs"
    } else if r.variable.ends_with("ROOTFS") {
        "--rootfs"
    } else {
        "--sysfs"
    };
    let from = match r.origin {
        RootOrigin::Default => "default".to_string(),
        RootOrigin::Environment => format!("from {}", r.variable),
        RootOrigin::SetRoots => format!("from {flag}"),
        _ => "origin unknown".to_string(),
    };
    format!("{} ({from})", r.path.display())
}

/// What listing one of the kubelet's log directories found, in words: `3 pods`, `missing
/// (…)`. `what` names its entries (`pod`, `container link`).
pub fn kubelet_dir_words(state: &KubeletDirState, what: &str) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    match state {
        KubeletDirState::Found {
            entries,
            skipped,
            complete,
        } => {
            let mut s = plural(*entries, what, &format!("{what}s"));
            if *skipped > 0 {
                let _ = write!(
                    s,
                    ", {} not named as the kubelet names them, skipped",
                    plural(*skipped, "entry", "entries")
                );
            }
            if !complete {
                s.push_str(", listing cut at its limit (entries or time)");
            }
            s
        }
        KubeletDirState::Missing => "missing (no kubelet here, or the node's / is not at this \
                                     rootfs: pods and containers are not named)"
            .into(),
        KubeletDirState::PermissionDenied => {
            "permission denied (this user may not list it: pods and containers are not named)"
                .into()
        }
        KubeletDirState::Failed { reason } => format!("cannot be listed: {reason}"),
        _ => "unknown state".into(),
    }
}

/// The `hmn doctor` lines on the kubelet's logs under the rootfs.
fn kubelet_lines(out: &mut impl Write, k: &KubeletLogs) -> io::Result<()> {
    writeln!(
        out,
        "    kubelet pod logs: {}: {}",
        k.pods_dir.display(),
        kubelet_dir_words(&k.pods, "pod")
    )?;
    writeln!(
        out,
        "    kubelet container logs: {}: {}",
        k.containers_dir.display(),
        kubelet_dir_words(&k.containers, "container link")
    )
}

/// The line on the procfs mount, when its options change which processes hmn sees
/// (`hidepid`, `subset=pid`): what they hide from hmn and what to do, or that hmn is exempt.
pub fn procfs_mount_line(m: &ProcfsMount) -> Option<String> {
    let mut opts = Vec::new();
    match m.hidepid {
        Some(Hidepid::Off) => {}
        Some(h) => opts.push(format!("hidepid={h}")),
        None => opts.push("hidepid (a value hmn does not know)".into()),
    }
    if let Some(g) = m.gid {
        opts.push(format!("gid={g}"));
    }
    if m.subset_pid {
        opts.push("subset=pid".into());
    }
    if opts.is_empty() {
        return None;
    }
    let what = match (m.advice(), m.hides_other_users) {
        (Some(a), Some(true)) => format!("hides processes from hmn: {a}"),
        (Some(a), _) => format!("may hide processes from hmn: {a}"),
        (None, _) if m.hidepid.is_some_and(|h| h != Hidepid::Off) => {
            "hmn is exempt (root, or a member of the exempt group)".into()
        }
        (None, _) => "every process is visible".into(),
    };
    Some(format!(
        "    procfs mount: {} with {}: {what}",
        m.mount_point.display(),
        opts.join(",")
    ))
}

/// The `hmn doctor` report.
pub fn doctor(
    out: &mut impl Write,
    rss: &Result<u64, String>,
    roots: &Result<Roots, String>,
    mount: Option<&ProcfsMount>,
    kubelet: &Result<KubeletLogs, String>,
    reports: &[SourceReport],
) -> io::Result<()> {
    match rss {
        Ok(b) => writeln!(
            out,
            "RAM: answered, this process has {} MiB resident",
            b / MIB
        )?,
        Err(e) => writeln!(out, "RAM: failed: {e}")?,
    }
    match roots {
        Ok(r) => {
            writeln!(out, "procfs: {}", root_line(&r.procfs))?;
            if let Some(line) = mount.and_then(procfs_mount_line) {
                writeln!(out, "{line}")?;
            }
            writeln!(out, "sysfs: {}", root_line(&r.sysfs))?;
            writeln!(out, "rootfs: {}", root_line(&r.rootfs))?;
            if let Ok(k) = kubelet {
                kubelet_lines(out, k)?;
            }
        }
        Err(e) => writeln!(out, "roots: {e}")?,
    }
    for r in reports {
        let name = source_name(r.source);
        match &r.state {
            SourceState::Answered => writeln!(out, "{name}: answered")?,
            SourceState::Failed(why) => writeln!(out, "{name}: failed: {why}")?,
            SourceState::Absent(why) => writeln!(out, "{name}: not present: {why}")?,
            _ => writeln!(out, "{name}: unknown state")?,
        }
        for (k, v) in &r.details {
            writeln!(out, "    {k}: {v}")?;
        }
        if let Some(h) = hint(r) {
            writeln!(out, "    what to do: {h}")?;
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct DoctorJson<'a> {
    rss_bytes: Option<u64>,
    rss_error: Option<&'a str>,
    roots: Option<&'a Roots>,
    roots_error: Option<&'a str>,
    procfs_mount: Option<&'a ProcfsMount>,
    kubelet_logs: Option<&'a KubeletLogs>,
    sources: &'a [SourceReport],
    #[serde(flatten)]
    extra: &'a DoctorExtra,
}

/// What `hmn doctor` says beyond the library's reports: the kubelet's pod-resources socket,
/// and why the sources' reports are missing when they did not come within the deadline.
#[derive(Debug, Default, Serialize)]
pub struct DoctorExtra {
    /// The socket's path and what asking it said (`None`: not a kubelet node).
    pub pod_resources: Option<PodResourcesCheck>,
    /// Why `sources` is empty: the reports did not come within the deadline.
    pub sources_error: Option<String>,
    /// What `hmn ghosts` would find, summed (`None`: no GPU, or no answer in time).
    pub ghosts: Option<GhostSummary>,
    /// Whose PID namespace numbers the NVIDIA driver's pids, as hmn takes it, and where hmn
    /// runs (`None`: no NVIDIA GPU answered in time).
    pub pids: Option<PidsCheck>,
}

/// How the driver's pids meet this process's PID namespace.
#[derive(Debug, Serialize)]
pub struct PidsCheck {
    /// Whether the driver's pids are taken as the caller's namespace's (else the host's).
    pub callers_numbering: bool,
    /// Why, naming the driver's version.
    pub why: String,
    /// Whether hmn runs in the initial PID namespace (`None`: not known).
    pub initial_pid_namespace: Option<bool>,
}

/// How many ghosts there are and the bytes of each class (see `hmn ghosts`).
#[derive(Debug, Default, Serialize)]
pub struct GhostSummary {
    pub count: usize,
    pub bytes_by_class: std::collections::BTreeMap<&'static str, u64>,
    /// Whether every listed GPU process was looked at.
    pub complete: bool,
}

impl GhostSummary {
    pub fn of(report: &hypomnesis::GhostReport) -> Self {
        Self {
            count: report.ghosts.len(),
            bytes_by_class: super::ghosts::by_class(report),
            complete: report.complete,
        }
    }
}

/// The pod-resources socket, asked once.
#[derive(Debug, Serialize)]
pub struct PodResourcesCheck {
    pub socket: String,
    /// How many GPU allocations it listed.
    pub allocations: Option<usize>,
    pub error: Option<String>,
}

/// The lines of [`DoctorExtra`].
pub fn extra_lines(out: &mut impl Write, extra: &DoctorExtra) -> io::Result<()> {
    if let Some(p) = &extra.pod_resources {
        match (&p.allocations, &p.error) {
            (Some(n), _) => writeln!(
                out,
                "pod-resources: {}: answered, {n} GPU allocation{}",
                p.socket,
                if *n == 1 { "" } else { "s" }
            )?,
            (None, Some(e)) => writeln!(out, "pod-resources: failed: {e}")?,
            (None, None) => writeln!(out, "pod-resources: {}: no answer", p.socket)?,
        }
    }
    if let Some(e) = &extra.sources_error {
        writeln!(out, "GPU sources: {e}")?;
    }
    if let Some(p) = &extra.pids {
        let here = match p.initial_pid_namespace {
            Some(true) => {
                "hmn runs in the initial PID namespace, where every process has its number"
            }
            Some(false) if p.callers_numbering => {
                "hmn runs in a PID namespace of its own: the driver lists its processes only"
            }
            Some(false) => {
                "hmn runs in a PID namespace of its own: every listed pid is outside it unless \
                 --procfs names the host's procfs"
            }
            None => "whether hmn runs in the initial PID namespace is not known",
        };
        writeln!(out, "pids: {}; {here}", p.why)?;
    }
    if let Some(g) = &extra.ghosts {
        if g.count == 0 && g.complete {
            writeln!(out, "ghosts: none (GPU memory held after its work is over)")?;
        } else if g.count == 0 {
            writeln!(
                out,
                "ghosts: none found, but not every GPU process could be looked at: `hmn ghosts` \
                 says which"
            )?;
        } else {
            let (total, parts) = super::ghosts::held(&g.bytes_by_class);
            writeln!(
                out,
                "ghosts: {} holding {total} ({parts}): `hmn ghosts` says why and what frees it",
                g.count
            )?;
        }
    }
    Ok(())
}

pub fn doctor_json(
    out: &mut impl Write,
    rss: &Result<u64, String>,
    roots: &Result<Roots, String>,
    mount: Option<&ProcfsMount>,
    kubelet: &Result<KubeletLogs, String>,
    reports: &[SourceReport],
    extra: &DoctorExtra,
) -> io::Result<()> {
    json(
        out,
        &DoctorJson {
            rss_bytes: rss.as_ref().ok().copied(),
            rss_error: rss.as_ref().err().map(String::as_str),
            roots: roots.as_ref().ok(),
            roots_error: roots.as_ref().err().map(String::as_str),
            procfs_mount: mount,
            kubelet_logs: kubelet.as_ref().ok(),
            sources: reports,
            extra,
        },
    )
}

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).

// The fixtures are built with the `test-helpers` builders (`cargo test --all-features`).
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {

    use hypomnesis::ErrorKind;

    use super::*;

    use crate::view::MIB;

    use crate::view::text;

    fn reports() -> Vec<SourceReport> {
        vec![
            SourceReport::builder()
                .source(GpuQuerySource::Nvml)
                .state(SourceState::absent(
                    ErrorKind::NotInstalled,
                    "could not load the NVML library (tried libnvidia-ml.so.1: not found)",
                ))
                .details(vec![])
                .build(),
            SourceReport::builder()
                .source(GpuQuerySource::NvidiaSmi)
                .state(SourceState::absent(
                    ErrorKind::NotInstalled,
                    "nvidia-smi was not found on PATH",
                ))
                .details(vec![])
                .build(),
        ]
    }

    fn roots() -> Roots {
        Roots::builder()
            .procfs(
                Root::builder()
                    .path("/host/proc".into())
                    .origin(RootOrigin::SetRoots)
                    .variable("HYPOMNESIS_PROCFS")
                    .build(),
            )
            .sysfs(
                Root::builder()
                    .path("/sys".into())
                    .variable("HYPOMNESIS_SYSFS")
                    .build(),
            )
            .rootfs(
                Root::builder()
                    .path("/host".into())
                    .origin(RootOrigin::Environment)
                    .variable("HYPOMNESIS_ROOTFS")
                    .build(),
            )
            .build()
    }

    fn kubelet() -> KubeletLogs {
        KubeletLogs::builder()
            .pods_dir("/host/var/log/pods".into())
            .pods(KubeletDirState::Found {
                entries: 3,
                skipped: 1,
                complete: true,
            })
            .containers_dir("/host/var/log/containers".into())
            .containers(KubeletDirState::Missing)
            .build()
    }

    #[test]
    fn root_lines() {
        let r = roots();
        assert_eq!(root_line(&r.procfs), "/host/proc (from --procfs)");
        let env = Root::builder()
            .path("/host/sys".into())
            .origin(RootOrigin::Environment)
            .variable("HYPOMNESIS_SYSFS")
            .build();
        assert_eq!(root_line(&env), "/host/sys (from HYPOMNESIS_SYSFS)");
        let flag = Root::builder()
            .path("/host".into())
            .origin(RootOrigin::SetRoots)
            .variable("HYPOMNESIS_ROOTFS")
            .build();
        assert_eq!(root_line(&flag), "/host (from --rootfs)");
    }

    #[test]
    fn kubelet_directories_in_words() {
        let found = |entries, skipped, complete| KubeletDirState::Found {
            entries,
            skipped,
            complete,
        };
        assert_eq!(kubelet_dir_words(&found(1, 0, true), "pod"), "1 pod");
        assert_eq!(
            kubelet_dir_words(&found(0, 2, false), "container link"),
            "0 container links, 2 entries not named as the kubelet names them, skipped, \
             listing cut at its limit (entries or time)"
        );
        assert!(
            kubelet_dir_words(&KubeletDirState::PermissionDenied, "pod")
                .starts_with("permission denied")
        );
        let failed = KubeletDirState::Failed {
            reason: "Not a directory (os error 20)".into(),
        };
        assert_eq!(
            kubelet_dir_words(&failed, "pod"),
            "cannot be listed: Not a directory (os error 20)"
        );
    }

    #[test]
    fn doctor_text() {
        let mut r = reports();
        r[1] = SourceReport::builder()
            .source(GpuQuerySource::NvidiaSmi)
            .state(SourceState::Answered)
            .details(vec![
                ("executable".into(), "/usr/bin/nvidia-smi".into()),
                ("version".into(), "595.80".into()),
            ])
            .build();
        assert_eq!(
            text(|w| doctor(w, &Ok(12 * MIB + 5), &Ok(roots()), None, &Ok(kubelet()), &r)),
            "\
RAM: answered, this process has 12 MiB resident
procfs: /host/proc (from --procfs)
sysfs: /sys (default)
rootfs: /host (from HYPOMNESIS_ROOTFS)
    kubelet pod logs: /host/var/log/pods: 3 pods, 1 entry not named as the kubelet names them, skipped
    kubelet container logs: /host/var/log/containers: missing (no kubelet here, or the node's / is not at this rootfs: pods and containers are not named)
NVML: not present: could not load the NVML library (tried libnvidia-ml.so.1: not found)
    what to do: install the NVIDIA driver (it provides libnvidia-ml.so.1), or set HYPOMNESIS_NVML_LIBRARY to the library's absolute path
nvidia-smi: answered
    executable: /usr/bin/nvidia-smi
    version: 595.80
"
        );
        let report = |state: SourceState| {
            SourceReport::builder()
                .source(GpuQuerySource::Nvml)
                .state(state)
                .build()
        };
        let failed = report(SourceState::failed(
            ErrorKind::DriverNotLoaded,
            "nvmlInit_v2 failed: NVML_ERROR_DRIVER_NOT_LOADED (9)",
        ));
        assert!(hint(&failed).unwrap().contains("modprobe"));
        assert_eq!(hint(&report(SourceState::Answered)), None);
        let off = report(SourceState::absent(
            ErrorKind::NotBuiltIn,
            "not compiled in (cargo feature `nvml`)",
        ));
        assert_eq!(hint(&off), Some("rebuild hmn with that cargo feature"));
        let v: serde_json::Value = serde_json::from_str(&text(|w| {
            doctor_json(
                w,
                &Err("no statm".into()),
                &Ok(roots()),
                None,
                &Ok(kubelet()),
                &r,
                &DoctorExtra::default(),
            )
        }))
        .unwrap();
        assert_eq!(v["roots"]["rootfs"]["path"], "/host");
        assert_eq!(v["roots"]["rootfs"]["origin"], "environment");
        assert_eq!(v["kubelet_logs"]["pods_dir"], "/host/var/log/pods");
        assert_eq!(v["kubelet_logs"]["pods"]["state"], "found");
        assert_eq!(v["kubelet_logs"]["pods"]["entries"], 3);
        assert_eq!(v["kubelet_logs"]["pods"]["complete"], true);
        assert_eq!(v["kubelet_logs"]["containers"]["state"], "missing");
        // A bad rootfs is said once, in the roots' error: no kubelet lines.
        let bad = text(|w| {
            doctor(
                w,
                &Ok(0),
                &Err("rootfs root …".into()),
                None,
                &Err("x".into()),
                &[],
            )
        });
        assert!(!bad.contains("kubelet"), "{bad}");
        assert!(v["rss_bytes"].is_null());
        assert_eq!(v["roots"]["procfs"]["path"], "/host/proc");
        assert_eq!(v["roots"]["procfs"]["origin"], "set_roots");
        assert_eq!(v["roots"]["sysfs"]["origin"], "default");
        assert_eq!(v["rss_error"], "no statm");
        assert_eq!(v["sources"][0]["state"]["state"], "absent");
        assert_eq!(v["sources"][1]["details"][1][1], "595.80");
    }

    #[test]
    fn procfs_mount_lines() {
        let m = |h: Option<Hidepid>, gid: Option<u32>, subset: bool, hides: Option<bool>| {
            ProcfsMount::builder()
                .mount_point("/tmp/p".into())
                .hidepid(h)
                .gid(gid)
                .subset_pid(subset)
                .hides_other_users(hides)
                .build()
        };
        assert_eq!(
            procfs_mount_line(&m(Some(Hidepid::Off), None, false, Some(false))),
            None
        );
        assert_eq!(
            procfs_mount_line(&m(Some(Hidepid::Invisible), Some(27), false, Some(true))).unwrap(),
            "    procfs mount: /tmp/p with hidepid=invisible,gid=27: hides processes from hmn: \
             /tmp/p is mounted with hidepid=invisible: other users' processes are hidden; run as \
             root or as a member of group 27"
        );
        assert_eq!(
            procfs_mount_line(&m(Some(Hidepid::Invisible), Some(27), false, Some(false))).unwrap(),
            "    procfs mount: /tmp/p with hidepid=invisible,gid=27: hmn is exempt (root, or a \
             member of the exempt group)"
        );
        assert_eq!(
            procfs_mount_line(&m(Some(Hidepid::Off), None, true, Some(false))).unwrap(),
            "    procfs mount: /tmp/p with subset=pid: every process is visible"
        );
        assert!(
            procfs_mount_line(&m(None, None, false, None))
                .unwrap()
                .contains(
                    "hidepid (a value hmn does not know): may hide processes from hmn: \
                           /tmp/p is mounted with an unknown hidepid"
                ),
        );
        let with = m(Some(Hidepid::NoAccess), None, false, Some(true));
        let t = text(|w| doctor(w, &Ok(0), &Ok(roots()), Some(&with), &Ok(kubelet()), &[]));
        assert!(
            t.contains("procfs: /host/proc (from --procfs)\n    procfs mount: /tmp/p with hidepid=noaccess: "),
            "{t}"
        );
        let v: serde_json::Value = serde_json::from_str(&text(|w| {
            doctor_json(
                w,
                &Ok(0),
                &Ok(roots()),
                Some(&with),
                &Ok(kubelet()),
                &[],
                &DoctorExtra::default(),
            )
        }))
        .unwrap();
        assert_eq!(v["procfs_mount"]["hidepid"], "noaccess");
        assert_eq!(v["procfs_mount"]["hides_other_users"], true);
    }
}
