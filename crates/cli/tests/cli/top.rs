//! `hmn top` in a real terminal: tmux runs it against the fake NVML, keys are sent to sort,
//! filter and quit, and the screen tmux holds is read back, for the fake GPU's figures and,
//! after `q`, for a terminal given back as it was (main screen, cursor shown, cooked mode).
//! Skips without tmux, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1` (as `.ci/run` sets).
#![cfg(all(unix, feature = "top"))]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;

/// A tmux server of this test's own (its own socket), killed at the end.
pub(super) struct Tmux {
    socket: String,
}

impl Tmux {
    /// A server of its own (named after `what`, this test process and a count, so that two
    /// tests never share one) with one session, `top`, of `width` x 30 cells running `command`.
    pub(super) fn start(what: &str, width: u16, command: &[&str]) -> Self {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmux = Self {
            socket: format!("hmn-top-{what}-{}-{n}", std::process::id()),
        };
        let width = width.to_string();
        let mut args = vec![
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "top",
            "-x",
            &width,
            "-y",
            "30",
        ];
        args.extend_from_slice(command);
        tmux.cmd(&args);
        tmux
    }

    pub(super) fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(super) fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "top"])
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }

    /// Waits (up to 20 s) for the screen to satisfy `ok`; returns it.
    pub(super) fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "waited 20 s for {what}; the screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// Whether tmux is installed; without it the tests skip, unless
/// `HYPOMNESIS_REQUIRE_EXTERNAL=1`, which makes them fail.
pub(super) fn tmux_here() -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("HYPOMNESIS_REQUIRE_EXTERNAL").is_none_or(|v| v != "1"),
        "tmux is required (HYPOMNESIS_REQUIRE_EXTERNAL=1) but not installed"
    );
    eprintln!("skipped: tmux is not installed");
    false
}

pub(super) fn sleeper(arg: &str) -> Child {
    Command::new("sleep")
        .arg(arg)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn top_in_a_real_terminal_sorts_filters_quits_and_restores_it() {
    if !tmux_here() {
        return;
    }
    let mut a = sleeper("311");
    let mut b = sleeper("312");
    let scenario = support::write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {total}, "reserved": {reserved},
            "free": {free}, "utilization": {{"gpu": 55, "memory": 20}}, "compute_processes": [{{"pid": {a}, "used": {a_used}}},
            {{"pid": {b}, "used": {b_used}}}]}}]}}"#,
        total = 143_771 * MIB,
        reserved = 614 * MIB,
        free = (143_771 - 614 - 3000 - 5000) * MIB,
        a = a.id(),
        a_used = 3000 * MIB,
        b = b.id(),
        b_used = 5000 * MIB,
    ));
    let tmux = start("test", &scenario);
    // The fake GPU's figures: 8,000 MiB held by the two processes, with the reservation.
    // What a screen is checked for is waited for, all in one screen: tmux may show a frame
    // that is still arriving (its new rows above the last frame's).
    tmux.wait_for("the fake GPU's figures", |s| {
        s.contains("GPU 0  NVIDIA H200")
            && s.contains("used 8.4 GiB of 140.4 GiB, busy 55% (mem 20%), 2 processes")
            && s.contains("reserved 614 MiB")
            && s.contains("held by processes 7.8 GiB")
    });
    // Largest first: 5,000 MiB (sleep 312) above 3,000 MiB (sleep 311).
    tmux.wait_for("both processes with their commands, largest first", |s| {
        s.find("sleep 312")
            .zip(s.find("sleep 311"))
            .is_some_and(|(big, small)| big < small)
    });
    // Sort by PID (the first column, ascending): `<` three times from GPU MEM.
    tmux.keys(&["<", "<", "<"]);
    let (first, second) = if a.id() < b.id() {
        ("sleep 311", "sleep 312")
    } else {
        ("sleep 312", "sleep 311")
    };
    tmux.wait_for("sorted by pid", |s| {
        s.contains("PID▲")
            && s.find(first)
                .zip(s.find(second))
                .is_some_and(|(one, two)| one < two)
    });
    // A narrower window redraws without the columns that no longer fit, and lines do not wrap.
    tmux.cmd(&["resize-window", "-t", "top", "-x", "50", "-y", "30"]);
    tmux.wait_for("the narrow layout, no line wider than 50", |s| {
        !s.contains("USER") && s.contains("COMMAND") && s.lines().all(|l| l.chars().count() <= 50)
    });
    tmux.cmd(&["resize-window", "-t", "top", "-x", "120", "-y", "30"]);
    tmux.wait_for("the wide layout again", |s| s.contains("USER"));
    // Filter: only `311`.
    tmux.keys(&["/", "311", "Enter"]);
    tmux.wait_for("the filter", |s| {
        s.contains("filter: 311") && !s.contains("sleep 312") && s.contains("sleep 311")
    });
    tmux.keys(&["q"]);
    // The shell's line `TOP-EXIT=<status>`, not the command's own `echo TOP-EXIT=$?` (on the
    // screen as soon as the main screen is back, a moment before the status is printed).
    let s = tmux.wait_for("hmn top to quit", |s| {
        s.lines().any(|l| l.starts_with("TOP-EXIT="))
    });
    assert!(s.lines().any(|l| l == "TOP-EXIT=0"), "{s}");
    assert!(s.contains("BEFORE-TOP"), "the main screen is back: {s}");
    assert!(!s.contains("GPU 0  NVIDIA H200"), "the view is gone: {s}");
    assert_restored(&tmux);
    for c in [&mut a, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let _ = std::fs::remove_file(scenario);
}

