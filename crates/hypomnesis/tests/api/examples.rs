//! The examples print what a reader can read: figures and words, never Rust's debug forms
//! (`None`, `Some(…)`), with and without a GPU.
#![cfg(all(feature = "report", feature = "nvml"))]

use std::process::Command;

use support::{FakeVariant, empty_dir, fake_nvml, write_scenario};

const MIB: u64 = 1 << 20;

fn print_demo(gpu: bool) -> String {
    let mut c = Command::new(support::example("print_demo", "report"));
    c.env_remove("HYPOMNESIS_PROCFS")
        .env("HYPOMNESIS_SYSFS", empty_dir())
        .env("PATH", empty_dir())
        .env("HYPOMNESIS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    if gpu {
        let scenario = format!(
            r#"{{"devices": [{{"name": "NVIDIA H200", "total": {}, "reserved": {}, "free": {},
                "compute_processes": [{{"pid": 4194400, "used": {}}}]}}]}}"#,
            143_771 * MIB,
            614 * MIB,
            110_796 * MIB,
            1024 * MIB
        );
        c.env("HYPOMNESIS_NVML_LIBRARY", fake_nvml(FakeVariant::Modern))
            .env("FAKE_NVML_SCENARIO", write_scenario(&scenario));
    }
    let o = c.output().unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    text
}

fn assert_readable(text: &str) {
    for debug_form in ["None", "Some(", "Ok(", "Err(", "{:?}"] {
        assert!(
            !text.contains(debug_form),
            "{debug_form:?} in what the example prints:\n{text}"
        );
    }
}

#[test]
fn print_demo_prints_no_debug_forms() {
    let without = print_demo(false);
    assert_readable(&without);
    assert!(without.contains("VRAM unknown"), "{without}");
    let with = print_demo(true);
    assert_readable(&with);
    assert!(
        with.contains("GPU 0: free 110796 MB / 143771 MB [NVIDIA H200]"),
        "{with}"
    );
    assert!(with.contains("VRAM +0 MB"), "{with}");
}
