//! Who a process is: the checked-in cgroup files of each container runtime's path form, and
//! real processes started here (another user's too when the tests run as root).

use hypomnesis::parse_cgroup;

const ID: &str = "3f9a1c2b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
const ID2: &str = "9e8d7c6b5a4938271605f4e3d2c1b0a99e8d7c6b5a4938271605f4e3d2c1b0a9";
const POD: &str = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";

fn fixture(name: &str) -> String {
    let path = support::fixtures("cgroup").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_runtime_path_form_names_its_container() {
    // (file, container id, runtime, pod UID)
    let cases: [(&str, &str, Option<&str>, Option<&str>); 8] = [
        ("docker-cgroupfs-v1.txt", ID, Some("docker"), None),
        ("docker-systemd-v2.txt", ID, Some("docker"), None),
        (
            "containerd-kubernetes-systemd-v2.txt",
            ID2,
            Some("containerd"),
            Some(POD),
        ),
        (
            "containerd-kubernetes-cgroupfs-v1.txt",
            ID2,
            None,
            Some(POD),
        ),
        (
            "crio-kubernetes-systemd-v2.txt",
            ID,
            Some("crio"),
            Some(POD),
        ),
        ("podman-rootless-v2.txt", ID, Some("podman"), None),
        ("podman-rootful-v2.txt", ID2, Some("podman"), None),
        // The same file read twice: nothing is remembered between reads.
        ("docker-systemd-v2.txt", ID, Some("docker"), None),
    ];
    for (file, id, runtime, pod) in cases {
        let c = parse_cgroup(&fixture(file)).unwrap_or_else(|| panic!("{file}: no container"));
        assert_eq!(c.id, id, "{file}");
        assert_eq!(c.runtime.as_deref(), runtime, "{file}");
        assert_eq!(c.pod_uid.as_deref(), pod, "{file}");
    }
    for file in [
        "crio-conmon-v2.txt",
        "host-session-v2.txt",
        "host-service-v1.txt",
    ] {
        assert_eq!(parse_cgroup(&fixture(file)), None, "{file}");
    }
    // Every fixture is covered above.
    let n = std::fs::read_dir(support::fixtures("cgroup"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "txt")
        })
        .count();
    assert_eq!(n, 10);
    assert_eq!(parse_cgroup(""), None);
    assert_eq!(parse_cgroup("garbage without colons\n0::\n"), None);
}

#[cfg(target_os = "linux")]
#[test]
fn a_real_process_has_its_owner_command_and_memory() {
    let mut child = std::process::Command::new("sleep")
        .arg("61")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let ctx = hypomnesis::process_context(child.id());
    let me = hypomnesis::process_context(std::process::id());
    assert_eq!(ctx.uid, me.uid);
    assert!(ctx.uid.is_some());
    let names = hypomnesis::parse_passwd(&std::fs::read_to_string("/etc/passwd").unwrap());
    let want = ctx
        .uid
        .map(|u| names.get(&u).cloned().unwrap_or_else(|| u.to_string()));
    assert_eq!(ctx.user, want);
    let command = ctx.command.clone().unwrap();
    assert_eq!(command, "sleep 61");
    assert!(ctx.rss_bytes.unwrap() > 0);
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = hypomnesis::process_context(child.id());
    assert_eq!(
        gone.command, None,
        "an exited process has no context: {gone:?}"
    );
    assert_eq!(gone.uid, None);
    assert_eq!(gone.rss_bytes, None);
    let many = hypomnesis::process_contexts(&[std::process::id(), child.id()]);
    assert_eq!(many.len(), 2);
    assert_eq!(many[0].uid, me.uid);
    assert_eq!(many[1], gone);
}

