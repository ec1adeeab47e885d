//! `hmn top`'s selection in a real terminal (tmux, the fake NVML): scrolling 2,000 processes to
//! the last, the mouse's wheel and click, the details of a process, and `k` signalling a real
//! `sleep`, refused for another user's process and for a pid that a later process reuses (made
//! to happen in a PID namespace of the test's own, where the next pid can be set).
#![cfg(all(target_os = "linux", feature = "top"))]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::top::{Tmux, quit, shell, sleeper, start, start_top, tmux_here};

const MIB: u64 = 1 << 20;

/// The fake NVML's environment for `scenario`, as `NAME=value` words.
fn fake_env(scenario: &Path) -> Vec<String> {
    let lib = support::fake_nvml(support::FakeVariant::Modern);
    vec![
        format!("HYPOMNESIS_NVML_LIBRARY={}", lib.display()),
        format!("FAKE_NVML_SCENARIO={}", scenario.display()),
        format!("HYPOMNESIS_SYSFS={}", support::empty_dir().display()),
    ]
}

/// An H200 whose compute processes are `rows` (JSON objects, comma-separated).
fn h200_with(rows: &str) -> PathBuf {
    support::write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
            "compute_processes": [{rows}]}}]}}"#,
        143_771 * MIB,
        614 * MIB,
        100_000 * MIB,
    ))
}

/// The first and last row numbers of "rows a–b of n" on the screen.
fn window(s: &str) -> Option<(usize, usize, usize)> {
    let at = s.find("rows ")?;
    let rest = s.get(at + 5..)?;
    let (a, rest) = rest.split_once('–')?;
    let (b, rest) = rest.split_once(" of ")?;
    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((a.parse().ok()?, b.parse().ok()?, n.parse().ok()?))
}

/// A mouse report as an xterm sends it (SGR, 1-based cells): `button` 0 is the left button,
/// 64/65 the wheel up/down.
fn mouse(tmux: &Tmux, button: u8, column: usize, row: usize) {
    let press = format!("\x1b[<{button};{column};{row}M");
    tmux.keys(&["-l", &press]);
    if button < 64 {
        let release = format!("\x1b[<{button};{column};{row}m");
        tmux.keys(&["-l", &release]);
    }
}

/// An H200 with 2,000 compute processes. Pids no process has (above the kernel's limit):
/// listed by the driver, unreadable here, which is what a table of other namespaces' processes
/// looks like. Pid 4,200,000 + i holds i + 1 MiB, so the largest is the last pid and the
/// smallest the first.
fn two_thousand() -> PathBuf {
    let rows: Vec<String> = (0..2000)
        .map(|i| format!(r#"{{"pid": {}, "used": {}}}"#, 4_200_000 + i, (i + 1) * MIB))
        .collect();
    h200_with(&rows.join(","))
}

#[test]
fn two_thousand_processes_scroll_to_the_last_and_a_row_opens_in_detail() {
    if !tmux_here() {
        return;
    }
    let scenario = two_thousand();
    let tmux = start("keys-scroll", &scenario);
    // What a screen is checked for is waited for, all in one screen: tmux may show a frame
    // that is still arriving (its new rows above the last frame's).
    let s = tmux.wait_for("the first rows, the largest first", |s| {
        window(s).is_some_and(|w| (w.0, w.2) == (1, 2000)) && s.contains("4201999")
    });
    let (first, last, _) = window(&s).unwrap();
    // End: the last of 2,000, the smallest.
    tmux.keys(&["End"]);
    let shown = last - first + 1;
    tmux.wait_for("the last rows, a window's worth", |s| {
        window(s) == Some((2001 - shown, 2000, 2000)) && s.contains("4200000")
    });
    // PgUp moves the view up by a page less one row; Home goes back to the top.
    tmux.keys(&["PageUp"]);
    tmux.wait_for("a page up", |s| window(s).is_some_and(|w| w.1 < 2000));
    tmux.keys(&["Home"]);
    tmux.wait_for("the top again", |s| window(s).is_some_and(|w| w.0 == 1));
    // Down twice, then Enter: the third largest in detail.
    tmux.keys(&["Down", "Down", "Enter"]);
    tmux.wait_for("the details", |s| {
        s.contains("process 4201997")
            && s.contains("another PID namespace")
            && s.contains("GPU memory GPU 0 2.0 GiB")
    });
    tmux.wait_for("its history", |s| s.contains("peak 2.0 GiB over"));
    tmux.keys(&["Escape"]);
    tmux.wait_for("the table again", |s| window(s).is_some());
    // The wheel: three rows down from the third; a click on the row of pid 4201990.
    mouse(&tmux, 65, 5, 20);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the sixth row in detail", |s| s.contains("process 4201994"));
    tmux.keys(&["Escape"]);
    let s = tmux.wait_for("the table", |s| window(s).is_some());
    let y = s
        .lines()
        .position(|l| l.starts_with("4201990"))
        .expect("pid 4201990 in view");
    mouse(&tmux, 0, 3, y + 1);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the clicked row in detail", |s| {
        s.contains("process 4201990")
    });
    tmux.keys(&["Escape"]);
    quit(&tmux);
    let _ = std::fs::remove_file(scenario);
}

