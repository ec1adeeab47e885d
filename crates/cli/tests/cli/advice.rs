//! Advice that can hurt (issue 56), each case with real processes and kernel objects: the
//! number the driver charges being a thread's; the holders of a GPU's device file, told by
//! their device numbers on a node stood in by a private mount namespace (`util::gpunode`),
//! among them a context-less `nvidia-persistenced` and a plain file named `/dev/nvidia7`; a
//! pid reused by a process that holds no descriptor of the GPU; a busy `nohup` job after its
//! session ended; a zombie leader whose thread runs; a process in and out of `D` (a job
//! writing to slow storage, stood in by a `vfork` parent whose child sleeps a second each
//! time); the exporter's scan in the background. No kill and no GPU reset is advised without
//! the evidence for it.
#![cfg(all(feature = "serve", target_os = "linux"))]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::gpunode;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TOTAL: u64 = 143_771 * MIB;
const RESERVED: u64 = 616 * MIB;

/// An H200 (GPU 0 of the node stand-in) whose processes are `rows` (pid, bytes), all of its
/// allocation theirs, with the driver's activity `samples` (the scenario's JSON) if any.
fn scenario(rows: &[(u32, u64)], samples: Option<&str>) -> String {
    let used: u64 = rows.iter().map(|r| r.1).sum();
    let procs: Vec<String> = rows
        .iter()
        .map(|(p, b)| format!(r#"{{"pid": {p}, "used": {b}}}"#))
        .collect();
    let samples = samples.map_or_else(String::new, |s| format!(r#""process_samples": {s},"#));
    format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "{uuid}", "total": {TOTAL},
            "reserved": {RESERVED}, "free": {free}, {samples} "compute_processes": [{procs}]}}]}}"#,
        uuid = gpunode::UUID,
        free = TOTAL - RESERVED - used,
        procs = procs.join(", ")
    )
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// A child and the first line it prints.
fn started(mut c: Command) -> (Child, String) {
    let mut child = c
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().to_owned())
}

fn python(script: &str) -> Command {
    let mut c = Command::new("python3");
    c.args(["-c", script]);
    c
}

/// The number the driver charges is a thread of another process: `ps` does not blame that
/// process (its row is the exited one's, no command), `ghosts` calls the memory exited and
/// says whose thread the number is, and the process lives on.
#[test]
fn a_charged_number_that_is_a_thread_blames_no_process() {
    let (mut child, tid) = started(python(
        "import threading, time\n\
         t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n\
         t.start()\n\
         print(t.native_id, flush=True)\n\
         time.sleep(60)\n",
    ));
    let tid: u32 = tid.parse().unwrap();
    let sc = scenario(&[(tid, 3 * GIB)], None);
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ps", "--json"])
        .output()
        .unwrap();
    let rows = json(&o.stdout);
    assert_eq!(rows[0]["pid"], tid, "{rows}");
    assert_eq!(rows[0]["unreadable"], "exited", "{rows}");
    assert!(rows[0]["command"].is_null(), "not blamed: {rows}");
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ghosts", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let j = json(&o.stdout);
    let g = &j["ghosts"][0];
    assert_eq!(
        (&g["class"], &g["pid"]),
        (&"exited".into(), &tid.into()),
        "{j}"
    );
    let first = g["evidence"][0].as_str().unwrap();
    assert!(
        first.contains(&format!("now a thread of process {}", child.id())),
        "{first}"
    );
    assert_ne!(g["remedy"]["action"], "kill", "{g}");
    assert!(child.try_wait().unwrap().is_none(), "its process lives on");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Memory charged to an exited session leader: its child in the session, holding the GPU, is
/// the one to kill; `nvidia-persistenced` (which keeps the device files open with no context)
/// is never a suspect; a process nothing ties to the memory is named, not given; a process
/// in a mount namespace of its own holding a plain file named `/dev/nvidia7` is nothing.
#[test]
fn the_device_files_holders_are_judged_by_their_device_numbers() {
    if !gpunode::can_stand_in() {
        return;
    }
    // The exited pid comes from the node script itself; the scenario names it through a
    // placeholder the script fills in before hmn reads it.
    let lines = r#"
cp /bin/sleep "$node/nvidia-persistenced"
"$node/nvidia-persistenced" 60 < /dev/nvidia7 & persistenced=$!
sleep 60 < /dev/nvidia7 & unrelated=$!
setsid sh -c 'echo $$ > '"$node"'/leader; sleep 60 < /dev/nvidia7 > /dev/null 2>&1 & echo $! > '"$node"'/child' &
wait $!
while [ ! -s "$node/child" ]; do sleep 0.01; done
leader=$(cat "$node/leader"); child=$(cat "$node/child")
while [ -d /proc/$leader ]; do sleep 0.01; done
unshare --mount sh -c 'mount -t tmpfs x /dev && touch /dev/nvidia7 && exec sleep 60 < /dev/nvidia7' & named=$!
sleep 0.3
sed "s/LEADER/$leader/" "$FAKE_NVML_SCENARIO" > "$node/scenario.json"
echo "$leader $child $persistenced $unrelated $named"
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" ghosts --json || true
kill $persistenced $unrelated $child $named
"#;
    let sc = scenario(&[(0, 4 * GIB)], None).replace(r#""pid": 0"#, r#""pid": LEADER"#);
    let Some(o) = gpunode::script(&sc, lines) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let (first, rest) = out
        .split_once('\n')
        .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&o.stderr)));
    let pids: Vec<u64> = first.split(' ').map(|p| p.parse().unwrap()).collect();
    let [leader, child, persistenced, unrelated, named] = pids[..] else {
        panic!("{first}")
    };
    let j: serde_json::Value = serde_json::from_str(rest)
        .unwrap_or_else(|e| panic!("{e}: {out}{}", String::from_utf8_lossy(&o.stderr)));
    let g = &j["ghosts"][0];
    assert_eq!(
        (&g["class"], &g["pid"]),
        (&"exited".into(), &leader.into()),
        "{j:#}"
    );
    assert_eq!(g["remedy"]["action"], "kill", "{j:#}");
    assert_eq!(g["remedy"]["pids"], serde_json::json!([child]), "{j:#}");
    let mut holders: Vec<u64> = g["holders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    holders.sort_unstable();
    let mut want = vec![child, unrelated];
    want.sort_unstable();
    assert_eq!(
        holders, want,
        "persistenced and the plain file are no suspects: {j:#}"
    );
    let evidence = g["evidence"].to_string();
    assert!(
        evidence.contains(&format!(
            "{persistenced} (nvidia-persistenced) holds /dev/nvidia7"
        )) && evidence.contains("not a suspect"),
        "{evidence}"
    );
    assert!(
        evidence.contains(&format!(
            "{unrelated} (sleep) holds /dev/nvidia7; whether it holds this memory is not known"
        )),
        "{evidence}"
    );
    assert!(
        !evidence.contains(&format!("{named} ")),
        "a plain file named /dev/nvidia7 is not the GPU: {evidence}"
    );
    assert!(j["holder_scan"]["complete"].as_bool().unwrap(), "{j:#}");
}

