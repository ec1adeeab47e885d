#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use super::*;

use std::path::PathBuf;

const UID: &str = "6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d";
const UID2: &str = "0b1c2d3e-4f50-4162-8374-a5b6c7d8e9f0";

fn id(c: char) -> String {
    c.to_string().repeat(64)
}

/// A rootfs in the temp directory with the kubelet's two log directories.
fn rootfs(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hmn-kube-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join(PODS)).unwrap();
    std::fs::create_dir_all(d.join(CONTAINERS)).unwrap();
    d
}

fn pod_dir(root: &Path, name: &str) {
    std::fs::create_dir_all(root.join(PODS).join(name)).unwrap();
}

/// A link as the kubelet makes it: absolute, into `/var/log/pods` (dangling here: never
/// followed).
fn link(root: &Path, name: &str) {
    std::os::unix::fs::symlink(
        "/var/log/pods/elsewhere/0.log",
        root.join(CONTAINERS).join(name),
    )
    .unwrap();
}

fn container(id: &str, uid: Option<&str>) -> Container {
    Container {
        id: id.to_string(),
        runtime: Some("containerd".into()),
        pod_uid: uid.map(String::from),
        namespace: None,
        pod: None,
        name: None,
    }
}

fn names_of(c: &Container) -> (Option<&str>, Option<&str>, Option<&str>) {
    (c.namespace.as_deref(), c.pod.as_deref(), c.name.as_deref())
}