/// A scenario file: one H200 no process holds memory on, and `extra` (more top-level fields,
/// each after a comma).
fn idle_h200(extra: &str) -> std::path::PathBuf {
    support::write_scenario(&format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {}}}]{extra}}}"#,
        143_771 * MIB,
        614 * MIB,
        100_000 * MIB,
    ))
}

/// A tmux session running `hmn top` against the fake NVML with `scenario`, after a marker line
/// on the main screen.
pub(super) fn start(what: &str, scenario: &std::path::Path) -> Tmux {
    let lib = support::fake_nvml(support::FakeVariant::Modern);
    start_top(
        what,
        120,
        &[
            format!("HYPOMNESIS_NVML_LIBRARY={}", lib.display()),
            format!("FAKE_NVML_SCENARIO={}", scenario.display()),
            format!("HYPOMNESIS_SYSFS={}", support::empty_dir().display()),
        ],
    )
}

/// A tmux session of `width` columns running `hmn top --interval 200ms` with `env` (`NAME=value`
/// each), after a marker line on the main screen; the shell prints `TOP-EXIT=<status>` after.
pub(super) fn start_top(what: &str, width: u16, env: &[String]) -> Tmux {
    let tmux = shell(what, width);
    let line = format!(
        "echo BEFORE-TOP; {} {} top --interval 200ms; echo TOP-EXIT=$?",
        env.join(" "),
        env!("CARGO_BIN_EXE_hmn"),
    );
    tmux.keys(&[&line, "Enter"]);
    tmux
}

/// A tmux session of `width` columns running a bare bash (no rc files, a clean environment).
pub(super) fn shell(what: &str, width: u16) -> Tmux {
    Tmux::start(
        what,
        width,
        &[
            "env",
            "-i",
            "PS1=$ ",
            "TERM=xterm-256color",
            "PATH=/usr/bin:/bin",
            "bash",
            "--norc",
            "--noprofile",
        ],
    )
}

/// `q`, then the exit status 0 and the terminal as it was.
pub(super) fn quit(tmux: &Tmux) {
    tmux.keys(&["q"]);
    let s = tmux.wait_for("hmn top to quit", |s| {
        s.lines().any(|l| l.starts_with("TOP-EXIT="))
    });
    assert!(s.lines().any(|l| l == "TOP-EXIT=0"), "{s}");
    assert_restored(tmux);
}

