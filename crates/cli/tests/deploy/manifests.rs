//! The deploy kit against hmn itself: deploy/Dockerfile (its stages, base images, user, port,
//! command, and its health check run against a real `hmn serve`), the Kubernetes manifests of
//! deploy/kubernetes (validated strictly against the Kubernetes schemas and prometheus-operator's,
//! a typo'd field shown to fail, and their objects agreeing with each other and with the image),
//! deploy/prometheus.yml and the alert rules of deploy/alerts (`promtool check config`, `check
//! rules`, `test rules`, mutated rules shown to fail their tests, and every series they use
//! present in a real scrape).
//!
//! External tools: `promtool` (Debian's `prometheus` package) on PATH, and a Python environment
//! with kubernetes-validate, cloudcoil-models-prometheus-operator and dockerfile (Docker's own
//! Dockerfile parser), named by `HYPOMNESIS_DEPLOY_PYTHON` or found as the environment of a
//! `kubernetes-validate` on PATH. Without them those checks print `skipped: …` and pass, unless
//! `HYPOMNESIS_REQUIRE_EXTERNAL=1`, which makes them fail.
#![cfg(all(feature = "serve", target_os = "linux"))]

use crate::util::deploy as deploying;
use crate::util::serve as serving;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use deploying::{deploy, read, scenario, scratch, text};
use serde_json::Value;
use serving::{Server, free_port, get, serve_command};
use support::FakeVariant;

/// The exporter's port in the image and the manifests.
const PORT: u16 = 10_466;
/// The Kubernetes versions the manifests are validated against (kubernetes-validate's schemas).
const KUBERNETES_VERSIONS: [&str; 2] = ["1.29", "1.37"];
/// Names the Python interpreter of the environment with the validators.
const PYTHON_ENV: &str = "HYPOMNESIS_DEPLOY_PYTHON";
/// How CI installs that environment (the same pins as .ci/run).
const INSTALL_HINT: &str = "python3 -m venv target/deploy-tools/venv && target/deploy-tools/venv/bin/pip install kubernetes-validate==1.37.0 cloudcoil==0.6.0 cloudcoil-models-prometheus-operator==0.80.1.0 dockerfile==3.4.0, then HYPOMNESIS_DEPLOY_PYTHON=$PWD/target/deploy-tools/venv/bin/python";

/// Strict manifest validation and Dockerfile parsing, run by the environment's Python.
const VALIDATE_PY: &str = r#""""Validates Kubernetes manifests strictly (unknown fields are errors) and parses Dockerfiles.

manifests VERSION... -- FILE...: every object of every file against kubernetes-validate's
strict schemas of each Kubernetes VERSION, or, for prometheus-operator's ServiceMonitor,
PodMonitor and PrometheusRule, against the JSON schema of cloudcoil's models with additionalProperties false on
every object that lists its properties. An object of any other kind is an error. Prints one
JSON object: {"objects": [...], "checked": ["file kind/name", ...], "errors": [...]}.

