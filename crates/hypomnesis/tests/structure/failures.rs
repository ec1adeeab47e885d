//! No reason is decided from message text: a failure's kind is decided where it is seen (an
//! NVML return code, an nvidia-smi token, an errno) and carried as a value (`Failure`) from
//! there. The one place a kind travels inside text is the 0.2.x variants that hold only a
//! message (`HypomnesisError::Nvml(String)`, …), written and read back in `error.rs` alone.
//! This test reads the sources of the library, `hmn` and the Python bindings and fails on the
//! ways a kind used to be guessed from words.

use std::path::Path;

use support::layering::rust_files;

/// What deciding from text looks like: reading a kind back from a message, or testing a
/// message for a code name or for the words a constructor wrote.
const FORBIDDEN: &[&str] = &[
    "kind_of_message",
    "split_tag(",
    "tagged_text",
    ".contains(\"NVML_ERROR",
    ".starts_with(\"NVML_ERROR",
    "== \"NVML_ERROR",
    ".contains(crate::error::",
    ".starts_with(crate::error::",
    ".ends_with(crate::error::",
    ".contains(\"Insufficient Permissions",
    "contains(\"[no_",
    "contains(\"[not_",
];

#[test]
fn no_reason_is_decided_from_message_text() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files: Vec<_> = ["crates/hypomnesis/src", "crates/cli/src", "python/src"]
        .iter()
        .flat_map(|dir| rust_files(&root.join(dir)))
        .collect();
    assert!(
        files.len() > 100,
        "the sources were not found: {}",
        files.len()
    );
    let error_rs = root.join("crates/hypomnesis/src/error.rs");
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for bad in FORBIDDEN {
                let allowed = *f == error_rs && bad.starts_with("split_tag");
                if line.contains(bad) && !allowed {
                    found.push(format!("{}:{}: {}", f.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "kinds decided from text:\n{}",
        found.join("\n")
    );
    // In error.rs the tag is read back by `kind` and `Display` alone (and the note adders that
    // keep it): no other function there reads it.
    let text = std::fs::read_to_string(&error_rs).unwrap();
    let uses = text.matches("split_tag(").count();
    assert_eq!(
        uses, 5,
        "split_tag's definition and its four readers in error.rs"
    );
}
