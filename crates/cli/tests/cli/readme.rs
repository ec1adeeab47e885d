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

/// The demo commands of every `text` code block of the README (where a run's figures differ from
/// run to run, as `hmn run`'s timings and RSS, the README writes `…`).
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
            let words = shell_words::split(cmd)
                .unwrap_or_else(|e| panic!("a README command a shell cannot split: {cmd}: {e}"));
            let mut words = words.into_iter();
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
            // A path under the checkout is written `"$PWD/…"` (the demo script runs from it).
            let root = support::workspace().display().to_string();
            let args: Vec<String> = words
                .map(|w| match w.strip_prefix("$PWD") {
                    Some(rest) => format!("{root}{rest}"),
                    None => w,
                })
                .collect();
            if found {
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
        // `hmn run` starts its command from PATH (sh, python3); the others need nothing there
        // (no nvidia-smi: the fake NVML answers).
        let path = if t.args.first().is_some_and(|a| a == "run") {
            std::env::var_os("PATH").unwrap_or_default()
        } else {
            empty_dir().into_os_string()
        };
        // As `scripts/demo/demo.sh` does: the pid files the scenario names are the command's to
        // write, and one an earlier run left would list its process, gone since.
        let scenario: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join(&t.scenario)).unwrap())
                .unwrap();
        for d in scenario["devices"].as_array().into_iter().flatten() {
            for p in d["compute_processes"].as_array().into_iter().flatten() {
                if let Some(f) = p["pid_file"].as_str() {
                    let _ = std::fs::remove_file(f);
                }
            }
        }
        let out = crate::util::hmn::hmn()
            .args(&t.args)
            .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", root.join(&t.scenario))
            .env("PATH", path)
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

/// The units a figure the README credits to BENCHMARKS.md is given in.
const UNITS: [&str; 10] = [
    "ms", "µs", "%", "x", "MiB", "KiB", "GiB", "CPU s", "ns", "calls/s",
];

/// The figures of a sentence: each number with its unit (the first number of a range such as
/// `46–57 ms` with the range's).
fn figures(sentence: &str) -> Vec<(String, &'static str)> {
    let chars: Vec<char> = sentence.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len()
            && (chars[j].is_ascii_digit()
                || (matches!(chars[j], '.' | ',')
                    && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
        {
            j += 1;
        }
        let number: String = chars[i..j].iter().collect();
        let after: String = chars[j..].iter().collect();
        let unit = unit_of(after.strip_prefix(' ').unwrap_or(&after)).or_else(|| {
            // The first number of a range takes the range's unit.
            let rest = after.strip_prefix('–')?;
            figures(rest).first().map(|(_, u)| *u)
        });
        if let Some(u) = unit {
            out.push((number, u));
        }
        i = j;
    }
    out
}

/// The unit `text` starts with, if it is one of [`UNITS`] (a whole word).
fn unit_of(text: &str) -> Option<&'static str> {
    UNITS.iter().copied().find(|u| {
        text.starts_with(u)
            && text[u.len()..]
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric())
    })
}

/// Whether `text` gives `number` as a number of its own (not part of a longer one) followed by
/// `unit` (with or without a space), or heading a list of numbers that is (`159.6, 156.5 µs`).
fn has_figure(text: &str, number: &str, unit: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut rest = &text[at + number.len()..];
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        let longer = matches!(rest.chars().next(), Some('.' | ',')) && digit(rest.chars().nth(1));
        if digit(before)
            || matches!(before, Some('.' | ','))
            || digit(rest.chars().next())
            || longer
        {
            return false;
        }
        // The list's further numbers, up to its unit.
        while let Some(more) = rest.strip_prefix(", ").filter(|m| digit(m.chars().next())) {
            rest = more.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
        }
        unit_of(rest.strip_prefix(' ').unwrap_or(rest)) == Some(unit)
    })
}

#[test]
fn the_figure_finder() {
    let found =
        figures("takes 46–57 ms, 1.4x and 0.90% of 8,000 rows, 9 KiB (148 KiB plain) at 5 s");
    assert_eq!(
        found,
        [
            ("46".to_string(), "ms"),
            ("57".into(), "ms"),
            ("1.4".into(), "x"),
            ("0.90".into(), "%"),
            ("9".into(), "KiB"),
            ("148".into(), "KiB"),
        ]
    );
    assert!(has_figure("| 93.3 ms | 4.03 ms |", "4.03", "ms"));
    assert!(!has_figure("| 13.1 ms |", "13", "ms"));
    assert!(!has_figure("| 113.1 ms |", "13.1", "ms"));
    assert!(
        !has_figure("0.07% of a core", "0.07", "CPU s"),
        "another unit"
    );
    assert!(has_figure("0.40% of the 5 s budget", "0.40", "%"));
    assert!(has_figure("| 159.6, 156.5, 145.2 µs |", "159.6", "µs"));
    assert!(has_figure("| 159.6, 156.5, 145.2 µs |", "156.5", "µs"));
    assert!(!has_figure("| 159.6, 156.5 ms, 145.2 µs |", "159.6", "µs"));
}

/// Every figure a README sentence credits to BENCHMARKS.md is there, with its unit: a sentence
/// that names the file quotes only what it holds.
#[test]
fn the_figures_credited_to_benchmarks_are_there() {
    let root = support::workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let bench = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap();
    let mut checked = 0;
    for paragraph in readme.split("\n\n") {
        let text = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        for sentence in text.split(". ").filter(|s| s.contains("BENCHMARKS")) {
            for (number, unit) in figures(sentence) {
                assert!(
                    has_figure(&bench, &number, unit),
                    "the README credits {number} {unit} to BENCHMARKS.md, which does not hold \
                     it: {sentence}"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} figures found: the finder is broken"
    );
}

/// The README's `sudo scripts/demo/hidepid.sh` transcript, run again (as root, with util-linux;
/// skipped, saying so, elsewhere unless `HYPOMNESIS_REQUIRE_EXTERNAL=1`).
#[cfg(target_os = "linux")]
#[test]
fn the_readme_hidepid_transcript_is_what_the_script_prints() {
    let root = support::workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "$ sudo scripts/demo/hidepid.sh")
        .expect("the README's hidepid transcript");
    let expected: Vec<String> = lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("```"))
        .map(|l| (*l).to_string())
        .collect();
    // The effective uid, from the process's own status file.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let root_user = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    let tools = ["unshare", "setpriv", "mount"]
        .iter()
        .all(|t| support::external(t).is_some());
    if !(root_user && tools) {
        assert!(
            std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
            "the hidepid transcript needs root and util-linux, which HYPOMNESIS_REQUIRE_EXTERNAL=1 requires"
        );
        eprintln!("skipped: the hidepid transcript needs root and util-linux");
        return;
    }
    // The script is given this test's hmn: building its own would replace, while other tests
    // run, the binary they run (one of default features, without `debug-output`).
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/demo/hidepid.sh"))
        .env("HMN_BIN", env!("CARGO_BIN_EXE_hmn"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<&str> = text.lines().collect();
    assert!(
        lines_match(&expected, &got),
        "README's hidepid transcript differs:\n--- README\n{}\n--- script\n{text}",
        expected.join("\n")
    );
}
