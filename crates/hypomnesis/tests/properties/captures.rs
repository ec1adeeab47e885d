//! The pure parsers on every recorded capture (both phases, Linux and Windows) and on broken
//! versions of them: right figures, and never a panic.
#![cfg(feature = "nvidia-smi-fallback")]

use support::capture_reader;

use hypomnesis::__parsers::{parse_apps, parse_gpus, parse_q_memory, parse_version};

/// The capture's `--query-gpu` rows re-shaped to the columns the library asks for.
fn our_gpu_csv(text: &str, phase: &str) -> String {
    capture_reader::gpu_rows(text, phase)
        .iter()
        .map(|g| {
            let strip = |k: &str| g[k].strip_suffix(" MiB").unwrap_or(&g[k]).to_string();
            [
                g["index"].clone(),
                g["uuid"].clone(),
                g["driver_version"].clone(),
                g["pci.bus_id"].clone(),
                strip("memory.total"),
                strip("memory.free"),
                strip("memory.reserved"),
                g["name"].clone(),
            ]
            .join(", ")
                + "\n"
        })
        .collect()
}

#[test]
fn q_memory_agrees_with_the_csv_in_every_capture() {
    for path in support::all_captures() {
        let text = capture_reader::read(&path);
        for phase in ["idle", "load"] {
            let q = capture_reader::section(&text, phase, "query (-q)").unwrap();
            let parsed = parse_q_memory(&q).unwrap();
            let csv = capture_reader::gpu_rows(&text, phase);
            assert_eq!(parsed.len(), csv.len(), "{}", path.display());
            for (m, g) in parsed.iter().zip(&csv) {
                assert_eq!(m.pci_bus_id, g["pci.bus_id"]);
                assert_eq!(
                    m.total_mib.clone().ok(),
                    capture_reader::mib(&g["memory.total"])
                );
                assert_eq!(
                    m.free_mib.clone().ok(),
                    capture_reader::mib(&g["memory.free"])
                );
                assert_eq!(
                    m.used_mib.clone().ok(),
                    capture_reader::mib(&g["memory.used"])
                );
                assert_eq!(
                    m.reserved_mib.clone().and_then(Result::ok),
                    capture_reader::mib(&g["memory.reserved"])
                );
            }
            let gpus = parse_gpus(&our_gpu_csv(&text, phase), true).unwrap();
            assert_eq!(gpus.rows.len(), csv.len());
            assert!(gpus.skipped.is_empty(), "{:?}", gpus.skipped);
        }
        let v = capture_reader::section(&text, "capabilities", "version").unwrap();
        assert!(parse_version(&v).is_some(), "{}", path.display());
    }
}

/// Every prefix of the outputs (a half-written line, a cut multi-byte character…) parses to
/// rows or to an error: never a panic.
#[test]
fn truncated_outputs_never_panic() {
    for path in support::all_captures() {
        let text = capture_reader::read(&path);
        let gpu_csv = our_gpu_csv(&text, "load");
        let apps = capture_reader::section(&text, "load", "query-compute-apps").unwrap();
        let q = capture_reader::section(&text, "load", "query (-q)").unwrap();
        for cut in 0..gpu_csv.len() {
            if let Some(prefix) = gpu_csv.get(..cut) {
                let _ = parse_gpus(prefix, true);
                let _ = parse_gpus(prefix, false);
            }
        }
        for cut in (0..apps.len()).step_by(3) {
            if let Some(prefix) = apps.get(..cut) {
                let _ = parse_apps(prefix);
            }
        }
        for cut in (0..q.len()).step_by(97) {
            if let Some(prefix) = q.get(..cut) {
                let _ = parse_q_memory(prefix);
            }
        }
    }
}

#[test]
fn hostile_bytes_give_errors_that_say_what_was_wrong() {
    let e = parse_gpus("0, a, b, c, 1, 2\n", true).unwrap_err();
    assert!(e.contains("line 1") && e.contains("expected 8"), "{e}");
    let e = parse_apps("x\u{0}\u{ff}y, z, w, v\n").unwrap_err();
    assert!(e.contains("pid is not a number"), "{e}");
    let long = "9".repeat(10_000);
    let e = parse_gpus(&format!("{long}, a, b, c, 1, 2, 3, n\n"), true).unwrap_err();
    assert!(
        e.len() < 300,
        "error messages clip hostile input: {} bytes",
        e.len()
    );
}
