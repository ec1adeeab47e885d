//! The module graph of a crate's sources, for the layering tests of each crate: every module
//! with the modules it imports, read from the paths the code names (`use crate::…`,
//! `super::…`, `crate::a::b(…)`), followed through re-exports (`use crate::GpuDeviceInfo` is an
//! arrow to `types::device`, where the root's `pub use` takes it from), test modules left out;
//! `mod x;` declarations are structure, not imports. `circles` finds the modules that import
//! each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, at any depth (test modules and binaries included).
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// A module path, `["gpu", "nvml", "session"]`; the crate root is `[]`.
pub type Module = Vec<String>;

/// Every `.rs` file under `dir` with its module path (`foo/mod.rs` is `foo`).
pub fn modules(dir: &Path, prefix: &Module, out: &mut BTreeMap<Module, PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if prefix.is_empty() && name == "bin" {
                continue; // the binary is a crate of its own
            }
            let mut m = prefix.clone();
            m.push(name);
            modules(&path, &m, out);
        } else if name == "tests.rs" {
            // A test module in a file of its own (`#[cfg(test)] mod tests;`): left out like the
            // inline ones.
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut m = prefix.clone();
            if !matches!(stem, "mod" | "lib" | "main") {
                m.push(stem.to_string());
            }
            out.insert(m, path);
        }
    }
}

/// The code of a file without its comments and its test modules (`#[cfg(test)] mod x { … }`
/// blocks, whatever their name, and a `mod tests` at the end).
pub fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut keep = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        let test_attr = t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test");
        let mut j = i;
        while test_attr && j < lines.len() && lines[j].trim_start().starts_with("#[") {
            j += 1;
        }
        let opens_mod = |l: &str| {
            let l = l.trim_start();
            (l.starts_with("mod ") || l.starts_with("pub mod ")) && l.ends_with('{')
        };
        if test_attr && j < lines.len() && opens_mod(lines[j]) {
            let mut depth = 0usize;
            let mut k = j;
            while k < lines.len() {
                depth = (depth + lines[k].matches('{').count())
                    .saturating_sub(lines[k].matches('}').count());
                k += 1;
                if depth == 0 {
                    break;
                }
            }
            i = k;
            continue;
        }
        if t.starts_with("mod tests") && t.ends_with('{') {
            // An unmarked test module at the end: drop it and the attributes above it.
            while keep
                .last()
                .is_some_and(|l: &&str| l.trim_start().starts_with("#["))
            {
                keep.pop();
            }
            break;
        }
        keep.push(lines[i]);
        i += 1;
    }
    keep.iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths named by a use tree or a path expression starting at `s` (just after `crate::` or
/// `super::`), expanded: `{a, b::{c, d}}` gives `a`, `b::c`, `b::d`.
pub fn paths(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[u8], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while *i < s.len() && s[*i].is_ascii_whitespace() {
                *i += 1;
            }
            if *i < s.len() && s[*i] == b'{' {
                *i += 1;
                loop {
                    tree(s, i, &path, out);
                    while *i < s.len() && (s[*i].is_ascii_whitespace() || s[*i] == b',') {
                        *i += 1;
                    }
                    if *i >= s.len() || s[*i] == b'}' {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                *i += 1;
            }
            if start == *i {
                out.push(path);
                return;
            }
            let seg = String::from_utf8_lossy(&s[start..*i]).into_owned();
            if seg != "self" {
                path.push(seg);
            }
            if s.get(*i..*i + 2) == Some(b"::") {
                *i += 2;
                continue;
            }
            // `as name` and the like end the path.
            out.push(path);
            while *i < s.len() && !matches!(s[*i], b',' | b'}' | b';') && s[*i] != b'\n' {
                if s[*i] == b'(' || s[*i] == b')' {
                    break;
                }
                *i += 1;
            }
            return;
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    tree(s.as_bytes(), &mut i, &[], &mut out);
    out
}

/// The module a path from module `from` names: the longest prefix that is a module, and the
/// segments after it (an item of that module, or a name it re-exports).
pub fn resolve(
    from: &Module,
    kind: &str,
    path: &[String],
    all: &BTreeMap<Module, PathBuf>,
) -> Option<(Module, Vec<String>)> {
    // `super` of module a::b (`a/b.rs` or `a/b/mod.rs`) is `a`.
    let mut base: Module = if kind == "crate" {
        Vec::new()
    } else {
        let mut m = from.clone();
        m.pop()?;
        m
    };
    let mut best = base.clone();
    let mut used = 0;
    for seg in path {
        base.push(seg.clone());
        if all.contains_key(&base) {
            best.clone_from(&base);
            used += 1;
        } else {
            break;
        }
    }
    Some((best, path[used..].to_vec()))
}

/// What each module re-exports: (module, name) → the module the name comes from, read from its
/// `pub use` and `pub(…) use` items (`pub use types::{A, B}` in the root, `pub use
/// crate::x::Y`, `pub use super::z::W`, `pub use self::v::U`).
pub type Reexports = BTreeMap<(Module, String), Module>;

pub fn reexports(all: &BTreeMap<Module, PathBuf>) -> Reexports {
    let mut out = Reexports::new();
    for (m, file) in all {
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let start = offset;
            offset += line.len();
            let t = line.trim_start();
            let Some(vis_end) = t.find(" use ") else {
                continue;
            };
            let vis = &t[..vis_end];
            if !(vis == "pub" || (vis.starts_with("pub(") && vis.ends_with(')'))) {
                continue;
            }
            let after = &text[start + (line.len() - t.len()) + vis_end + " use ".len()..];
            for p in paths(after) {
                let Some(name) = p.last().cloned() else {
                    continue;
                };
                let (kind, start, from) = match p.first().map(String::as_str) {
                    Some("crate") => ("crate", 1, m.clone()),
                    Some("super") => {
                        let mut up = m.clone();
                        let mut i = 0;
                        while p.get(i).is_some_and(|s| s == "super") {
                            i += 1;
                        }
                        // `super::x` from a::b is relative to a: resolve as from a's child.
                        for _ in 1..i {
                            up.pop();
                        }
                        ("super", i, up)
                    }
                    Some("self") => {
                        let mut child = m.clone();
                        child.push(String::new());
                        ("super", 1, child)
                    }
                    _ => {
                        // A path from this module: a child module (or an extern crate, which
                        // resolves to no module of ours and is skipped).
                        let mut child = m.clone();
                        child.push(String::new());
                        ("super", 0, child)
                    }
                };
                if let Some((target, rest)) = resolve(&from, kind, &p[start..], all)
                    && rest.len() <= 1
                    && target != *m
                    && (target.len() > m.len() || kind != "super" || start > 0)
                {
                    out.insert((m.clone(), name), target);
                }
            }
        }
    }
    out
}

/// Follows re-exports: the module `target` names, or the one it re-exports `rest[0]` from.
pub fn through(target: Module, rest: &[String], re: &Reexports) -> Module {
    let mut at = target;
    let mut name = rest.first().cloned();
    for _ in 0..8 {
        let Some(n) = name.take() else { break };
        match re.get(&(at.clone(), n.clone())) {
            Some(next) => {
                at.clone_from(next);
                name = Some(n);
            }
            None => break,
        }
    }
    at
}

/// Edges of the crate rooted at `dir`: module → modules it names (not itself, not the root).
pub fn graph(dir: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    scan(dir).0
}

/// The edges, and each path by which a module names an item through the root's re-exports
/// (`crate::GpuDeviceInfo` rather than `crate::types::GpuDeviceInfo`): `module: crate::Name`.
pub fn scan(dir: &Path) -> (BTreeMap<Module, BTreeSet<Module>>, Vec<String>) {
    let mut via_root = Vec::new();
    let mut all = BTreeMap::new();
    modules(dir, &Vec::new(), &mut all);
    let re = reexports(&all);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, file) in &all {
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut out = BTreeSet::new();
        for kind in ["crate", "super"] {
            let needle = format!("{kind}::");
            let mut from = 0;
            while let Some(at) = text[from..].find(&needle) {
                let start = from + at;
                from = start + needle.len();
                let before = text[..start].chars().last();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue; // `super::super`, part of a longer path
                }
                for mut p in paths(&text[from..]) {
                    // `super::super::x`
                    let mut base_from = m.clone();
                    while kind == "super" && p.first().is_some_and(|s| s == "super") {
                        p.remove(0);
                        base_from.pop();
                    }
                    if let Some((target, rest)) = resolve(&base_from, kind, &p, &all) {
                        if target.is_empty()
                            && !m.is_empty()
                            && let Some(first) = rest.first()
                            && re.contains_key(&(Vec::new(), first.clone()))
                        {
                            via_root.push(format!("{}: crate::{first}", name(m)));
                        }
                        let target = through(target, &rest, &re);
                        if target != *m && !target.is_empty() {
                            out.insert(target);
                        }
                    }
                }
            }
        }
        edges.insert(m.clone(), out);
    }
    (edges, via_root)
}

