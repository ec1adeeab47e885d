//! Each class from real processes where the kernel makes them (a zombie, a zombie leader with a
//! live thread, an orphan), and from crafted procfs trees where it cannot be made on demand (a
//! process in D, descriptors of a GPU's device file, the driver's information file).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use super::classify::{Look, Memory, Scans, classify};
use super::*;
use crate::types::{GpuProcessEntry, GpuQuerySource, UnreadableReason};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub(super) const MIB: u64 = 1 << 20;
const UUID: &str = "GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b";

pub(super) fn device(index: u32, allocated: u64) -> GpuDeviceInfo {
    let mut d = GpuDeviceInfo::blank(GpuQuerySource::Nvml);
    d.index = index;
    d.total_bytes = 80 << 30;
    d.reserved_bytes = Some(500 * MIB);
    d.free_bytes = d.total_bytes - 500 * MIB - allocated;
    d.used_bytes = d.total_bytes - d.free_bytes;
    d.uuid = Some(UUID.into());
    d.pci_bus_id = Some("00000000:62:00.0".into());
    d
}

pub(super) fn row(pid: u32, bytes: u64, unreadable: Option<UnreadableReason>) -> GpuProcessEntry {
    let mut p = GpuProcessEntry::blank(GpuQuerySource::Nvml);
    (p.pid, p.used_bytes, p.unreadable) = (pid, bytes, unreadable);
    p.context = Some(crate::types::GpuContextKind::Compute);
    p
}

pub(super) fn quick() -> GhostOptions {
    GhostOptions::default().stuck_after(Duration::from_millis(20))
}

/// A single look under `procfs`, with `activity` and no kubelet layout.
pub(super) fn look_with(
    procfs: &Path,
    devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
    options: GhostOptions,
    activity: &BTreeMap<u32, idle::DeviceActivity>,
) -> GhostReport {
    let look = Look {
        procfs,
        pods: pods::Pods::given(
            Err(crate::error::Failure::new(
                crate::error::ErrorKind::Other,
                "no kubelet in this test",
            )),
            None,
        ),
        stats: &BTreeMap::new(),
        activity,
        now_us: idle::now_us(),
        options,
        single: true,
        scans: Scans::Now,
    };
    classify(&look, &mut Memory::default(), devices)
}

/// A single look under `procfs`, with no activity read and no kubelet layout.
pub(super) fn one_look(
    procfs: &Path,
    devices: &[(GpuDeviceInfo, Vec<GpuProcessEntry>)],
    options: GhostOptions,
) -> GhostReport {
    look_with(procfs, devices, options, &BTreeMap::new())
}

/// The driver's samples of GPU 0, read now: `pid`s with nothing at work since 20 minutes ago.
pub(super) fn idle_samples(pids: &[u32]) -> BTreeMap<u32, idle::DeviceActivity> {
    use crate::types::{ProcessActivity, ProcessActivitySample};
    let now = idle::now_us();
    let mut a = idle::DeviceActivity::default();
    a.take(
        now,
        Ok(ProcessActivity::Samples {
            samples: pids
                .iter()
                .map(|&p| ProcessActivitySample::new(p, now - 20 * 60_000_000, [0, 0, 0, 0]))
                .collect(),
        }),
    );
    BTreeMap::from([(0, a)])
}

pub(super) fn state_of(pid: u32) -> Option<char> {
    look::ids(Path::new("/proc"), pid).map(|s| s.state)
}