/// The driver charges a pid that a process holding no descriptor of the GPU now has (a
/// daemon, after the trainer's number was reused): it is not blamed, the memory is
/// unaccounted, the process that holds the GPU is named, and nothing is given.
#[test]
fn a_reused_pid_is_not_blamed() {
    if !gpunode::can_stand_in() {
        return;
    }
    let lines = r#"
sleep 60 & daemon=$!
sleep 60 < /dev/nvidia7 & holder=$!
sed "s/DAEMON/$daemon/" "$FAKE_NVML_SCENARIO" > "$node/scenario.json"
echo "$daemon $holder"
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" ghosts --json || true
echo
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" ps --why --json 2>/dev/null
kill $daemon $holder
"#;
    let sc = scenario(&[(0, 4 * GIB)], None).replace(r#""pid": 0"#, r#""pid": DAEMON"#);
    let Some(o) = gpunode::script(&sc, lines) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let mut parts = out.splitn(2, '\n');
    let first = parts.next().unwrap();
    let rest = parts.next().unwrap_or_default();
    let pids: Vec<u64> = first.split(' ').map(|p| p.parse().unwrap()).collect();
    let (ghosts, ps) = rest
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&o.stderr)));
    let j: serde_json::Value = serde_json::from_str(ghosts).unwrap();
    let g = &j["ghosts"][0];
    assert_eq!(
        (&g["class"], &g["pid"]),
        (&"unaccounted".into(), &pids[0].into()),
        "{j:#}"
    );
    assert!(
        g["evidence"][0]
            .as_str()
            .unwrap()
            .contains("holds no descriptor of /dev/nvidia7: not the process the driver charges"),
        "{g}"
    );
    assert_eq!(g["holders"], serde_json::json!([pids[1]]), "{g}");
    assert_eq!(g["remedy"]["action"], "unknown", "{g}");
    let rows: serde_json::Value = serde_json::from_str(ps).unwrap();
    assert_eq!(rows[0]["ghost"]["class"], "unaccounted", "{rows:#}");
}