/// The strongly connected components with more than one module (the circles).
pub fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Transitive closure is small enough here (tens of modules).
    let nodes: Vec<&Module> = edges.keys().collect();
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for t in edges.get(&n).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&Module, BTreeSet<Module>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<Module>> = Vec::new();
    for n in &nodes {
        let group: Vec<Module> = nodes
            .iter()
            .filter(|o| o != &n && reaches[*n].contains(**o) && reaches[*o].contains(*n))
            .map(|o| (*o).clone())
            .collect();
        if !group.is_empty() {
            let mut g = group;
            g.push((*n).clone());
            g.sort();
            if !out.contains(&g) {
                out.push(g);
            }
        }
    }
    out
}

pub fn name(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_parser() {
        let p = |s: &str| {
            paths(s)
                .into_iter()
                .map(|v| v.join("::"))
                .collect::<Vec<_>>()
        };
        assert_eq!(p("a::b::C;"), vec!["a::b::C"]);
        assert_eq!(p("{a, b::{c, d}, e as f};"), vec!["a", "b::c", "b::d", "e"]);
        assert_eq!(p("view::json(out, &x)"), vec!["view::json"]);
        assert_eq!(p("gpu::{self, mig};"), vec!["gpu", "gpu::mig"]);
    }

    #[test]
    fn a_circle_is_found() {
        let m = |s: &str| s.split("::").map(String::from).collect::<Module>();
        let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        edges.insert(m("a"), [m("b")].into_iter().collect());
        edges.insert(m("b"), [m("c")].into_iter().collect());
        edges.insert(m("c"), [m("a")].into_iter().collect());
        edges.insert(m("d"), [m("a")].into_iter().collect());
        assert_eq!(circles(&edges), vec![vec![m("a"), m("b"), m("c")]]);
    }
}
