"""The Python side's fields cannot drift from the library's types: ``hypomnesis/_fields.py`` and
the TypedDicts of ``_native.pyi`` are what the generator makes of the types now, every
dataclass declares exactly the fields (and types) the generated lists give, and the native
module answers exactly those fields."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from typing import Dict

import pytest

import hypomnesis
from hypomnesis import _native
from hypomnesis._fields import FIELDS
from conftest import REPO

#: Fields a Python object has beyond those the native module gives it.
PYTHON_ONLY: Dict[str, Dict[str, str]] = {
    "Snapshot": {"device_index": "int", "taken_at": "float"},
}


def expected(name: str) -> Dict[str, str]:
    fields = dict(FIELDS[name])
    if name == "SourceReport":
        # Its native `state` is a SourceState dict, whose fields the Python object has.
        del fields["state"]
        fields.update(FIELDS["SourceState"])
    fields.update(PYTHON_ONLY.get(name, {}))
    return fields


def test_generated_files_are_fresh() -> None:
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [
        cargo,
        "run",
        "--quiet",
        "--manifest-path",
        str(REPO / "Cargo.toml"),
        "-p",
        "hypomnesis-python",
        "--features",
        "generate",
        "--bin",
        "hypomnesis-python-fields",
        "--target-dir",
        str(REPO / "target" / "fields-gen"),
        "--",
        "--check",
    ]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stderr}\n{done.stdout}"


@pytest.mark.parametrize("name", sorted(set(FIELDS) - {"SourceState"}))
def test_dataclass_fields_are_the_generated_ones(name: str) -> None:
    cls = getattr(hypomnesis, name)
    declared = {f.name: f.type for f in dataclasses.fields(cls)}
    assert declared == expected(name)


def test_native_answers_have_the_generated_fields() -> None:
    def keys(name: str) -> set:
        return {field for field, _ in FIELDS[name]}

    assert set(_native.device_info(0)) == keys("DeviceInfo")
    assert set(_native.process_gpu_info(0)) == keys("ProcessGpuInfo")
    rows = _native.gpu_processes(0)
    assert rows and all(set(r) == keys("GpuProcess") for r in rows)
    context = _native.process_context(os.getpid())
    assert set(context) == keys("ProcessContext")
    assert set(_native.host_memory()) == keys("HostMemory")
    snap = _native.snapshot(0)
    assert set(snap) == keys("Snapshot")
    assert snap["gpu_device"] is not None and set(snap["gpu_device"]) == keys("DeviceInfo")
    assert set(_native.mig_state(0)) == keys("MigState")
    for report in _native.sources():
        assert set(report) == keys("SourceReport")
        assert set(report["state"]) <= keys("SourceState")