pub(super) fn wait_for_state(pid: u32, want: char) {
    let t = Instant::now();
    while state_of(pid) != Some(want) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "pid {pid} never in {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A crafted procfs root, removed when dropped. Its `devices` names `/dev/null`'s major (1)
/// as NVIDIA's GPU devices and `/dev/tty`'s (5) as the unified-memory device, so descriptors
/// linked to real device nodes are told by their numbers: `/dev/zero` (1:5) is the GPU of minor
/// 5, `/dev/tty` (5:0) a CUDA context's `nvidia-uvm`.
pub(super) struct Tree(pub(super) PathBuf);

impl Tree {
    pub(super) fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("hmn-ghost-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(
            root.join("devices"),
            "Character devices:\n  1 nvidia-frontend\n  5 nvidia-uvm\n",
        )
        .unwrap();
        Self(root)
    }

    pub(super) fn process(&self, pid: u32, state: char, parent: u32, pgrp: u32) -> PathBuf {
        self.named(pid, "python", state, parent, pgrp)
    }

    pub(super) fn named(
        &self,
        pid: u32,
        name: &str,
        state: char,
        parent: u32,
        pgrp: u32,
    ) -> PathBuf {
        self.full(pid, name, state, (parent, pgrp, pgrp))
    }

    /// A process with its relations `(parent, process group, session)`.
    pub(super) fn full(&self, pid: u32, name: &str, state: char, ids: (u32, u32, u32)) -> PathBuf {
        let (parent, pgrp, session) = ids;
        let d = self.0.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        let line = format!(
            "{pid} ({name}) {state} {parent} {pgrp} {session} 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 {start}",
            start = 1000 + pid
        );
        std::fs::write(d.join("stat"), line).unwrap();
        std::fs::write(d.join("comm"), format!("{name}\n")).unwrap();
        std::fs::write(
            d.join("status"),
            format!("Name:\t{name}\nTgid:\t{pid}\nvoluntary_ctxt_switches:\t10\nnonvoluntary_ctxt_switches:\t2\n"),
        )
        .unwrap();
        d
    }

    pub(super) fn holds(&self, pid: u32, fd: u32, target: &str) {
        let d = self.0.join(pid.to_string()).join("fd");
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink(target, d.join(fd.to_string())).unwrap();
    }

    /// A CUDA process's descriptors: the GPU of minor 5 and the unified-memory device.
    pub(super) fn holds_gpu(&self, pid: u32) {
        self.holds(pid, 7, "/dev/zero");
        self.holds(pid, 8, "/dev/tty");
    }

    pub(super) fn driver_gpu(&self, minor: u32) {
        let d = self.0.join("driver/nvidia/gpus/0000:62:00.0");
        std::fs::create_dir_all(&d).unwrap();
        let text = format!(
            "Model: \t\t NVIDIA H100\nGPU UUID: \t {UUID}\nBus Location: \t 0000:62:00.0\nDevice Minor: \t {minor}\n"
        );
        std::fs::write(d.join("information"), text).unwrap();
    }

    /// The tree shows the initial PID namespace (its pid 1's `ns/pid`): a scan of it sees
    /// every process of the host.
    pub(super) fn whole(&self) {
        std::fs::create_dir_all(self.0.join("1/ns")).unwrap();
        std::os::unix::fs::symlink("pid:[4026531836]", self.0.join("1/ns/pid")).unwrap();
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_real_unreaped_zombie_names_its_parent() {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    wait_for_state(pid, 'Z');
    let devices = [(device(0, 2 * MIB), vec![row(pid, 2 * MIB, None)])];
    let report = one_look(Path::new("/proc"), &devices, quick());
    child.wait().unwrap();
    let g = &report.ghosts[0];
    assert_eq!(
        (g.class, g.pid, g.bytes),
        (GhostClass::Zombie, Some(pid), 2 * MIB)
    );
    assert_eq!(
        g.remedy,
        Remedy::Reap {
            parent: std::process::id()
        }
    );
    assert!(
        g.evidence[0].contains("not reaped by its parent"),
        "{:?}",
        g.evidence
    );
    assert_eq!(report.ghosts.len(), 1);
}

/// A zombie leader whose thread runs: structure, not proof. Without the driver's samples it
/// is a fact on its row; idle by them, a ghost to kill whole.
#[test]
fn a_real_zombie_leader_with_a_live_thread_is_a_fact_until_idle() {
    // The main thread ends by pthread_exit while another sleeps: the leader is Z, the thread S.
    let script = "import ctypes, threading, time\n\
                  threading.Thread(target=time.sleep, args=(30,)).start()\n\
                  ctypes.CDLL(None).pthread_exit(None)\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::null())
        .spawn()
        .expect("python3 (the CI installs it)");
    let pid = child.id();
    wait_for_state(pid, 'Z');
    let devices = [(device(0, MIB), vec![row(pid, MIB, None)])];
    let report = one_look(Path::new("/proc"), &devices, quick());
    // Older than the threshold (ages are in clock ticks).
    std::thread::sleep(Duration::from_millis(50));
    let idle = look_with(
        Path::new("/proc"),
        &devices,
        quick().idle_after(Duration::from_millis(1)),
        &idle_samples(&[pid]),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(report.ghosts.is_empty(), "{report:?}");
    let f = &report.facts[0];
    assert_eq!((f.class, f.pid), (GhostClass::Zombie, pid));
    assert!(
        f.evidence[0].contains("1 of its threads still run"),
        "{f:?}"
    );
    assert!(
        f.evidence.last().unwrap().contains("not called a ghost"),
        "{f:?}"
    );
    let g = &idle.ghosts[0];
    assert_eq!(g.class, GhostClass::Zombie);
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![pid] });
}

#[test]
fn a_real_orphan_is_a_fact_unless_idle() {
    // `setsid sh` leads a new session and group; its background sleep outlives it.
    let out = Command::new("setsid")
        .args(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"])
        .stdin(Stdio::null())
        .output()
        .expect("setsid (util-linux)");
    let pid: u32 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let leader = look::ids(Path::new("/proc"), pid).unwrap().pgrp;
    let t = Instant::now();
    while look::exists(Path::new("/proc"), leader) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the leader {leader} stays"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let devices = [(device(0, MIB), vec![row(pid, MIB, None)])];
    // Looked at again for a while: on a loaded machine the reparenting can be seen late (a CI
    // run once found nothing at the first look); the ids at the last look say why if never.
    let t = Instant::now();
    let report = loop {
        let report = one_look(Path::new("/proc"), &devices, quick());
        if !report.facts.is_empty() || t.elapsed() > Duration::from_secs(10) {
            break report;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(50));
    let idle = look_with(
        Path::new("/proc"),
        &devices,
        quick().idle_after(Duration::from_millis(1)),
        &idle_samples(&[pid]),
    );
    let ids = look::ids(Path::new("/proc"), pid);
    let _ = crate::host::process::send_signal(pid, libc::SIGKILL);
    assert!(report.ghosts.is_empty(), "activity unknown: {report:?}");
    let f = report
        .facts
        .first()
        .unwrap_or_else(|| panic!("no fact for {pid}: {ids:?}"));
    assert_eq!((f.class, f.pid), (GhostClass::Orphan, pid));
    assert!(
        f.evidence[0].contains(&format!("leader {leader}")),
        "{:?}",
        f.evidence
    );
    let g = &idle.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Orphan, Some(pid)));
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![pid] });
    assert!(
        g.evidence.iter().any(|e| e.contains("no activity sample")),
        "{:?}",
        g.evidence
    );
    // This test's own process is none of them.
    let me = [(device(0, MIB), vec![row(std::process::id(), MIB, None)])];
    let mine = one_look(Path::new("/proc"), &me, quick());
    assert!(mine.ghosts.is_empty() && mine.facts.is_empty());
}