/// The terminal is as it was: main screen, cursor shown, cooked mode with echo.
fn assert_restored(tmux: &Tmux) {
    let flags = tmux.cmd(&[
        "display",
        "-p",
        "-t",
        "top",
        "#{alternate_on} #{cursor_flag}",
    ]);
    assert_eq!(flags.trim(), "0 1", "main screen, cursor shown");
    tmux.keys(&[
        "stty -a | tr ' ' '\\n' | grep -x -e -icanon -e icanon -e -echo -e echo",
        "Enter",
    ]);
    let s = tmux.wait_for("stty", |s| {
        s.lines().any(|l| l == "icanon" || l == "-icanon")
            && s.lines().any(|l| l == "echo" || l == "-echo")
    });
    assert!(
        s.lines().any(|l| l == "icanon") && s.lines().any(|l| l == "echo"),
        "cooked mode with echo: {s}"
    );
}

/// A terminal that hangs up (its window closed, its tmux server killed) ends `hmn top`: the
/// process is gone within seconds instead of spinning on a dead terminal, with 129 as on
/// SIGHUP, whether the SIGHUP comes (`hmn top` in the terminal's session) or not (in a session
/// of its own, `setsid`: only the terminal's hang-up tells). A release build in a session of
/// its own aborted with 134 (giving the terminal back failed, and the message of that failure,
/// written to the dead terminal, panicked); this test build did not show it. A shell that
/// ignores SIGHUP runs it and writes its status to a file.
#[test]
fn a_terminal_that_hangs_up_ends_top() {
    if !tmux_here() {
        return;
    }
    let scenario = idle_h200("");
    let lib = support::fake_nvml(support::FakeVariant::Modern);
    for (what, session) in [
        ("hangup", &[][..]),
        ("hangup-setsid", &["setsid", "-w"][..]),
    ] {
        let status = support::empty_dir().join("status");
        let line = format!(
            "trap '' HUP; env HYPOMNESIS_NVML_LIBRARY={} FAKE_NVML_SCENARIO={} \
             HYPOMNESIS_SYSFS={} TERM=xterm-256color {} top --interval 200ms; echo $? > {}",
            lib.display(),
            scenario.display(),
            support::empty_dir().display(),
            env!("CARGO_BIN_EXE_hmn"),
            status.display(),
        );
        let command = [session, &["sh", "-c", &line]].concat();
        let tmux = Tmux::start(what, 100, &command);
        tmux.wait_for("the view", |s| s.contains("GPU 0  NVIDIA H200"));
        let pid = hmn_below(&tmux);
        let _ = Command::new("tmux")
            .args(["-L", &tmux.socket, "kill-server"])
            .output();
        let start = Instant::now();
        // Gone, or a zombie its new parent has not reaped yet.
        while support::running(pid) {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{what}: hmn top ({pid}) still runs 5 s after its terminal hung up"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        while !status.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let said = std::fs::read_to_string(&status).unwrap_or_default();
        assert_eq!(
            said.trim(),
            "129",
            "{what}: hmn top's status after a hang-up"
        );
    }
    let _ = std::fs::remove_file(scenario);
}

/// The pid of the `hmn` below the session's first process (its child, or further down).
fn hmn_below(tmux: &Tmux) -> u32 {
    let mut pid: u32 = tmux
        .cmd(&["display", "-p", "-t", "top", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    for _ in 0..4 {
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "hmn") {
            return pid;
        }
        pid = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap()
            .split_whitespace()
            .find_map(|p| p.parse().ok())
            .unwrap();
    }
    panic!("no hmn below the session's first process");
}

/// While NVML answers, `hmn top` runs no `nvidia-smi`: a counting one first on `PATH` is not
/// run over a few seconds of refreshes.
#[cfg(target_os = "linux")]
#[test]
fn top_runs_no_nvidia_smi_while_nvml_answers() {
    use crate::util::smi::{CountingSmi, Smi};
    if !tmux_here() {
        return;
    }
    let smi = CountingSmi::new("top", Smi::Answers);
    let scenario = idle_h200("");
    let lib = support::fake_nvml(support::FakeVariant::Modern);
    let tmux = start_top(
        "smi",
        120,
        &[
            format!("HYPOMNESIS_NVML_LIBRARY={}", lib.display()),
            format!("FAKE_NVML_SCENARIO={}", scenario.display()),
            format!("HYPOMNESIS_SYSFS={}", support::empty_dir().display()),
            format!("PATH={}:/usr/bin:/bin", smi.dir.display()),
        ],
    );
    tmux.wait_for("the view", |s| s.contains("GPU 0  NVIDIA H200"));
    // Ten refreshes or so at 200 ms.
    std::thread::sleep(Duration::from_secs(2));
    quit(&tmux);
    assert_eq!(smi.runs(), Vec::<String>::new());
    smi.assert_counts_a_doctor(&lib, &scenario);
    let _ = std::fs::remove_file(scenario);
}

/// Not a terminal (a pipe, a file): a usage error that points to the commands for that.
#[test]
fn without_a_terminal_top_says_what_to_use_instead() {
    let out = crate::util::hmn::hmn()
        .arg("top")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a terminal") && err.contains("hmn watch"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no escape sequences into a pipe");
}

/// A terminal that cannot move the cursor (`TERM=dumb`): a usage error that points to the
/// commands for it, before anything is drawn.
#[test]
fn a_dumb_terminal_is_refused_with_what_to_use_instead() {
    if !tmux_here() {
        return;
    }
    let tmux = Tmux::start(
        "dumb",
        250,
        &[
            "env",
            "-i",
            "PS1=$ ",
            "TERM=dumb",
            "PATH=/usr/bin:/bin",
            "bash",
            "--norc",
            "--noprofile",
        ],
    );
    let line = format!(
        "HYPOMNESIS_SYSFS={} {} top; echo TOP-EXIT=$?",
        support::empty_dir().display(),
        env!("CARGO_BIN_EXE_hmn"),
    );
    tmux.keys(&[&line, "Enter"]);
    let s = tmux.wait_for("the exit status", |s| {
        s.lines().any(|l| l.starts_with("TOP-EXIT="))
    });
    assert!(s.lines().any(|l| l == "TOP-EXIT=2"), "{s}");
    assert!(s.contains("TERM=dumb") && s.contains("hmn watch"), "{s}");
}

/// The pid of the `hmn top` that the session's shell runs (its child).
fn top_pid(tmux: &Tmux) -> i32 {
    let shell: u32 = tmux
        .cmd(&["display", "-p", "-t", "top", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .unwrap()
        .split_whitespace()
        .find_map(|p| p.parse::<i32>().ok())
        .unwrap()
}

/// Sends `signal` to the `hmn top` that the session's shell runs.
fn signal_top(tmux: &Tmux, signal: i32) {
    let top = top_pid(tmux);
    // SAFETY: kill(2) with a pid and a signal number; no memory is involved.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(top, signal) };
    assert_eq!(sent, 0);
}

/// A stop signal ends `hmn top` with 128 + its number, as every hmn command (it exited 0).
#[test]
fn a_stop_signal_ends_top_with_128_plus_its_number() {
    if !tmux_here() {
        return;
    }
    let scenario = idle_h200("");
    for (signal, n) in [(libc::SIGTERM, 15), (libc::SIGHUP, 1), (libc::SIGINT, 2)] {
        let tmux = start(&format!("signal{n}"), &scenario);
        tmux.wait_for("the view", |s| s.contains("GPU 0  NVIDIA H200"));
        signal_top(&tmux, signal);
        let s = tmux.wait_for("the exit status", |s| {
            s.lines().any(|l| l.starts_with("TOP-EXIT="))
        });
        assert!(
            s.lines().any(|l| l == format!("TOP-EXIT={}", 128 + n)),
            "signal {n}: {s}"
        );
        assert_restored(&tmux);
    }
    let _ = std::fs::remove_file(scenario);
}

/// A refresh that does not return (a process's `cmdline` that blocks its reader, as a D-state
/// process's does) is not shown as live: the header says how old the figures are and names the
/// file, and `q` still quits at once.
#[cfg(target_os = "linux")]
#[test]
fn a_late_refresh_names_the_file_it_waits_for_and_q_still_quits() {
    if !tmux_here() {
        return;
    }
    let root = super::impossible_figures::hostile_tree("top-late");
    let tmux = top_on_a_tree("late-file", &root);
    // The title and the rows of one paint (this build has the library's debug output, whose
    // lines on the first measurement may land over a view painted before it: the refresh's
    // own paint writes the view whole again).
    let title = |s: &str| s.lines().any(|l| l.starts_with("hmn top"));
    let s = tmux.wait_for("the card's clients", |s| s.contains("halfbad") && title(s));
    let head = s.lines().find(|l| l.starts_with("hmn top")).unwrap();
    assert!(
        !head.contains(" old:"),
        "live figures carry no mark: {head}"
    );
    block_a_refresh(&tmux, &root);
    // The age grows while the read stays blocked.
    tmux.wait_for("an older age", |s| {
        s.lines()
            .find(|l| l.starts_with("hmn top"))
            .and_then(|l| {
                l.split("figures ")
                    .nth(1)?
                    .split("s old")
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|age| age >= 4)
    });
    quit(&tmux);
    let _ = std::fs::remove_dir_all(root);
}

/// `hmn top` in a session of its own on `root` (a [`hostile_tree`]).
///
/// [`hostile_tree`]: super::impossible_figures::hostile_tree
#[cfg(target_os = "linux")]
fn top_on_a_tree(what: &str, root: &std::path::Path) -> Tmux {
    start_top(
        what,
        220,
        &[
            "HYPOMNESIS_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1".to_string(),
            format!("HYPOMNESIS_PROCFS={}", root.join("proc").display()),
            format!("HYPOMNESIS_SYSFS={}", root.join("sys").display()),
        ],
    )
}

/// Makes the `cmdline` of pid 601 in `root` a FIFO that nobody writes, so that the next
/// refresh blocks in its read, and waits until the view says so.
#[cfg(target_os = "linux")]
fn block_a_refresh(tmux: &Tmux, root: &std::path::Path) {
    let fifo = root.join("proc/601/cmdline");
    support::mkfifo(&fifo);
    let want = format!("old: waiting for {}", fifo.display());
    tmux.wait_for("the late mark with the figures' age", |s| {
        s.lines()
            .any(|l| l.starts_with("hmn top") && l.contains(&want) && l.contains("figures "))
    });
}

/// The terminal goes away (its tmux server killed) while a refresh is blocked: `hmn top` ends
/// within seconds. It spun a core for as long as it was let, deaf to SIGTERM: crossterm's
/// reader, asked for a key on a terminal at its end, read nothing again and again.
#[cfg(target_os = "linux")]
#[test]
fn a_terminal_that_goes_away_ends_top_even_with_a_refresh_blocked() {
    if !tmux_here() {
        return;
    }
    let root = super::impossible_figures::hostile_tree("top-hangup");
    let tmux = top_on_a_tree("hangup-blocked", &root);
    tmux.wait_for("the card's clients", |s| {
        s.contains("halfbad") && s.lines().any(|l| l.starts_with("hmn top"))
    });
    block_a_refresh(&tmux, &root);
    let top = top_pid(&tmux);
    drop(tmux);
    let gone = |pid: i32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|s| s.starts_with(['Z', 'X']))
        })
    };
    let until = Instant::now() + Duration::from_secs(10);
    while !gone(top) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let stat = std::fs::read_to_string(format!("/proc/{top}/stat")).unwrap_or_default();
    if !gone(top) {
        // SAFETY: kill(2) with a pid and a signal number; no memory is involved.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(top, libc::SIGKILL);
        }
    }
    assert!(
        gone(top),
        "hmn top {top} still runs 10 s after its terminal went: {stat}"
    );
    let _ = std::fs::remove_dir_all(root);
}

