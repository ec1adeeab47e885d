//! Every ghost class from real processes, on each surface: `hmn ghosts`, `hmn ps --why` and
//! the exporter's `hypomnesis_gpu_ghost_bytes`. The fake NVML lists a zoo of this test's own
//! children: a pid that has exited (a reaped child), an unreaped zombie, a process stuck in
//! uninterruptible sleep (the parent of a `vfork` whose child never execs, which waits in `D`),
//! an orphan (a double fork whose session leader ended) idle by the driver's samples, an idle
//! holder (the driver's samples reach back 5 s and show nothing at work for it), a busy one (a
//! sample at work: no ghost),
//! and memory no listed process accounts for. A process in a pod the node no longer has comes
//! from the kubelet fixture's procfs, with a copy of its log layout lacking the pod.
#![cfg(all(feature = "serve", target_os = "linux"))]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

use crate::util::serve::Server;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TOTAL: u64 = 143_771 * MIB;
const RESERVED: u64 = 616 * MIB;

/// The classes the zoo holds, with the GiB each holds.
const CLASSES: [(&str, u64); 6] = [
    ("exited", 3),
    ("zombie", 2),
    ("stuck", 4),
    ("orphan", 5),
    ("idle", 6),
    ("unaccounted", 7),
];

struct Zoo {
    /// The pid charged for each class (none for `unaccounted`), and the busy one's.
    pids: BTreeMap<&'static str, u32>,
    scenario: String,
    children: Vec<Child>,
    /// The stuck process's group (it and its vfork child), killed whole.
    stuck_group: u32,
}

fn state_of(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(10), "never {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn zoo() -> Zoo {
    let mut children = Vec::new();
    let mut pids = BTreeMap::new();
    let mut gone = Command::new("true").spawn().unwrap();
    pids.insert("exited", gone.id());
    gone.wait().unwrap();
    let zombie = Command::new("true").spawn().unwrap();
    pids.insert("zombie", zombie.id());
    wait_until("a zombie", || state_of(zombie.id()) == Some('Z'));
    children.push(zombie);
    // The vfork's parent waits in D until its child execs or exits, which this one never does.
    let script = "import ctypes, os, sys\n\
                  libc = ctypes.CDLL(None)\n\
                  print(os.getpid(), flush=True)\n\
                  if libc.vfork() == 0:\n    libc.pause()\n    os._exit(0)\n";
    let mut stuck = Command::new("python3")
        .args(["-c", script])
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("python3 (the CI installs it)");
    let mut line = String::new();
    BufReader::new(stuck.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let stuck_pid: u32 = line.trim().parse().unwrap();
    wait_until("in D", || state_of(stuck_pid) == Some('D'));
    pids.insert("stuck", stuck_pid);
    let stuck_group = stuck.id();
    children.push(stuck);
    let out = Command::new("setsid")
        .args(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"])
        .stdin(Stdio::null())
        .output()
        .expect("setsid (util-linux)");
    let orphan: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    pids.insert("orphan", orphan);
    let idle = Command::new("sleep").arg("60").spawn().unwrap();
    let busy = Command::new("sleep").arg("60").spawn().unwrap();
    pids.insert("idle", idle.id());
    pids.insert("busy", busy.id());
    children.extend([idle, busy]);
    // Older than the idle threshold the tests give (1 s).
    std::thread::sleep(Duration::from_millis(1300));
    let mut rows: Vec<(u32, u64)> = CLASSES
        .iter()
        .filter_map(|(c, gib)| Some((*pids.get(c)?, gib * GIB)))
        .collect();
    rows.push((pids["busy"], GIB));
    let listed: u64 = rows.iter().map(|r| r.1).sum();
    let procs: Vec<String> = rows
        .iter()
        .map(|(p, b)| format!(r#"{{"pid": {p}, "used": {b}}}"#))
        .collect();
    let scenario = format!(
        r#"{{"devices": [{{"name": "NVIDIA H200", "total": {TOTAL}, "reserved": {RESERVED},
            "free": {free}, "compute_processes": [{procs}],
            "process_samples": [{{"pid": {idle}, "age_s": 5}}, {{"pid": {orphan}, "age_s": 5}},
                                {{"pid": {busy}, "age_s": 0.2, "sm": 40}}]}}]}}"#,
        free = TOTAL - RESERVED - listed - 7 * GIB,
        procs = procs.join(", "),
        idle = pids["idle"],
        orphan = pids["orphan"],
        busy = pids["busy"],
    );
    Zoo {
        pids,
        scenario,
        children,
        stuck_group,
    }
}

