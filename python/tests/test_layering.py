"""The package's modules import one another in one direction: no module imports one that
imports it back (directly or around a circle, lazy and type-checking imports included), and
no module takes a private name (``_x``) from another subpackage (``ledger/``, ``tracking/``)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Set, Tuple

PACKAGE = Path(__file__).resolve().parent.parent / "hypomnesis"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> List[Tuple[str, List[str]]]:
    """(module imported, names taken from it) of every import in the file, at any depth."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out: List[Tuple[str, List[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [a.name for a in node.names]
            # `from . import x` names a module x when there is one (`_native` is the compiled
            # one), and then not the package itself.
            items = [n for n in names if f"{target}.{n}" not in modules() and n != "_native"]
            out.extend((f"{target}.{n}", []) for n in names if f"{target}.{n}" in modules())
            if items:
                out.append((target, items))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return [(t, n) for t, n in out if t == "hypomnesis" or t.startswith("hypomnesis.")]


_MODULES: Dict[str, Path] = {}


def modules() -> Dict[str, Path]:
    if not _MODULES:
        for p in PACKAGE.rglob("*.py"):
            _MODULES[module_name(p)] = p
    return _MODULES


def graph() -> Dict[str, Set[str]]:
    edges: Dict[str, Set[str]] = {}
    for name, path in modules().items():
        edges[name] = {t for t, _ in imports(path) if t in modules() and t != name}
    return edges


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    found: List[List[str]] = []
    for start in sorted(edges):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    found.append(path + [start])
                elif nxt not in path and nxt > start:
                    stack.append((nxt, path + [nxt]))
    return found


def subpackage(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 2 else ""


def test_no_module_imports_one_that_imports_it_back() -> None:
    found = circles(graph())
    assert not found, found


def test_a_circle_is_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    # The package's root may import everything; nothing here imports the root back.
    assert "hypomnesis" not in {t for ts in graph().values() for t in ts}


def test_no_private_name_crosses_a_subpackage() -> None:
    crossing = []
    for name, path in modules().items():
        for target, names in imports(path):
            if target in modules() and subpackage(target) and subpackage(target) != subpackage(name):
                crossing += [f"{name}: {target}.{n}" for n in names if n.startswith("_")]
    assert not crossing, crossing
