//! What a newcomer meets first: every subcommand on a closed stdout, roots from the environment
//! checked like the flags, options only where they apply, and the man page as `man` shows it.

#[cfg(feature = "serve")]
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;

/// `hmn` with a clean environment: no NVML, no nvidia-smi, no AMD/Intel devices.
use crate::util::hmn::isolated as hmn;

/// `hmn` against a fake H200 that one process (this test's pid) holds 1 GiB of.
fn with_gpu() -> Command {
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{{"pid": {}, "used": {}}}]}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        110_796 * MIB,
        std::process::id(),
        1024 * MIB
    );
    let mut c = hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        // `hmn run` finds its commands on PATH.
        .env("PATH", "/usr/bin:/bin");
    c
}

/// Runs `c` with a stdout whose reading end is already closed; returns (status, stderr).
fn closed_stdout(mut c: Command) -> (Option<i32>, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = c
        .stdout(writer)
        .stderr(Stdio::piped())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_quiet(what: &str, code: Option<i32>, err: &str, want: i32) {
    assert!(!err.contains("panicked"), "{what} panicked: {err}");
    assert!(
        !err.contains("cannot write") && !err.contains("Broken pipe"),
        "{what} complained about the closed pipe: {err}"
    );
    assert_eq!(code, Some(want), "{what}: {err}");
}

#[test]
fn every_subcommand_exits_quietly_on_a_closed_stdout() {
    let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let cases: Vec<(&str, Vec<&str>)> = vec![
        ("hmn", vec![]),
        ("hmn --json", vec!["--json"]),
        ("hmn ps", vec!["ps"]),
        ("hmn ps --json", vec!["ps", "--json"]),
        ("hmn doctor", vec!["doctor"]),
        ("hmn doctor --json", vec!["doctor", "--json"]),
        ("hmn run --json", vec!["run", "--json", "--", "true"]),
        (
            "hmn watch",
            vec!["watch", &pid, "--interval", "100ms", "--duration", "300ms"],
        ),
        (
            "hmn watch --json",
            vec![
                "watch",
                &pid,
                "--interval",
                "100ms",
                "--duration",
                "300ms",
                "--json",
            ],
        ),
        ("hmn spill --json", vec!["spill", "--json", "--", "true"]),
        ("hmn man", vec!["man"]),
    ];
    for (what, args) in cases {
        let mut c = with_gpu();
        c.args(&args);
        let (code, err) = closed_stdout(c);
        assert_quiet(what, code, &err, 0);
    }
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let mut c = hmn();
        c.args(["completions", shell]);
        let (code, err) = closed_stdout(c);
        assert_quiet(&format!("hmn completions {shell}"), code, &err, 0);
    }
    // The command's own status still comes through.
    let mut c = with_gpu();
    c.args(["run", "--json", "--", "sh", "-c", "exit 3"]);
    let (code, err) = closed_stdout(c);
    assert_quiet("hmn run (status 3)", code, &err, 3);
    let mut sleeper = sleeper;
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[cfg(feature = "serve")]
#[test]
fn serve_runs_and_stops_cleanly_with_a_closed_stdout() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut c = with_gpu();
    let mut child = c
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.contains("serving metrics on http://"), "{line}");
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    // A stop signal's 128 + n, the one rule of every hmn command (issue 24, point 6).
    assert_quiet("hmn serve", status.code(), &rest, 128 + 15);
}

fn run(mut c: Command, args: &[&str]) -> (i32, String, String) {
    let o = c.args(args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        err,
    )
}