/// Memory charged to an exited pid 4400 (the leader of process group 4400): its holders are
/// judged. A child in its group with a context is related, so killing it frees the memory;
/// persistenced holds the file with no context, and is never a suspect; a holder nothing ties
/// to the memory is named, not given.
/// The tree of [`an_exited_pids_holders_are_judged`], and its GPU's rows.
fn exited_tree(name: &str) -> (Tree, [(GpuDeviceInfo, Vec<GpuProcessEntry>); 1]) {
    let t = Tree::new(name);
    t.driver_gpu(5);
    t.process(4411, 'S', 1, 4400);
    t.holds_gpu(4411);
    t.named(812, "nvidia-persistenced", 'S', 1, 812);
    t.holds(812, 3, "/dev/zero");
    t.process(950, 'S', 1, 950);
    t.holds_gpu(950);
    // 500 is listed, holds the GPU, and has no tie to 4400: another tenant.
    t.process(500, 'S', 1, 500);
    t.holds_gpu(500);
    t.process(600, 'S', 1, 600);
    t.holds(600, 3, "/dev/null");
    let rows = vec![
        row(4400, 3 << 30, Some(UnreadableReason::Exited)),
        row(500, MIB, None),
    ];
    (t, [(device(0, (3 << 30) + MIB), rows)])
}

#[test]
fn an_exited_pids_holders_are_judged() {
    let (t, devices) = exited_tree("exited");
    let report = one_look(&t.0, &devices, quick());
    assert_eq!(report.ghosts.len(), 1, "{report:?}");
    let g = &report.ghosts[0];
    assert_eq!(
        (g.class, g.pid, g.bytes),
        (GhostClass::Exited, Some(4400), 3 << 30)
    );
    assert_eq!(g.holders, vec![950, 4411], "exempt ones are no suspects");
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![4411] });
    let text = g.evidence.join("\n");
    assert!(
        text.contains(
            "4411 (python) holds /dev/nvidia5 and nvidia-uvm (a CUDA context) and is in the process \
             group 4400 leads"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "812 (nvidia-persistenced) holds /dev/nvidia5: nvidia-persistenced, a client"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "950 (python) holds /dev/nvidia5 and nvidia-uvm (a CUDA context); whether it holds \
             this memory is not known"
        ),
        "{text}"
    );
    assert!(
        !text.contains("500 "),
        "a listed tenant is no suspect: {text}"
    );
    let scan = report.holder_scan.unwrap();
    assert!(scan.complete && scan.processes == 5, "{scan:?}");
    // Without the related one: the unrelated holder is named, and nothing is given.
    std::fs::remove_dir_all(t.0.join("4411")).unwrap();
    let report = one_look(&t.0, &devices, quick());
    let r = &report.ghosts[0].remedy;
    assert!(
        matches!(r, Remedy::Unknown { why } if why.contains("1 process holds /dev/nvidia5")),
        "{r:?}"
    );
}

