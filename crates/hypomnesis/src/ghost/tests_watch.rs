//! Looks over time and the node around them: a watch's stuck processes and the driver's
//! activity samples, a pod the kubelet dropped, a thread's number charged for an exited
//! process, and the leaders a look asks for (the helpers are `tests.rs`'s).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::classify::{Leaders, Look, Memory, Scans, classify};
use super::tests::{MIB, Tree, device, look_with, one_look, quick, row};
use super::*;
use crate::types::UnreadableReason;

/// A watch: stuck once in D with the same count of context switches at looks `stuck_after`
/// apart, without waiting; a process whose count moved between looks (a job in and out of D,
/// writing a checkpoint) starts again.
#[test]
fn a_watch_calls_a_process_stuck_only_while_it_does_not_switch() {
    let t = Tree::new("watch-d");
    let d = t.process(700, 'D', 1, 700);
    let devices = [(device(0, MIB), vec![row(700, MIB, None)])];
    let activity = BTreeMap::new();
    let mut memory = Memory::default();
    let options = GhostOptions::default().stuck_after(Duration::from_millis(30));
    let scanner = scanner::Scanner::default();
    let look = |memory: &mut Memory| {
        let l = Look {
            procfs: &t.0,
            pods: pods::Pods::given(
                Err(crate::error::Failure::new(
                    crate::error::ErrorKind::Other,
                    "none",
                )),
                None,
            ),
            stats: &std::collections::BTreeMap::new(),
            activity: &activity,
            now_us: idle::now_us(),
            options,
            single: false,
            scans: Scans::Background(&scanner),
        };
        let started = Instant::now();
        let out = classify(&l, memory, &devices);
        assert!(started.elapsed() < Duration::from_millis(30), "no waiting");
        out
    };
    let report = look(&mut memory);
    assert!(report.ghosts.is_empty(), "one look is not two");
    std::thread::sleep(Duration::from_millis(40));
    let report = look(&mut memory);
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Stuck, Some(700)));
    assert!(g.evidence[0].contains("for 4"), "{:?}", g.evidence);
    // It woke and went back to sleep (its count moved): not stuck, until it holds again.
    let status = |n: u32| {
        std::fs::write(
            d.join("status"),
            format!("Tgid:\t700\nvoluntary_ctxt_switches:\t{n}\nnonvoluntary_ctxt_switches:\t2\n"),
        )
        .unwrap();
    };
    status(11);
    assert!(look(&mut memory).ghosts.is_empty());
    std::thread::sleep(Duration::from_millis(40));
    status(12);
    assert!(look(&mut memory).ghosts.is_empty(), "it moved again");
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(look(&mut memory).ghosts.len(), 1, "held still since");
}

#[test]
fn a_holder_with_no_activity_in_the_samples_is_idle_and_unknown_is_said() {
    use crate::types::{ProcessActivity, ProcessActivitySample};
    let t = Tree::new("idle");
    for pid in [701, 702, 703] {
        t.process(pid, 'S', 1, pid);
    }
    let now = idle::now_us();
    let min = 60_000_000;
    let mut a = idle::DeviceActivity::default();
    a.take(
        now,
        Ok(ProcessActivity::Samples {
            samples: vec![
                ProcessActivitySample::new(701, now - 20 * min, [0, 0, 0, 0]),
                ProcessActivitySample::new(702, now - min, [40, 10, 0, 0]),
            ],
        }),
    );
    let activity = BTreeMap::from([(0, a)]);
    let devices = [
        (
            device(0, 3 << 30),
            vec![row(701, 2 << 30, None), row(702, 1 << 30, None)],
        ),
        (device(1, MIB), {
            let mut r = row(703, MIB, None);
            r.device_index = 1;
            vec![r]
        }),
    ];
    let report = look_with(&t.0, &devices, GhostOptions::default(), &activity);
    assert_eq!(report.ghosts.len(), 1, "{report:?}");
    let g = &report.ghosts[0];
    assert_eq!(
        (g.class, g.pid, g.bytes),
        (GhostClass::Idle, Some(701), 2 << 30)
    );
    assert!(g.evidence[0].contains("in the 20m"), "{:?}", g.evidence);
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![701] });
    assert!(
        report.unseen.iter().any(|u| u
            .message
            .starts_with("GPU 1: whether its holders are idle is not known")),
        "GPU 1's activity was not read: said, not called busy or idle: {:?}",
        report.unseen
    );
}

