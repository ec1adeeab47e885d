//! The edges of a look that a mutation run found untested: a procfs whose devices list names
//! no NVIDIA major, the evidence of a reset and of its tenants, a holder without a context,
//! a row the driver listed as exited whose number is a process again, a watch whose threshold
//! is zero, orphans by each relation, the scan's own figures, and a rootfs without the
//! kubelet's layout.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::classify::{Look, Memory, Scans, classify};
use super::holders::{HolderScan, Majors, scan};
use super::tests::{MIB, Tree, device, one_look, quick, row};
use super::*;
use crate::types::UnreadableReason;

#[test]
fn a_procfs_whose_devices_name_no_nvidia_major_knows_no_device_file() {
    let t = Tree::new("no-major");
    std::fs::write(t.0.join("devices"), "Character devices:\n  1 mem\n").unwrap();
    t.driver_gpu(5);
    t.whole();
    let rows = vec![row(4400, 3 << 30, Some(UnreadableReason::NoSuchPid))];
    let report = one_look(&t.0, &[(device(0, 3 << 30), rows)], quick());
    let g = &report.ghosts[0];
    assert!(
        g.evidence[1].contains("names no NVIDIA major"),
        "{:?}",
        g.evidence
    );
    assert!(matches!(g.remedy, Remedy::Unknown { .. }), "{:?}", g.remedy);
    assert!(
        report.holder_scan.is_none(),
        "nothing to match descriptors against"
    );
}

/// A reset: its evidence says the scan saw everything and names the tenants it would end, the
/// live listed ones only (not one outside this PID namespace); a kill never speaks of a reset.
#[test]
fn a_resets_evidence_names_the_scan_and_the_live_tenants_only() {
    let t = Tree::new("tenants");
    t.driver_gpu(5);
    t.whole();
    t.process(500, 'S', 1, 500);
    t.holds_gpu(500);
    let rows = vec![
        row(4400, 3 << 30, Some(UnreadableReason::Exited)),
        row(500, MIB, None),
        row(600, MIB, Some(UnreadableReason::OutsidePidNamespace)),
    ];
    let devices = [(device(0, (3 << 30) + 2 * MIB), rows)];
    let report = one_look(&t.0, &devices, quick());
    let g = &report.ghosts[0];
    assert_eq!(g.remedy, Remedy::GpuReset);
    assert!(
        g.evidence
            .iter()
            .any(|e| e.starts_with("no process but those the driver lists holds /dev/nvidia5")),
        "{:?}",
        g.evidence
    );
    assert_eq!(
        g.evidence.last().unwrap(),
        "a GPU reset also ends the process the driver lists on GPU 0: 500"
    );
    // A related holder: a kill, and no word of a reset or of nothing holding it.
    t.process(4411, 'S', 1, 4400);
    t.holds_gpu(4411);
    let report = one_look(&t.0, &devices, quick());
    let g = &report.ghosts[0];
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![4411] });
    let text = g.evidence.join("\n");
    assert!(
        !text.contains("reset") && !text.contains("no process but"),
        "{text}"
    );
}

/// A compute context's memory: a related holder without `nvidia-uvm` has no compute context,
/// so it is no suspect; with it, it is the one to kill. A graphics context's memory: no
/// holder is exempt for lacking it.
#[test]
fn a_holder_without_nvidia_uvm_holds_no_compute_memory() {
    let t = Tree::new("no-uvm");
    t.driver_gpu(5);
    t.whole();
    t.process(4411, 'S', 1, 4400);
    t.holds(4411, 7, "/dev/zero");
    let rows = vec![row(4400, 3 << 30, Some(UnreadableReason::Exited))];
    let devices = [(device(0, 3 << 30), rows)];
    let g = &one_look(&t.0, &devices, quick()).ghosts[0];
    assert_eq!(g.remedy, Remedy::GpuReset, "{:?}", g.evidence);
    assert!(
        g.evidence[1].contains("no compute context"),
        "{:?}",
        g.evidence
    );
    let mut graphics = devices.clone();
    graphics[0].1[0].context = Some(crate::types::GpuContextKind::Graphics);
    let g = &one_look(&t.0, &graphics, quick()).ghosts[0];
    assert_eq!(g.remedy, Remedy::Kill { pids: vec![4411] });
}