/// Memory of an exited pid that nothing but context-less clients hold: a GPU reset only when the
/// scan saw the whole host, and never without the GPU's device file known.
#[test]
fn a_reset_only_from_a_scan_of_the_whole_host() {
    let (t, devices) = exited_tree("reset");
    for pid in [4411, 950] {
        std::fs::remove_dir_all(t.0.join(pid.to_string())).unwrap();
    }
    // Nobody but persistenced: a scan of a tree not known to show the host proves nothing...
    let report = one_look(&t.0, &devices, quick());
    let r = &report.ghosts[0].remedy;
    assert!(
        matches!(r, Remedy::Unknown { why } if why.contains("no holder of /dev/nvidia5 was found, but")),
        "{r:?}"
    );
    // ...one of the whole host does: only a reset frees it, and it ends the listed tenant.
    t.whole();
    let report = one_look(&t.0, &devices, quick());
    let g = &report.ghosts[0];
    assert_eq!(g.remedy, Remedy::GpuReset);
    assert!(
        g.evidence
            .last()
            .unwrap()
            .ends_with("a GPU reset also ends the process the driver lists on GPU 0: 500"),
        "{:?}",
        g.evidence
    );
    // Without the driver's file: said so, not guessed.
    std::fs::remove_dir_all(t.0.join("driver")).unwrap();
    let report = one_look(&t.0, &devices, quick());
    let r = &report.ghosts[0].remedy;
    assert!(
        matches!(r, Remedy::Unknown { why } if why.contains("device file is not known")),
        "{r:?}"
    );
}

/// A scan that could not read every process's descriptors, or stopped at its deadline, never
/// concludes that nothing holds the memory.
#[test]
fn an_incomplete_scan_never_concludes_no_holder() {
    let t = Tree::new("incomplete");
    t.driver_gpu(5);
    t.whole();
    let rows = vec![row(4_194_400, 16 << 30, Some(UnreadableReason::NoSuchPid))];
    let devices = [(device(0, 16 << 30), rows)];
    assert_eq!(
        one_look(&t.0, &devices, quick()).ghosts[0].remedy,
        Remedy::GpuReset,
        "seen whole"
    );
    // Past its deadline before it began: not complete, so unknown.
    let report = one_look(&t.0, &devices, quick().scan_deadline(Duration::ZERO));
    let r = &report.ghosts[0].remedy;
    assert!(
        matches!(r, Remedy::Unknown { why } if why.contains("deadline")),
        "{r:?}"
    );
    assert!(!report.holder_scan.unwrap().saw_everything());
}

#[test]
fn a_process_continuously_in_d_is_stuck_and_only_the_drivers_wait_is_a_reset() {
    let t = Tree::new("stuck");
    let d = t.process(700, 'D', 1, 700);
    std::fs::write(d.join("wchan"), "os_acquire_mutex\n").unwrap();
    let v = t.process(702, 'D', 1, 702);
    std::fs::write(v.join("wchan"), "kernel_clone\n").unwrap();
    t.process(701, 'S', 1, 701);
    let devices = [(
        device(0, 3 * MIB),
        vec![
            row(700, MIB, None),
            row(701, MIB, None),
            row(702, MIB, None),
        ],
    )];
    let report = one_look(&t.0, &devices, quick());
    assert_eq!(report.ghosts.len(), 2, "{report:?}");
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Stuck, Some(700)));
    assert!(
        g.evidence[0].contains("without a context switch for 2"),
        "{:?}",
        g.evidence
    );
    assert_eq!(
        g.evidence[1],
        "waiting in os_acquire_mutex, in the NVIDIA driver"
    );
    assert_eq!(g.remedy, Remedy::GpuReset);
    // A vfork parent: stuck, but no reset would free it.
    let g = &report.ghosts[1];
    assert_eq!((g.class, g.pid), (GhostClass::Stuck, Some(702)));
    assert!(
        matches!(&g.remedy, Remedy::Unknown { why } if why.contains("kernel_clone, not in the NVIDIA driver")),
        "{:?}",
        g.remedy
    );
    assert!(
        report.holder_scan.is_none(),
        "nothing for descriptors to explain"
    );
}