#[test]
fn roots_from_the_environment_are_checked_like_the_flags() {
    let file = std::env::current_exe().unwrap();
    let cases = [
        (
            "HYPOMNESIS_PROCFS",
            "/nonexistent".to_string(),
            "procfs root \"/nonexistent\" (from HYPOMNESIS_PROCFS) does not exist",
        ),
        (
            "HYPOMNESIS_PROCFS",
            "proc".to_string(),
            "procfs root \"proc\" (from HYPOMNESIS_PROCFS) is not an absolute path",
        ),
        (
            "HYPOMNESIS_SYSFS",
            file.display().to_string(),
            "(from HYPOMNESIS_SYSFS) is not a directory",
        ),
    ];
    for (var, value, want) in &cases {
        for args in [&["ps"][..], &[], &["doctor"], &["watch", "1"]] {
            let mut c = with_gpu();
            c.env(var, value);
            let (code, out, err) = run(c, args);
            assert_eq!(code, 2, "{var}={value} hmn {args:?}: {err}");
            assert!(err.contains(want), "{var}={value} hmn {args:?}: {err}");
            assert!(
                err.contains("bad setting: "),
                "{var}={value} hmn {args:?}: {err}"
            );
            assert_eq!(out, "", "nothing measured");
        }
        // Commands that read no root do not care.
        let mut c = hmn();
        c.env(var, value);
        let (code, _, _) = run(c, &["completions", "bash"]);
        assert_eq!(code, 0);
    }
    // The flags say the same.
    let (code, _, err) = run(with_gpu(), &["ps", "--procfs", "/nonexistent"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("hmn: bad setting: procfs root /nonexistent does not exist"),
        "a setting, not an I/O fault: {err}"
    );
}

#[test]
fn doctor_says_which_roots_are_in_use_and_where_they_came_from() {
    let (_, out, _) = run(with_gpu(), &["doctor"]);
    assert!(out.contains("\nprocfs: /proc (default)\n"), "{out}");
    let sys = empty_dir();
    assert!(
        out.contains(&format!(
            "\nsysfs: {} (from HYPOMNESIS_SYSFS)\n",
            sys.display()
        )),
        "{out}"
    );
    let (_, out, _) = run(with_gpu(), &["doctor", "--procfs", "/proc"]);
    assert!(out.contains("\nprocfs: /proc (from --procfs)\n"), "{out}");
    let mut c = with_gpu();
    c.env("HYPOMNESIS_PROCFS", "/proc");
    let (_, out, _) = run(c, &["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["roots"]["procfs"]["path"], "/proc");
    assert_eq!(v["roots"]["procfs"]["origin"], "environment");
}

#[test]
fn options_that_do_not_apply_are_refused() {
    for args in [
        &["--json", "man"][..],
        &["--json", "completions", "bash"],
        &["--procfs", "/proc", "man"],
        #[cfg(feature = "serve")]
        &["--json", "serve"],
        #[cfg(feature = "serve")]
        &["serve", "--json"],
    ] {
        let (code, out, err) = run(hmn(), args);
        assert_eq!(code, 2, "hmn {args:?}: {err}");
        assert_eq!(out, "");
        assert!(!err.is_empty());
    }
}

#[test]
fn no_gpu_is_one_short_sentence() {
    let (code, out, err) = run(hmn(), &[]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.len() < 120, "{out}");
    assert!(
        out.contains("hmn doctor") && out.contains("scripts/demo/demo.sh"),
        "{out}"
    );
    assert_eq!(err, "");
}

/// Whether the tests must run every external tool instead of skipping (as CI sets).
fn required() -> bool {
    std::env::var_os("HYPOMNESIS_REQUIRE_EXTERNAL").is_some_and(|v| v == "1")
}

#[test]
fn the_man_page_reads_cleanly_in_man() {
    let page = std::env::temp_dir().join(format!("hmn-{}.1", std::process::id()));
    let (code, roff, _) = run(hmn(), &["man"]);
    assert_eq!(code, 0);
    std::fs::write(&page, &roff).unwrap();
    let shown = Command::new("man")
        .args(["--warnings=w", "-l"])
        .arg(&page)
        .env("MANWIDTH", "80")
        .env("MANPAGER", "cat")
        .env("LANG", "C.UTF-8")
        .output();
    let _ = std::fs::remove_file(&page);
    let shown = match shown {
        Ok(o) => o,
        Err(e) if !required() => {
            eprintln!("skipped: man cannot be run ({e})");
            return;
        }
        Err(e) => panic!("man cannot be run: {e} (install man-db)"),
    };
    let text = String::from_utf8(shown.stdout)
        .unwrap()
        .replace('\u{a0}', " ");
    let warnings = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{warnings}");
    assert_eq!(warnings, "", "roff warnings");
    // The synopsis names each option's value.
    let synopsis: String = text
        .split("DESCRIPTION")
        .next()
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for want in [
        "hmn [--json] [--procfs DIR] [--sysfs DIR]",
        "hmn ps [--pid PID...] [--device N] [--sort KEY]",
        "hmn fits SIZE [--device N]",
        "-- CMD...",
        "hmn completions SHELL",
    ] {
        assert!(synopsis.contains(want), "{want:?} not in {synopsis}");
    }
    for sub in [
        "ps",
        "doctor",
        "run",
        "watch",
        "spill",
        "completions",
        "man",
    ] {
        assert!(text.contains(&format!("\n   hmn {sub}\n")), "hmn {sub}");
    }
    // Filled text never breaks a word, and fits the width; only the verbatim examples may not.
    for line in text.lines() {
        let t = line.trim_end();
        assert!(
            !(t.ends_with(['-', '\u{2010}'])
                && t.chars().rev().nth(1).is_some_and(char::is_alphabetic)),
            "a word broken across lines: {t:?}"
        );
        if t.chars().count() > 80 {
            assert!(
                t.trim_start().starts_with("GPU 0 [NVIDIA H200]"),
                "line wider than 80 columns: {t:?}"
            );
        }
    }
    assert!(!text.contains("hmn-ps(1)"), "no pages that do not exist");
}
