//! Kubernetes names without an API server, end to end: GPU processes of the fake NVML whose
//! cgroups (in `fixtures/kubelet/proc`) put them in pods, and the kubelet's log layout of that
//! node (`fixtures/kubelet/rootfs`) given by `--rootfs`. `hmn ps --json` names the namespace,
//! pod and container in each row's container object, `hmn ps` shows `NAMESPACE/POD`, and
//! `hmn doctor` says which rootfs is in use and what its kubelet logs hold.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

use crate::util::hmn::run;
#[cfg(feature = "serve")]
use crate::util::serve::Server;

const GIB: u64 = 1 << 30;

fn fixture(part: &str) -> PathBuf {
    support::fixtures("kubelet").join(part)
}

/// An H200 whose driver lists the fixture's GPU processes (the same as
/// `docs/demo-kubelet-scenario.json`, which the README's transcripts run).
fn scenario() -> String {
    let procs: Vec<String> = [
        (4242, 40),
        (4300, 30),
        (4400, 6),
        (4500, 4),
        (4600, 3),
        (4700, 2),
        (4800, 1),
    ]
    .iter()
    .map(|(pid, gib)| format!(r#"{{"pid": {pid}, "used": {}}}"#, gib * GIB))
    .collect();
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": 150754820096,
            "compute_processes": [{}]}}]}}"#,
        procs.join(", ")
    )
}

/// `hmn` on that H200, the fixture's procfs in use.
fn hmn() -> Command {
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario()))
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .env("PATH", empty_dir())
        .arg("--procfs")
        .arg(fixture("proc"));
    c
}

fn with_rootfs(part: &str) -> Command {
    let mut c = hmn();
    c.arg("--rootfs").arg(fixture(part));
    c
}

#[test]
fn ps_json_names_the_namespace_pod_and_container() {
    let (code, out, err) = run(with_rootfs("rootfs"), &["ps", "--json", "--sort", "pid"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names = |i: usize| {
        let c = &v[i]["container"];
        (
            v[i]["pid"].as_u64().unwrap(),
            c["namespace"].as_str(),
            c["pod"].as_str(),
            c["name"].as_str(),
        )
    };
    assert_eq!(
        names(0),
        (4242, Some("ml-team"), Some("trainer-0"), Some("worker"))
    );
    assert_eq!(
        names(1),
        (
            4300,
            Some("inference"),
            Some("vllm-7d9f8b6c4-x2k9p"),
            Some("server")
        )
    );
    assert_eq!(
        names(2),
        (4400, Some("ml-team"), Some("notebook-alice"), None)
    );
    // The hostile directory names and a pod without a directory: UID and id, no names.
    for i in [3, 4] {
        let c = &v[i]["container"];
        assert!(c["pod_uid"].is_string() && c["id"].is_string(), "{c}");
        assert!(
            c["namespace"].is_null() && c["pod"].is_null() && c["name"].is_null(),
            "{c}"
        );
    }
    assert_eq!(v[5]["container"]["runtime"], "docker");
    assert!(v[5]["container"]["pod"].is_null());
    assert!(v[6]["container"].is_null());
    let c = &v[0]["container"];
    assert_eq!(c["pod_uid"], "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d");
    assert_eq!(c["id"], "c0ffee01".repeat(8));
    assert_eq!(v[0]["command"], "python3 train.py --epochs 90");
}

#[test]
fn ps_shows_namespace_slash_pod_and_the_same_from_the_variable() {
    let (code, out, _) = run(with_rootfs("rootfs"), &["ps", "--sort", "pid"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].ends_with("  NAMESPACE/POD                   COMMAND"),
        "{out}"
    );
    // Each row's cells, by the words between the column gaps.
    let cells = |pid: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(pid))
            .unwrap_or_else(|| panic!("no row {pid}: {out}"));
        line.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    };
    let pod_and_command = |pid: &str| {
        let c = cells(pid);
        (c[c.len() - 2].clone(), c[c.len() - 1].clone())
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        pod_and_command("4242"),
        pair("ml-team/trainer-0", "python3 train.py --epochs 90")
    );
    assert_eq!(pod_and_command("4300").0, "inference/vllm-7d9f8b6c4-x2k9p");
    assert_eq!(
        pod_and_command("4400").0,
        "ml-team/notebook-alice",
        "a pod whose container is not named"
    );
    assert_eq!(pod_and_command("4500"), pair("?", "python3 hostile.py"));
    assert_eq!(pod_and_command("4600"), pair("?", "python3 unknown-pod.py"));
    assert_eq!(pod_and_command("4700"), pair("-", "ffmpeg -hwaccel cuda"));
    assert_eq!(pod_and_command("4800").0, "-");

    // HYPOMNESIS_ROOTFS does what --rootfs does.
    let mut c = hmn();
    c.env("HYPOMNESIS_ROOTFS", fixture("rootfs"));
    let (_, by_env, _) = run(c, &["ps", "--sort", "pid"]);
    assert_eq!(by_env, out);

    // Without the node's logs (the default `/` here has none), no names: the processes in
    // pods (their cgroups say so) are `?`, not left without the column (as they were).
    let (code, out, _) = run(hmn(), &["ps", "--sort", "pid"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("NAMESPACE/POD") && !out.contains("ml-team"),
        "{out}"
    );
    let line = |pid: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{pid} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("4242").contains("  ?  "), "{out}");
    assert!(line("4700").contains("  -  "), "{out}");
}

