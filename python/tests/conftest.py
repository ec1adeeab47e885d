"""Shared test helpers: the fake NVML (the workspace member ``fake-nvml``), built with cargo where
the Rust tests and the scripts build it (``crates/testkit``, ``scripts/lib``: one target
directory per variant under ``<cargo target dir>/fake-builds/``, the cdylib copied to the real
library's name), and child processes
that run code against a scenario.

NVML is loaded once per process, so every scenario of its own runs in a child Python process
(:func:`run_child`). This process itself measures through the fake too (:data:`SESSION`): set
up in :func:`pytest_configure`, before any test touches a GPU, so no real GPU or driver of the
machine running the tests is ever read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Dict, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "lib"))
import paths  # noqa: E402  (scripts/lib: cargo's target directory, as cargo resolves it)

MIB = 1 << 20
GIB = 1 << 30
#: Above Linux's largest possible pid_max (2^22): never a process here.
GHOST = 4_194_400

#: Why the ghost (a pid beyond any pid_max) cannot be read: in the initial PID namespace no
#: process can have its number; in another, it may be the host's.
GHOST_REASON = (
    "no_such_pid"
    if os.path.exists("/proc/self/ns/pid") and os.readlink("/proc/self/ns/pid") == "pid:[4026531836]"
    else "outside_pid_namespace"
)

#: Which cargo features make each variant (as FakeVariant::feature_args in crates/testkit).
VARIANTS: Dict[str, list[str]] = {
    "modern": [],
    "pre-r510": ["--no-default-features", "--features", "v2-procs"],
    "r450": ["--no-default-features"],
    "r535-wide": ["--no-default-features", "--features", "r535-wide"],
}

_built: Dict[str, Path] = {}


def fake_nvml(variant: str = "modern") -> Path:
    """Build the fake ``libnvidia-ml`` of ``variant`` (once per test session) and return the
    absolute path of its copy named ``libnvidia-ml.so.1``."""
    if variant in _built:
        return _built[variant]
    target = Path(paths.fake_dir(variant))
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [
        cargo,
        "build",
        "--manifest-path",
        str(REPO / "Cargo.toml"),
        "-p",
        "fake-nvml",
        *VARIANTS[variant],
        "--target-dir",
        str(target),
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"building the fake NVML ({variant}) failed: {' '.join(cmd)}\n"
            f"--- stderr ---\n{done.stderr}\n--- stdout ---\n{done.stdout}"
        )
    built = target / "debug" / "libnvidia_ml.so"
    dest = target / "libnvidia-ml.so.1"
    new = built.read_bytes()
    if not dest.exists() or dest.read_bytes() != new:
        # Write aside and rename over: a process with the old copy loaded keeps a whole file.
        tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
        tmp.write_bytes(new)
        os.replace(tmp, dest)
    _built[variant] = dest
    return dest


def empty_dir() -> Path:
    """An empty directory: for ``PATH`` (no ``nvidia-smi``) and ``HYPOMNESIS_SYSFS`` (no DRM
    devices), so only the fake NVML answers."""
    d = Path(tempfile.gettempdir()) / "hmn-py-empty"
    d.mkdir(exist_ok=True)
    return d


def h200(**extra: Any) -> Dict[str, Any]:
    """An H200-like device as the fake's scenario describes one: 143771 MiB total, 614 MiB
    reserved, 110796 MiB free."""
    device: Dict[str, Any] = {
        "name": "NVIDIA H200",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:18:00.0",
        "total": 143_771 * MIB,
        "reserved": 614 * MIB,
        "free": 110_796 * MIB,
    }
    device.update(extra)
    return device


def write_scenario(scenario: Dict[str, Any]) -> Path:
    """Write a scenario to a new file and return its path."""
    fd, name = tempfile.mkstemp(prefix="fake-nvml-py-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(scenario, f)
    return Path(name)


def fake_env(
    lib: Optional[Path], scenario_path: Optional[Path], base: Optional[Dict[str, str]] = None
) -> Dict[str, str]:
    """The environment that points hypomnesis at ``lib`` and the fake at ``scenario_path``,
    with no ``nvidia-smi`` and no DRM devices to fall back on."""
    env = dict(os.environ if base is None else base)
    for key in ("HYPOMNESIS_NVIDIA_SMI", "HYPOMNESIS_PROCFS", "FAKE_NVML_SCENARIO"):
        env.pop(key, None)
    env["PATH"] = str(empty_dir())
    env["HYPOMNESIS_SYSFS"] = str(empty_dir())
    env["LD_LIBRARY_PATH"] = str(empty_dir())
    if lib is None:
        env.pop("HYPOMNESIS_NVML_LIBRARY", None)
    else:
        env["HYPOMNESIS_NVML_LIBRARY"] = str(lib)
    if scenario_path is not None:
        env["FAKE_NVML_SCENARIO"] = str(scenario_path)
    return env


#: Run first in every child: writes the scenario (with ``__SELF_PID__`` replaced by the child's
#: pid, so a scenario can list the child's own process) before anything loads NVML, and gives
#: the child code ``out(value)`` (prints it as the JSON the parent reads) and ``error(call)``
#: (what exception a call raises).
_PRELUDE = r"""
import dataclasses, json, os, sys
_template = os.environ.get("HMN_SCENARIO_TEMPLATE")
if _template is not None:
    with open(os.environ["FAKE_NVML_SCENARIO"], "w") as _f:
        _f.write(_template.replace('"__SELF_PID__"', str(os.getpid())))
