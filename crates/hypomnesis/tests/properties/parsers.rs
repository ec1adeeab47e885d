//! Property tests on every parser: arbitrary bytes and structured mutations of real inputs
//! (the recorded `nvidia-smi` captures, kernel-format fdinfo and sysfs files) never panic,
//! errors say what was wrong, and what is accepted keeps the memory invariants (free + used =
//! total, reserved within used); generated inputs round-trip to the values they were made
//! from. The case count comes from `PROPTEST_CASES` (CI uses a few thousand;
//! `scripts/checks/fuzz.sh` runs 100,000 per parser).
#![cfg(all(feature = "nvidia-smi-fallback", feature = "drm"))]
#![allow(clippy::format_collect, clippy::format_push_string)] // test code

use support::capture_reader;

use std::sync::OnceLock;

use hypomnesis::__parsers as p;
use proptest::prelude::*;

/// Real inputs to mutate: capture sections, and kernel-format DRM files.
fn corpus() -> &'static Vec<String> {
    static C: OnceLock<Vec<String>> = OnceLock::new();
    C.get_or_init(|| {
        let mut v = Vec::new();
        for path in support::all_captures() {
            let text = capture_reader::read(&path);
            for (phase, what) in [
                ("load", "query-gpu"),
                ("load", "query-compute-apps"),
                ("idle", "query (-q)"),
                ("load", "query (-q)"),
                ("capabilities", "version"),
                ("capabilities", "list (-L)"),
            ] {
                if let Some(s) = capture_reader::section(&text, phase, what) {
                    v.push(s);
                }
            }
        }
        let fixtures = support::fixtures("drm/mixed/proc");
        for pid in ["100", "200", "300", "301"] {
            for entry in std::fs::read_dir(fixtures.join(pid).join("fdinfo")).unwrap().flatten() {
                v.push(std::fs::read_to_string(entry.path()).unwrap());
            }
        }
        v.push("10352 1530 1137 6 0 421 0\n".into());
        v.push("Name:\tcat\nVmPeak:\t    8432 kB\nVmRSS:\t    1920 kB\nNSpid:\t48213\t7\n".into());
        v.push("4242 (my (odd) name) S 4200 4242 4200 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 98765 1 300\n".into());
        v.push("DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n".into());
        v.push("pid_12444_luid_0x00000000_0x0000D1C2_phys_0".into());
        v.push(
            "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
             40 27 0:33 / /tmp/hmn\\040proc rw shared:9 - proc proc rw,hidepid=invisible,gid=27\n"
                .into(),
        );
        v.push("Gid:\t1\t1\t1\t100\nGroups:\t27 44\nCapEff:\t000001ffffffffff\n".into());
        v
    })
}

/// One structured mutation of `s`.
fn mutate(s: &str, op: u8, at: usize, with: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let i = if chars.is_empty() {
        0
    } else {
        at % chars.len()
    };
    let lines: Vec<&str> = s.lines().collect();
    let li = if lines.is_empty() {
        0
    } else {
        at % lines.len()
    };
    match op % 8 {
        0 => chars[..i].iter().collect(), // truncate
        1 => chars
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != i)
            .map(|(_, c)| c)
            .collect(), // drop a char
        2 => {
            let mut c = chars.clone();
            c.splice(i..i, with.chars());
            c.into_iter().collect()
        } // insert
        3 => lines
            .iter()
            .enumerate()
            .filter(|(k, _)| *k != li)
            .map(|(_, l)| *l)
            .collect::<Vec<_>>()
            .join("\n"), // drop a line
        4 => {
            let mut l = lines.clone();
            if !l.is_empty() {
                l.insert(li, lines[li]);
            }
            l.join("\n")
        } // duplicate a line
        5 => s.replace(", ", with),       // change separators
        6 => s.replace(|c: char| c.is_ascii_digit(), with), // break numbers
        _ => s.replace('\n', "\r\n"),     // CRLF
    }
}

const MIB: u64 = 1 << 20;

