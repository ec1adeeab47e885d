"""``track(ledger=True)``: the ledger (the driver's figure for this process against what the
imported frameworks hold) at each sample, and at the peak, over the fake NVML with a figure
that changes while the block runs (``used_file``) and a stand-in torch whose figures the block
changes too."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List

import pytest

from conftest import GIB, MIB, h200, run_child
from test_track_robust import run_script

STANDINS = (Path(__file__).parent / "standins.py").read_text(encoding="utf-8")
GPU0 = "GPU-11111111-2222-3333-4444-555555555555"


def scenario(used_file: str) -> Dict[str, Any]:
    own = [{"pid": "__SELF_PID__", "used": 2 * GIB, "used_file": used_file}]
    return {"devices": [h200(compute_processes=own)]}


#: Three phases of 0.3 s: the driver's figure for this process 2, 6, then 3 GiB; torch's
#: reserved 1.5, 5, then 2 GiB (allocated 1, 4, 1.5 GiB).
PHASES = """
import time
USED = os.environ["HMN_USED_FILE"]
def phase(driver, reserved, allocated):
    devs[0]["reserved"], devs[0]["allocated"] = reserved, allocated
    with open(USED + ".new", "w") as f:
        f.write(str(driver))
    os.replace(USED + ".new", USED)