#[test]
fn doctor_says_which_rootfs_and_what_its_kubelet_logs_hold() {
    let root = fixture("rootfs");
    let (code, out, _) = run(with_rootfs("rootfs"), &["doctor"]);
    assert_eq!(code, 0);
    let want = format!(
        "rootfs: {r} (from --rootfs)\n    kubelet pod logs: {r}/var/log/pods: 3 pods, 3 entries \
         not named as the kubelet names them, skipped\n    kubelet container logs: \
         {r}/var/log/containers: 4 container links, 2 entries not named as the kubelet names \
         them, skipped\n",
        r = root.display()
    );
    assert!(out.contains(&want), "{out}");

    let (_, out, _) = run(with_rootfs("rootfs-no-links"), &["doctor"]);
    assert!(
        out.contains("/var/log/containers: missing (no kubelet here"),
        "{out}"
    );

    let (code, out, _) = run(with_rootfs("rootfs"), &["doctor", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["roots"]["rootfs"]["origin"], "set_roots");
    assert_eq!(v["roots"]["rootfs"]["variable"], "HYPOMNESIS_ROOTFS");
    assert_eq!(v["roots"]["rootfs"]["path"], root.to_str().unwrap());
    let k = &v["kubelet_logs"];
    assert_eq!(k["pods"]["state"], "found");
    assert_eq!(k["pods"]["entries"], 3);
    assert_eq!(k["containers"]["entries"], 4);
    assert_eq!(k["containers"]["skipped"], 2);

    // The default, and a bad one from the environment (refused, naming the variable).
    let (_, out, _) = run(hmn(), &["doctor"]);
    assert!(out.contains("\nrootfs: / (default)\n"), "{out}");
    let mut c = hmn();
    c.env("HYPOMNESIS_ROOTFS", "host");
    let (code, _, err) = run(c, &["doctor"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("rootfs root \"host\" (from HYPOMNESIS_ROOTFS) is not an absolute path"),
        "{err}"
    );
    let (code, _, err) = run(hmn(), &["ps", "--rootfs", "/nonexistent/host"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("rootfs root /nonexistent/host does not exist"),
        "{err}"
    );
}

/// `--group-by`: each GPU's memory added up per pod, namespace, container or owner; a pod the
/// kubelet's files do not name is its UID (by pod) or unknown (by namespace), a process in no
/// pod a group of its own.
#[test]
fn ps_group_by_adds_memory_up_per_pod_namespace_and_container() {
    let (code, out, err) = run(with_rootfs("rootfs"), &["ps", "--group-by", "namespace"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["GPU", "NAMESPACE", "PROCS", "VRAM", "DEVICE"]);
    // Largest first: ml-team (trainer 40 GiB + notebook 6 GiB), inference (30 GiB), the two
    // pods without names (4 + 3 GiB), then the two processes in no pod (2 + 1 GiB).
    let groups: Vec<(&str, &str, &str)> = lines[1..].iter().map(|l| (l[1], l[2], l[3])).collect();
    assert_eq!(
        groups,
        [
            ("ml-team", "2", "46.0"),
            ("inference", "1", "30.0"),
            ("?", "2", "7.0"),
            ("(no", "pod)", "2")
        ],
        "{out}"
    );
    let (_, out, _) = run(
        with_rootfs("rootfs"),
        &["ps", "--group-by", "pod", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let pods: Vec<(String, String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["group"].as_str().unwrap_or("-").to_string(),
                g["kind"].as_str().unwrap().to_string(),
                g["used_bytes"].as_u64().unwrap() / GIB,
            )
        })
        .collect();
    assert_eq!(pods[0], ("ml-team/trainer-0".into(), "named".into(), 40));
    assert_eq!(pods.last().unwrap(), &("-".into(), "none".into(), 3));
    assert_eq!(
        pods.iter().map(|p| p.2).sum::<u64>(),
        86,
        "every GiB in one group: {pods:?}"
    );
    let (_, out, _) = run(with_rootfs("rootfs"), &["ps", "--group-by", "container"]);
    assert!(out.contains("ml-team/trainer-0/worker"), "{out}");
    assert!(out.contains("(no container)"), "{out}");
}

/// `hmn serve` with the same roots labels its series with the kubelet's names: a process's
/// namespace, pod and container, a pod's total by namespace and name, and by UID alone where the
/// pod's logs are gone; a process in no pod carries none of those labels.
#[cfg(feature = "serve")]
#[test]
fn serve_labels_the_series_with_the_kubelets_names() {
    let (procfs, rootfs) = (fixture("proc"), fixture("rootfs"));
    let server = Server::start(
        FakeVariant::Modern,
        &scenario(),
        &[
            "--procfs",
            procfs.to_str().unwrap(),
            "--rootfs",
            rootfs.to_str().unwrap(),
        ],
    );
    let reply = server.get("/metrics");
    assert_eq!(reply.status, 200, "{}", server.stderr());
    let series = |prefix: &str| -> Vec<String> {
        reply
            .body
            .lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    };
    let process = |pid: u32| -> String {
        let found = series("hypomnesis_gpu_process_memory_bytes{");
        let needle = format!("pid=\"{pid}\"");
        found
            .into_iter()
            .find(|l| l.contains(&needle))
            .unwrap_or_else(|| panic!("no series for pid {pid}:\n{}", reply.body))
    };
    let trainer = process(4242);
    for label in [
        r#"namespace="ml-team""#,
        r#"pod="trainer-0""#,
        r#"container="worker""#,
    ] {
        assert!(trainer.contains(label), "{label} missing: {trainer}");
    }
    assert!(trainer.ends_with(&format!(" {}", 40 * GIB)), "{trainer}");
    // Logs gone: the pod's UID, no namespace.
    let orphan = process(4500);
    assert!(
        orphan.contains(r#"pod="2d3e4f5a-6b7c-4d8e-9fa0-b1c2d3e4f5a6""#)
            && !orphan.contains("namespace="),
        "{orphan}"
    );
    // No pod: no Kubernetes labels at all.
    let xorg = process(4800);
    assert!(
        !xorg.contains("pod=") && !xorg.contains("namespace="),
        "{xorg}"
    );
    let pods = series("hypomnesis_gpu_pod_memory_bytes{");
    let pod = |labels: &str| -> u64 {
        pods.iter()
            .find(|l| l.contains(labels))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no pod series with {labels}: {pods:?}"))
    };
    assert_eq!(pod(r#"namespace="ml-team",pod="trainer-0""#), 40 * GIB);
    assert_eq!(
        pod(r#"namespace="inference",pod="vllm-7d9f8b6c4-x2k9p""#),
        30 * GIB
    );
    assert_eq!(
        pod(r#"pod="3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7""#),
        3 * GIB
    );
    // Five pods; the two processes in no pod are in none of them.
    assert_eq!(pods.len(), 5, "{pods:?}");
}
