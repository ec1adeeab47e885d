"""The Python example of the repository's README, run as a doctest against the fake NVML the
README says it was run against, so the example and its shown output cannot drift.

The example is the ```pycon block between the markers ``<!-- python-example -->`` and
``<!-- /python-example -->`` of README.md (``HMN_README`` names another file, to check a section
before it is pasted in). Output that differs between runs is ``...`` there (doctest ELLIPSIS);
the user the README shows (``root``) is this machine's user here. ``import torch`` there finds
the stand-in of tests/standins.py this test puts in ``sys.modules`` first, as the README says.
"""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

import pytest

from conftest import GHOST, GIB, MIB, REPO, h200, run_child

START = "<!-- python-example -->"
END = "<!-- /python-example -->"

#: What the README's run measured: one H200, this process holding 1 GiB, a process of another
#: container 30 GiB.
SCENARIO = {
    "devices": [
        h200(
            compute_processes=[
                {"pid": "__SELF_PID__", "used": GIB},
                {"pid": GHOST, "used": 30 * GIB},
            ]
        )
    ]
}

#: The stand-in torch the README's explain() reads: its CUDA device 0 is the H200 (by UUID,
#: without the prefix, as torch gives it), its allocator holding 768 MiB, 512 MiB allocated.
TORCH = f"""
standin_torch([{{"uuid": "11111111-2222-3333-4444-555555555555", "allocated": {512 * MIB},
                "reserved": {768 * MIB}}}])
"""

RUN = """
import doctest
text = os.environ["HMN_EXAMPLE"]
test = doctest.DocTestParser().get_doctest(text, {}, "README python-example", "README.md", 0)
report = []
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
result = runner.run(test, out=report.append)
out({"failed": result.failed, "attempted": result.attempted, "report": "".join(report)})
"""


def example() -> str:
    readme = Path(os.environ.get("HMN_README", REPO / "README.md"))
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        pytest.fail(
            f"{readme} has no Python example between {START!r} and {END!r}: paste the README's "
            "Python section (with its markers) in",
            pytrace=False,
        )
    section = text.split(START, 1)[1].split(END, 1)[0]
    blocks = re.findall(r"```pycon\n(.*?)```", section, flags=re.S)
    assert blocks, f"no ```pycon block between the markers of {readme}"
    return "\n".join(blocks)


def test_readme_python_example_runs_as_shown() -> None:
    code = example()
    user = pwd.getpwuid(os.getuid()).pw_name
    code = code.replace(" root False", f" {user} False")
    standins = (Path(__file__).parent / "standins.py").read_text(encoding="utf-8")
    r = run_child(standins + TORCH + RUN, SCENARIO, env={"HMN_EXAMPLE": code})
    assert r["attempted"] >= 10
    assert r["failed"] == 0, r["report"]
