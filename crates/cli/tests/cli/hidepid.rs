//! Processes hidden by the procfs mount's `hidepid`, on a real mount: in a private mount
//! namespace (`unshare -m`) a procfs is mounted with `hidepid=invisible` (or `noaccess`, or with
//! a `gid=` group), and `hmn --procfs <that mount>` runs as `nobody` (`setpriv`) against the
//! fake NVML, which lists a process of root's and one of nobody's, both of this PID namespace.
//! Root's is hidden, with that reason and the fix; nobody's is read whole; neither is outside
//! the PID namespace. A member of the `gid=` group sees both.
//!
//! Needs root, `unshare` and `setpriv` (util-linux) and the right to mount a procfs. Where that
//! is missing the tests say `skipped: …` and pass, unless `HYPOMNESIS_REQUIRE_EXTERNAL=1` (as
//! `.ci/run` sets), which makes them fail.
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use support::{FakeVariant, fake_nvml};

/// The exit code of the script when the procfs cannot be mounted.
const NO_MOUNT: i32 = 97;
/// The group exempt from `hidepid` in the `gid=` cases (no name needed).
const GROUP: u32 = 4242;

/// `None` (after saying so) when the tests may skip; a failure under
/// `HYPOMNESIS_REQUIRE_EXTERNAL=1`.
fn missing(what: &str) -> Option<()> {
    assert!(
        std::env::var("HYPOMNESIS_REQUIRE_EXTERNAL").as_deref() != Ok("1"),
        "{what}, and HYPOMNESIS_REQUIRE_EXTERNAL=1 requires it (run as root, with util-linux's \
         unshare and setpriv, where a procfs may be mounted)"
    );
    eprintln!("skipped: {what}");
    None
}

/// Whether this runs as root with `unshare` and `setpriv`.
fn can_run() -> Option<()> {
    let uid = Command::new("id").arg("-u").output().ok();
    if uid.is_none_or(|o| String::from_utf8_lossy(&o.stdout).trim() != "0") {
        return missing("not running as root");
    }
    for tool in ["unshare", "setpriv", "mount"] {
        let found = Command::new(tool).arg("--version").output();
        if found.is_err() {
            return missing(&format!("{tool} is not installed"));
        }
    }
    Some(())
}

