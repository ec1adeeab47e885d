//! deploy/prometheus.yml and the alert rules of deploy/alerts against promtool and hmn:
//! `promtool check config` (the file and its commented Kubernetes example), `check rules`,
//! `test rules` (deploy/alerts/hypomnesis.rules.test.yml), mutated rules shown to fail their
//! tests, and every series and label the rules use present in a real scrape.
//!
//! `promtool` (Debian's `prometheus` package) is used when on PATH; without it those checks print
//! `skipped: …` and pass, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1`, which makes them fail.
#![cfg(all(feature = "serve", target_os = "linux"))]

use crate::util::deploy as deploying;
use crate::util::serve as serving;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use deploying::{deploy, read, scenario, scratch, text};
use serving::{Server, get};
use support::{FakeVariant, external};

/// `promtool <args>`: whether it passed, and what it said.
fn promtool(promtool: &Path, args: &[&str], path: &Path) -> (bool, String) {
    let out = Command::new(promtool)
        .args(args)
        .arg(path)
        .output()
        .unwrap();
    (out.status.success(), text(&out))
}

#[test]
#[allow(clippy::too_many_lines)] // the config, its example, the rules and their mutants in order
fn prometheus_config_and_alert_rules_pass_promtool() {
    let config = deploy().join("prometheus.yml");
    let text = read(&config);
    for needle in [
        r#"targets: ["localhost:10466"]"#,
        "scrape_interval: 15s",
        "  - alerts/hypomnesis.rules.yml",
        "  - job_name: hmn\n",
    ] {
        assert!(text.contains(needle), "prometheus.yml lacks {needle:?}");
    }
    assert!(!text.contains("9835"), "the old port is gone");

    let Some(promtool_path) = external("promtool") else {
        return;
    };
    let (ok, said) = promtool(&promtool_path, &["check", "config"], &config);
    assert!(
        ok && said.contains("1 rule files found"),
        "promtool check config deploy/prometheus.yml:\n{said}"
    );

    // The commented Kubernetes example, uncommented.
    let mut example = String::from("scrape_configs:\n");
    for line in text
        .lines()
        .skip_while(|l| !l.contains("# - job_name: hmn"))
    {
        let Some(rest) = line.strip_prefix("  #") else {
            break;
        };
        example.push_str("  ");
        example.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        example.push('\n');
    }
    assert!(
        example.contains("names: [hmn.hypomnesis.svc.cluster.local]")
            && example.contains("port: 10466"),
        "the example names the Service of deploy/kubernetes/hmn.yaml: {example}"
    );
    let path = scratch("k8s-example.yml");
    std::fs::write(&path, &example).unwrap();
    let (ok, said) = promtool(&promtool_path, &["check", "config"], &path);
    assert!(
        ok,
        "the Kubernetes example of deploy/prometheus.yml:\n{said}\n{example}"
    );

    let alerts = deploy().join("alerts");
    let rules = alerts.join("hypomnesis.rules.yml");
    let tests = alerts.join("hypomnesis.rules.test.yml");
    let (ok, said) = promtool(&promtool_path, &["check", "rules"], &rules);
    assert!(
        ok && said.contains("10 rules found"),
        "promtool check rules:\n{said}"
    );
    let (ok, said) = promtool(&promtool_path, &["test", "rules"], &tests);
    assert!(
        ok && said.contains("SUCCESS"),
        "promtool test rules:\n{said}"
    );

    // Each alert's tests catch a change to its rule.
    let original = read(&rules);
    let mutants = [
        ("> 0.95", "> 0.99"),
        (
            "hypomnesis_gpu_memory_reserved_bytes or",
            "hypomnesis_gpu_memory_reserved_bytes * 0 or",
        ),
        ("up{job=\"hmn\"} == 0", "up == 0"),
        (
            "          hypomnesis_up{source!=\"nvidia-smi\"} == 0\n            or",
            "          hypomnesis_up{source!=\"nvidia-smi\"} == 1\n            or",
        ),
        (
            "\n            or (hypomnesis_up{source=\"nvidia-smi\"} == 0 unless",
            "\n            or (hypomnesis_up{source=\"nvidia-smi\"} == 0 and",
        ),
        (
            "hypomnesis_scrape_success == 0\n            unless on",
            "hypomnesis_scrape_success == 0\n            and on",
        ),
        (
            "                or (hypomnesis_up{source=\"nvidia-smi\"} == 0 unless on (job, instance) hypomnesis_up{source=\"nvml\"} == 1)\n",
            "                or hypomnesis_up{source=\"nvidia-smi\"} == 0\n",
        ),
        (
            " == 0 and on (job, instance) hypomnesis_up{source=\"nvml\"} == 1\n",
            " == 0\n",
        ),
        ("        for: 30m\n", "        for: 20m\n"),
        (
            "hypomnesis_gpu_devices < max_over_time",
            "hypomnesis_gpu_devices > max_over_time",
        ),
        ("[1h]", "[5m]"),
        ("* 600 > 2 *", "* 600 > 4 *"),
        (
            "2 * 1024 * 1024 * 1024\n        for: 15m\n",
            "2 * 1024 * 1024 * 1024\n        for: 5m\n",
        ),
        (
            "hypomnesis_gpu_pod_memory_outside_allocation_bytes > 0",
            "hypomnesis_gpu_pod_memory_outside_allocation_bytes >= 0",
        ),
        (
            "hypomnesis_gpu_ghost_bytes > 0",
            "hypomnesis_gpu_ghost_bytes >= 0",
        ),
        (
            "hypomnesis_gpu_ghost_bytes > 0\n        for: 15m",
            "hypomnesis_gpu_ghost_bytes > 0\n        for: 5m",
        ),
        (
            "            > on (job, instance, gpu, uuid, claim_namespace, claim)",
            "            >= on (job, instance, gpu, uuid, claim_namespace, claim)",
        ),
        (
            "hypomnesis_gpu_claim_memory_booked_bytes\n        for: 5m",
            "hypomnesis_gpu_claim_memory_booked_bytes\n        for: 1m",
        ),
    ];
    for (from, to) in mutants {
        assert_eq!(
            original.matches(from).count(),
            1,
            "{from:?} once in the rules"
        );
        let dir = scratch("mutant");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("hypomnesis.rules.yml"), original.replace(from, to)).unwrap();
        std::fs::copy(&tests, dir.join("hypomnesis.rules.test.yml")).unwrap();
        let (ok, said) = promtool(
            &promtool_path,
            &["test", "rules"],
            &dir.join("hypomnesis.rules.test.yml"),
        );
        assert!(
            !ok,
            "the rules with {to:?} for {from:?} still pass their tests:\n{said}"
        );
    }
}

