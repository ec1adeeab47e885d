//! A process any local user can name `\x1b[2J\x1b[31mE"\n}` (`prctl(PR_SET_NAME)`) holds GPU
//! memory, its command line holding the same bytes: `hmn ps` and `hmn watch` show them with `?` for the control characters, `--json` escapes
//! them, and nothing hmn writes carries an escape to the terminal.
#![cfg(target_os = "linux")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, fake_nvml, write_scenario};

/// What the process is named: 13 bytes, within the 15 a name may have.
const HOSTILE: &str = "\u{1b}[2J\u{1b}[31mE\"\n}";

/// A process that renames itself to `HOSTILE` and waits; once its name is set.
fn hostile_process() -> Child {
    renamed(HOSTILE)
}

/// A process that renames itself to `name` (at most 15 bytes), its command line carrying the
/// same bytes (for the COMMAND column), and waits; once its name is set.
fn renamed(name: &str) -> Child {
    let child = Command::new("python3")
        .args([
            "-c",
            "import ctypes, os, sys, time\n\
             ctypes.CDLL(None).prctl(15, os.fsencode(sys.argv[1]), 0, 0, 0)\n\
             time.sleep(30)",
            name,
        ])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let comm = format!("/proc/{}/comm", child.id());
    let started = Instant::now();
    while std::fs::read_to_string(&comm).unwrap_or_default() != format!("{name}\n") {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the name was never set"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

fn hmn(pid: u32) -> Command {
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": 150754820096,
            "compute_processes": [{{"pid": {pid}, "used": 1073741824}}]}}]}}"#
    );
    let mut c = crate::util::hmn::hmn();
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(&scenario))
        .env("HYPOMNESIS_SYSFS", support::empty_dir());
    c
}

fn no_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{what} carries a control character: {text:?}"
    );
}

#[test]
fn a_hostile_process_name_never_reaches_the_terminal_raw() {
    let mut p = hostile_process();
    let pid = p.id();

    let o = hmn(pid).arg("ps").output().unwrap();
    no_controls("hmn ps", &o.stdout);
    no_controls("hmn ps (stderr)", &o.stderr);
    let table = String::from_utf8(o.stdout).unwrap();
    let row = table
        .lines()
        .find(|l| l.contains(&pid.to_string()))
        .unwrap();
    assert!(row.ends_with(" ?[2J?[31mE\"?}"), "{table}");
    assert_eq!(
        table.lines().count(),
        2,
        "the newline in the name adds no row: {table}"
    );

    let o = hmn(pid).args(["ps", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["name"], HOSTILE, "JSON keeps the name, escaped");
    assert!(
        v[0]["command"].as_str().unwrap().ends_with(HOSTILE),
        "and the command line"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains(r"\u001b[2J"));

    let o = hmn(pid)
        .args(["watch", "--interval", "100ms", "--duration", "300ms"])
        .arg(pid.to_string())
        .output()
        .unwrap();
    no_controls("hmn watch", &o.stdout);
    no_controls("hmn watch (stderr)", &o.stderr);
    assert!(String::from_utf8_lossy(&o.stdout).contains("?[2J"), "{o:?}");

    let o = hmn(pid)
        .args(["run", "--", "printf", "%s", "\u{1b}]0;title\u{7}"])
        .output()
        .unwrap();
    // The command's own output is the command's; hmn's summary quotes it without the escape.
    no_controls("hmn run (summary)", &o.stderr);

    let _ = p.kill();
    let _ = p.wait();
}

/// `hmn serve`: a process named with an OSC title sequence (`\x1b]0;pwned\x07x`) holds GPU
/// memory; no byte of `/metrics` is a control character but the line feeds, and its series
/// names it with `?` for them (they reached `curl /metrics` raw before).
#[cfg(feature = "serve")]
#[test]
fn a_hostile_process_name_never_reaches_metrics_raw() {
    let name = "\u{1b}]0;pwned\u{7}x";
    let mut p = renamed(name);
    let pid = p.id();
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": 150754820096,
            "compute_processes": [{{"pid": {pid}, "used": 1073741824}}]}}]}}"#
    );
    let server =
        crate::util::serve::Server::start(FakeVariant::Modern, &scenario, &["--no-ghosts"]);
    let reply = server.get("/metrics");
    let _ = p.kill();
    let _ = p.wait();
    assert_eq!(reply.status, 200, "{reply:?}");
    no_controls("/metrics", &reply.bytes);
    assert!(
        reply
            .bytes
            .iter()
            .all(|&b| b == b'\n' || (0x20..0x7f).contains(&b) || b >= 0x80),
        "{}",
        reply.body
    );
    assert!(
        reply
            .body
            .contains(&format!("pid=\"{pid}\",process=\"?]0;pwned?x\"")),
        "{}",
        reply.body
    );
}

/// A user name with a RIGHT-TO-LEFT OVERRIDE (U+202E) in a crafted passwd, under `--procfs`:
/// `hmn ps` shows it with `?`, so the rest of the row is shown in its own order (it reached
/// the terminal raw before, turning the row's figures around); `--json` keeps the name exact.
#[test]
fn a_bidi_override_in_a_user_name_is_shown_as_a_question_mark() {
    let root = std::env::temp_dir().join(format!("hmn-bidi-procfs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("4242")).unwrap();
    std::fs::create_dir_all(root.join("1/root/etc")).unwrap();
    std::fs::write(
        root.join("4242/status"),
        "Name:\ttrainer\nPid:\t4242\nUid:\t1234\t1234\t1234\t1234\nGid:\t1234\t1234\t1234\t1234\n",
    )
    .unwrap();
    std::fs::write(root.join("4242/comm"), "trainer\n").unwrap();
    // The owner is the directory's (as procfs has it): uid 1234 needs root to give; as
    // another user the directory is the caller's own, and the passwd names that uid.
    let uid = if std::os::unix::fs::chown(root.join("4242"), Some(1234), Some(1234)).is_ok() {
        1234
    } else {
        std::fs::metadata(root.join("4242"))
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
            .unwrap()
    };
    std::fs::write(
        root.join("1/root/etc/passwd"),
        format!("daemon:x:1:1::/:/bin/sh\nal\u{202e}ecil:x:{uid}:{uid}::/home/a:/bin/sh\n"),
    )
    .unwrap();
    let ps = hmn(4242)
        .args(["--procfs", root.to_str().unwrap(), "ps"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ps.stdout);
    assert!(
        ps.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&ps.stderr)
    );
    assert!(text.contains("al?ecil"), "{text}");
    assert!(!text.contains('\u{202e}'), "{text:?}");
    let json = hmn(4242)
        .args(["--procfs", root.to_str().unwrap(), "ps", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v.to_string().contains("al\u{202e}ecil"), "{v}");
    let _ = std::fs::remove_dir_all(root);
}
