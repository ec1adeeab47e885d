#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
//! An independent reader of the recorded `nvidia-smi` captures, for expected values in tests.

use std::collections::HashMap;
use std::path::Path;

/// The raw output of section `# <phase> :: <what>…` (after its banner, trailing blanks trimmed).
pub fn section(text: &str, phase: &str, what: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let head = format!("# {phase} :: {what}");
    let start = lines.iter().position(|l| l.starts_with(&head))?;
    let banner = start + lines[start..].iter().position(|l| l.starts_with("####"))?;
    let body: Vec<&str> = lines[banner + 1..]
        .iter()
        .take_while(|l| !l.starts_with("################"))
        .copied()
        .collect();
    let mut s = body.join("\n");
    while s.ends_with('\n') || s.ends_with(' ') {
        s.pop();
    }
    Some(s)
}

/// `--query-gpu` rows of a phase as maps from field name (units stripped) to value (units kept).
pub fn gpu_rows(text: &str, phase: &str) -> Vec<HashMap<String, String>> {
    csv_rows(&section(text, phase, "query-gpu").unwrap())
}

/// `--query-compute-apps` rows of a phase.
pub fn app_rows(text: &str, phase: &str) -> Vec<HashMap<String, String>> {
    csv_rows(&section(text, phase, "query-compute-apps").unwrap())
}

fn csv_rows(body: &str) -> Vec<HashMap<String, String>> {
    let mut lines = body.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(", ")
        .map(|h| h.split(" [").next().unwrap().trim().to_string())
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(", ").map(|v| v.trim().to_string()))
                .collect()
        })
        .collect()
}

/// `"46068 MiB"` → `Some(46068)`; bracketed tokens → `None`.
pub fn mib(v: &str) -> Option<u64> {
    v.strip_suffix(" MiB").unwrap_or(v).parse().ok()
}

/// The capture's file text.
pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}