/// Every press counts: 2,100 Down presses sent at once (three batches of 700, which tmux writes
/// to the terminal as fast as it takes them) take the selection from the first of 2,000 rows to
/// the last, where it stays. Presses lost on the way (a view that read only part of what came,
/// and slept on the rest) left it near the middle for good.
#[test]
fn a_burst_of_presses_loses_none() {
    if !tmux_here() {
        return;
    }
    let scenario = two_thousand();
    let tmux = start("keys-burst", &scenario);
    tmux.wait_for("the first rows, the first selected", |s| {
        window(s).is_some_and(|w| (w.0, w.2) == (1, 2000)) && s.contains("4201999")
    });
    let downs = vec!["Down"; 700];
    for _ in 0..3 {
        tmux.keys(&downs);
    }
    tmux.wait_for("the last row, after 2,100 presses", |s| {
        window(s).is_some_and(|w| (w.1, w.2) == (2000, 2000)) && s.contains("4200000")
    });
    // The selection is on the last row: its details are those of the smallest process.
    tmux.keys(&["Enter"]);
    tmux.wait_for("the last process in detail", |s| {
        s.contains("process 4200000")
    });
    tmux.keys(&["Escape"]);
    quit(&tmux);
    let _ = std::fs::remove_file(scenario);
}

