//! The library's module graph (read by `hypomnesis_testkit::layering`): no module imports
//! another that imports it back (directly or around a circle), and the layers point one way:
//! types ← host and backends ← dispatcher ← root. A backend never reaches up into the
//! dispatcher or the public GPU functions. Every module has a layer (`layer_of`): a new module
//! without one fails, and so does an arrow from a lower layer to a higher one. `hmn`'s own
//! layering is tested in `crates/cli/tests/layering.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use support::layering::{Module, circles, graph, modules, name, reexports, scan, through};

/// The library's sources.
fn library() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_library_has_no_circles_and_backends_do_not_reach_up() {
    let edges = graph(&library());
    let found = circles(&edges);
    assert!(
        found.is_empty(),
        "modules that import each other: {:?}",
        found
            .iter()
            .map(|c| c.iter().map(name).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
    let backends = ["nvml", "nvidia_smi", "drm", "windows", "metal"];
    for (m, to) in &edges {
        let is_backend = m.len() >= 2 && m[0] == "gpu" && backends.contains(&m[1].as_str());
        if !is_backend {
            continue;
        }
        for t in to {
            let up = *t == ["gpu".to_string()] || t.starts_with(&["gpu".into(), "dispatch".into()]);
            assert!(
                !up,
                "backend module {} reaches up into {}",
                name(m),
                name(t)
            );
        }
    }
    // The data types come first: they import no GPU code.
    let types: Vec<_> = edges
        .iter()
        .filter(|(m, _)| m.first().is_some_and(|f| f == "types"))
        .collect();
    assert!(types.len() > 3, "the types modules were found: {types:?}");
    for (m, to) in types {
        for t in to {
            assert!(
                t.first().is_none_or(|f| f != "gpu"),
                "{} imports {}",
                name(m),
                name(t)
            );
        }
    }
}

/// The library's layers, lowest first: 0 the data types, errors and the in-flight table; 1 the
/// host (roots, procfs, processes, RAM, durations) and the GPU backends beside it (a backend may
/// read the host, the host never reads a backend); 2 the dispatcher and the public functions
/// over it (the sampler among them); 3 the root.
fn layer_of(m: &Module) -> Option<(u8, &'static str)> {
    let first = m.first().map_or("", String::as_str);
    let second = m.get(1).map_or("", String::as_str);
    Some(match (first, second) {
        ("", _) => (3, "root"),
        ("types" | "error" | "inflight" | "bounded", _) => (0, "types"),
        ("host" | "duration", _) => (1, "host"),
        (
            "gpu",
            "backend" | "pci" | "winparse" | "nvidia" | "mig" | "nvml" | "nvidia_smi" | "drm"
            | "windows" | "metal",
        ) => (1, "backends"),
        ("gpu", "" | "dispatch")
        | ("snapshot" | "report" | "spill" | "ram" | "sampling" | "ghost", _) => (2, "dispatcher"),
        _ => return None,
    })
}

/// The arrows that run back up: to a higher layer, or from the host to a backend.
fn upward(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut out = Vec::new();
    for (m, to) in edges {
        let Some((from_rank, from_name)) = layer_of(m) else {
            out.push(format!("{} has no layer (add it to layer_of)", name(m)));
            continue;
        };
        for t in to {
            let Some((to_rank, to_name)) = layer_of(t) else {
                out.push(format!("{} has no layer (add it to layer_of)", name(t)));
                continue;
            };
            if to_rank > from_rank || (from_name == "host" && to_name == "backends") {
                out.push(format!(
                    "{} ({from_name}) imports {} ({to_name})",
                    name(m),
                    name(t)
                ));
            }
        }
    }
    out
}

/// The root is the roof, not a floor: a module of the library names an item by the module
/// that has it, never through the root's `pub use` (which would make every module depend on
/// the root, and the root on every module).
#[test]
fn no_library_module_imports_through_the_root() {
    let (_, via_root) = scan(&library());
    assert!(via_root.is_empty(), "imports through lib.rs: {via_root:#?}");
}

#[test]
fn an_import_through_the_root_is_caught() {
    let dir = std::env::temp_dir().join(format!("hmn-layering-root-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("types")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod types;\nmod gpu;\npub use types::Thing;\n",
    )
    .unwrap();
    std::fs::write(dir.join("types/mod.rs"), "pub struct Thing;\n").unwrap();
    std::fs::write(dir.join("gpu.rs"), "use crate::Thing;\n").unwrap();
    let (_, via_root) = scan(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(via_root, ["gpu: crate::Thing"]);
}

#[test]
fn the_library_layers_point_one_way_re_exports_included() {
    let edges = graph(&library());
    let up = upward(&edges);
    assert!(up.is_empty(), "arrows running back up: {up:#?}");
    // Re-exports are read and followed: `crate::GpuDeviceInfo` names `types::device`, through
    // the root's `pub use types::…` and the types' `pub use device::…`.
    let mut all = BTreeMap::new();
    modules(&library(), &Vec::new(), &mut all);
    let re = reexports(&all);
    assert_eq!(
        through(Vec::new(), &["GpuDeviceInfo".to_string()], &re),
        vec!["types".to_string(), "device".to_string()],
        "{re:?}"
    );
}

#[test]
fn an_arrow_up_through_a_re_export_is_caught() {
    let dir = std::env::temp_dir().join(format!("hmn-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("gpu")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(dir.join(path), text).unwrap();
    write(
        "lib.rs",
        "mod gpu;\nmod types;\npub use gpu::{device_count, Thing};\n",
    );
    write(
        "gpu/mod.rs",
        "mod nvml;\npub use self::nvml::Thing;\npub fn device_count() {}\n",
    );
    write("gpu/nvml.rs", "pub struct Thing;\n");
    // A data type reaching the dispatcher and a backend, both through the root's re-exports.
    write(
        "types.rs",
        "use crate::{device_count, Thing};\npub fn f(_: Thing) { device_count() }\n",
    );
    let edges = graph(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let types = &edges[&vec!["types".to_string()]];
    let m = |s: &str| s.split("::").map(String::from).collect::<Module>();
    assert!(types.contains(&m("gpu")), "{edges:?}");
    assert!(types.contains(&m("gpu::nvml")), "{edges:?}");
    let up = upward(&edges);
    assert!(
        up.iter()
            .any(|u| u == "types (types) imports gpu (dispatcher)")
            && up
                .iter()
                .any(|u| u == "types (types) imports gpu::nvml (backends)"),
        "{up:?}"
    );
}
