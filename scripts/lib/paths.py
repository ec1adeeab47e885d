"""Paths every Python script under scripts/ shares: the repository root, cargo's target directory
as cargo resolves it (CARGO_TARGET_DIR, a cargo config's build.target-dir, or <root>/target), and
the fake NVML that scripts/lib/common.sh's `fake_nvml` and the workspace's tests build there.

A script imports it with `sys.path.insert(0, <scripts/lib>)`; nothing here runs on import but one
`cargo metadata` (skipped when cargo is absent, as on a GPU host given prebuilt binaries)."""
import json
import os
import shutil
import subprocess

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def _target() -> str:
    if shutil.which("cargo"):
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps",
             "--manifest-path", os.path.join(ROOT, "Cargo.toml")],
            check=True, capture_output=True, text=True).stdout
        return json.loads(out)["target_directory"]
    given = os.environ.get("CARGO_TARGET_DIR")
    return os.path.abspath(given) if given else os.path.join(ROOT, "target")


TARGET = _target()


def fake_dir(variant: str = "modern") -> str:
    """Where the fake NVML of `variant` is built: <target>/fake-builds/<variant>."""
    return os.path.join(TARGET, "fake-builds", variant)


FAKE = os.path.join(fake_dir(), "libnvidia-ml.so.1")


def build_fake(release: bool = False) -> str:
    """Builds the default fake NVML as scripts/lib/common.sh does and returns its path;
    `release`: optimised, in a folder of its own (for benchmarks that time our side of a call,
    not the fake's debug build)."""
    d = fake_dir("modern-release" if release else "modern")
    profile = ["--release"] if release else []
    subprocess.run(["cargo", "build", "-q", "-p", "fake-nvml", "--target-dir", d, *profile],
                   check=True, cwd=ROOT)
    out = os.path.join(d, "libnvidia-ml.so.1")
    shutil.copyfile(os.path.join(d, "release" if release else "debug", "libnvidia_ml.so"), out)
    return out