impl Drop for Zoo {
    fn drop(&mut self) {
        // The stuck process's whole group (it and its vfork child), and the orphan.
        let mut targets = vec![format!("-{}", self.stuck_group)];
        targets.extend(self.pids.get("orphan").map(u32::to_string));
        let _ = Command::new("kill")
            .arg("-9")
            .arg("--")
            .args(&targets)
            .status();
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn hmn(scenario: &str, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let o = crate::util::hmn::with_fake(scenario)
        .args(args)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code(), v)
}

#[test]
fn hmn_ghosts_sorts_every_class_of_the_zoo() {
    let zoo = zoo();
    let (code, j) = hmn(
        &zoo.scenario,
        &[
            "ghosts",
            "--json",
            "--stuck-after",
            "100ms",
            "--idle-after",
            "1s",
        ],
    );
    assert_eq!(code, Some(1));
    for (class, gib) in CLASSES {
        let g = j["ghosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["class"] == class)
            .unwrap_or_else(|| panic!("no {class}: {j:#}"));
        assert_eq!(g["bytes"], gib * GIB, "{class}: {g}");
        match zoo.pids.get(class) {
            Some(&pid) => assert_eq!(g["pid"], pid, "{class}"),
            None => assert!(g["pid"].is_null(), "{class}"),
        }
        assert_eq!(j["bytes_by_class"][class], gib * GIB);
    }
    let stuck = j["ghosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["class"] == "stuck")
        .unwrap();
    assert!(
        stuck["evidence"][0]
            .as_str()
            .unwrap()
            .contains("without a context switch for 100ms"),
        "{stuck}"
    );
    // A vfork parent waits for its child, not for the GPU: no reset would free it.
    assert_eq!(stuck["remedy"]["action"], "unknown", "{stuck}");
    assert!(
        stuck["remedy"]["why"]
            .as_str()
            .unwrap()
            .contains("not in the NVIDIA driver"),
        "{stuck}"
    );
    assert!(
        !j["ghosts"]
            .to_string()
            .contains(&format!(":{},", zoo.pids["busy"])),
        "the busy holder is no ghost: {j}"
    );
}

#[test]
fn ps_why_marks_every_class_of_the_zoo() {
    let zoo = zoo();
    let (_, rows) = hmn(
        &zoo.scenario,
        &["ps", "--why", "--idle-after", "1s", "--json"],
    );
    let class_of = |pid: u32| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .map(|r| r["ghost"]["class"].clone())
            .unwrap()
    };
    for class in ["exited", "zombie", "stuck", "orphan", "idle"] {
        assert_eq!(class_of(zoo.pids[class]), class, "{rows:#}");
    }
    assert!(class_of(zoo.pids["busy"]).is_null());
    // And in the text: the not-visible row is unaccounted, the footer sums every class.
    let o = crate::util::hmn::with_fake(&zoo.scenario)
        .args(["ps", "--why", "--idle-after", "1s"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let hidden = out.lines().find(|l| l.contains("not visible")).unwrap();
    assert!(hidden.contains("unaccounted"), "{out}");
    assert!(
        out.contains(
            "6 ghosts holding 27.0 GiB: exited 3.0 GiB, zombie 2.0 GiB, stuck 4.0 GiB, \
             orphan 5.0 GiB, idle 6.0 GiB, unaccounted 7.0 GiB"
        ),
        "{out}"
    );
    // Without --why, --idle-after is refused.
    let o = crate::util::hmn::with_fake(&zoo.scenario)
        .args(["ps", "--idle-after", "1s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn the_exporter_serves_every_class_of_the_zoo() {
    let zoo = zoo();
    let server = Server::start(
        FakeVariant::Modern,
        &zoo.scenario,
        &["--min-interval", "1ms", "--ghost-idle-after", "1s"],
    );
    let series = |body: &str, class: &str| {
        body.lines()
            .find(|l| {
                l.starts_with("hypomnesis_gpu_ghost_bytes{")
                    && l.contains(&format!("class=\"{class}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    let first = server.get("/metrics").body;
    assert_eq!(series(&first, "stuck"), Some(0), "one scrape is one look");
    // A second scrape, more than the 2 s a process must stay in D: stuck, without waiting.
    std::thread::sleep(Duration::from_millis(2100));
    let started = Instant::now();
    let body = server.get("/metrics").body;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no scrape waits"
    );
    for (class, gib) in CLASSES {
        assert_eq!(series(&body, class), Some(gib * GIB), "{class}:\n{body}");
    }
    assert_eq!(series(&body, "gone_pod"), Some(0));
    // --no-ghosts: no family at all.
    let off = Server::start(FakeVariant::Modern, &zoo.scenario, &["--no-ghosts"]);
    assert!(!off.get("/metrics").body.contains("gpu_ghost"));
}

/// A copy of the kubelet fixture's node layout without pod 6a2b5c3d-…'s directory.
fn rootfs_without_the_pod() -> PathBuf {
    let rootfs = empty_dir();
    let copied = Command::new("cp")
        .arg("-a")
        .arg(support::fixtures("kubelet").join("rootfs/var"))
        .arg(&rootfs)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::remove_dir_all(
        rootfs.join("var/log/pods/ml-team_trainer-0_6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"),
    )
    .unwrap();
    rootfs
}

const POD_SCENARIO: &str = r#"{"devices": [{"name": "NVIDIA H200", "total": 150754820096,
    "compute_processes": [{"pid": 4242, "used": 42949672960}]}]}"#;

fn roots(c: &mut Command, rootfs: &Path) {
    c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(POD_SCENARIO))
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .arg("--procfs")
        .arg(support::fixtures("kubelet").join("proc"))
        .arg("--rootfs")
        .arg(rootfs);
}

#[test]
fn a_gone_pod_on_ps_why_and_the_exporter() {
    let rootfs = rootfs_without_the_pod();
    let mut c = crate::util::hmn::hmn();
    c.args(["ps", "--why", "--json"]);
    roots(&mut c, &rootfs);
    let o = c.output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(rows[0]["pid"], 4242);
    assert_eq!(rows[0]["ghost"]["class"], "gone_pod", "{rows:#}");
    let mut c = crate::util::serve::serve_command(
        FakeVariant::Modern,
        POD_SCENARIO,
        &["--listen", "127.0.0.1:0"],
    );
    roots(&mut c, &rootfs);
    let server = Server::spawn(c);
    let body = server.get("/metrics").body;
    let line = body
        .lines()
        .find(|l| l.starts_with("hypomnesis_gpu_ghost_bytes{") && l.contains("gone_pod"))
        .unwrap_or_else(|| panic!("{body}"));
    assert!(line.ends_with(" 42949672960"), "{line}");
}