/// A directory under the temporary directory that `nobody` can read, emptied first.
fn open_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hmn-hidepid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// `from` copied to `to`, readable and runnable by everyone (the target directory may not be).
fn install(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Child processes killed when the test ends, however it ends.
struct Sleepers(Vec<Child>);

impl Drop for Sleepers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A place to run `hmn` as nobody: the binary, the fake NVML and its scenario (root's `sleep`,
/// nobody's `sleep`, and `extra` pids), and an empty mount point.
struct Stage {
    dir: PathBuf,
    root_pid: u32,
    user_pid: u32,
    _sleepers: Sleepers,
}

impl Stage {
    fn new(name: &str, extra: &[u32]) -> Self {
        let dir = open_dir(name);
        install(Path::new(env!("CARGO_BIN_EXE_hmn")), &dir.join("hmn"));
        install(
            &fake_nvml(FakeVariant::Modern),
            &dir.join("libnvidia-ml.so.1"),
        );
        std::fs::create_dir(dir.join("proc")).unwrap();
        std::fs::create_dir(dir.join("empty")).unwrap();
        for d in ["proc", "empty"] {
            std::fs::set_permissions(dir.join(d), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // Each holds GPU 0 of the node the procfs stands in (`/dev/zero`, 1:5; see `hmn`): not
        // `util::gpunode`'s 1:7, which tests running beside these scan for.
        let gpu = || std::fs::File::open("/dev/zero").unwrap();
        let root = Command::new("sleep")
            .arg("120")
            .stdin(gpu())
            .spawn()
            .unwrap();
        let user = Command::new("setpriv")
            .args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .args(["sleep", "120"])
            .stdin(gpu())
            .spawn()
            .unwrap();
        let (root_pid, user_pid) = (root.id(), user.id());
        let sleepers = Sleepers(vec![root, user]);
        // setpriv execs sleep: wait until the pid runs it as nobody.
        for _ in 0..200 {
            let status = std::fs::read_to_string(format!("/proc/{user_pid}/status"));
            if status.is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:\t65534"))) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let mut rows = vec![(root_pid, 16_u64 << 30), (user_pid, 2 << 30)];
        rows.extend(extra.iter().map(|&p| (p, 1 << 30)));
        let procs: Vec<String> = rows
            .iter()
            .map(|(p, used)| format!(r#"{{"pid": {p}, "used": {used}}}"#))
            .collect();
        let scenario = format!(
            r#"{{"devices": [{{"name": "NVIDIA H200", "uuid": "{}", "total": 150754820096,
                "reserved": 643825664, "compute_processes": [{}]}}]}}"#,
            crate::util::gpunode::UUID,
            procs.join(", ")
        );
        let path = dir.join("scenario.json");
        std::fs::write(&path, scenario).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Self {
            dir,
            root_pid,
            user_pid,
            _sleepers: sleepers,
        }
    }

    /// `hmn --procfs <mount> <args>` as nobody (in `groups`, if any), on a procfs mounted with
    /// `options` in a private mount namespace, a GPU node's as `util::gpunode` stands one in
    /// (its `devices` names major 1 NVIDIA's, the driver's file gives GPU 0 minor 5: what
    /// the sleepers hold): exit code, stdout, stderr; `None` (skipped) where the procfs cannot
    /// be mounted.
    fn hmn(&self, options: &str, groups: Option<u32>, args: &str) -> Option<(i32, String, String)> {
        let d = self.dir.display();
        let groups =
            groups.map_or_else(|| "--clear-groups".to_string(), |g| format!("--groups {g}"));
        let info = format!(
            "Model: \\t NVIDIA H200\\nGPU UUID: \\t {}\\nBus Location: \\t 0000:01:00.0\\nDevice Minor: \\t 5\\n",
            crate::util::gpunode::UUID
        );
        let script = format!(
            "mount --make-rprivate / && mount -t proc -o {options} proc {d}/proc || exit {NO_MOUNT}
             printf 'Character devices:\\n  1 nvidia-frontend\\n' > {d}/devices
             mount --bind {d}/devices {d}/proc/devices || exit {NO_MOUNT}
             mount -t tmpfs hmn-driver {d}/proc/driver || exit {NO_MOUNT}
             mkdir -p {d}/proc/driver/nvidia/gpus/0000:01:00.0
             printf '{info}' > {d}/proc/driver/nvidia/gpus/0000:01:00.0/information
             cd / && exec setpriv --reuid nobody --regid nogroup {groups} env -i \
               HYPOMNESIS_NVML_LIBRARY={d}/libnvidia-ml.so.1 FAKE_NVML_SCENARIO={d}/scenario.json \
               HYPOMNESIS_SYSFS={d}/empty PATH={d}/empty {d}/hmn --procfs {d}/proc {args}"
        );
        let out = Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .output()
            .unwrap();
        let (o, e) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let code = out.status.code().unwrap_or(-1);
        if code == NO_MOUNT {
            missing(&format!("a procfs cannot be mounted here: {e}"))?;
        }
        assert!(!e.contains("panicked"), "hmn panicked: {e}");
        Some((code, o, e))
    }

    /// `hmn ps --json`'s row of `pid`.
    fn row(json: &str, pid: u32) -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap_or_else(|| panic!("no row of {pid}: {json}"))
            .clone()
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn hidepid_invisible_hides_roots_process_and_says_how_to_see_it() {
    if can_run().is_none() {
        return;
    }
    let s = Stage::new("invisible", &[]);
    let Some((code, out, err)) = s.hmn("hidepid=invisible", None, "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{out}{err}");
    let root = Stage::row(&out, s.root_pid);
    assert_eq!(root["unreadable"], "hidden_by_hidepid", "{root}");
    assert_eq!(root["outside_pid_namespace"], false, "{root}");
    assert!(
        root["user"].is_null() && root["command"].is_null(),
        "{root}"
    );
    assert_eq!(root["used_bytes"], 16_u64 << 30);
    let user = Stage::row(&out, s.user_pid);
    assert!(user["unreadable"].is_null(), "{user}");
    assert_eq!(user["outside_pid_namespace"], false, "{user}");
    assert_eq!(user["user"], "nobody", "{user}");
    assert_eq!(user["command"], "sleep 120", "{user}");
    assert!(user["rss_bytes"].as_u64().is_some_and(|r| r > 0), "{user}");
    assert!(
        err.contains(&format!(
            "hmn: 1 process is hidden (memory counted; owner and command unknown): {}/proc is \
             mounted with hidepid=invisible: other users' processes are hidden; run as root or \
             as a member of group 0 (the mount sets no gid=).",
            s.dir.display()
        )),
        "{err}"
    );

    let (code, out, err) = s.hmn("hidepid=invisible", None, "ps").unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let line = |pid: u32| {
        out.lines()
            .find(|l| l.starts_with(&pid.to_string()))
            .unwrap_or_else(|| panic!("no line of {pid}: {out}"))
            .to_string()
    };
    let hidden = line(s.root_pid);
    assert!(
        hidden.starts_with(&format!("{} (hidden)", s.root_pid)) && hidden.ends_with("  ?"),
        "{out}"
    );
    assert!(!out.contains("(outside)"), "{out}");
    assert!(line(s.user_pid).ends_with("sleep 120"), "{out}");

    let (code, out, err) = s.hmn("hidepid=invisible", None, "doctor").unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "    procfs mount: {d}/proc with hidepid=invisible: hides processes from hmn: {d}/proc \
             is mounted with hidepid=invisible",
            d = s.dir.display()
        )),
        "{out}"
    );
}