/// The driver's list said exited, and a process has the number again by the look: not a ghost
/// of the exited one, and said.
#[test]
fn an_exited_row_whose_number_is_a_process_again_is_not_seen() {
    let me = std::process::id();
    let rows = vec![row(me, MIB, Some(UnreadableReason::Exited))];
    let report = one_look(Path::new("/proc"), &[(device(0, MIB), rows)], quick());
    assert!(report.ghosts.is_empty(), "{report:?}");
    assert!(
        report.unseen[0].message.contains(&format!("pid {me}")),
        "{report:?}"
    );
    assert!(!report.complete);
}

/// A watch with no threshold: a process in D is stuck at its second look, never its first.
#[test]
fn a_watch_with_no_threshold_calls_stuck_at_the_second_look() {
    let t = Tree::new("zero-d");
    t.process(700, 'D', 1, 700);
    let devices = [(device(0, MIB), vec![row(700, MIB, None)])];
    let activity = BTreeMap::new();
    let scanner = scanner::Scanner::default();
    let mut memory = Memory::default();
    let mut look = || {
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
            options: GhostOptions::default().stuck_after(Duration::ZERO),
            single: false,
            scans: Scans::Background(&scanner),
        };
        classify(&l, &mut memory, &devices)
    };
    assert!(look().ghosts.is_empty(), "one look is not two");
    std::thread::sleep(Duration::from_millis(2));
    assert_eq!(look().ghosts[0].class, GhostClass::Stuck);
}

/// Orphans by each relation, as facts (no activity read): a group leader gone and the parent
/// init; a session leader gone and a subreaper parent in another session; a session leader
/// gone but the parent in the same session (not reparented); its own group's leader; none.
#[test]
fn orphans_by_each_relation() {
    let t = Tree::new("orphans");
    t.full(600, "subreaper", 'S', (1, 600, 600));
    t.full(610, "shell", 'S', (1, 610, 680));
    t.full(700, "w", 'S', (1, 690, 690));
    t.full(702, "w", 'S', (600, 702, 695));
    t.full(703, "w", 'S', (610, 703, 680));
    t.full(704, "w", 'S', (1, 0, 0));
    let rows = [700, 702, 703, 704].map(|p| row(p, MIB, None)).to_vec();
    let report = one_look(&t.0, &[(device(0, 4 * MIB), rows)], quick());
    let orphans: BTreeSet<u32> = report
        .facts
        .iter()
        .filter(|f| f.class == GhostClass::Orphan)
        .map(|f| f.pid)
        .collect();
    assert_eq!(orphans, BTreeSet::from([700, 702]), "{report:?}");
    let f = report.facts.iter().find(|f| f.pid == 702).unwrap();
    assert_eq!(f.evidence[0], "the leader 695 of its session is gone");
    assert_eq!(f.evidence[1], "its parent is now 600 (subreaper)");
}

/// A zombie's evidence names its parent by name.
#[test]
fn a_zombies_parent_is_named() {
    let t = Tree::new("zombie-parent");
    t.full(600, "trainer", 'S', (1, 600, 600));
    t.full(601, "w", 'Z', (600, 600, 600));
    let rows = vec![row(601, MIB, None)];
    let g = &one_look(&t.0, &[(device(0, MIB), rows)], quick()).ghosts[0];
    assert!(
        g.evidence[0].ends_with("not reaped by its parent 600 (trainer)"),
        "{:?}",
        g.evidence
    );
}