/// The session leader of a `setsid` shell ends; its background job lives on at work.
/// `(pid, the leader that ended)`.
fn nohup_job() -> u32 {
    let out = Command::new("setsid")
        .args(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"])
        .stdin(Stdio::null())
        .output()
        .expect("setsid (util-linux)");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A job left running after logout (its session's leader gone, reparented), at work by the
/// driver's samples: a fact on its row, never a ghost, so `hmn ghosts` exits 0 and the
/// exporter serves no orphan bytes; idle by them, it is one.
#[test]
fn a_busy_nohup_job_is_no_ghost() {
    let job = nohup_job();
    // Reparented and older than the threshold the tests give.
    std::thread::sleep(Duration::from_millis(1300));
    let busy = format!(r#"[{{"pid": {job}, "age_s": 0.2, "sm": 84}}]"#);
    let sc = scenario(&[(job, 8 * GIB)], Some(&busy));
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ghosts", "--json", "--idle-after", "1s"])
        .output()
        .unwrap();
    let j = json(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{j:#}");
    assert_eq!(j["ghosts"], serde_json::json!([]));
    assert_eq!(j["facts"][0]["class"], "orphan", "{j:#}");
    assert_eq!(j["facts"][0]["pid"], job);
    assert!(
        j["facts"][0]["evidence"].to_string().contains("at work"),
        "{j:#}"
    );
    let server = crate::util::serve::Server::start(
        support::FakeVariant::Modern,
        &sc,
        &["--min-interval", "1ms", "--ghost-idle-after", "1s"],
    );
    for _ in 0..2 {
        let body = server.get("/metrics").body;
        let orphan = body
            .lines()
            .find(|l| l.starts_with("hypomnesis_gpu_ghost_bytes{") && l.contains("orphan"))
            .unwrap_or_else(|| panic!("{body}"));
        assert!(orphan.ends_with(" 0"), "{orphan}");
    }
    // Idle by the driver's samples: now a ghost.
    let idle = format!(r#"[{{"pid": {job}, "age_s": 5}}]"#);
    let o = crate::util::hmn::with_fake(&scenario(&[(job, 8 * GIB)], Some(&idle)))
        .args(["ghosts", "--json", "--idle-after", "1s"])
        .output()
        .unwrap();
    let j = json(&o.stdout);
    let _ = Command::new("kill").arg(job.to_string()).status();
    assert_eq!(o.status.code(), Some(1), "{j:#}");
    assert_eq!(j["ghosts"][0]["class"], "orphan", "{j:#}");
    assert_eq!(j["ghosts"][0]["remedy"]["pids"], serde_json::json!([job]));
}

/// A zombie leader whose thread runs: `ps` gives its RSS and command from the thread, and
/// `ghosts` calls it no ghost while whether it is idle is not known.
#[test]
fn a_zombie_leader_with_a_live_thread_shows_its_threads_memory() {
    let (mut child, _) = started(python(
        "import ctypes, threading, time\n\
         threading.Thread(target=time.sleep, args=(60,)).start()\n\
         print('ready', flush=True)\n\
         ctypes.CDLL(None).pthread_exit(None)\n",
    ));
    let pid = child.id();
    let t = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z ")) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "never a zombie leader"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let sc = scenario(&[(pid, GIB)], None);
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ps", "--json"])
        .output()
        .unwrap();
    let rows = json(&o.stdout);
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ghosts", "--json"])
        .output()
        .unwrap();
    let j = json(&o.stdout);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        rows[0]["rss_bytes"].as_u64().is_some_and(|r| r > MIB),
        "{rows}"
    );
    assert!(
        rows[0]["command"]
            .as_str()
            .is_some_and(|c| c.contains("python3")),
        "{rows}"
    );
    assert_eq!(j["ghosts"], serde_json::json!([]), "{j:#}");
    assert_eq!(j["facts"][0]["class"], "zombie", "{j:#}");
}

/// A C program that is in `D` for a second at a time and runs a moment between: the parent of
/// a `vfork` whose child sleeps 1 s and exits, again and again (as a job writing a checkpoint
/// to slow storage is; the issue's was in `D` 1.5 s at a time: 1 s leaves a loaded machine more
/// room before one stay in `D` outlasts two looks 2 s apart). Built with the system's `cc`;
/// `None` (after saying so) without one.
fn flicker() -> Option<std::path::PathBuf> {
    let dir = support::empty_dir();
    let src = dir.join("flicker.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <sys/wait.h>\n#include <unistd.h>\n\
         int main(void) {\n  puts(\"ready\"); fflush(stdout);\n  for (;;) {\n\
             pid_t p = vfork();\n    if (p == 0) { usleep(1000000); _exit(0); }\n\
             waitpid(p, 0, 0);\n  }\n}\n",
    )
    .unwrap();
    let exe = dir.join("flicker");
    let built = Command::new("cc").arg("-o").arg(&exe).arg(&src).status();
    if built.is_ok_and(|s| s.success()) {
        return Some(exe);
    }
    assert!(
        std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
        "a C compiler (cc) is needed, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it"
    );
    eprintln!("skipped: no C compiler");
    None
}

/// A process in `D` a second at a time, running a moment between: in `D` at two looks 2 s
/// apart, but never stuck, by its context switches, for `hmn ghosts` and across the
/// exporter's scrapes.
#[test]
fn a_process_in_and_out_of_d_is_not_stuck() {
    let Some(exe) = flicker() else {
        return;
    };
    let (mut child, _) = started(Command::new(exe));
    let pid = child.id();
    let sc = scenario(&[(pid, 8 * GIB)], None);
    let o = crate::util::hmn::with_fake(&sc)
        .args(["ghosts", "--json", "--stuck-after", "2s"])
        .output()
        .unwrap();
    let j = json(&o.stdout);
    let server = crate::util::serve::Server::start(
        support::FakeVariant::Modern,
        &sc,
        &["--min-interval", "1ms"],
    );
    let mut stuck = Vec::new();
    let mut in_d = 0;
    for _ in 0..5 {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        in_d += usize::from(state.contains(") D "));
        let body = server.get("/metrics").body;
        stuck.extend(
            body.lines()
                .filter(|l| l.starts_with("hypomnesis_gpu_ghost_bytes{") && l.contains("stuck"))
                .map(str::to_owned),
        );
        std::thread::sleep(Duration::from_millis(2100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(in_d >= 2, "the process was in D at {in_d} of 5 looks");
    assert_eq!(j["ghosts"], serde_json::json!([]), "{j:#}");
    assert_eq!(stuck.len(), 5, "{stuck:?}");
    assert!(stuck.iter().all(|l| l.ends_with(" 0")), "{stuck:?}");
}

/// The exporter on a GPU node: memory charged to an exited pid whose related holder lives. No
/// scrape runs the scan of every process's descriptors: the first look starts it on a thread of
/// its own and says the remedy is not known yet; a later scrape uses it, and publishes its age
/// and that it saw everything.
#[test]
fn the_exporter_scans_in_the_background_and_says_how_old_the_scan_is() {
    if !gpunode::can_stand_in() {
        return;
    }
    let addr = crate::util::serve::free_port();
    let lines = format!(
        r#"
setsid sh -c 'echo $$ > '"$node"'/leader; sleep 60 < /dev/nvidia7 > /dev/null 2>&1 & echo $! > '"$node"'/child' &
wait $!
while [ ! -s "$node/child" ]; do sleep 0.01; done
leader=$(cat "$node/leader"); child=$(cat "$node/child")
while [ -d /proc/$leader ]; do sleep 0.01; done
sed "s/LEADER/$leader/" "$FAKE_NVML_SCENARIO" > "$node/scenario.json"
FAKE_NVML_SCENARIO="$node/scenario.json" "$HMN" serve --listen {addr} --min-interval 1ms 2> "$node/serve.err" & serve=$!
python3 - <<'PY'
import time, urllib.request
def scrape():
    t = time.monotonic()
    for _ in range(100):
        try:
            body = urllib.request.urlopen("http://{addr}/metrics", timeout=5).read().decode()
            return time.monotonic() - t, body
        except OSError:
            time.sleep(0.05)
            t = time.monotonic()
    raise SystemExit("the exporter never answered")
for n in range(2):
    took, body = scrape()
    lines = [l for l in body.splitlines() if l.startswith(("hypomnesis_gpu_ghost_bytes", "hypomnesis_ghost_scan"))]
    print(f"scrape {{n}} took {{took:.3f}}")
    print("\n".join(lines))
    time.sleep(1.5)
PY
kill $serve $child
"#
    );
    let sc = scenario(&[(0, 4 * GIB)], None).replace(r#""pid": 0"#, r#""pid": LEADER"#);
    let Some(o) = gpunode::script(&sc, &lines) else {
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    let (first, second) = out
        .split_once("scrape 1 took")
        .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&o.stderr)));
    let took = |text: &str| -> f64 {
        let line = text.lines().next().unwrap_or_default();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(
        took(first.trim_start_matches("scrape 0 took")) < 2.0,
        "no scrape waits: {out}"
    );
    let exited = |text: &str| {
        text.lines()
            .find(|l| l.contains("class=\"exited\""))
            .is_some_and(|l| l.ends_with(&format!(" {}", 4 * GIB)))
    };
    assert!(exited(first) && exited(second), "{out}");
    assert!(
        second
            .lines()
            .any(|l| l == "hypomnesis_ghost_scan_complete 1"),
        "the second scrape uses the finished scan: {out}"
    );
    assert!(
        second
            .lines()
            .any(|l| l.starts_with("hypomnesis_ghost_scan_age_seconds ")),
        "{out}"
    );
}