dockerfile FILE: the instructions, as Docker's own parser reads them, as JSON.
"""
import json
import sys


def strict(node):
    if isinstance(node, dict):
        if "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)
    return node


def manifests(versions, files):
    import jsonschema
    import kubernetes_validate.utils as kv
    import yaml
    from cloudcoil.models.prometheus_operator import v1

    crds = {("monitoring.coreos.com/v1", "ServiceMonitor"): v1.ServiceMonitor,
            ("monitoring.coreos.com/v1", "PodMonitor"): v1.PodMonitor,
            ("monitoring.coreos.com/v1", "PrometheusRule"): v1.PrometheusRule}
    report = {"objects": [], "checked": [], "errors": []}
    for path in files:
        with open(path) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        if not docs:
            report["errors"].append(f"{path}: no object")
        for doc in docs:
            report["objects"].append(doc)
            what = f"{path} {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
            model = crds.get((doc.get("apiVersion"), doc.get("kind")))
            try:
                if model is not None:
                    schema = strict(model.model_json_schema(by_alias=True))
                    error = jsonschema.exceptions.best_match(
                        jsonschema.Draft202012Validator(schema).iter_errors(doc))
                    if error is not None:
                        raise error
                    model.model_validate(doc)
                else:
                    for version in versions:
                        kv.validate(doc, version, strict=True)
            except jsonschema.ValidationError as e:
                where = ".".join(str(p) for p in e.absolute_path)
                report["errors"].append(f"{what}: {where}: {e.message}")
                continue
            except Exception as e:  # no schema for the kind, a model's own check, ...
                report["errors"].append(f"{what}: {type(e).__name__}: {e}")
                continue
            report["checked"].append(what)
    json.dump(report, sys.stdout)
    return 1 if report["errors"] else 0


def dockerfile(path):
    import dockerfile as parser

    json.dump([{"cmd": c.cmd.upper(), "flags": list(c.flags), "value": list(c.value),
                "json": c.json} for c in parser.parse_file(path)], sys.stdout)
    return 0


def main(argv):
    if argv[:1] == ["manifests"] and "--" in argv:
        cut = argv.index("--")
        return manifests(argv[1:cut], argv[cut + 1:])
    if argv[:1] == ["dockerfile"] and len(argv) == 2:
        return dockerfile(argv[1])
    sys.stderr.write("usage: manifests VERSION... -- FILE... | dockerfile FILE\n")
    return 2


sys.exit(main(sys.argv[1:]))
"#;

/// `None` (after saying so) when a tool is missing and the tests may skip it; a failure when
/// `HYPOMNESIS_REQUIRE_EXTERNAL=1`.
fn missing(what: &str) -> Option<PathBuf> {
    assert!(
        std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
        "{what}, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it. Install: {INSTALL_HINT}"
    );
    eprintln!("skipped: {what}");
    None
}

/// The Python interpreter of the environment with the validators: `$HYPOMNESIS_DEPLOY_PYTHON`,
/// else the one beside `kubernetes-validate` on PATH.
fn python() -> Option<PathBuf> {
    let python = if let Some(p) = std::env::var_os(PYTHON_ENV) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{PYTHON_ENV}={} is not a file", p.display());
        p
    } else {
        let launcher = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("kubernetes-validate"))
                .find(|p| p.is_file())
        });
        let Some(launcher) = launcher else {
            return missing(&format!(
                "{PYTHON_ENV} is not set and kubernetes-validate is not on PATH"
            ));
        };
        let dir = launcher.parent().unwrap();
        match ["python3", "python"]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
        {
            Some(p) => p,
            None => return missing(&format!("no python beside {}", launcher.display())),
        }
    };
    let out = Command::new(&python)
        .args([
            "-c",
            "import kubernetes_validate, cloudcoil.models.prometheus_operator, dockerfile, jsonschema",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    if !out.status.success() {
        return missing(&format!(
            "{} lacks the validators:\n{}",
            python.display(),
            text(&out)
        ));
    }
    Some(python)
}

/// Runs the validation script with `args`: its exit status and its JSON answer.
fn validate(python: &Path, args: &[&str]) -> (Output, Value) {
    let script = scratch("validate.py");
    std::fs::write(&script, VALIDATE_PY).unwrap();
    let out = Command::new(python)
        .arg(&script)
        .args(args)
        .output()
        .unwrap();
    let answer = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "validate.py {args:?} did not answer JSON ({e}):\n{}",
            text(&out)
        )
    });
    (out, answer)
}

/// Strict validation of manifest files against every version of [`KUBERNETES_VERSIONS`].
fn validate_manifests(python: &Path, files: &[&Path]) -> (Output, Value) {
    let mut args: Vec<&str> = vec!["manifests"];
    args.extend(KUBERNETES_VERSIONS);
    args.push("--");
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    validate(python, &args)
}

/// One instruction of a Dockerfile: its keyword (upper case) and the rest of its line(s).
#[derive(Debug)]
struct Instruction {
    keyword: String,
    args: String,
}

/// The instructions of a Dockerfile: comments and blank lines dropped, continued lines joined.
fn instructions(dockerfile: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head.trim());
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let whole = std::mem::take(&mut pending);
        let (keyword, args) = whole.split_once(' ').unwrap_or((&whole, ""));
        out.push(Instruction {
            keyword: keyword.to_ascii_uppercase(),
            args: args.trim().to_string(),
        });
    }
    assert!(
        pending.is_empty(),
        "the Dockerfile ends in a continued line"
    );
    out
}

/// An exec-form (JSON array) argument list.
fn exec_form(args: &str) -> Vec<String> {
    serde_json::from_str(args).unwrap_or_else(|e| panic!("not an exec-form list ({e}): {args}"))
}

/// The argument after `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    args.get(i + 1)
        .unwrap_or_else(|| panic!("nothing after {flag} in {args:?}"))
}

/// Runs `hmn` with `args` (the fake NVML behind it): its exit status and stderr.
fn hmn(args: &[String]) -> Output {
    let (first, rest) = args.split_first().unwrap();
    assert_eq!(first, "serve", "{args:?}");
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    serve_command(FakeVariant::Modern, &scenario(), &rest)
        .output()
        .unwrap()
}

#[test]
#[allow(clippy::too_many_lines)] // one file, its facts in order
fn dockerfile_builds_hmn_and_runs_it_unprivileged_with_a_working_health_check() {
    let path = deploy().join("Dockerfile");
    let all = instructions(&read(&path));
    let froms: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, i)| i.keyword == "FROM")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(froms.len(), 2, "two stages: {all:#?}");
    let (build, run) = all.split_at(froms[1]);

    // Stage 1: a Rust toolchain on Debian 12, at least the crate's rust-version.
    let from = &build[0].args;
    let (image, stage) = from.split_once(" AS ").expect("the build stage is named");
    assert_eq!(stage, "build");
    let version = image
        .strip_prefix("rust:")
        .and_then(|v| v.strip_suffix("-bookworm"))
        .unwrap_or_else(|| panic!("build stage image {image}"));
    let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
    let wanted: Vec<u32> = env!("CARGO_PKG_RUST_VERSION")
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        parts >= wanted,
        "rust:{version} is older than rust-version {wanted:?}"
    );
    assert!(
        build
            .iter()
            .any(|i| i.keyword == "RUN"
                && i.args.contains("cargo build --release --locked --bin hmn")),
        "{build:#?}"
    );

    // Stage 2: the binary on debian:bookworm-slim, not root, the NVIDIA toolkit's variables.
    assert_eq!(run[0].args, "debian:bookworm-slim");
    let one = |keyword: &str| -> &str {
        let found: Vec<&Instruction> = run.iter().filter(|i| i.keyword == keyword).collect();
        assert_eq!(
            found.len(),
            1,
            "one {keyword} in the runtime stage: {run:#?}"
        );
        &found[0].args
    };
    assert_eq!(one("COPY"), "--from=build /out/hmn /usr/local/bin/hmn");
    let env = one("ENV");
    for setting in [
        "NVIDIA_VISIBLE_DEVICES=all",
        "NVIDIA_DRIVER_CAPABILITIES=utility",
    ] {
        assert!(env.split_whitespace().any(|s| s == setting), "ENV {env}");
    }
    let user = one("USER");
    let ids: Vec<u32> = user.split(':').map(|i| i.parse().unwrap()).collect();
    assert!(
        ids.len() == 2 && ids.iter().all(|&i| i != 0),
        "USER {user}: a numeric uid:gid, not root"
    );
    assert_eq!(one("EXPOSE"), PORT.to_string());
    assert_eq!(exec_form(one("ENTRYPOINT")), ["/usr/local/bin/hmn"]);
    let cmd = exec_form(one("CMD"));
    let listen = format!("0.0.0.0:{PORT}");
    assert_eq!(
        cmd,
        ["serve", "--listen", listen.as_str(), "--allow-remote"]
    );
    let health = one("HEALTHCHECK");
    let (options, check) = health.split_once(" CMD ").expect("HEALTHCHECK … CMD […]");
    assert!(
        options.contains("--interval=") && options.contains("--timeout="),
        "{health}"
    );
    let check = exec_form(check);
    assert_eq!(check[0], "/usr/local/bin/hmn", "{check:?}");
    let check = check[1..].to_vec();
    assert!(check.contains(&"--check".to_string()), "{check:?}");
    assert_eq!(
        after(&check, "--listen"),
        listen,
        "the check asks the CMD's address"
    );

    // Docker's own parser reads the same instructions.
    if let Some(python) = python() {
        let (out, parsed) = validate(&python, &["dockerfile", path.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out));
        let keywords: Vec<&str> = parsed
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["cmd"].as_str().unwrap())
            .collect();
        let ours: Vec<&str> = all.iter().map(|i| i.keyword.as_str()).collect();
        assert_eq!(keywords, ours);
    }

    // The image's command, on loopback and a free port, serves; the health check, given that
    // server's port, passes (0.0.0.0 asked on loopback); once the server is gone it fails.
    let with_port = |args: &[String], addr: &str| -> Vec<String> {
        args.iter()
            .map(|a| {
                if *a == listen {
                    addr.to_string()
                } else {
                    a.clone()
                }
            })
            .collect()
    };
    let serving = with_port(&cmd, "127.0.0.1:0");
    let rest: Vec<&str> = serving[1..].iter().map(String::as_str).collect();
    let server = Server::spawn(serve_command(FakeVariant::Modern, &scenario(), &rest));
    assert_eq!(get(server.addr, "/metrics", &[]).status, 200);
    let probe = with_port(&check, &format!("0.0.0.0:{}", server.addr.port()));
    let out = hmn(&probe);
    assert!(
        out.status.success(),
        "{probe:?} against a server: {}",
        text(&out)
    );
    drop(server);
    let closed = free_port();
    let probe = with_port(&check, &format!("0.0.0.0:{}", closed.port()));
    let out = hmn(&probe);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{probe:?}, nothing there: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("no server answering"),
        "says why: {}",
        text(&out)
    );
}

/// The labels of `selector.matchLabels` (or `podSelector.matchLabels`) are all in `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let wanted = selector["matchLabels"].as_object().expect("matchLabels");
    !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
#[allow(clippy::too_many_lines)] // the objects, checked against each other in order
fn kubernetes_manifests_are_valid_and_agree_with_the_image() {
    let dir = deploy().join("kubernetes");
    let hmn_yaml = read(&dir.join("hmn.yaml"));
    // Without the validators, the facts that a reading finds.
    for needle in [
        r#"args: ["serve", "--listen", "0.0.0.0:10466", "--allow-remote"]"#,
        "image: hypomnesis/hmn:0.2.15",
        "imagePullPolicy: IfNotPresent",
        "hostPID: true",
        "value: /host/proc",
        "value: /host/sys",
        "name: NVIDIA_VISIBLE_DEVICES",
        "# runtimeClassName: nvidia",
        r#"prometheus.io/port: "10466""#,
        "containerPort: 10466",
        "clusterIP: None",
        "readOnlyRootFilesystem: true",
        r#"drop: ["ALL"]"#,
        "type: RuntimeDefault",
        "kind: NetworkPolicy",
    ] {
        assert!(hmn_yaml.contains(needle), "hmn.yaml lacks {needle:?}");
    }
    assert!(
        hmn_yaml.contains(&format!(
            "image: hypomnesis/hmn:{}",
            env!("CARGO_PKG_VERSION")
        )),
        "the image is this version's"
    );
    assert!(
        !deploy().join("daemonset.yaml").exists(),
        "deploy/daemonset.yaml was replaced by deploy/kubernetes/hmn.yaml"
    );

    let Some(python) = python() else {
        return;
    };
    let files = [
        "hmn.yaml",
        "servicemonitor.yaml",
        "podmonitor.yaml",
        "prometheusrule.yaml",
    ]
    .map(|f| dir.join(f));
    let (out, report) = validate_manifests(&python, &files.each_ref().map(PathBuf::as_path));
    assert!(
        out.status.success() && report["errors"].as_array().unwrap().is_empty(),
        "strict validation failed:\n{}",
        text(&out)
    );
    let checked: BTreeSet<String> = report["checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let c = c.as_str().unwrap();
            c.rsplit_once('/')
                .map_or(c, |(head, _)| head)
                .rsplit(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    let all_kinds: BTreeSet<String> = [
        "Namespace",
        "DaemonSet",
        "Service",
        "NetworkPolicy",
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    ]
    .map(String::from)
    .into();
    assert_eq!(checked, all_kinds, "every object validated: {report}");

    let objects = report["objects"].as_array().unwrap();
    let object = |kind: &str| -> &Value {
        let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind}");
        found[0]
    };
    let namespace = object("Namespace")["metadata"]["name"].clone();
    assert_eq!(
        object("Namespace")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged",
        "hostPID and hostPath pods are admitted"
    );
    for kind in [
        "DaemonSet",
        "Service",
        "NetworkPolicy",
        "ServiceMonitor",
        "PodMonitor",
        "PrometheusRule",
    ] {
        assert_eq!(object(kind)["metadata"]["namespace"], namespace, "{kind}");
    }

    // The DaemonSet: the image's command and port, the host's /proc and /sys read-only, not
    // root, no capability, no writable root filesystem.
    let ds = object("DaemonSet");
    let pod = &ds["spec"]["template"];
    let pod_labels = &pod["metadata"]["labels"];
    assert!(selects(&ds["spec"]["selector"], pod_labels));
    let spec = &pod["spec"];
    assert_eq!(spec["hostPID"], true);
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    assert!(spec["securityContext"]["runAsUser"].as_u64().unwrap() > 0);
    assert_eq!(
        spec["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let containers = spec["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        ["serve", "--listen", "0.0.0.0:10466", "--allow-remote"]
    );
    let out = hmn(&[
        "serve".to_string(),
        "--check".into(),
        "--listen".into(),
        args[2].into(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "hmn takes the address: {}",
        text(&out)
    );
    assert_eq!(
        c["image"],
        format!("hypomnesis/hmn:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    let port = &c["ports"][0];
    assert_eq!(
        (port["name"].as_str(), port["containerPort"].as_u64()),
        (Some("metrics"), Some(u64::from(PORT)))
    );
    assert_eq!(
        pod["metadata"]["annotations"]["prometheus.io/port"],
        PORT.to_string()
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"], "metrics", "{probe}");
    }
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    let env = |var: &str| -> String {
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == var)
            .unwrap_or_else(|| panic!("{var}"))["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // `host` mounted read-only at `at`, from a hostPath volume.
    let mounted = |at: &str, host: &str| {
        let mount = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == at)
            .unwrap_or_else(|| panic!("{host} is mounted at {at}"));
        assert_eq!(mount["readOnly"], true, "{host}");
        let volume = spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        assert_eq!(volume["hostPath"]["path"], host, "{host}");
    };
    for (var, host) in [("HYPOMNESIS_PROCFS", "/proc"), ("HYPOMNESIS_SYSFS", "/sys")] {
        mounted(&env(var), host);
    }
    // The rootfs: the node's kubelet logs, pod-resources directory, CDI specs and NVIDIA DRA
    // driver's directory (DRA), read-only, each where it is on the node below it.
    let rootfs = env("HYPOMNESIS_ROOTFS");
    for host in [
        "/var/log/pods",
        "/var/log/containers",
        "/var/lib/kubelet/pod-resources",
        "/var/run/cdi",
        "/var/lib/kubelet/plugins/gpu.nvidia.com",
    ] {
        mounted(&format!("{rootfs}{host}"), host);
    }

    // The Service, the monitors and the NetworkPolicy reach those pods on that port.
    let service = object("Service");
    assert!(
        selects(
            &serde_json::json!({"matchLabels": service["spec"]["selector"]}),
            pod_labels
        ),
        "the Service selects the pods"
    );
    let service_port = &service["spec"]["ports"][0];
    assert_eq!(service_port["name"], "metrics");
    assert_eq!(service_port["port"], PORT);
    assert_eq!(service_port["targetPort"], "metrics");
    let sm = object("ServiceMonitor");
    assert!(selects(
        &sm["spec"]["selector"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    let pm = object("PodMonitor");
    assert!(selects(&pm["spec"]["selector"], pod_labels));
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
    for (monitor, labels) in [(sm, &service["metadata"]["labels"]), (pm, pod_labels)] {
        assert_eq!(
            monitor["spec"]["namespaceSelector"]["matchNames"],
            serde_json::json!([namespace])
        );
        // The job label the alert rules expect.
        let job = monitor["spec"]["jobLabel"].as_str().unwrap();
        assert_eq!(labels[job], "hmn", "{}", monitor["kind"]);
    }
    let np = object("NetworkPolicy");
    assert!(selects(&np["spec"]["podSelector"], pod_labels));
    assert_eq!(np["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
    let rules = np["spec"]["ingress"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "one way in");
    assert_eq!(
        rules[0]["ports"],
        serde_json::json!([{"protocol": "TCP", "port": PORT}])
    );
    let from = &rules[0]["from"][0];
    assert_eq!(
        from["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    assert_eq!(
        from["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        "prometheus"
    );
}

#[test]
#[allow(clippy::too_many_lines)] // the cases, one a line
fn strict_validation_rejects_a_typo_in_every_kind() {
    let Some(python) = python() else {
        return;
    };
    let dir = deploy().join("kubernetes");
    // (file, the text, its typo, what the error must name)
    let cases = [
        (
            "hmn.yaml",
            "  name: hypomnesis\n  labels:",
            "  name: hypomnesis\n  label:",
            "'label' was unexpected",
        ),
        (
            "hmn.yaml",
            "readOnlyRootFilesystem: true",
            "readOnlyRootFileSystem: true",
            "'readOnlyRootFileSystem' was unexpected",
        ),
        (
            "hmn.yaml",
            "hostPID: true",
            "hostPid: true",
            "'hostPid' was unexpected",
        ),
        (
            "hmn.yaml",
            "containerPort: 10466",
            "containerPort: \"10466\"",
            "is not of type 'integer'",
        ),
        (
            "hmn.yaml",
            "      targetPort: metrics",
            "      targetport: metrics",
            "'targetport' was unexpected",
        ),
        (
            "hmn.yaml",
            "policyTypes:",
            "policyType:",
            "'policyType' was unexpected",
        ),
        (
            "servicemonitor.yaml",
            "      scrapeTimeout: 10s",
            "      scrapetimeout: 10s",
            "'scrapetimeout' was unexpected",
        ),
        (
            "servicemonitor.yaml",
            "jobLabel:",
            "joblabel:",
            "'joblabel' was unexpected",
        ),
        (
            "podmonitor.yaml",
            "  podMetricsEndpoints:",
            "  podMetricEndpoints:",
            "'podMetricEndpoints' was unexpected",
        ),
        (
            "podmonitor.yaml",
            "        - sourceLabels:",
            "        - sourcelabels:",
            "'sourcelabels' was unexpected",
        ),
        (
            "prometheusrule.yaml",
            "        - alert: HypomnesisExporterDown",
            "        - alarm: HypomnesisExporterDown",
            "'alarm' was unexpected",
        ),
    ];
    // All broken copies in one run (the validators take seconds to load), each with its errors.
    let mut broken = Vec::new();
    for (file, from, to, expected) in cases {
        let original = read(&dir.join(file));
        assert_eq!(original.matches(from).count(), 1, "{file}: {from:?} once");
        let path = scratch(file);
        std::fs::write(&path, original.replace(from, to)).unwrap();
        broken.push((path, format!("{to:?} for {from:?}"), expected));
    }
    // A kind that no schema knows is an error, not a pass.
    let unknown = scratch("unknown.yaml");
    std::fs::write(
        &unknown,
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: x\n",
    )
    .unwrap();
    let mut files: Vec<&Path> = broken.iter().map(|(p, _, _)| p.as_path()).collect();
    files.push(&unknown);
    let (out, report) = validate_manifests(&python, &files);
    assert!(!out.status.success(), "{report}");
    let errors: Vec<&str> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    for (path, typo, expected) in &broken {
        let prefix = format!("{} ", path.display());
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with(&prefix) && e.contains(expected)),
            "{} with {typo} should fail naming {expected:?}: {errors:#?}",
            path.display()
        );
    }
    let prefix = format!("{} Gadget/x", unknown.display());
    assert!(
        errors.iter().any(|e| e.starts_with(&prefix)),
        "a kind without a schema is an error: {errors:#?}"
    );
}