import hypomnesis

def _plain(v):
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v

def out(value):
    print("HMN-RESULT " + json.dumps(_plain(value)), flush=True)

def error(call, *args):
    try:
        call(*args)
    except hypomnesis.HypomnesisError as e:
        return {"type": type(e).__name__, "kind": e.kind, "source": e.source,
                "message": str(e), "mro": [c.__name__ for c in type(e).__mro__]}
    return None
"""


def run_child(
    code: str,
    scenario: Optional[Dict[str, Any]] = None,
    variant: Optional[str] = "modern",
    env: Optional[Dict[str, str]] = None,
) -> Any:
    """Run ``code`` in a new Python process measuring through the fake NVML of ``variant`` with
    ``scenario`` (``variant=None``: no NVML library at all), and return what it passed to
    ``out()``. Fails the test with the child's output if the child fails."""
    lib = fake_nvml(variant) if variant is not None else None
    scenario_path = None
    child_env = fake_env(lib, None)
    if scenario is not None:
        scenario_path = write_scenario({})
        child_env = fake_env(lib, scenario_path)
        child_env["HMN_SCENARIO_TEMPLATE"] = json.dumps(scenario)
    child_env.update(env or {})
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PRELUDE + "\n" + textwrap.dedent(code)],
            env=child_env,
            # Not the package's source folder, whose `hypomnesis/` has no built extension.
            cwd=tempfile.gettempdir(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        if scenario_path is not None:
            scenario_path.unlink()
    results = [
        line[len("HMN-RESULT ") :]
        for line in done.stdout.splitlines()
        if line.startswith("HMN-RESULT ")
    ]
    if done.returncode != 0 or len(results) != 1:
        pytest.fail(
            f"child failed (exit {done.returncode}, {len(results)} results)\n"
            f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}",
            pytrace=False,
        )
    return json.loads(results[0])


#: The scenario this test process measures through: two H200s, the first listing this process
#: with 2 GiB, the second this process's parent with 5 GiB and a ghost (another namespace).
SESSION: Dict[str, Any] = {}


def pytest_configure(config: pytest.Config) -> None:
    lib = fake_nvml("modern")
    SESSION.update(
        {
            "devices": [
                h200(compute_processes=[{"pid": os.getpid(), "used": 2 * GIB}]),
                h200(
                    uuid="GPU-22222222-2222-3333-4444-555555555555",
                    pci_bus_id="00000000:2A:00.0",
                    compute_processes=[
                        {"pid": os.getppid(), "used": 5 * GIB},
                        {"pid": GHOST, "used": 3 * GIB},
                    ],
                ),
            ],
            "process_names": {str(GHOST): "ghost"},
        }
    )
    path = write_scenario(SESSION)
    config.add_cleanup(path.unlink)
    # This process's own PATH stays (cargo, and the Python of the children, are found there);
    # the fake answers, so no nvidia-smi fallback is ever run.
    for key in ("HYPOMNESIS_NVIDIA_SMI", "HYPOMNESIS_PROCFS"):
        os.environ.pop(key, None)
    os.environ["HYPOMNESIS_NVML_LIBRARY"] = str(lib)
    os.environ["FAKE_NVML_SCENARIO"] = str(path)
    os.environ["HYPOMNESIS_SYSFS"] = str(empty_dir())