#[test]
fn hidepid_noaccess_refuses_the_files_of_roots_process() {
    if can_run().is_none() {
        return;
    }
    let s = Stage::new("noaccess", &[]);
    let Some((code, out, err)) = s.hmn("hidepid=noaccess", None, "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{out}{err}");
    let root = Stage::row(&out, s.root_pid);
    assert_eq!(
        (&root["unreadable"], &root["outside_pid_namespace"]),
        (&"hidden_by_hidepid".into(), &false.into()),
        "{root}"
    );
    assert!(
        Stage::row(&out, s.user_pid)["unreadable"].is_null(),
        "{out}"
    );
    assert!(
        err.contains("hidepid=noaccess: other users' processes cannot be read; run as root"),
        "{err}"
    );
}

#[test]
fn a_member_of_the_gid_group_sees_every_process_and_others_are_told_the_group() {
    if can_run().is_none() {
        return;
    }
    let s = Stage::new("gid", &[]);
    let options = format!("hidepid=invisible,gid={GROUP}");
    let Some((code, out, err)) = s.hmn(&options, Some(GROUP), "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{out}{err}");
    for pid in [s.root_pid, s.user_pid] {
        let r = Stage::row(&out, pid);
        assert!(r["unreadable"].is_null(), "{r}");
        assert_eq!(r["outside_pid_namespace"], false, "{r}");
        assert_eq!(r["command"], "sleep 120", "{r}");
    }
    assert_eq!(Stage::row(&out, s.root_pid)["user"], "root");
    assert!(!err.contains("hidden"), "{err}");

    // Outside the group: hidden, and told which group sees it.
    let (code, out, err) = s.hmn(&options, None, "ps --json").unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        Stage::row(&out, s.root_pid)["unreadable"],
        "hidden_by_hidepid"
    );
    assert!(
        err.contains(&format!(
            "other users' processes are hidden; run as root or as a member of group {GROUP}."
        )),
        "{err}"
    );
}