/// What a scan says of itself: complete, every process's descriptors read and the whole host
/// shown, or not, each said; its age grows.
#[test]
fn a_scans_figures_say_what_it_did_not_see() {
    let all = HolderScan {
        complete: true,
        covers_host: Some(true),
        ..HolderScan::default()
    };
    assert!(all.saw_everything() && all.not_seen().is_empty());
    for (scan, said) in [
        (
            HolderScan {
                complete: false,
                ..all
            },
            "deadline",
        ),
        (
            HolderScan {
                unreadable: 1,
                ..all
            },
            "could not be read",
        ),
        (
            HolderScan {
                covers_host: Some(false),
                ..all
            },
            "does not show every process",
        ),
        (
            HolderScan {
                covers_host: None,
                ..all
            },
            "is not known",
        ),
    ] {
        assert!(!scan.saw_everything(), "{scan:?}");
        let lines = scan.not_seen();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains(said), "{lines:?}");
    }
    // A crafted procfs: a process whose fd directory is a file (unreadable), one with none
    // (gone since the listing), one of another PID namespace's pid 1 (not the whole host).
    let t = Tree::new("scan-figures");
    t.process(801, 'S', 1, 801);
    std::fs::write(t.0.join("801/fd"), "not a directory").unwrap();
    t.process(802, 'S', 1, 802);
    std::fs::create_dir_all(t.0.join("1/ns")).unwrap();
    std::os::unix::fs::symlink("pid:[4026539999]", t.0.join("1/ns/pid")).unwrap();
    let majors = Majors {
        gpu: Some(1),
        uvm: None,
    };
    let s = scan(&t.0, majors, Instant::now() + Duration::from_secs(60));
    assert_eq!(s.stats.unreadable, 1, "{:?}", s.stats);
    assert_eq!(s.stats.covers_host, Some(false));
    assert!(s.stats.complete && !s.stats.saw_everything());
    std::thread::sleep(Duration::from_millis(20));
    assert!(s.stats_at(Instant::now()).age >= Duration::from_millis(20));
}

/// A rootfs without the kubelet's log layout: with no live list, pods are not looked at (no
/// word); with a live list, that the layout could not be read is said.
#[test]
fn a_rootfs_without_the_kubelets_layout() {
    let t = Tree::new("no-layout");
    let uid = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";
    let d = t.process(801, 'S', 1, 801);
    std::fs::write(
        d.join("cgroup"),
        format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope\n",
            uid.replace('-', "_"),
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let rootfs = std::env::temp_dir().join(format!("hmn-no-layout-{}", std::process::id()));
    std::fs::create_dir_all(&rootfs).unwrap();
    let devices = [(device(0, MIB), vec![row(801, MIB, None)])];
    let activity = BTreeMap::new();
    let live = BTreeSet::from([("ml".to_string(), "train-0".to_string())]);
    let run = |live: Option<&BTreeSet<(String, String)>>| {
        let look = Look {
            procfs: &t.0,
            pods: pods::Pods::read(Ok(&rootfs), live),
            stats: &std::collections::BTreeMap::new(),
            activity: &activity,
            now_us: idle::now_us(),
            options: GhostOptions::default(),
            single: true,
            scans: Scans::Now,
        };
        classify(&look, &mut Memory::default(), &devices)
    };
    let quiet = run(None);
    assert!(
        quiet.ghosts.is_empty() && !quiet.unseen.iter().any(|u| u.message.contains("pods")),
        "{quiet:?}"
    );
    let said = run(Some(&live));
    assert!(said.ghosts.is_empty(), "{said:?}");
    // Said as the read that failed (the path and the system's words), not as a node without
    // a kubelet: with a live list, a missing layout is a failure to read.
    let failed = format!("{}: ", rootfs.join("var/log/pods").display());
    assert!(
        said.unseen.iter().any(|u| u.message.contains(&failed)),
        "{:?}",
        said.unseen
    );
    // A layout path that is not a directory is a failure even without the live list.
    std::fs::create_dir_all(rootfs.join("var/log")).unwrap();
    std::fs::write(rootfs.join("var/log/pods"), "not a directory").unwrap();
    let odd = run(None);
    assert!(
        odd.unseen.iter().any(|u| u.message.contains(&failed)),
        "{:?}",
        odd.unseen
    );
    std::fs::remove_dir_all(&rootfs).unwrap();
}
