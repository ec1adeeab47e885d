//! The README's `scripts/demo/demo.sh` transcripts, run again against the fake NVML and compared
//! line by line, so the README shows what a reader sees. In an expected line, `…` stands for
//! any text; a line that is only `…` stands for any number of lines.

use support::{FakeVariant, empty_dir, fake_nvml};

/// One `$ …scripts/demo/demo.sh ARGS` command of a transcript and the output printed under it.
#[derive(Debug)]
struct Transcript {
    scenario: String,
    args: Vec<String>,
    expected: Vec<String>,
}

/// The demo commands of every `text` code block of the README (`hmn run` ones excepted: their
/// timings and RSS differ from run to run).
fn transcripts(readme: &str) -> Vec<Transcript> {
    let mut out: Vec<Transcript> = Vec::new();
    let mut in_block = false;
    let mut current: Option<Transcript> = None;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = line == "```text";
            out.extend(current.take());
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.extend(current.take());
            let cmd = cmd.split(" #").next().unwrap_or(cmd);
            let mut words = cmd.split_whitespace();
            let mut scenario = "docs/demo-scenario.json".to_string();
            let mut found = false;
            for w in words.by_ref() {
                if let Some(s) = w.strip_prefix("HMN_DEMO_SCENARIO=") {
                    scenario = s.to_string();
                } else if w == "scripts/demo/demo.sh" {
                    found = true;
                    break;
                } else {
                    break;
                }
            }
            let args: Vec<String> = words.map(String::from).collect();
            if found && args.first().is_none_or(|a| a != "run") {
                current = Some(Transcript {
                    scenario,
                    args,
                    expected: Vec::new(),
                });
            }
        } else if let Some(t) = current.as_mut() {
            t.expected.push(line.to_string());
        }
    }
    for t in &mut out {
        while t.expected.last().is_some_and(String::is_empty) {
            t.expected.pop();
        }
    }
    out
}

/// Whether `line` matches `pattern`, in which `…` stands for any text.
fn line_matches(pattern: &str, line: &str) -> bool {
    let mut parts = pattern.split('…');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = line.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (k, p) in parts.iter().enumerate() {
        if k + 1 == parts.len() {
            return rest.ends_with(p);
        }
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// Whether `lines` match `patterns`, where a pattern that is only `…` matches any run of lines.
fn lines_match(patterns: &[String], lines: &[&str]) -> bool {
    match patterns.split_first() {
        None => lines.is_empty(),
        Some((p, rest)) if p == "…" => (0..=lines.len()).any(|k| lines_match(rest, &lines[k..])),
        Some((p, rest)) => lines
            .split_first()
            .is_some_and(|(l, more)| line_matches(p, l) && lines_match(rest, more)),
    }
}

#[test]
fn the_matcher() {
    assert!(line_matches("a … b", "a 12 MiB b"));
    assert!(line_matches("…/x.so", "/tmp/t/x.so"));
    assert!(!line_matches("a … b", "a 12 MiB c"));
    assert!(line_matches("exact", "exact"));
    let p = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    assert!(lines_match(&p(&["a", "…", "z"]), &["a", "b", "c", "z"]));
    assert!(lines_match(&p(&["a", "…"]), &["a"]));
    assert!(!lines_match(&p(&["a", "z"]), &["a", "b", "z"]));
}

#[test]
fn the_readme_transcripts_are_what_hmn_prints() {
    let root = support::workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let list = transcripts(&readme);
    assert!(
        list.len() >= 7,
        "the README's demo transcripts were not found: {list:?}"
    );
    for t in list {
        let out = crate::util::hmn::hmn()
            .args(&t.args)
            .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", root.join(&t.scenario))
            .env("PATH", empty_dir())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines_match(&t.expected, &lines),
            "README transcript of `scripts/demo/demo.sh {}` ({}) differs from what hmn prints:\n--- README\n{}\n--- hmn\n{text}",
            t.args.join(" "),
            t.scenario,
            t.expected.join("\n"),
        );
    }
}