/// Root starts a process as `nobody` (uid 65534): its owner is that user, by name where the
/// user database has one.
#[cfg(target_os = "linux")]
#[test]
fn another_users_process_is_named_as_theirs() {
    use std::os::unix::process::CommandExt;
    if hypomnesis::process_context(std::process::id()).uid != Some(0) {
        eprintln!("not root: cannot start a process as another user here");
        return;
    }
    let mut child = std::process::Command::new("sleep")
        .arg("62")
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let ctx = hypomnesis::process_context(child.id());
    assert_eq!(ctx.uid, Some(65534));
    let names = hypomnesis::parse_passwd(&std::fs::read_to_string("/etc/passwd").unwrap());
    let want = names.get(&65534).cloned().unwrap_or_else(|| "65534".into());
    assert_eq!(ctx.user.as_deref(), Some(want.as_str()));
    assert_eq!(ctx.command.as_deref(), Some("sleep 62"));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Each part of the context is read only when asked for; the owner is the same whether it
/// comes from the command line's open file or from the process's directory.
#[cfg(target_os = "linux")]
#[test]
fn only_the_parts_asked_for_are_read() {
    use hypomnesis::{ContextParts, process_contexts_with as with};
    let mut child = std::process::Command::new("sleep")
        .arg("63")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let pid = child.id();
    let one = |parts: ContextParts| with(&[pid], parts).pop().unwrap();
    assert_eq!(
        one(ContextParts::NONE),
        hypomnesis::ProcessContext::default()
    );
    let all = one(ContextParts::ALL);
    assert_eq!(
        all,
        hypomnesis::process_context(pid),
        "ALL is what process_context reads"
    );
    assert!(all.cpu_time.is_some(), "{all:?}");

    let mut user = ContextParts::NONE;
    user.user = true;
    let u = one(user);
    assert!(u.uid.is_some() && u.user.is_some(), "{u:?}");
    assert_eq!((u.uid, &u.user), (all.uid, &all.user));
    assert_eq!((&u.command, u.rss_bytes, u.cpu_time), (&None, None, None));

    let mut command = ContextParts::NONE;
    command.command = true;
    let c = one(command);
    assert_eq!(c.command.as_deref(), Some("sleep 63"));
    assert_eq!((c.uid, &c.user, c.rss_bytes), (None, &None, None));

    let mut rss = ContextParts::NONE;
    rss.rss = true;
    let from_statm = one(rss).rss_bytes.unwrap();
    rss.cpu_time = true;
    let both = one(rss);
    assert_eq!(
        both.rss_bytes,
        Some(from_statm),
        "stat and statm agree on a sleeping process"
    );
    assert!(both.cpu_time.is_some());
    assert_eq!((both.uid, &both.command), (None, &None));

    let mut no_container = ContextParts::ALL;
    no_container.container = false;
    no_container.cpu_time = false;
    let n = one(no_container);
    assert_eq!(n.container, None);
    assert_eq!(n.cpu_time, None);
    assert_eq!((n.uid, &n.command), (all.uid, &all.command));

    child.kill().unwrap();
    child.wait().unwrap();
    // Gone: nothing, whichever path the owner would have come from.
    assert_eq!(
        one(ContextParts::ALL),
        hypomnesis::ProcessContext::default()
    );
    assert_eq!(one(user), hypomnesis::ProcessContext::default());
}

/// The CPU time of a busy process grows by what it spends: this test's own, while it spins.
#[cfg(any(target_os = "linux", target_os = "macos", windows))]
#[test]
fn cpu_time_grows_while_a_process_works() {
    let mut parts = hypomnesis::ContextParts::NONE;
    parts.cpu_time = true;
    let me = std::process::id();
    let cpu = || {
        hypomnesis::process_contexts_with(&[me], parts)
            .pop()
            .unwrap()
            .cpu_time
            .unwrap()
    };
    let start = cpu();
    let wall = std::time::Instant::now();
    let mut x = 0_u64;
    while cpu() < start + std::time::Duration::from_millis(100) {
        for i in 0..100_000_u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(
            wall.elapsed() < std::time::Duration::from_secs(30),
            "100 ms of CPU not seen in 30 s: {:?} → {:?}",
            start,
            cpu()
        );
    }
    // Never more CPU than the wall time since the start times the cores.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let spent = cpu().saturating_sub(start);
    assert!(
        spent
            <= wall.elapsed() * u32::try_from(cores).unwrap()
                + std::time::Duration::from_millis(20),
        "{spent:?}"
    );
}

/// The host's RAM is `/proc/meminfo`'s total, and what is available lies within it.
#[cfg(target_os = "linux")]
#[test]
fn host_memory_is_meminfo() {
    let m = hypomnesis::host_memory().unwrap();
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(m.total_bytes, total_kib * 1024);
    let available = m.available_bytes.unwrap();
    assert!(available > 0 && available <= m.total_bytes, "{m:?}");
}

/// A signal reaches the process it names, and only one: pid 0 (the group) and pids beyond
/// `i32::MAX` (-1: every process) are refused; a pid that exited is "no such process".
#[cfg(unix)]
#[test]
fn send_signal_reaches_one_process_only() {
    use std::os::unix::process::ExitStatusExt as _;
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    hypomnesis::send_signal(child.id(), 0).unwrap(); // 0: only whether it exists
    hypomnesis::send_signal(child.id(), libc::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    let gone = hypomnesis::send_signal(child.id(), 0).unwrap_err();
    assert_eq!(gone.raw_os_error(), Some(libc::ESRCH), "{gone}");
    for pid in [0, u32::MAX, 1 << 31] {
        let refused = hypomnesis::send_signal(pid, 0).unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::InvalidInput,
            "{pid}: {refused}"
        );
    }
}

/// A process started now started moments ago, by the procfs's uptime and clock ticks.
#[cfg(target_os = "linux")]
#[test]
fn a_process_started_now_started_moments_ago() {
    let mut child = std::process::Command::new("sleep")
        .arg("5")
        .spawn()
        .unwrap();
    let start = hypomnesis::process_start_time(child.id()).unwrap();
    let ago = hypomnesis::started_ago(start).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ago < std::time::Duration::from_secs(3), "{ago:?}");
    // This test binary started earlier than the child.
    let own = hypomnesis::process_start_time(std::process::id()).unwrap();
    assert!(hypomnesis::started_ago(own).unwrap() >= ago);
    assert_eq!(
        hypomnesis::started_ago(u64::MAX),
        None,
        "a start in the far future"
    );
    assert!(hypomnesis::procfs_is_own());
}
