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


def run_python(code: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tempfile.gettempdir(),
    )


# Once the interpreter is exiting (``atexit``), no read enters Python; the one inside is
# waited for, no longer than the timeout; the exiting thread itself goes on.
EXITING_SAYS = """
import threading, time
from hypomnesis import _native
w = _native.Worker("exiting")
inside, release = threading.Event(), threading.Event()
def slow():
    inside.set()
    release.wait(10)
    return "out"
number = w.ask(slow)
inside.wait(5)
t0 = time.monotonic()
print("short", _native._exiting(0.2), round(time.monotonic() - t0, 1))
threading.Timer(0.2, release.set).start()
t0 = time.monotonic()
print("long", _native._exiting(5.0), time.monotonic() - t0 < 4)
print("answer", w.wait(number, 5.0))
calls = []
try:
    w.wait(w.ask(lambda: calls.append(1)), 5.0)
except RuntimeError as e:
    print("refused", "interpreter is exiting" in str(e), calls)
print("goes on", _native._round_trip_seconds(3) >= 0, _native._exiting(float("nan")))
"""


def test_exiting_lets_no_read_into_python_and_waits_for_the_one_inside() -> None:
    out = run_python(EXITING_SAYS)
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert out.stdout.splitlines() == [
        "short False 0.2",
        "long True True",
        "answer (True, 'out')",
        "refused True []",
        "goes on True True",
    ], out.stdout


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
        out = run_python(EXITING_CHILD)
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout.split() == ["leaving", "read", "made"], out.stdout


# Daemon threads waiting (the GIL released) in the package's native code when the main thread
# ends: one that took the GIL back during finalization was ended by pthread_exit, whose
# unwinding through Rust frames crashed the process (SIGSEGV, in CI once from
# track(ledger=True)'s reading thread). They stay parked instead.
DAEMONS_AT_EXIT = """
import threading, time
from hypomnesis import _bounded
def spin(i):
    w = _bounded.worker(("daemon", i))
    while True:
        try:
            w.wait(w.ask(lambda: time.sleep(0.002)), 5.0)
        except RuntimeError:
            pass
class SlowToGo:
    # Finalization takes its time (the GIL released), as a big program's may.
    def __del__(self):
        time.sleep(0.3)
slow_to_go = SlowToGo()
for i in range(6):
    threading.Thread(target=spin, args=(i,), daemon=True).start()
time.sleep(0.05)
print("leaving", flush=True)
"""


def test_daemon_threads_in_native_code_at_exit_do_not_crash_it() -> None:
    for _ in range(5):
        out = run_python(DAEMONS_AT_EXIT)
        assert out.returncode == 0, (out.returncode, out.stderr)
        assert out.stdout == "leaving\n", out.stdout