/// What the `nvidia-smi` fallback accepts keeps the invariants of a device: free + used =
/// total, used = total - free, a reservation within used (give or take nvidia-smi's rounding to
/// whole MiB) and no larger than total; a GPU taken as unified (both figures `[N/A]`,
/// `[Not Supported]` or 0) has the host's pool, whole, and no reservation.
fn smi_invariants(s: &str) {
    for with_reserved in [true, false] {
        let Ok(parsed) = p::parse_gpus(s, with_reserved) else {
            continue;
        };
        let lines = s.lines().filter(|l| !l.trim().is_empty()).count();
        assert_eq!(
            parsed.rows.len() + parsed.skipped.len(),
            lines,
            "every line is a row or a skipped line"
        );
        for line in &parsed.skipped {
            let said = line.to_string();
            assert!(said.starts_with("line ") && said.len() < 2_000, "{said:?}");
            assert!(line.text.chars().count() <= 200, "{line:?}");
        }
        for g in parsed.rows {
            let (total, free) = (g.total_mib.clone(), g.free_mib.clone());
            match p::smi_device_info(g) {
                Ok(d) if d.memory_model == Some(hypomnesis::MemoryModel::Unified) => {
                    // No memory of its own: both figures said so, and the host's pool stands in.
                    let none = |f: &Result<u64, String>| {
                        matches!(f, Ok(0))
                            || matches!(f, Err(t) if t == "[N/A]" || t == "[Not Supported]")
                    };
                    assert!(none(&total) && none(&free), "{total:?} {free:?} {d:?}");
                    assert_eq!(d.free_bytes + d.used_bytes, d.total_bytes, "{d:?}");
                    assert_eq!(d.reserved_bytes, None, "{d:?}");
                }
                Ok(d) => {
                    assert_eq!(d.free_bytes + d.used_bytes, d.total_bytes, "{d:?}");
                    assert_eq!(Ok(d.total_bytes), total.map(|t| t * MIB));
                    assert_eq!(Ok(d.free_bytes), free.map(|f| f * MIB));
                    if let Some(r) = d.reserved_bytes {
                        assert!(r <= d.used_bytes + 2 * MIB, "{d:?}");
                        assert!(r <= d.total_bytes + 2 * MIB, "{d:?}");
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

/// Every parser on one input: no panic; errors are non-empty and bounded; accepted device
/// figures keep the invariants.
fn all_parsers(s: &str) {
    smi_invariants(s);
    let check = |r: Result<(), String>| {
        if let Err(e) = r {
            assert!(!e.is_empty() && e.len() < 2_000, "error message: {e:?}");
        }
    };
    check(p::statm_resident_bytes(s, 4096).map(drop));
    check(p::status_vmrss_bytes(s).map(drop));
    check(p::smaps_rollup_rss_pss(s).map(|(rss, pss)| assert!(pss <= rss, "{s:?}")));
    let mut by_node = std::collections::BTreeMap::new();
    check(p::numa_maps_line(s, 4096, &mut by_node).map(|()| {
        assert!(
            by_node.values().all(|&b| b <= 1 << 52),
            "{s:?}: {by_node:?}"
        );
    }));
    check(p::parse_gpus(s, true).map(drop));
    check(p::parse_gpus(s, false).map(drop));
    check(p::parse_apps(s).map(drop));
    check(p::parse_q_memory(s).map(drop));
    let _ = p::parse_q_mig(s);
    let _ = p::parse_list(s);
    check(p::parse_mig_modes(s).map(drop));
    let _ = p::parse_version(s);
    check(p::parse_duration(s).map(drop));
    check(p::parse_fdinfo(s).map(|f| {
        std::hint::black_box(p::client_usage(&f));
    }));
    check(p::parse_size(s).map(drop));
    check(p::parse_sysfs_u64(s).map(drop));
    check(p::parse_pci_id(s).map(drop));
    let _ = p::parse_uevent(s);
    if let Some(a) = p::PciAddress::parse(s) {
        assert_eq!(p::PciAddress::parse(&a.to_string()), Some(a), "{s:?}");
    }
    let _ = p::region_kind(s);
    check(p::parse_pdh_instance(s).map(drop));
    check(hypomnesis::parse_stat(s).map(drop));
    mountinfo_invariants(s);
    kubelet_names(s);
}

/// The kubelet's log names: what is accepted is made of names the kubelet could have written
/// (no `_`, no control character, within the DNS-1123 lengths) and re-forms the input.
fn kubelet_names(s: &str) {
    let clean = |f: &str, max: usize| {
        assert!(!f.is_empty() && f.len() <= max, "{f:?}");
        assert!(
            f.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'),
            "{f:?}"
        );
    };
    if let Some(p) = p::parse_pod_log_dir(s) {
        clean(p.namespace, 63);
        clean(p.pod, 253);
        clean(p.uid, 64);
        assert_eq!(format!("{}_{}_{}", p.namespace, p.pod, p.uid), s);
    }
    if let Some(l) = p::parse_container_log_link(s) {
        clean(l.namespace, 63);
        clean(l.pod, 253);
        clean(l.container, 63);
        assert_eq!(l.id.len(), 64);
        assert_eq!(
            format!("{}_{}_{}-{}.log", l.pod, l.namespace, l.container, l.id),
            s
        );
    }
}

/// The mountinfo parsers on any text: a mount point is absolute, the mount of a path contains
/// it, options and credentials parse or are unknown, and none panics.
fn mountinfo_invariants(s: &str) {
    for line in s.lines() {
        if let Some(m) = p::parse_mountinfo_line(line) {
            assert!(m.mount_point.starts_with('/'), "{line:?}");
        }
    }
    for path in ["/", "/proc", "/tmp/hmn proc/1"] {
        if let Some(m) = p::mount_of(s, path) {
            assert!(path.starts_with(&m.mount_point), "{path} on {m:?}");
        }
    }
    let (hidepid, _, _) = p::procfs_options(s);
    if let Some(c) = p::status_credentials(s) {
        assert!(!c.groups.is_empty());
        let _ = p::hides_other_users(hidepid, None, Some(&c));
    }
    let _ = p::unescape_mountinfo(s);
}

proptest! {
    /// A mount point with any characters, escaped as the kernel escapes it, is read back.
    #[test]
    fn mountinfo_mount_points_round_trip(dir in "[^\\x00]{1,40}", hidepid in 0_u8..5) {
        let escaped: String = dir
            .chars()
            .map(|c| match c {
                ' ' | '\t' | '\n' | '\\' => format!("\\{:03o}", c as u32),
                c => c.to_string(),
            })
            .collect();
        let text = format!(
            "22 27 0:21 / /proc rw - proc proc rw\n40 22 0:33 / /proc/x/{escaped} rw - proc proc rw,hidepid={hidepid}\n"
        );
        let path = format!("/proc/x/{dir}");
        let m = p::mount_of(&text, &path).unwrap();
        prop_assert_eq!(&m.mount_point, &path);
        let (mode, _, _) = p::procfs_options(&m.options);
        prop_assert_eq!(mode.is_some(), hidepid != 3);
    }

    #[test]
    fn arbitrary_text(s in "\\PC*") {
        all_parsers(&s);
    }

    #[test]
    fn arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        all_parsers(&String::from_utf8_lossy(&b));
        let wide: Vec<u16> = b.chunks(2).map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)])).collect();
        let _ = p::utf16_until_nul(&wide);
    }

    #[test]
    fn mutated_real_inputs(k in any::<usize>(), ops in proptest::collection::vec((any::<u8>(), any::<usize>(), "[ -~\\n\\t\\[\\]]{0,8}"), 1..4)) {
        let c = corpus();
        let mut s = c[k % c.len()].clone();
        for (op, at, with) in &ops {
            s = mutate(&s, *op, *at, with);
        }
        all_parsers(&s);
    }

    #[test]
    fn kubelet_names_round_trip(
        ns in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
        pod in "[a-z0-9]([a-z0-9-]{0,40}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?){0,3}",
        container in "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?",
        uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        id in "[0-9a-f]{64}",
        junk in "[_A-Z\\x00-\\x1f\\n ]",
        at in any::<usize>(),
    ) {
        let dir = format!("{ns}_{pod}_{uid}");
        let d = p::parse_pod_log_dir(&dir).unwrap();
        prop_assert_eq!((d.namespace, d.pod, d.uid), (ns.as_str(), pod.as_str(), uid.as_str()));
        let link = format!("{pod}_{ns}_{container}-{id}.log");
        let l = p::parse_container_log_link(&link).unwrap();
        prop_assert_eq!(
            (l.pod, l.namespace, l.container, l.id),
            (pod.as_str(), ns.as_str(), container.as_str(), id.as_str())
        );
        // One character no kubelet name holds, anywhere before the UID or the id: refused.
        let mut bad = dir.clone();
        bad.insert_str(at % (dir.len() - uid.len()), &junk);
        prop_assert!(p::parse_pod_log_dir(&bad).is_none(), "{:?}", bad);
        let mut bad = link.clone();
        bad.insert_str(at % (link.len() - 68), &junk);
        prop_assert!(p::parse_container_log_link(&bad).is_none(), "{:?}", bad);
    }

    #[test]
    fn sizes_round_trip(n in 0_u64..(1 << 40), unit in 0_usize..3) {
        let (text, scale) = [("", 1_u64), (" KiB", 1 << 10), (" MiB", 1 << 20)][unit];
        prop_assert_eq!(p::parse_size(&format!("{n}{text}")), Ok(n * scale));
    }

    #[test]
    fn durations_round_trip(ms in 1_u64..86_400_000) {
        prop_assert_eq!(p::parse_duration(&format!("{ms}ms")), Ok(std::time::Duration::from_millis(ms)));
    }

    #[test]
    fn pdh_names_round_trip(pid in any::<u32>(), hi in any::<u32>(), lo in any::<u32>(), phys in 0_u32..16) {
        let name = format!("pid_{pid}_luid_0x{hi:08X}_0x{lo:08X}_phys_{phys}");
        let i = p::parse_pdh_instance(&name).unwrap();
        prop_assert_eq!((i.pid, i.luid_high, i.luid_low, i.phys), (Some(pid), hi, lo, phys));
    }

    #[test]
    fn smi_device_figures_keep_the_invariants(total in 1_u64..2_000_000, free in 0_u64..2_100_000, reserved in 0_u64..4096) {
        let line = format!("3, GPU-x, 590.48.01, 00000000:01:00.0, {total}, {free}, {reserved}, NVIDIA H200\n");
        let g = p::parse_gpus(&line, true).unwrap().rows.remove(0);
        match p::smi_device_info(g) {
            Ok(d) => {
                prop_assert!(free <= total);
                prop_assert_eq!((d.index, d.total_bytes, d.free_bytes), (3, total * MIB, free * MIB));
                prop_assert_eq!(d.used_bytes, (total - free) * MIB);
                // The reservation is kept exactly when it fits in used, give or take a MiB of
                // rounding per figure.
                let fits = reserved * MIB <= (total - free) * MIB + 2 * MIB;
                prop_assert_eq!(d.reserved_bytes, fits.then_some(reserved * MIB));
            }
            Err(e) => {
                prop_assert!(free > total, "refused a possible row: {}", e);
                prop_assert!(e.to_string().contains("memory.free is larger than memory.total"));
            }
        }
    }

    #[test]
    fn apps_round_trip(rows in proptest::collection::vec((1_u32..4_194_304, 0_u64..200_000, "[a-z_][a-z0-9_.-]{0,15}"), 0..20)) {
        let text: String = rows
            .iter()
            .map(|(pid, mib, name)| format!("00000000:01:00.0, {pid}, {mib}, /usr/bin/{name}\n"))
            .collect();
        let apps = p::parse_apps(&text).unwrap();
        prop_assert!(apps.skipped.is_empty(), "{:?}", apps.skipped);
        prop_assert_eq!(apps.rows.len(), rows.len());
        for (a, (pid, mib, name)) in apps.rows.iter().zip(&rows) {
            prop_assert_eq!(a.pid, *pid);
            prop_assert_eq!(a.used_mib.clone(), Ok(*mib));
            let want = format!("/usr/bin/{name}");
            prop_assert_eq!(a.name.as_deref(), Some(want.as_str()));
        }
    }

    #[test]
    fn q_memory_round_trip(blocks in proptest::collection::vec((1_u64..200_000, 0_u64..4096, 0_u64..200_000, 0_u64..200_000), 1..5)) {
        let mut text = String::from("==============NVSMI LOG==============\n\nAttached GPUs : 1\n");
        for (k, (total, reserved, used, free)) in blocks.iter().enumerate() {
            text.push_str(&format!(
                "GPU 00000000:{k:02X}:00.0\n    Product Name : NVIDIA H200\n    FB Memory Usage\n        Total : {total} MiB\n        Reserved : {reserved} MiB\n        Used : {used} MiB\n        Free : {free} MiB\n    BAR1 Memory Usage\n        Total : 256 MiB\n        Used : 1 MiB\n        Free : 255 MiB\n"
            ));
        }
        let q = p::parse_q_memory(&text).unwrap();
        prop_assert_eq!(q.len(), blocks.len());
        for (k, (m, (total, reserved, used, free))) in q.iter().zip(&blocks).enumerate() {
            prop_assert_eq!(&m.pci_bus_id, &format!("00000000:{k:02X}:00.0"));
            prop_assert_eq!(m.total_mib.clone(), Ok(*total));
            prop_assert_eq!(m.reserved_mib.clone(), Some(Ok(*reserved)));
            prop_assert_eq!(m.used_mib.clone(), Ok(*used));
            prop_assert_eq!(m.free_mib.clone(), Ok(*free));
        }
    }

    #[test]
    fn fdinfo_round_trip(vram in proptest::option::of(0_u64..(1 << 36)), gtt in proptest::option::of(0_u64..(1 << 36)), unit in 0_usize..3, id in any::<u64>()) {
        let (suffix, scale) = [("", 1_u64), (" KiB", 1 << 10), (" MiB", 1 << 20)][unit];
        let mut text = format!("drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t{id}\n");
        if let Some(v) = vram {
            text.push_str(&format!("drm-resident-vram:\t{v}{suffix}\ndrm-total-vram:\t{}{suffix}\n", v + 1));
        }
        if let Some(g) = gtt {
            text.push_str(&format!("drm-resident-gtt:\t{g}{suffix}\n"));
        }
        let info = p::parse_fdinfo(&text).unwrap();
        prop_assert_eq!(info.driver.as_str(), "amdgpu");
        prop_assert_eq!(info.pdev.as_deref(), Some("0000:03:00.0"));
        prop_assert_eq!(info.client_id, Some(id));
        let (used, shared) = p::client_usage(&info);
        // Device-local memory is used and system memory (GTT) shared; without a local region (an
        // integrated GPU), system memory is what the client uses.
        let want = vram.map_or((gtt.unwrap_or(0) * scale, 0), |v| {
            (v * scale, gtt.unwrap_or(0) * scale)
        });
        prop_assert_eq!((used, shared), want);
    }

    #[test]
    fn statm_and_status_round_trip(size in 0_u64..(1 << 40), resident in 0_u64..(1 << 40), kib in 0_u64..(1 << 40)) {
        prop_assert_eq!(p::statm_resident_bytes(&format!("{size} {resident} 7 1 0 9 0\n"), 4096), Ok(resident * 4096));
        prop_assert_eq!(p::status_vmrss_bytes(&format!("Name:\tx\nVmRSS:\t{kib} kB\n")), Ok(kib * 1024));
    }

    #[test]
    fn smaps_rollup_round_trip(rss in 0_u64..(1 << 40), share in 0_u64..=1000) {
        let pss = rss * share / 1000;
        let text = format!("00400000-7fff9fd49000 ---p 00000000 00:00 0    [rollup]\nRss: {rss:>12} kB\nPss: {pss:>12} kB\nPss_Anon: {pss} kB\nSwapPss: 0 kB\n");
        prop_assert_eq!(p::smaps_rollup_rss_pss(&text), Ok((rss * 1024, pss * 1024)));
    }

    #[test]
    fn stat_round_trip(comm in "[ -~]{0,15}", ppid in any::<u32>(), start in any::<u64>()) {
        let line = format!("4242 ({comm}) S {ppid} 4242 4200 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 {start} 12345678 300\n");
        prop_assert_eq!(hypomnesis::parse_stat(&line), Ok((ppid, start)));
    }

    #[test]
    fn gpu_rows_round_trip(total in 1_u64..1_000_000, free_frac in 0_u64..1000, reserved in 0_u64..4096) {
        let free = total * free_frac / 1000;
        let line = format!("0, GPU-x, 590.48.01, 00000000:01:00.0, {total}, {free}, {reserved}, NVIDIA H200\n");
        let g = &p::parse_gpus(&line, true).unwrap().rows[0];
        prop_assert_eq!(g.total_mib.clone(), Ok(total));
        prop_assert_eq!(g.free_mib.clone(), Ok(free));
        prop_assert_eq!(g.reserved_mib.clone(), Some(Ok(reserved)));
    }
}