#[test]
fn alert_rules_use_series_that_hmn_serves() {
    let server = Server::start(FakeVariant::Modern, &scenario(), &[]);
    let reply = get(
        server.addr,
        "/metrics",
        &["Accept: text/plain; version=0.0.4"],
    );
    assert_eq!(reply.status, 200);
    let exposed: BTreeSet<&str> = reply
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let alerts = deploy().join("alerts");
    let mut used = BTreeSet::new();
    for file in ["hypomnesis.rules.yml", "hypomnesis.rules.test.yml"] {
        let text = read(&alerts.join(file));
        for (at, _) in text.match_indices("hypomnesis_") {
            let name: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            // File names (hypomnesis.rules.yml) are not series.
            if name.len() > "hypomnesis_".len() {
                used.insert(name);
            }
        }
    }
    assert!(used.len() >= 8, "{used:?}");
    // Served only on a Kubernetes node whose pod-resources socket answers: the exposition's unit
    // test `memory_outside_the_kubelets_allocation_is_its_own_series` serves the first; the
    // claims' series come from a DRA node, which `cli::dra`'s first scrape serves.
    let kubernetes_only = [
        "hypomnesis_gpu_pod_memory_outside_allocation_bytes",
        "hypomnesis_gpu_claim_memory_bytes",
        "hypomnesis_gpu_claim_memory_booked_bytes",
    ];
    for name in used
        .iter()
        .filter(|n| !kubernetes_only.contains(&n.as_str()))
    {
        assert!(
            exposed.contains(name.as_str()),
            "{name} is not served:\n{}",
            reply.body
        );
    }
    // The labels the rules join on and write into their annotations.
    for (series, labels) in [
        ("hypomnesis_gpu_info", &["gpu", "uuid", "model"][..]),
        ("hypomnesis_gpu_memory_used_bytes", &["gpu", "uuid"][..]),
        ("hypomnesis_gpu_memory_reserved_bytes", &["gpu", "uuid"][..]),
        (
            "hypomnesis_gpu_process_memory_bytes",
            &["gpu", "uuid", "pid", "process"][..],
        ),
        ("hypomnesis_up", &["source"][..]),
    ] {
        let line = reply
            .body
            .lines()
            .find(|l| l.starts_with(&format!("{series}{{")))
            .unwrap_or_else(|| panic!("no {series}:\n{}", reply.body));
        for label in labels {
            assert!(
                line.contains(&format!("{label}=\"")),
                "{series} lacks {label}: {line}"
            );
        }
    }
}

#[test]
fn the_prometheusrule_object_holds_the_rules_file() {
    // deploy/kubernetes/prometheusrule.yaml is made from the rules file by a script; a rule
    // changed in one and not the other fails here.
    let script = support::workspace().join("scripts/gen/prometheusrule.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("--check")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let object = read(&deploy().join("kubernetes/prometheusrule.yaml"));
    let rules = read(&deploy().join("alerts/hypomnesis.rules.yml"));
    for alert in rules
        .lines()
        .filter(|l| l.trim_start().starts_with("- alert: "))
    {
        assert!(object.contains(&format!("  {alert}\n")), "{alert} missing");
    }
    // The check compares the text: a different object fails it.
    let copy = scratch("prometheusrule-check");
    std::fs::create_dir_all(copy.join("scripts/gen")).unwrap();
    std::fs::create_dir_all(copy.join("deploy/kubernetes")).unwrap();
    std::fs::create_dir_all(copy.join("deploy/alerts")).unwrap();
    std::fs::copy(&script, copy.join("scripts/gen/prometheusrule.py")).unwrap();
    std::fs::write(copy.join("deploy/alerts/hypomnesis.rules.yml"), &rules).unwrap();
    std::fs::write(
        copy.join("deploy/kubernetes/prometheusrule.yaml"),
        object.replace("for: 5m", "for: 1m"),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(copy.join("scripts/gen/prometheusrule.py"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a changed object passed the check");
    assert!(text(&out).contains("is not what"), "{}", text(&out));
}