#[test]
fn a_process_in_a_pod_the_kubelet_dropped_is_a_gone_pod() {
    let t = Tree::new("pods");
    let uid = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";
    let cgroup = format!(
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/\
         cri-containerd-{}.scope\n",
        uid.replace('-', "_"),
        "ab".repeat(32)
    );
    for pid in [801, 802] {
        let d = t.process(pid, 'S', 1, pid);
        std::fs::write(d.join("cgroup"), &cgroup).unwrap();
    }
    std::fs::write(t.0.join("802/cgroup"), "0::/user.slice/session-3.scope\n").unwrap();
    let activity = BTreeMap::new();
    let devices = [(
        device(0, 2 * MIB),
        vec![row(801, MIB, None), row(802, MIB, None)],
    )];
    let run = |logs: BTreeMap<String, (String, String)>, live: Option<&BTreeSet<_>>| {
        let look = Look {
            procfs: &t.0,
            pods: pods::Pods::given(Ok(logs), live),
            stats: &std::collections::BTreeMap::new(),
            activity: &activity,
            now_us: idle::now_us(),
            options: GhostOptions::default(),
            single: true,
            scans: Scans::Now,
        };
        classify(&look, &mut Memory::default(), &devices)
    };
    let pod = |ns: &str, name: &str| (ns.to_string(), name.to_string());
    // No log directory for its UID, no live list read: gone by the layout alone, said so,
    // and nothing given. 802 is in no pod.
    let other = BTreeMap::from([("1111".to_string(), pod("ml", "x"))]);
    let report = run(other.clone(), None);
    assert_eq!(report.ghosts.len(), 1, "{report:?}");
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::GonePod, Some(801)));
    assert!(g.evidence[0].contains(uid), "{:?}", g.evidence);
    assert!(g.evidence[1].contains("no directory"), "{:?}", g.evidence);
    assert!(matches!(g.remedy, Remedy::Unknown { .. }), "{:?}", g.remedy);
    // The live list names a pod that has no log directory either (a log cleaner): this one
    // may be it, running. Never gone.
    let live = BTreeSet::from([pod("ml", "x"), pod("ml", "train-0")]);
    let report = run(other.clone(), Some(&live));
    assert!(report.ghosts.is_empty(), "{report:?}");
    assert!(
        report
            .unseen
            .iter()
            .any(|u| u.message.contains("1 pod of the kubelet's live list")),
        "{:?}",
        report.unseen
    );
    // Every live pod has its directory, none this UID: gone, by the list.
    let live = BTreeSet::from([pod("ml", "x")]);
    let g = &run(other, Some(&live)).ghosts[0];
    assert_eq!(g.class, GhostClass::GonePod);
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![801] });
    // Its directory is there, the live list lacks it: gone; lists it: not a ghost.
    let logs = BTreeMap::from([(uid.to_string(), pod("ml", "train-0"))]);
    let live = BTreeSet::from([pod("ml", "serve-1")]);
    let report = run(logs.clone(), Some(&live));
    assert_eq!(report.ghosts[0].class, GhostClass::GonePod);
    assert!(
        report.ghosts[0].evidence[1].contains("does not have ml/train-0"),
        "{:?}",
        report.ghosts[0].evidence
    );
    let live = BTreeSet::from([pod("ml", "train-0")]);
    assert!(run(logs.clone(), Some(&live)).ghosts.is_empty());
    assert!(
        run(logs, None).ghosts.is_empty(),
        "no list: its directory is all there is"
    );
}

/// The number of a thread of a live process, charged by the driver for a process that has
/// exited (the library's placing calls the row exited): gone, and the thread named as such.
#[test]
fn a_thread_number_is_an_exited_process() {
    let thread = crate::host::process::leader::Thread::start();
    let tid = thread.tid;
    let rows = vec![row(tid, 3 << 30, Some(UnreadableReason::Exited))];
    let report = one_look(Path::new("/proc"), &[(device(0, 3 << 30), rows)], quick());
    drop(thread);
    let g = &report.ghosts[0];
    assert_eq!((g.class, g.pid), (GhostClass::Exited, Some(tid)));
    assert!(
        g.evidence[0].contains(&format!(
            "the number is now a thread of process {}",
            std::process::id()
        )),
        "{:?}",
        g.evidence
    );
    assert!(matches!(g.remedy, Remedy::Unknown { .. }), "{:?}", g.remedy);
}

