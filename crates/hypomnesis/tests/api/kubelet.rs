//! Kubernetes names without an API server: the checked-in kubelet log layout
//! (`fixtures/kubelet`) and processes in its pods, read through the public API with the roots
//! set as a program in a container sets them. The roots are process-wide, so each case runs in
//! a child process of its own.

use std::path::PathBuf;

use hypomnesis::__parsers::{parse_container_log_link, parse_pod_log_dir};
use hypomnesis::{KubeletDirState, RootOrigin};

const TRAINER: &str = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";
const WORKER_RUN_1: &str = "c0ffee01c0ffee01c0ffee01c0ffee01c0ffee01c0ffee01c0ffee01c0ffee01";

fn fixture(part: &str) -> PathBuf {
    support::fixtures("kubelet").join(part)
}

fn names(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixture(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

/// Every entry of the fixture is a pod or a link of the kubelet's form, or one it would never
/// make; the parsers tell which.
#[test]
fn the_fixture_entries_parse_as_the_kubelet_names_them() {
    let pods: Vec<(String, String, String)> = names("rootfs/var/log/pods")
        .iter()
        .filter_map(|n| {
            parse_pod_log_dir(n).map(|p| (p.namespace.into(), p.pod.into(), p.uid.into()))
        })
        .collect();
    assert_eq!(
        pods,
        [
            (
                "inference",
                "vllm-7d9f8b6c4-x2k9p",
                "0b1c2d3e-4f50-4162-8374-a5b6c7d8e9f0"
            ),
            (
                "ml-team",
                "notebook-alice",
                "1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5"
            ),
            ("ml-team", "trainer-0", TRAINER),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    let links: Vec<(String, String, String)> = names("rootfs/var/log/containers")
        .iter()
        .filter_map(|n| {
            parse_container_log_link(n)
                .map(|l| (l.namespace.into(), l.pod.into(), l.container.into()))
        })
        .collect();
    assert_eq!(
        links,
        [
            ("ml-team", "trainer-0", "log-shipper"),
            ("ml-team", "trainer-0", "worker"),
            ("ml-team", "trainer-0", "worker"),
            ("inference", "vllm-7d9f8b6c4-x2k9p", "server"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
}

#[cfg(target_os = "linux")]
fn run_child(case: &str, rootfs: Option<PathBuf>) {
    let mut cmd = support::child_command(module_path!());
    cmd.env("HMN_CHILD", case)
        .env("HYPOMNESIS_PROCFS", fixture("proc"))
        .env("HYPOMNESIS_SYSFS", support::empty_dir());
    match rootfs {
        Some(r) => cmd.env("HYPOMNESIS_ROOTFS", r),
        None => cmd.env_remove("HYPOMNESIS_ROOTFS"),
    };
    support::run_child_passing(&mut cmd, &format!("case {case}"));
}

#[test]
#[ignore = "entry point for the child processes; the other tests run it"]
fn child() {
    match std::env::var("HMN_CHILD").unwrap().as_str() {
        "node" => node(),
        "no_links" => no_links(),
        "set_rootfs" => set_rootfs(),
        "bad_rootfs" => bad_rootfs(),
        other => panic!("unknown case {other}"),
    }
}

/// (pid, namespace, pod, container) of each fixture process, `None` where unknown.
type Row = (u32, Option<String>, Option<String>, Option<String>);

fn rows(pids: &[u32]) -> Vec<Row> {
    let mut parts = hypomnesis::ContextParts::NONE;
    parts.container = true;
    pids.iter()
        .zip(hypomnesis::process_contexts_with(pids, parts))
        .map(|(&pid, ctx)| {
            let c = ctx.container;
            (
                pid,
                c.as_ref().and_then(|c| c.namespace.clone()),
                c.as_ref().and_then(|c| c.pod.clone()),
                c.as_ref().and_then(|c| c.name.clone()),
            )
        })
        .collect()
}

fn row(pid: u32, names: Option<(&str, &str, Option<&str>)>) -> Row {
    match names {
        Some((ns, pod, name)) => (
            pid,
            Some(ns.into()),
            Some(pod.into()),
            name.map(String::from),
        ),
        None => (pid, None, None, None),
    }
}

const PIDS: [u32; 8] = [4242, 4250, 4300, 4400, 4500, 4600, 4700, 4800];

fn node() {
    let roots = hypomnesis::roots().unwrap();
    assert_eq!(roots.rootfs.path, fixture("rootfs"));
    assert_eq!(roots.rootfs.origin, RootOrigin::Environment);
    assert_eq!(roots.rootfs.variable, "HYPOMNESIS_ROOTFS");
    assert_eq!(
        rows(&PIDS),
        vec![
            row(4242, Some(("ml-team", "trainer-0", Some("worker")))),
            row(4250, Some(("ml-team", "trainer-0", Some("log-shipper")))),
            row(
                4300,
                Some(("inference", "vllm-7d9f8b6c4-x2k9p", Some("server")))
            ),
            row(4400, Some(("ml-team", "notebook-alice", None))),
            row(4500, None),
            row(4600, None),
            row(4700, None),
            row(4800, None),
        ]
    );
    // The cgroup's ids stay; a process outside Kubernetes keeps its container, unnamed.
    let all = hypomnesis::process_contexts(&[4242, 4700, 4800]);
    let trainer = all[0].container.as_ref().unwrap();
    assert_eq!(trainer.id, WORKER_RUN_1);
    assert_eq!(trainer.pod_uid.as_deref(), Some(TRAINER));
    assert_eq!(trainer.runtime.as_deref(), Some("containerd"));
    let docker = all[1].container.as_ref().unwrap();
    assert_eq!(docker.runtime.as_deref(), Some("docker"));
    assert!(docker.pod_uid.is_none() && docker.namespace.is_none() && docker.name.is_none());
    assert!(all[2].container.is_none());
    // Asked again: the same names, from what is kept.
    assert_eq!(
        rows(&[4242])[0],
        row(4242, Some(("ml-team", "trainer-0", Some("worker"))))
    );

    let logs = hypomnesis::kubelet_logs().unwrap();
    assert_eq!(logs.pods_dir, fixture("rootfs/var/log/pods"));
    assert_eq!(
        logs.pods,
        KubeletDirState::Found {
            entries: 3,
            skipped: 3,
            complete: true
        }
    );
    assert_eq!(logs.containers_dir, fixture("rootfs/var/log/containers"));
    assert_eq!(
        logs.containers,
        KubeletDirState::Found {
            entries: 4,
            skipped: 2,
            complete: true
        }
    );
}

fn no_links() {
    assert_eq!(
        rows(&[4242, 4250, 4300]),
        vec![
            row(4242, Some(("ml-team", "trainer-0", None))),
            row(4250, Some(("ml-team", "trainer-0", None))),
            row(4300, None),
        ]
    );
    let logs = hypomnesis::kubelet_logs().unwrap();
    assert!(
        matches!(logs.pods, KubeletDirState::Found { entries: 1, .. }),
        "{logs:?}"
    );
    assert_eq!(logs.containers, KubeletDirState::Missing);
}

/// `set_rootfs` before the first measurement wins over the default; a second, different one
/// is refused, as for the other roots; `set_roots` still takes its two roots alone.
fn set_rootfs() {
    hypomnesis::set_roots(Some(&fixture("proc")), None).unwrap();
    assert!(hypomnesis::set_rootfs(std::path::Path::new("relative/missing")).is_err());
    hypomnesis::set_rootfs(&fixture("rootfs")).unwrap();
    hypomnesis::set_rootfs(&fixture("rootfs")).unwrap();
    let e = hypomnesis::set_rootfs(&fixture("rootfs-no-links")).unwrap_err();
    assert!(e.to_string().contains("rootfs root is already"), "{e}");
    let roots = hypomnesis::roots().unwrap();
    assert_eq!(roots.rootfs.origin, RootOrigin::SetRoots);
    assert_eq!(roots.rootfs.path, fixture("rootfs"));
    assert_eq!(
        rows(&[4300]),
        vec![row(
            4300,
            Some(("inference", "vllm-7d9f8b6c4-x2k9p", Some("server")))
        )]
    );
}

/// A bad `HYPOMNESIS_ROOTFS`: the roots and the layout check fail naming it; a process's
/// context keeps what its cgroup says, with no names.
fn bad_rootfs() {
    let e = hypomnesis::roots().unwrap_err().to_string();
    assert!(
        e.contains("rootfs root \"relative/dir\" (from HYPOMNESIS_ROOTFS) is not an absolute path"),
        "{e}"
    );
    assert!(hypomnesis::kubelet_logs().is_err());
    let ctx = hypomnesis::process_contexts(&[4242]).pop().unwrap();
    let c = ctx.container.unwrap();
    assert_eq!(c.pod_uid.as_deref(), Some(TRAINER));
    assert_eq!((c.namespace, c.pod, c.name), (None, None, None));
}

#[cfg(target_os = "linux")]
#[test]
fn pods_and_containers_are_named_from_the_nodes_logs() {
    run_child("node", Some(fixture("rootfs")));
    run_child("no_links", Some(fixture("rootfs-no-links")));
    run_child("set_rootfs", None);
    run_child("bad_rootfs", Some(PathBuf::from("relative/dir")));
}
