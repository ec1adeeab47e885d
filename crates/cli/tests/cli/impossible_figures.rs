//! Figures that cannot be, from sysfs, DRM fdinfo and the NVML path: a client claiming 16 EiB of
//! a 24 GiB card is left out and counted, a bad line costs a client only that line, an fdinfo
//! that is `/dev/zero` is not read to its end, a card using more than it has is an error, and a
//! FIFO named as the NVML library does not block.
#![cfg(target_os = "linux")]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `from` copied to `to`, links as links.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let kind = e.file_type().unwrap();
        if kind.is_symlink() {
            symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The `mixed` fixture with hostile clients of its AMD card (card1, 0000:03:00.0, 24 GiB).
pub(super) fn hostile_tree(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("hmn-impossible-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    copy_tree(&support::fixtures("drm/mixed"), &root);
    let client = |pid: u32, comm: &str, fdinfo: Option<&str>| {
        let d = root.join("proc").join(pid.to_string());
        std::fs::create_dir_all(d.join("fd")).unwrap();
        std::fs::create_dir_all(d.join("fdinfo")).unwrap();
        std::fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(d.join("status"), format!("Name:\t{comm}\nNSpid:\t{pid}\n")).unwrap();
        symlink("/dev/dri/card1", d.join("fd/3")).unwrap();
        match fdinfo {
            Some(text) => std::fs::write(d.join("fdinfo/3"), text).unwrap(),
            None => symlink("/dev/zero", d.join("fdinfo/3")).unwrap(),
        }
    };
    client(
        600,
        "hog",
        Some(
            "drm-driver:\tamdgpu\ndrm-client-id:\t60\ndrm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t18446744073709551615\n",
        ),
    );
    client(
        601,
        "halfbad",
        Some(
            "drm-driver:\tamdgpu\ndrm-client-id:\t61\ndrm-pdev:\t0000:03:00.0\ndrm-memory-vram:\t1024 KiB\ndrm-memory-cpu:\tlots\n",
        ),
    );
    client(602, "zero", None);
    root
}

pub(super) fn hmn(root: &Path, args: &[&str]) -> (i32, String, String, Duration) {
    let t = Instant::now();
    let o = crate::util::hmn::hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
        .env("PATH", support::empty_dir())
        .env("HYPOMNESIS_PROCFS", root.join("proc"))
        .env("HYPOMNESIS_SYSFS", root.join("sys"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
        t.elapsed(),
    )
}

#[test]
fn impossible_clients_are_left_out_and_counted_and_good_fields_kept() {
    let root = hostile_tree("clients");
    let (_, out, err, took) = hmn(&root, &["ps", "--json"]);
    assert!(
        took < Duration::from_secs(5),
        "an fdinfo of /dev/zero is not read through: {took:?}"
    );
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let on_amd: Vec<(u64, u64)> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pid"].as_u64().unwrap() >= 600)
        .map(|r| {
            (
                r["pid"].as_u64().unwrap(),
                r["used_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        on_amd,
        vec![(601, 1 << 20)],
        "no 16 EiB row; the bad cpu line cost nothing else"
    );
    assert!(
        err.contains("hmn: 1 process row left out: no memory figure, pid 0, or more memory than the device has"),
        "{err}"
    );
    let (_, out, _, _) = hmn(&root, &["doctor"]);
    for line in [
        "fdinfo files refused: 1",
        "fdinfo lines left out: 1",
        "process rows dropped: 1 (more memory than the device has)",
    ] {
        assert!(out.contains(line), "{line:?} in\n{out}");
    }
    let (_, out, _, _) = hmn(&root, &["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let drm = v["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == "drm")
        .unwrap();
    assert_eq!(drm["dropped_process_rows"], 1, "{drm}");
    let _ = std::fs::remove_dir_all(root);
}

/// The largest resident set any child of this test process has had, bytes.
fn children_max_rss() -> u64 {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is a valid one.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &raw mut u);
        u
    };
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// Files a crafted procfs or sysfs tree makes huge (1 GiB, sparse: a `status` of a client, the
/// card's `product_name`, `meminfo`) are read up to a cap suited to each, not whole: they cost
/// what real ones do (they took seconds and a gigabyte or three of memory).
#[test]
fn gigabyte_files_in_a_crafted_tree_are_read_only_up_to_their_cap() {
    let root = hostile_tree("huge");
    let huge = |path: &Path| {
        std::fs::File::create(path)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
    };
    huge(&root.join("proc/601/status"));
    huge(&root.join("proc/meminfo"));
    let dev = root.join("sys/class/drm/card1/device");
    huge(&dev.join("product_name"));
    for args in [&["ps", "--json"][..], &["--json"], &["ps"]] {
        let (code, out, err, took) = hmn(&root, args);
        assert!(code == 0 || code == 1, "{args:?}: {code} {err}");
        assert!(took < Duration::from_secs(10), "{args:?} took {took:?}");
        assert!(out.len() < 1 << 20, "{args:?} printed {} bytes", out.len());
    }
    let (_, out, _, _) = hmn(&root, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let card1 = v
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["pci_bus_id"] == "0000:03:00.0")
        .unwrap_or_else(|| panic!("{v}"));
    assert!(
        card1["name"].is_null(),
        "a product_name over its cap is no name: {card1}"
    );
    let rss = children_max_rss();
    assert!(
        rss < 256 << 20,
        "a child of this test held {} MiB",
        rss >> 20
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_card_using_more_than_it_has_is_an_error_not_zero_free() {
    let root = hostile_tree("card");
    let dev = root.join("sys/class/drm/card1/device");
    let total: u64 = std::fs::read_to_string(dev.join("mem_info_vram_total"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(dev.join("mem_info_vram_used"), format!("{}\n", total + 1)).unwrap();
    // The card is skipped with its reason and the others listed: exit 0 (0.2.15).
    let (code, out, err, _) = hmn(&root, &["--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("impossible figures") && err.contains("(skipped)"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let amd = v
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["error"].as_str().is_some_and(|e| e.contains("card1")))
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(amd["error_kind"], "bad_answer", "{amd}");
    assert!(
        amd["error"]
            .as_str()
            .unwrap()
            .contains("impossible figures"),
        "{amd}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_fifo_named_as_the_nvml_library_does_not_block() {
    let fifo = std::env::temp_dir().join(format!("hmn-fifo-{}", std::process::id()));
    let _ = std::fs::remove_file(&fifo);
    support::mkfifo(&fifo);
    let t = Instant::now();
    let o = crate::util::hmn::hmn()
        .arg("doctor")
        .env("HYPOMNESIS_NVML_LIBRARY", &fifo)
        .env("PATH", support::empty_dir())
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("not a regular file"), "{out}");
    let _ = std::fs::remove_file(fifo);
}

/// NVML rows whose pid is no process's (0, and 2³²−1 = `NVML_VALUE_NOT_AVAILABLE`) are left
/// out, and `hmn doctor` says they had no process rather than blaming their memory figure
/// (which it did: "memory not available or larger than the device").
#[test]
fn rows_without_a_process_are_not_blamed_on_memory() {
    use support::{FakeVariant, fake_nvml, write_scenario};
    let scenario = r#"{"devices": [{"name": "NVIDIA H200", "total": 150754820096,
        "compute_processes": [{"pid": 0, "used": 1048576}, {"pid": 4294967295, "used": 1048576},
                              {"pid": 4242, "used": 1048576}]}]}"#;
    let out = crate::util::hmn::hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("PATH", support::empty_dir())
        .args(["ps", "--json"])
        .output()
        .unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pids: Vec<u64> = rows
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["pid"].as_u64())
        .collect();
    assert_eq!(pids, vec![4242], "{rows}");
    let doctor = crate::util::hmn::hmn()
        .env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
        .env("FAKE_NVML_SCENARIO", write_scenario(scenario))
        .env("HYPOMNESIS_SYSFS", support::empty_dir())
        .env("PATH", support::empty_dir())
        .args(["doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    // The doctor lists the processes first, so the rows are counted by then.
    assert!(
        text.contains("process rows dropped")
            && text.contains("2 (pid 0 or 4294967295: no process)"),
        "{text}"
    );
    assert!(!text.contains("memory not available"), "{text}");
}