/// A leader is looked up once a look: the answer stands for every row sharing it, even when
/// the leader goes in the middle of the look (the look is one moment's).
#[test]
fn each_leader_is_looked_up_once_a_look() {
    let root = std::env::temp_dir().join(format!("hmn-leaders-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let process = |pid: u32| {
        std::fs::create_dir_all(root.join(pid.to_string())).unwrap();
        std::fs::write(
            root.join(pid.to_string()).join("status"),
            format!("Tgid:\t{pid}\n"),
        )
        .unwrap();
    };
    process(40);
    let mut leaders = Leaders::default();
    assert!(leaders.exists(&root, 40) && !leaders.exists(&root, 41));
    std::fs::remove_dir_all(root.join("40")).unwrap();
    process(41);
    assert!(leaders.exists(&root, 40) && !leaders.exists(&root, 41));
    let mut next = Leaders::default();
    assert!(
        !next.exists(&root, 40) && next.exists(&root, 41),
        "a new look"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// A look through a caller's identities (`hmn top`'s refresh) reads each listed process's
/// `stat` through the files they keep, and finds what a look by path finds; a file rewritten
/// between looks is read as it is now.
#[cfg(feature = "sampling")]
#[test]
fn a_look_through_kept_identities_finds_what_a_look_by_path_finds() {
    let t = Tree::new("watch-identities");
    t.process(710, 'Z', 1, 710);
    let alive = t.process(711, 'S', 1, 711);
    let devices = [(
        device(0, 4 * MIB),
        vec![row(710, MIB, None), row(711, MIB, None)],
    )];
    let mut ids = crate::sampling::Identities::new();
    let read = ids.stats(&t.0, &[710, 711, 712]);
    let states: Vec<(u32, char, u64)> =
        read.iter().map(|(&p, (s, st))| (p, s.state, *st)).collect();
    assert_eq!(
        states,
        [(710, 'Z', 1710), (711, 'S', 1711)],
        "712 has no files"
    );
    let classes = |r: &GhostReport| -> Vec<(GhostClass, Option<u32>)> {
        r.ghosts.iter().map(|g| (g.class, g.pid)).collect()
    };
    let mut by_path = GhostWatch::new(quick()).with_roots(&t.0, &t.0);
    let mut kept = GhostWatch::new(quick()).with_roots(&t.0, &t.0);
    let a = by_path.look_at_rows(&devices).unwrap();
    let b = kept.look_at_rows_with(&devices, &mut ids).unwrap();
    assert_eq!(classes(&a), classes(&b));
    assert!(
        classes(&b).contains(&(GhostClass::Zombie, Some(710))),
        "{:?}",
        b.ghosts
    );
    // 711 turns zombie: the kept file reads it so.
    let line = std::fs::read_to_string(alive.join("stat")).unwrap();
    std::fs::write(alive.join("stat"), line.replacen(" S ", " Z ", 1)).unwrap();
    assert_eq!(ids.stats(&t.0, &[711])[&711].0.state, 'Z');
    let a = by_path.look_at_rows(&devices).unwrap();
    let b = kept.look_at_rows_with(&devices, &mut ids).unwrap();
    assert_eq!(classes(&a), classes(&b));
    assert!(
        classes(&b).contains(&(GhostClass::Zombie, Some(711))),
        "{:?}",
        b.ghosts
    );
    // The kept file is what the look reads: with the path gone (a crafted tree can do what
    // procfs cannot), a look by path cannot read 711's state, the kept file still does.
    std::fs::remove_file(alive.join("stat")).unwrap();
    let a = by_path.look_at_rows(&devices).unwrap();
    let b = kept.look_at_rows_with(&devices, &mut ids).unwrap();
    assert!(
        !classes(&a).contains(&(GhostClass::Zombie, Some(711))),
        "{:?}",
        a.ghosts
    );
    assert!(
        classes(&b).contains(&(GhostClass::Zombie, Some(711))),
        "{:?}",
        b.ghosts
    );
    let _ = std::fs::remove_dir_all(&t.0);
}
