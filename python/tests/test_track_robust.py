"""track() under asyncio, across fork(), with a driver call that hangs, and under Ctrl-C:
records per task, a quiet end in a forked child, samples marked instead of waited for, and a
KeyboardInterrupt at once."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Dict

import hypomnesis
from conftest import _PRELUDE, fake_env, fake_nvml, h200, run_child, write_scenario

BLOCK = 64 << 20


def test_overlapping_blocks_in_two_tasks_keep_their_own_records() -> None:
    tracker = hypomnesis.track(interval=0.002)
    got: Dict[str, hypomnesis.Tracking] = {}

    async def task(name: str, size: int, hold: float) -> None:
        with tracker as t:
            buf = bytearray(b"\x01") * size
            await asyncio.sleep(hold)
            del buf
        got[name] = t

    async def main() -> None:
        # a enters first and leaves last; b enters and leaves inside it.
        await asyncio.gather(task("a", 4 << 20, 0.3), task("b", BLOCK, 0.1))

    asyncio.run(main())
    a, b = got["a"], got["b"]
    assert a is not b and {id(t) for t in tracker.history} == {id(a), id(b)}
    assert a.duration >= 0.3 > b.duration >= 0.1, (a.duration, b.duration)
    assert b.peak_rss_delta_bytes >= BLOCK * 0.95
    assert tracker.history == [b, a]


def test_an_async_function_is_tracked_while_awaited() -> None:
    tracker = hypomnesis.track(interval=0.002)

    @tracker
    async def load(n: int) -> int:
        buf = bytearray(b"\x01") * n
        await asyncio.sleep(0.1)
        return len(buf)

    @tracker
    def plain() -> str:
        return "sync"

    assert inspect.iscoroutinefunction(load) and not inspect.iscoroutinefunction(plain)
    assert load.__name__ == "load"
    assert asyncio.run(load(BLOCK)) == BLOCK
    t = tracker.last
    assert t is not None and t.duration >= 0.1 and t.peak_rss_delta_bytes >= BLOCK * 0.95
    assert plain() == "sync" and len(tracker.history) == 2


def run_script(code: str, scenario: Dict[str, Any]) -> "subprocess.Popen[str]":
    """Starts ``code`` (after conftest's prelude) in a child measuring through the fake NVML
    with ``scenario``; its output is piped."""
    path = write_scenario(scenario)
    env = fake_env(fake_nvml("modern"), path)
    return subprocess.Popen(
        [sys.executable, "-c", _PRELUDE + "\n" + textwrap.dedent(code)],
        env=env,
        cwd=tempfile.gettempdir(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


FORK = """
import time
pid = None
with hypomnesis.track(interval=0.001, deadline=1.0) as t:
    time.sleep(0.05)
    pid = os.fork()
    time.sleep(0.02)
if pid == 0:
    with hypomnesis.track(interval=0.001) as u:
        time.sleep(0.1)
    print("CHILD " + json.dumps({
        "ended": not t.running, "kept": len(t.samples), "duration": t.duration,
        "again": u.sample_count, "missed": u.missed_count, "gpu": u.peak_gpu_bytes,
    }), flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
out({"status": os.waitstatus_to_exitcode(status), "samples": t.sample_count})
"""


def test_fork_inside_a_block_ends_it_quietly_in_the_child() -> None:
    for _ in range(3):
        child = run_script(FORK, {"devices": [h200(compute_processes=[])]})
        stdout, stderr = child.communicate(timeout=60)
        assert child.returncode == 0, stderr
        # Neither the parent nor the forked child printed anything (no panic, no traceback).
        assert stderr == "", stderr
        lines = stdout.splitlines()
        parent = [json.loads(x[11:]) for x in lines if x.startswith("HMN-RESULT ")]
        forked = [json.loads(x[6:]) for x in lines if x.startswith("CHILD ")]
        assert parent and parent[0]["status"] == 0 and parent[0]["samples"] >= 20, stdout
        # The child's block ended with its entry and exit samples; it tracked again fully.
        assert forked, stdout
        c = forked[0]
        assert c["ended"] and c["kept"] >= 2 and c["duration"] >= 0.02, c
        assert c["again"] >= 10 and c["missed"] == 0 and c["gpu"] == {"0": 0}, c


SLOW = {
    "devices": [h200()],
    "slow": [
        {"function": "nvmlDeviceGetMemoryInfo", "ms": 30_000, "after": 0},
        {"function": "nvmlDeviceGetMemoryInfo_v2", "ms": 30_000, "after": 0},
    ],
}


def test_a_hanging_driver_call_marks_samples_instead_of_blocking() -> None:
    got = run_child(
        """
        import time
        t0 = time.monotonic()
        with hypomnesis.track(interval=0.01, deadline=0.2) as t:
            time.sleep(0.5)
        took = time.monotonic() - t0
        out({"took": took, "taken": t.sample_count, "missed": t.missed_count,
             "first": t.baseline.missed_deadline, "gpu": t.peak_gpu_bytes,
             "used": t.final.device_used_bytes, "rss": t.peak_rss_bytes})
        """,
        SLOW,
    )
    # The entry sample waited for the deadline once; the rest did not wait at all.
    assert got["took"] < 2.0, got
    assert got["taken"] >= 20 and got["missed"] == got["taken"] and got["first"], got
    assert got["gpu"] == {"0": None} and got["used"] == {"0": None} and got["rss"] > 0


def test_ctrl_c_during_a_hanging_driver_call_stops_at_once() -> None:
    # Python turns SIGINT into KeyboardInterrupt only when it starts with SIGINT at its
    # default: started from a shell's background job (`(cmd &)`, no job control), SIGINT is
    # ignored and so it stays. The child sets Python's handler itself, whatever it inherited.
    # If it is still running after 10 s, every thread's Python stack goes to its stderr, shown
    # when it is not done in time.
    child = run_script(
        """
        import faulthandler, signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        faulthandler.dump_traceback_later(10)
        print("ready", flush=True)
        try:
            with hypomnesis.track(interval=60, deadline=60):
                pass
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(0)
        sys.exit(5)
        """,
        SLOW,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(0.5)  # inside the entry sample, which waits for the hung call
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        stdout, stderr = child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, stderr = child.communicate()
        raise AssertionError(f"still running 30 s after SIGINT; out {stdout!r}, err:\n{stderr}")
    took = time.monotonic() - sent
    assert child.returncode == 0, stderr
    assert "interrupted" in stdout
    assert took < 0.5, took


def test_a_hanging_device_count_is_not_waited_for_either() -> None:
    slow_count = {
        "devices": [h200()],
        "slow": [
            {"function": "nvmlDeviceGetCount_v2", "ms": 30_000, "after": 0},
            {"function": "nvmlDeviceGetCount", "ms": 30_000, "after": 0},
        ],
    }
    got = run_child(
        """
        import time
        t0 = time.monotonic()
        with hypomnesis.track(deadline=0.3) as t:
            pass
        out({"took": time.monotonic() - t0, "devices": list(t.devices)})
        """,
        slow_count,
    )
    # Not in time: this block samples no device (the next asks again).
    assert got["took"] < 2.0 and got["devices"] == [], got