GIB = 1 << 30
devs = [{"uuid": "11111111-2222-3333-4444-555555555555", "allocated": GIB,
         "reserved": 3 * GIB // 2}]
phase(2 * GIB, 3 * GIB // 2, GIB)
standin_torch(devs)
watch = import_watch()
with hypomnesis.track(interval=0.005, ledger=True) as t:
    time.sleep(0.3)
    phase(6 * GIB, 5 * GIB, 4 * GIB)
    time.sleep(0.3)
    phase(3 * GIB, 2 * GIB, 3 * GIB // 2)
    time.sleep(0.3)

def row(s):
    g = s.ledger.gpus
    return {"time": s.time, "own": s.gpu_bytes[0], "lag": s.ledger_lag,
            "gpus": [{"driver": x.driver_bytes, "reserved": x.framework_reserved_bytes,
                      "outside": x.outside_bytes, "free": x.free_bytes,
                      "headroom": x.headroom_bytes, "uuid": x.uuid,
                      "frameworks": [f.framework for f in x.frameworks]} for x in g],
            "unmatched": len(s.ledger.unmatched)}

peak = t.peak_ledger
out({"rows": [row(s) for s in t.samples], "peak": repr(peak), "peak_gpus": peak.gpus,
     "peak_gpu": t.peak_gpu_bytes, "asked": watch.asked,
     "kept": len(t._recorder.readings())})
"""


def run_phases() -> Any:
    fd, used = tempfile.mkstemp(prefix="hmn-used-")
    os.close(fd)
    try:
        return run_child(
            STANDINS + PHASES, scenario(used), env={"HMN_USED_FILE": used}
        )
    finally:
        os.unlink(used)


def inner(rows: List[Dict[str, Any]], start: float, end: float) -> List[Dict[str, Any]]:
    """The rows well inside a phase (its first and last 60 ms left out)."""
    return [r for r in rows if start + 0.06 <= r["time"] <= end - 0.06]


def test_each_sample_has_the_ledger_of_its_time_and_the_peak_has_the_peaks() -> None:
    r = run_phases()
    rows = r["rows"]
    assert len(rows) >= 20, rows
    for row in rows:
        (g,) = row["gpus"]
        # The driver's figure is the sample's own; the frameworks matched by UUID.
        assert g["driver"] == row["own"] and g["uuid"] == GPU0, row
        assert g["frameworks"] == ["torch"] and row["unmatched"] == 0, row
    first, last = rows[0]["gpus"][0], rows[-1]["gpus"][0]
    assert (first["driver"], first["reserved"], first["outside"]) == (
        2 * GIB, 3 * GIB // 2, GIB // 2
    )
    assert (last["driver"], last["reserved"], last["outside"]) == (3 * GIB, 2 * GIB, GIB)
    assert rows[0]["lag"] == 0.0 and rows[-1]["lag"] == 0.0
    # Each phase's samples carry that phase's framework figures, read near them in time.
    for (start, end), driver, reserved in (
        ((0.0, 0.3), 2 * GIB, 3 * GIB // 2),
        ((0.3, 0.6), 6 * GIB, 5 * GIB),
        ((0.6, 0.9), 3 * GIB, 2 * GIB),
    ):
        middle = inner(rows[1:-1], start, end)
        assert middle, (start, rows)
        for row in middle:
            g = row["gpus"][0]
            assert (g["driver"], g["reserved"], g["outside"]) == (
                driver, reserved, driver - reserved
            ), row
            assert abs(row["lag"]) <= 0.05, row
            # Free is the device's (the fake's fixed figure); headroom adds torch's cache.
            assert g["free"] == 110_796 * MIB and g["headroom"] > g["free"], row
    # At the peak (6 GiB on the driver), torch held 5 GiB: 1 GiB outside the frameworks.
    assert r["peak_gpu"] == {"0": 6 * GIB}
    (p,) = r["peak_gpus"]
    assert p["driver_bytes"] == 6 * GIB and p["framework_reserved_bytes"] == 5 * GIB
    assert p["outside_bytes"] == GIB and p["frameworks"][0]["allocated_bytes"] == 4 * GIB
    assert r["peak"].startswith(
        "GPU 0 NVIDIA H200: driver 6.0 GiB = torch reserved 5.0 GiB (allocated 4.0 GiB, allocator slack 1.0 GiB) + "
        "outside frameworks 1.0 GiB"
    ), r["peak"]
    # Nothing was imported to read them.
    assert r["asked"] == []


def test_without_frameworks_the_driver_figure_is_all_outside_and_off_by_default() -> None:
    fd, used = tempfile.mkstemp(prefix="hmn-used-")
    os.close(fd)
    try:
        r = run_child(
            """
            import time
            with hypomnesis.track(interval=0.01, ledger=True) as t:
                time.sleep(0.05)
            with hypomnesis.track(interval=0.01) as u:
                time.sleep(0.02)
            out({"gpus": [s.ledger.gpus for s in t.samples], "peak": t.peak_ledger,
                 "plain": [(s.ledger, s.ledger_lag) for s in u.samples],
                 "plain_peak": u.peak_ledger})
            """,
            scenario(used),
        )
    finally:
        os.unlink(used)
    for gpus in r["gpus"]:
        (g,) = gpus
        assert g["driver_bytes"] == 2 * GIB and g["frameworks"] == [], g
        assert g["framework_reserved_bytes"] == 0 and g["outside_bytes"] == 2 * GIB, g
    assert r["peak"]["gpus"][0]["outside_bytes"] == 2 * GIB
    assert all(x == [None, None] for x in r["plain"]) and r["plain_peak"] is None


def test_with_no_gpu_sampled_a_framework_device_is_unmatched() -> None:
    r = run_child(
        STANDINS
        + """
standin_torch([{"uuid": "11111111-2222-3333-4444-555555555555", "allocated": 1,
                "reserved": 2}])
with hypomnesis.track(devices=[], ledger=True) as t:
    pass
out({"gpus": t.baseline.ledger.gpus, "unmatched": [f.device for f in t.final.ledger.unmatched]})
""",
        {"devices": [h200()]},
    )
    assert r == {"gpus": [], "unmatched": ["cuda:0"]}


def test_readings_between_are_bounded() -> None:
    r = run_child(
        STANDINS
        + """
import time
from hypomnesis.tracking import recorder
recorder.LEDGER_READINGS = 8
standin_torch([{"uuid": "11111111-2222-3333-4444-555555555555", "allocated": 1,
                "reserved": 2}])
with hypomnesis.track(interval=0.001, devices=[], ledger=True) as t:
    time.sleep(0.3)
out({"kept": len(t._recorder.readings()), "samples": len(t.samples),
     "ledgers": sum(s.ledger is not None for s in t.samples)})
""",
        {"devices": [h200()]},
    )
    # At most 8 between (thinned when full), the two around the peak's moment, and the entry
    # and exit readings.
    assert 2 < r["kept"] <= 12, r
    assert r["ledgers"] == r["samples"], r


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_a_bad_ledger_argument_is_refused_at_track(bad: Any) -> None:
    r = run_child(
        f"""
try:
    hypomnesis.track(ledger={bad!r})
    out(None)
except TypeError as e:
    out(str(e))
"""
    )
    assert r is not None and r.startswith("ledger must be True or False"), r


FORK = """
import time
standin_torch([{"uuid": "11111111-2222-3333-4444-555555555555", "allocated": 1,
                "reserved": 2}])
pid = None
with hypomnesis.track(interval=0.001, deadline=1.0, ledger=True) as t:
    time.sleep(0.05)
    pid = os.fork()
    time.sleep(0.02)
if pid == 0:
    with hypomnesis.track(interval=0.005, ledger=True) as u:
        time.sleep(0.1)
    print("CHILD " + json.dumps({
        "ended": not t.running, "ledgers": all(s.ledger is not None for s in t.samples),
        "again": len(u._recorder.readings()),
        "reserved": u.final.ledger.gpus[0].framework_reserved_bytes,
    }), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
out({"status": os.waitstatus_to_exitcode(status)})
"""


def test_fork_inside_a_ledger_block_and_track_again_in_the_child() -> None:
    child = run_script(STANDINS + FORK, {"devices": [h200(compute_processes=[])]})
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0 and stderr == "", stderr
    forked = [json.loads(x[6:]) for x in stdout.splitlines() if x.startswith("CHILD ")]
    assert forked, stdout
    # The child's ledger thread is its own: it read the frameworks again (the driver lists
    # no process: the GPU's entry is there for torch's 2 bytes).
    c = forked[0]
    assert c["ended"] and c["ledgers"] and c["again"] >= 5, c
    assert c["reserved"] == 2, c
