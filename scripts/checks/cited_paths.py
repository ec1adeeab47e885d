#!/usr/bin/env python3
"""Every path of this repository that a comment or a document cites exists.

Reads the tracked source and documentation files (Rust, Markdown, shell, Python, TOML, YAML,
`.ci/run`) and takes each token that looks like a path inside the repository (beginning with
one of its top-level folders, or a crate's `src/`, `tests/`, `benches/`, `examples/`), leaving
out patterns (`*`, `…`, `<…>`, `{a,b}`, `$VAR`). A path resolves when it exists from the
repository's root, from the citing file's folder, or from the root of the crate or package the
file is in. Prints each path that resolves nowhere as `file:line: path` and exits 1 if any.

Usage: scripts/checks/cited_paths.py   (from anywhere in the repository)
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
SUFFIXES = {".rs", ".md", ".sh", ".py", ".toml", ".yml", ".yaml", ".pyi"}
TOP = r"(?:\.ci|crates|scripts|docs|python|deploy|examples|tests|src|benches)"
TOKEN = re.compile(rf"(?<![\w./~-]){TOP}/[A-Za-z0-9_.+/-]*[A-Za-z0-9_+/]")
PATTERN = re.compile(r"[*…<>{}$\\]")
#: Records of the past, whose paths were true when written: the changelog, and the mutation
#: runs' tables in docs/mutants.md.
HISTORY = {"CHANGELOG.md", "docs/mutants.md"}
#: Citations that are meant as they are, each with its reason.
ALLOW = {
    # The test asserts that this file, replaced by deploy/kubernetes/hmn.yaml, stays gone.
    ("crates/cli/tests/deploy/manifests.rs", "deploy/daemonset.yaml"),
    # "each crate's tests/tests.rs": the same path in every crate.
    ("crates/testkit/src/lib.rs", "tests/tests.rs"),
}


def package_roots(path: Path) -> list:
    """The folders above `path` that hold a Cargo.toml or a pyproject.toml, nearest first."""
    out = []
    for parent in path.parents:
        if (parent / "Cargo.toml").exists() or (parent / "pyproject.toml").exists():
            out.append(parent)
        if parent == ROOT:
            break
    return out


#: The workspace's crates and the Python package: a document outside them may cite a path
#: inside one from its root (`src/gpu/nvml/mod.rs` for the library's).
CRATES = sorted(p.parent for p in ROOT.glob("crates/*/Cargo.toml")) + [ROOT / "python"]


def resolves(cited: str, where: Path) -> bool:
    cited = cited.rstrip("/.")
    bases = [ROOT, where.parent] + package_roots(where)
    if where.is_relative_to(ROOT / "docs") or where.parent == ROOT:
        bases += CRATES
    return any((base / cited).exists() for base in bases)


def main() -> int:
    files = subprocess.check_output(["git", "ls-files"], cwd=ROOT, text=True).split("\n")
    missing = []
    for name in files:
        path = ROOT / name
        if not name or not path.is_file() or path.is_symlink() or name in HISTORY:
            continue
        if name == "scripts/checks/cited_paths.py":
            continue  # its examples and its allow list
        if path.suffix not in SUFFIXES and name != ".ci/run":
            continue
        if "/fixtures/" in name or name.startswith("docs/h200/"):
            continue  # captured outputs quote other machines' paths
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for m in TOKEN.finditer(line):
                cited = m.group(0)
                after = line[m.end() : m.end() + 1]
                if after and PATTERN.match(after):
                    continue
                if PATTERN.search(cited):
                    continue
                if (name, cited.rstrip("/")) in ALLOW:
                    continue
                if not resolves(cited, path):
                    missing.append(f"{name}:{number}: {cited}")
    for m in missing:
        print(m)
    if missing:
        print(f"{len(missing)} cited paths do not exist (fix the path, or the text)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