#[test]
fn a_process_gone_since_the_list_is_not_called_outside() {
    if can_run().is_none() {
        return;
    }
    let mut gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    let s = Stage::new("gone", &[gone_pid]);
    let Some((code, out, err)) = s.hmn("hidepid=invisible", None, "ps --json") else {
        return;
    };
    assert_eq!(code, 0, "{out}{err}");
    let r = Stage::row(&out, gone_pid);
    // Every process of the initial PID namespace has a number there: a number with no process
    // is one that exited. In a child namespace it may be another namespace's (the host's).
    let initial =
        std::fs::read_link("/proc/self/ns/pid").is_ok_and(|l| l.as_os_str() == "pid:[4026531836]");
    if initial {
        assert_eq!(
            (&r["unreadable"], &r["outside_pid_namespace"]),
            (&"exited".into(), &false.into()),
            "{r}"
        );
        assert!(err.contains("1 process is gone: exited"), "{err}");
    } else {
        assert_eq!(r["unreadable"], "outside_pid_namespace", "{r}");
    }
}

/// `hmn ghosts --json` as nobody says what it could not see instead of guessing: root's
/// process hidden by `hidepid` is a `not seen` line, not an exited ghost; without `hidepid`,
/// the descriptors of root's processes that nobody cannot list are counted when an exited pid
/// needs the scan.
#[test]
fn ghosts_as_nobody_say_what_they_could_not_see() {
    if can_run().is_none() {
        return;
    }
    let mut gone = Command::new("true").spawn().unwrap();
    let exited = gone.id();
    gone.wait().unwrap();
    let s = Stage::new("ghosts", &[exited]);
    let Some((code, out, err)) = s.hmn("hidepid=invisible", None, "ghosts --json") else {
        return;
    };
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert_eq!(code, 1, "the exited pid is a ghost: {v:#}");
    let classes: Vec<(u64, &str)> = v["ghosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["pid"].as_u64().unwrap(), g["class"].as_str().unwrap()))
        .collect();
    assert_eq!(classes, vec![(u64::from(exited), "exited")], "{v:#}");
    let unseen = v["unseen"].to_string();
    assert!(
        unseen.contains(&format!("pid {} on GPU 0 (16384 MiB)", s.root_pid))
            && unseen.contains("hidepid"),
        "root's process is said hidden, not guessed: {unseen}"
    );
    let Some((_, out, _)) = s.hmn("rw", None, "ghosts --json") else {
        return;
    };
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v["holder_scan"]["unreadable"].as_u64().unwrap() > 0,
        "root's descriptors, unlisted by nobody: {v:#}"
    );
    // A scan that could not read every process's descriptors never concludes that nothing
    // holds the memory: no GPU reset, and what was not seen is said.
    let g = &v["ghosts"][0];
    assert_eq!(g["class"], "exited", "{v:#}");
    assert_eq!(g["remedy"]["action"], "unknown", "{v:#}");
    assert!(
        g["remedy"]["why"]
            .as_str()
            .unwrap()
            .contains("could not be read (another user's)"),
        "{v:#}"
    );
}

/// Nothing but processes nobody cannot see: no ghost found, and not "no ghosts": exit 2.
#[test]
fn ghosts_that_saw_not_every_process_cannot_say_none() {
    if can_run().is_none() {
        return;
    }
    let s = Stage::new("ghosts-unseen", &[]);
    let Some((code, out, err)) = s.hmn("hidepid=invisible", None, "ghosts") else {
        return;
    };
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        out.starts_with("no ghost found among the GPU processes seen, but not every one"),
        "{out}"
    );
    assert!(!out.starts_with("no ghosts:"), "{out}");
    assert!(
        out.contains(&format!("not seen: pid {}", s.root_pid)),
        "{out}"
    );
}
