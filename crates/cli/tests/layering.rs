//! `hmn`'s module graph (read by `hypomnesis_testkit::layering`): no module imports another
//! that imports it back (directly or around a circle); views and collectors never reach into
//! commands or the command line; the parts of `top` import nothing of `top` itself; and `hmn`
//! reaches nothing the library hides. The library tests its own layering
//! (`crates/hypomnesis/tests/structure/layering.rs`).

use std::path::{Path, PathBuf};

use support::layering::{Module, circles, graph, name, rust_files};

fn hmn() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn hmn_has_no_circles_and_views_do_not_reach_into_commands() {
    let edges = graph(&hmn());
    assert!(edges.len() > 20, "the modules of hmn were found: {edges:?}");
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "modules that import each other: {:?}",
        found
            .iter()
            .map(|c| c.iter().map(name).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    for (m, to) in &edges {
        if matches!(
            m.first().map(String::as_str),
            Some("view" | "collect" | "args" | "outcome" | "help")
        ) {
            for t in to {
                let first = t.first().map_or("", String::as_str);
                assert!(
                    !matches!(first, "cmd" | "cli"),
                    "{} reaches into {}",
                    name(m),
                    name(t)
                );
            }
        }
    }
}

/// `hmn top`'s `top` module is the view's `run`, and its parts (the terminal, the event loop,
/// the sampling thread, the drawing) live in modules under it that never import an item of
/// `top` itself: they may name their siblings (`super::state::ViewState`), not their parent.
#[test]
fn top_parts_do_not_import_from_top_itself() {
    let edges = graph(&hmn());
    let top: Module = vec!["top".to_string()];
    let parts: Vec<_> = edges
        .iter()
        .filter(|(m, _)| m.len() >= 2 && m.starts_with(&top))
        .collect();
    assert!(parts.len() > 5, "the modules of top were found: {edges:?}");
    let up: Vec<String> = parts
        .iter()
        .filter(|(_, to)| to.contains(&top))
        .map(|(m, _)| name(m))
        .collect();
    assert!(up.is_empty(), "modules that import from top itself: {up:?}");
}

/// `hmn` is a user of the library like any other: it reaches nothing the library hides
/// (`#[doc(hidden)]`'s `__parsers`, kept for the library's own property tests and fuzzing).
#[test]
fn hmn_uses_only_the_public_api() {
    let found: Vec<String> = rust_files(&hmn())
        .into_iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains("__parsers"))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        found.is_empty(),
        "hmn reaches the library's hidden parsers: {found:?}"
    );
}