/// Memory no listed process accounts for, on a host where one unlisted process holds the GPU:
/// named as holding it, never given a kill (nothing ties it to that memory).
#[test]
fn memory_no_listed_process_accounts_for_names_the_unlisted_holders() {
    let t = Tree::new("unaccounted");
    t.driver_gpu(5);
    t.process(800, 'S', 1, 800);
    t.holds_gpu(800);
    t.process(900, 'S', 1, 900);
    t.holds_gpu(900);
    // 2 GiB allocated, 1 GiB listed: 1 GiB beyond, far above the allowance.
    let devices = [(device(0, 2 << 30), vec![row(800, 1 << 30, None)])];
    let report = one_look(&t.0, &devices, quick());
    let g = &report.ghosts[0];
    assert_eq!(
        (g.class, g.pid, g.bytes),
        (GhostClass::Unaccounted, None, 1 << 30)
    );
    assert_eq!(g.holders, vec![900]);
    assert!(matches!(g.remedy, Remedy::Unknown { .. }), "{:?}", g.remedy);
    assert_eq!(report.bytes_by_class()[&GhostClass::Unaccounted], 1 << 30);
    // Within the driver's allowance: no ghost.
    let small = [(
        device(0, (1 << 30) + 10 * MIB),
        vec![row(800, 1 << 30, None)],
    )];
    assert!(one_look(&t.0, &small, quick()).ghosts.is_empty());
}

/// A live pid the driver charges that holds no descriptor of the GPU is not the process it
/// charges (its number reused by a daemon): never blamed, and the holders are looked for.
#[test]
fn a_listed_pid_holding_no_descriptor_of_the_gpu_is_not_what_the_driver_charges() {
    let t = Tree::new("reused");
    t.driver_gpu(5);
    t.named(4400, "sshd", 'S', 1, 4400);
    t.holds(4400, 3, "/dev/null");
    t.process(4411, 'S', 1, 4390);
    t.holds_gpu(4411);
    let devices = [(device(0, 3 << 30), vec![row(4400, 3 << 30, None)])];
    let report = one_look(&t.0, &devices, quick());
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Unaccounted, Some(4400)));
    assert!(
        g.evidence[0].contains("pid 4400 here is sshd, which holds no descriptor of /dev/nvidia5"),
        "{:?}",
        g.evidence
    );
    assert_eq!(g.holders, vec![4411], "the real holder is named");
    assert!(matches!(g.remedy, Remedy::Unknown { .. }), "{:?}", g.remedy);
    // Holding the GPU's file, it is what the driver charges: no ghost.
    t.holds_gpu(4400);
    assert!(one_look(&t.0, &devices, quick()).ghosts.is_empty());
}

#[test]
fn a_pid_no_process_can_have_is_memory_held_by_no_process() {
    let t = Tree::new("nosuch");
    t.driver_gpu(0);
    t.whole();
    let rows = vec![row(4_194_400, 16 << 30, Some(UnreadableReason::NoSuchPid))];
    let report = one_look(&t.0, &[(device(0, 16 << 30), rows)], quick());
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Unaccounted, Some(4_194_400)));
    assert!(
        g.evidence[0].contains("no process here can have"),
        "{:?}",
        g.evidence
    );
    assert_eq!(g.remedy, Remedy::GpuReset, "nothing holds /dev/nvidia0");
}

#[test]
fn rows_that_cannot_be_looked_at_are_said_not_guessed() {
    let t = Tree::new("unseen");
    let rows = vec![row(42, MIB, Some(UnreadableReason::OutsidePidNamespace))];
    let report = one_look(&t.0, &[(device(0, MIB), rows)], quick());
    assert!(report.ghosts.is_empty());
    assert!(!report.complete, "not every process was seen");
    assert!(
        report.unseen[0].message.contains("outside_pid_namespace"),
        "{:?}",
        report.unseen
    );
    // Its kind says what kind of blindness it is, without reading the words.
    assert_eq!(report.unseen[0].kind, crate::error::ErrorKind::NotSupported);
    let hidden = vec![row(43, MIB, Some(UnreadableReason::HiddenByHidepid))];
    let report = one_look(&t.0, &[(device(0, MIB), hidden)], quick());
    assert_eq!(report.unseen[0].kind, crate::error::ErrorKind::NoPermission);
    let me = [(device(0, MIB), vec![row(std::process::id(), MIB, None)])];
    assert!(one_look(Path::new("/proc"), &me, quick()).complete);
}