/// Whether `child` ends within 5 s.
fn ends(child: &mut std::process::Child) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn k_asks_then_signals_the_selected_sleep_which_ends() {
    if !tmux_here() {
        return;
    }
    let mut child = sleeper("313");
    let scenario = h200_with(&format!(r#"{{"pid": {}, "used": {}}}"#, child.id(), GIB));
    let tmux = start("keys-signal", &scenario);
    tmux.wait_for("the sleep", |s| s.contains("sleep 313"));
    // The only row is selected; k asks first, and Esc sends nothing.
    tmux.keys(&["k"]);
    let q = format!("Send SIGTERM to pid {}?", child.id());
    tmux.wait_for("the question", |s| s.contains(&q));
    tmux.keys(&["Escape"]);
    tmux.wait_for("no question", |s| !s.contains(&q));
    assert!(
        child.try_wait().unwrap().is_none(),
        "cancelled: still running"
    );
    // k, KILL chosen, then back to TERM, and Enter sends it.
    tmux.keys(&["k", "9"]);
    tmux.wait_for("KILL chosen", |s| s.contains("Send SIGKILL to pid"));
    tmux.keys(&["t", "Enter"]);
    let said = format!("sent SIGTERM to pid {}", child.id());
    tmux.wait_for("what was done", |s| s.contains(&said));
    assert!(ends(&mut child), "the sleep ended");
    quit(&tmux);
    let _ = std::fs::remove_file(scenario);
}

const GIB: u64 = 1 << 30;

#[test]
fn another_users_process_is_refused_and_said_so() {
    if !tmux_here() {
        return;
    }
    if !running_as_root() || Command::new("setpriv").arg("--help").output().is_err() {
        require("root and setpriv, to run hmn as another user than the sleep's");
        return;
    }
    let mut child = sleeper("314");
    let scenario = h200_with(&format!(r#"{{"pid": {}, "used": {}}}"#, child.id(), GIB));
    readable_by_all(&scenario);
    let mut env = fake_env(&scenario);
    env.insert(
        0,
        "setpriv --reuid=65534 --regid=65534 --clear-groups env".into(),
    );
    let tmux = start_top("keys-eperm", 120, &env);
    tmux.wait_for("the sleep", |s| s.contains("sleep 314"));
    tmux.keys(&["k"]);
    tmux.wait_for("the question", |s| s.contains("Send SIGTERM"));
    tmux.keys(&["Enter"]);
    let refusal = format!("not permitted to send SIGTERM to pid {}", child.id());
    tmux.wait_for("the refusal", |s| s.contains(&refusal));
    assert!(child.try_wait().unwrap().is_none(), "still running");
    quit(&tmux);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(scenario);
}

#[test]
#[allow(clippy::too_many_lines)] // one scenario, its steps in order
fn a_reused_pid_is_signalled_only_when_asked_about_its_new_process() {
    if !tmux_here() {
        return;
    }
    if !running_as_root() {
        require("root, to set the PID namespace's next pid (ns_last_pid)");
        return;
    }
    let dir = tempfile_dir();
    let (pid_file, trigger, second, ended) = (
        dir.join("pid"),
        dir.join("go"),
        dir.join("second"),
        dir.join("ended"),
    );
    let scenario = h200_with(&format!(
        r#"{{"pid_file": "{}", "used": {}}}"#,
        pid_file.display(),
        GIB
    ));
    // A sleep whose pid the fake lists (the driver numbers processes as the initial PID
    // namespace does, as this test runs); on the trigger, it is killed and reaped, the
    // namespace's last pid is set back, and a second sleep gets the same pid (again until it
    // does: another process may take the number first). `ended` appears if the second sleep
    // is ever killed.
    let controller = format!(
        "( sleep 600 & a=$!; echo $a > {pid}; while [ ! -e {go} ]; do sleep 0.05; done; \
         kill $a; wait $a; for i in $(seq 1 100); do echo $((a - 1)) > /proc/sys/kernel/ns_last_pid; \
         sleep 600 & b=$!; [ $b = $a ] && break; kill $b; wait $b; done; \
         echo $b > {second}; wait $b; touch {ended} ) &",
        pid = pid_file.display(),
        go = trigger.display(),
        second = second.display(),
        ended = ended.display(),
    );
    let line = format!(
        "echo BEFORE-TOP; bash -c '{controller} exec env {} {} top --interval 200ms'; \
         echo TOP-EXIT=$?",
        fake_env(&scenario).join(" "),
        env!("CARGO_BIN_EXE_hmn"),
    );
    let tmux = shell("keys-reuse", 120);
    tmux.keys(&[&line, "Enter"]);
    // The view with the sleep's row (the command typed holds both words, so the view's own
    // title line is looked for), or the shell's line after a top that could not start.
    let exited = |s: &str| s.lines().any(|l| l.starts_with("TOP-EXIT="));
    let s = tmux.wait_for("the first sleep", |s| {
        (s.contains("GPU 0  NVIDIA H200") && s.contains("sleep 600")) || exited(s)
    });
    if exited(&s) {
        require(&format!("hmn top with the first sleep: {s}"));
        return;
    }
    // The question is asked about the first sleep; the pid is reused before the answer.
    tmux.keys(&["k"]);
    tmux.wait_for("the question", |s| s.contains("Send SIGTERM"));
    let first = std::fs::read_to_string(&pid_file).unwrap();
    std::fs::write(&trigger, "").unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while !second.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let reused = std::fs::read_to_string(&second).unwrap_or_default();
    assert_eq!(
        reused.trim(),
        first.trim(),
        "the second sleep has the first's pid"
    );
    // A refresh or two with the second sleep in place, then the answer: refused.
    std::thread::sleep(Duration::from_millis(600));
    tmux.keys(&["Enter"]);
    tmux.wait_for("the refusal", |s| {
        s.contains("nothing sent") && s.contains("no longer the process selected")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(!ended.exists(), "the second sleep was not signalled");
    // The row is the second sleep's now: asked about it, the signal reaches it.
    tmux.keys(&["k"]);
    tmux.wait_for("the question about the second sleep", |s| {
        s.contains("Send SIGTERM")
    });
    tmux.keys(&["Enter"]);
    let until = Instant::now() + Duration::from_secs(10);
    while !ended.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        ended.exists(),
        "the second sleep, the row's process now, was signalled"
    );
    quit(&tmux);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_file(scenario);
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Skips with a message, or fails where external requirements are required.
fn require(what: &str) {
    assert!(
        std::env::var_os("HYPOMNESIS_REQUIRE_EXTERNAL").is_none_or(|v| v != "1"),
        "this test needs {what} (HYPOMNESIS_REQUIRE_EXTERNAL=1)"
    );
    eprintln!("skipped: this test needs {what}");
}

/// A fresh directory under the system's temporary one.
fn tempfile_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("hmn-top-keys-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Makes `path` readable by every user (a scenario another user's hmn reads).
fn readable_by_all(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
}