#[test]
fn a_pods_names_are_read_once_and_kept() {
    let root = rootfs("once");
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}"));
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}/worker"));
    pod_dir(&root, &format!("default_notebook_{UID2}"));
    link(&root, &format!("trainer-0_ml-team_worker-{}.log", id('a')));
    link(&root, &format!("notebook_default_jupyter-{}.log", id('b')));
    let mut names = Names::new();
    let now = Instant::now();
    let mut c = container(&id('a'), Some(UID));
    names.name(&root, &mut c, now);
    assert_eq!(
        names_of(&c),
        (Some("ml-team"), Some("trainer-0"), Some("worker"))
    );
    assert_eq!(c.pod_uid.as_deref(), Some(UID), "the UID and id stay");
    assert_eq!(names.listings, 2, "one listing of each directory");

    // The other pod was in the same listings: no file is touched for it, nor for a second
    // process of the first pod, even once the logs are gone.
    std::fs::remove_dir_all(root.join("var")).unwrap();
    let mut other = container(&id('b'), Some(UID2));
    names.name(&root, &mut other, now + RELIST * 5);
    assert_eq!(
        names_of(&other),
        (Some("default"), Some("notebook"), Some("jupyter"))
    );
    let mut again = container(&id('a'), Some(UID));
    names.name(&root, &mut again, now + RELIST * 10);
    assert_eq!(again, c);
    assert_eq!(names.listings, 2, "no listing for what is known");

    // Outside a pod: nothing to name, nothing read.
    let mut docker = container(&id('c'), None);
    names.name(&root, &mut docker, now + RELIST * 20);
    assert_eq!(names_of(&docker), (None, None, None));
    assert_eq!(names.listings, 2);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_container_not_known_yet_relists_only_its_directory_at_most_once_a_second() {
    let root = rootfs("relist");
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}"));
    link(&root, &format!("trainer-0_ml-team_worker-{}.log", id('a')));
    let mut names = Names::new();
    let t0 = Instant::now();
    let mut first = container(&id('a'), Some(UID));
    names.name(&root, &mut first, t0);
    assert_eq!(names.listings, 2);

    // The container restarts: a new id, its link made a moment later.
    let mut restarted = container(&id('d'), Some(UID));
    names.name(&root, &mut restarted, t0 + Duration::from_millis(10));
    assert_eq!(
        names_of(&restarted),
        (Some("ml-team"), Some("trainer-0"), None),
        "within a second of the last listing, not listed again"
    );
    assert_eq!(names.listings, 2);
    link(&root, &format!("trainer-0_ml-team_worker-{}.log", id('d')));
    names.name(&root, &mut restarted, t0 + RELIST);
    assert_eq!(
        names_of(&restarted),
        (Some("ml-team"), Some("trainer-0"), Some("worker"))
    );
    assert_eq!(names.listings, 3, "the links listed again, not the pods");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_missing_layout_names_nothing() {
    let root = rootfs("missing");
    std::fs::remove_dir_all(root.join("var")).unwrap();
    let mut names = Names::new();
    let now = Instant::now();
    let mut c = container(&id('a'), Some(UID));
    names.name(&root, &mut c, now);
    assert_eq!(c, container(&id('a'), Some(UID)), "UID and id only");
    assert_eq!(names.listings, 1, "no pod: the links are not listed");
    names.name(&root, &mut c, now + Duration::from_millis(500));
    assert_eq!(names.listings, 1);

    // Pods without links: the pod's names, no container name.
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}"));
    names.name(&root, &mut c, now + RELIST);
    assert_eq!(names_of(&c), (Some("ml-team"), Some("trainer-0"), None));
    assert_eq!(names.listings, 3);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_link_of_another_pod_or_names_that_disagree_give_no_name() {
    let root = rootfs("disagree");
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}"));
    // The id's link names another pod.
    link(&root, &format!("other-pod_ml-team_worker-{}.log", id('a')));
    // Two directories for one UID2, two links for one id: which is right is unknown.
    pod_dir(&root, &format!("default_notebook_{UID2}"));
    pod_dir(&root, &format!("default_impostor_{UID2}"));
    pod_dir(&root, &format!("batch_job-1_{}", "7".repeat(36)));
    link(&root, &format!("job-1_batch_main-{}.log", id('b')));
    link(&root, &format!("job-1_batch_sidecar-{}.log", id('b')));
    let mut names = Names::new();
    let now = Instant::now();
    let mut c = container(&id('a'), Some(UID));
    names.name(&root, &mut c, now);
    assert_eq!(names_of(&c), (Some("ml-team"), Some("trainer-0"), None));
    let mut twice = container(&id('c'), Some(UID2));
    names.name(&root, &mut twice, now);
    assert_eq!(names_of(&twice), (None, None, None));
    let seven = "7".repeat(36);
    let mut b = container(&id('b'), Some(&seven));
    names.name(&root, &mut b, now);
    assert_eq!(names_of(&b), (Some("batch"), Some("job-1"), None));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn hostile_and_countless_entries_are_skipped_within_the_caps() {
    let root = rootfs("hostile");
    pod_dir(&root, &format!("ml-team_trainer-0_{UID}"));
    for bad in [
        format!("ml-team_trainer\n-0_{UID2}"),
        format!("ml-team_\x1b[2Jx_{UID2}"),
        format!("{}_x_{UID2}", "n".repeat(200)),
        "no-underscore".to_string(),
        "lost+found".to_string(),
    ] {
        pod_dir(&root, &bad);
    }
    // Not UTF-8.
    {
        use std::os::unix::ffi::OsStrExt;
        let raw = std::ffi::OsStr::from_bytes(b"ns_p\xff_6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d");
        std::fs::create_dir_all(root.join(PODS).join(raw)).unwrap();
    }
    link(&root, &format!("trainer-0_ml-team_w\x07-{}.log", id('a')));
    for i in 0..3000 {
        std::fs::write(root.join(CONTAINERS).join(format!("junk-{i}")), "").unwrap();
    }
    let l = layout(&root, MAX_ENTRIES, LIST_TIME);
    assert_eq!(
        l.pods,
        KubeletDirState::Found {
            entries: 1,
            skipped: 6,
            complete: true
        }
    );
    assert_eq!(
        l.containers,
        KubeletDirState::Found {
            entries: 0,
            skipped: 3001,
            complete: true
        }
    );
    assert_eq!(l.pods_dir, root.join("var/log/pods"));
    // A cap of entries, or of time, cuts the listing and says so.
    let cut = layout(&root, 100, LIST_TIME);
    assert!(
        matches!(
            cut.containers,
            KubeletDirState::Found {
                entries: 0,
                skipped: 100,
                complete: false
            }
        ),
        "{cut:?}"
    );
    let none = layout(&root, MAX_ENTRIES, Duration::ZERO);
    assert!(
        matches!(
            none.containers,
            KubeletDirState::Found {
                skipped: 0,
                complete: false,
                ..
            }
        ),
        "{none:?}"
    );
    let mut names = Names::new();
    let mut c = container(&id('a'), Some(UID));
    names.name(&root, &mut c, Instant::now());
    assert_eq!(names_of(&c), (Some("ml-team"), Some("trainer-0"), None));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn why_a_directory_cannot_be_listed() {
    let root = rootfs("why");
    std::fs::remove_dir_all(root.join(CONTAINERS)).unwrap();
    std::fs::write(root.join(CONTAINERS), "a file").unwrap();
    let l = layout(&root.join("nonexistent"), MAX_ENTRIES, LIST_TIME);
    assert_eq!(
        (l.pods, l.containers),
        (KubeletDirState::Missing, KubeletDirState::Missing)
    );
    let l = layout(&root, MAX_ENTRIES, LIST_TIME);
    assert!(
        matches!(&l.containers, KubeletDirState::Failed { reason } if reason.contains("directory")),
        "{l:?}"
    );
    // Root lists any directory whatever its mode: the refusal shows only to another user.
    if running_as_root() {
        eprintln!("running as root: permission denied not checked");
    } else {
        use std::os::unix::fs::PermissionsExt;
        let pods = root.join(PODS);
        std::fs::set_permissions(&pods, std::fs::Permissions::from_mode(0o000)).unwrap();
        let l = layout(&root, MAX_ENTRIES, LIST_TIME);
        std::fs::set_permissions(&pods, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(l.pods, KubeletDirState::PermissionDenied);
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Whether this process runs as root, from the owner of a file it makes.
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let f = std::env::temp_dir().join(format!("hmn-kube-whoami-{}", std::process::id()));
    std::fs::write(&f, "").unwrap();
    let uid = std::fs::metadata(&f).unwrap().uid();
    let _ = std::fs::remove_file(&f);
    uid == 0
}

#[test]
fn a_cut_listing_adds_within_the_cap_and_a_complete_one_replaces() {
    let mut known: Listing<u32> = Listing::new();
    let listed = |keys: &[&str]| -> Listed<u32> {
        keys.iter().map(|k| ((*k).to_string(), Some(1))).collect()
    };
    known.update(listed(&["a", "b"]), true);
    known.update(listed(&["c"]), false);
    assert_eq!(known.by_key.len(), 3, "a cut listing adds");
    known.update(listed(&["d"]), true);
    assert_eq!(
        known.by_key.keys().collect::<Vec<_>>(),
        ["d"],
        "a complete one replaces"
    );
    let mut unknown = listed(&["e"]);
    unknown.insert("f".into(), None);
    known.update(unknown, true);
    assert_eq!(
        known.by_key.keys().collect::<Vec<_>>(),
        ["e"],
        "disagreement is unknown"
    );
    let many: Vec<String> = (0..MAX_ENTRIES).map(|i| i.to_string()).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    known.update(listed(&many), false);
    assert_eq!(known.by_key.len(), MAX_ENTRIES, "never past the cap");
    let mut l = Listed::new();
    add(&mut l, "k", 1);
    add(&mut l, "k", 1);
    assert_eq!(l.get("k"), Some(&Some(1)), "the same twice agrees");
    add(&mut l, "k", 2);
    assert_eq!(l.get("k"), Some(&None));
    add(&mut l, "k", 1);
    assert_eq!(l.get("k"), Some(&None), "stays unknown");
}