/// A driver call that stops returning after a few refreshes: the view says how old its figures
/// are and names the NVML function, and `q` quits while the call is still blocked.
#[test]
fn a_late_refresh_names_the_driver_call_it_waits_for() {
    if !tmux_here() {
        return;
    }
    let scenario = idle_h200(
        r#", "slow": [{"function": "nvmlDeviceGetMemoryInfo", "ms": 600000, "after": 3}]"#,
    );
    let tmux = start("late-driver", &scenario);
    tmux.wait_for("the view", |s| s.contains("GPU 0  NVIDIA H200"));
    tmux.wait_for("the late mark, and the last figures staying", |s| {
        s.contains("old: waiting for the NVIDIA driver (nvmlDeviceGetMemoryInfo)")
            && s.contains("GPU 0  NVIDIA H200")
    });
    quit(&tmux);
    let _ = std::fs::remove_file(scenario);
}

/// Ctrl-Z (a key in raw mode) and SIGTSTP suspend `hmn top` as full-screen tools are
/// suspended: while it is stopped the terminal is the shell's again (main screen, cursor
/// shown, cooked mode with echo), and `fg` brings the whole view back in raw mode (a key acts
/// without Enter and is not echoed) with none of the shell's lines in it.
#[test]
fn suspend_and_resume_give_the_terminal_back_and_take_it_again() {
    if !tmux_here() {
        return;
    }
    let scenario = idle_h200("");
    let tmux = start("suspend", &scenario);
    tmux.wait_for("the view", |s| s.contains("GPU 0  NVIDIA H200"));
    let stopped = |s: &str| s.lines().filter(|l| l.contains("Stopped")).count();
    for (round, how) in ["Ctrl-Z", "SIGTSTP"].into_iter().enumerate() {
        if how == "Ctrl-Z" {
            tmux.keys(&["C-z"]);
        } else {
            signal_top(&tmux, libc::SIGTSTP);
        }
        let s = tmux.wait_for("the shell's Stopped line", |s| stopped(s) > round);
        assert!(s.contains("BEFORE-TOP"), "{how}: the main screen: {s}");
        assert_restored(&tmux);
        tmux.keys(&["fg", "Enter"]);
        tmux.wait_for(
            "the view again, redrawn whole: no shell line left in it",
            |s| {
                s.contains("GPU 0  NVIDIA H200")
                    && s.starts_with("hmn top")
                    && !s.contains("icanon")
                    && !s.contains("Stopped")
            },
        );
        let flags = tmux.cmd(&["display", "-p", "-t", "top", "#{alternate_on}"]);
        assert_eq!(flags.trim(), "1", "{how}: the alternate screen again");
        // Raw mode: `p` pauses at once, without Enter, and is not echoed.
        tmux.keys(&["p"]);
        tmux.wait_for("the pause, the key not echoed", |s| {
            s.contains("PAUSED") && !s.lines().any(|l| l == "p")
        });
        tmux.keys(&["p"]);
        tmux.wait_for("the pause's end", |s| !s.contains("PAUSED"));
    }
    // The shell went on with its line at the first stop (TOP-EXIT=148, 128 + SIGTSTP); the
    // status of `fg` is hmn top's own.
    tmux.keys(&["q"]);
    tmux.wait_for("the shell's prompt", |s| {
        s.lines().rfind(|l| !l.is_empty()) == Some("$")
    });
    tmux.keys(&["echo FG-EXIT=$?", "Enter"]);
    let s = tmux.wait_for("the exit status", |s| {
        s.lines().any(|l| l.starts_with("FG-EXIT="))
    });
    assert!(s.lines().any(|l| l == "FG-EXIT=0"), "{s}");
    assert_restored(&tmux);
    let _ = std::fs::remove_file(scenario);
}
