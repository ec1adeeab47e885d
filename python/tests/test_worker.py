"""``_native.Worker``: a read that may block, made on the library's bounded worker: coalesced
while one runs, waited for within a deadline, its exception raised to the waiter."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time

import pytest

from hypomnesis import _native


def test_a_read_answers_and_the_next_is_a_new_one() -> None:
    w = _native.Worker("test-answer")
    first = w.ask(lambda: 41)
    assert w.wait(first, 5.0) == (True, 41)
    second = w.ask(lambda: 42)
    assert second == first + 1
    assert w.wait(second, 5.0) == (True, 42)
    assert w.running_for() is None


def test_a_blocked_read_answers_every_ask_and_is_waited_for_once() -> None:
    w = _native.Worker("test-blocked")
    release = threading.Event()
    calls = []

    def slow() -> str:
        calls.append(1)
        release.wait(10)
        return "late"

    number = w.ask(slow)
    t0 = time.monotonic()
    assert w.wait(number, 0.2) == (False, None)
    assert 0.15 < time.monotonic() - t0 < 2
    assert w.overdue(number)
    # Asked again while it runs: the same read answers, and no second call is made.
    assert w.ask(lambda: "never") == number
    running = w.running_for()
    assert running is not None and running > 0.1
    release.set()
    assert w.wait(number, 5.0) == (True, "late")
    assert calls == [1]
    assert not w.overdue(number + 1)


def test_the_reads_exception_is_raised_to_the_waiter() -> None:
    w = _native.Worker("test-raise")

    def bad() -> None:
        raise KeyError("no such device")

    number = w.ask(bad)
    with pytest.raises(KeyError, match="no such device"):
        w.wait(number, 5.0)
    # The worker goes on.
    assert w.wait(w.ask(lambda: "ok"), 5.0) == (True, "ok")


def test_a_bad_timeout_is_refused() -> None:
    w = _native.Worker("test-timeout")
    with pytest.raises(ValueError, match="timeout"):
        w.wait(w.ask(lambda: 1), float("nan"))


def test_a_closed_worker_lets_no_read_into_python() -> None:
    w = _native.Worker("test-closed")
    assert w.close(1.0) is True
    calls = []
    number = w.ask(lambda: calls.append(1))
    with pytest.raises(RuntimeError, match="interpreter is exiting"):
        w.wait(number, 5.0)
    assert calls == []


def test_close_waits_for_the_read_inside_and_no_longer_than_its_timeout() -> None:
    w = _native.Worker("test-close-wait")
    inside, release = threading.Event(), threading.Event()

    def slow() -> str:
        inside.set()
        release.wait(10)
        return "out"

    number = w.ask(slow)
    assert inside.wait(5)
    t0 = time.monotonic()
    assert w.close(0.2) is False
    assert 0.15 < time.monotonic() - t0 < 2
    threading.Timer(0.2, release.set).start()
    t0 = time.monotonic()
    assert w.close(5.0) is True
    assert time.monotonic() - t0 < 4
    # The read that was inside answers; none enters after it.
    assert w.wait(number, 5.0) == (True, "out")
    with pytest.raises(RuntimeError, match="interpreter is exiting"):
        w.wait(w.ask(lambda: "late"), 5.0)
    with pytest.raises(ValueError, match="timeout"):
        w.close(float("nan"))


# A read inside Python when the interpreter exits. Without the workers closed at exit, the
# worker's thread takes the GIL back while the interpreter finalizes, and CPython (before 3.14)
# ends it with pthread_exit: the process aborted, 10 times out of 10.
EXITING_CHILD = """
import sys, time
from hypomnesis import _bounded
def read():
    t = time.monotonic()
    while time.monotonic() - t < 0.3:
        time.sleep(0.001)
    print("read made", flush=True)
    return "done"
_bounded.worker("exit-test").ask(read)
time.sleep(0.05)
print("leaving", flush=True)
"""


def test_exit_with_a_read_inside_python_waits_for_it_and_does_not_crash() -> None:
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", EXITING_CHILD],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tempfile.gettempdir(),
        )
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout.split() == ["leaving", "read", "made"], out.stdout
