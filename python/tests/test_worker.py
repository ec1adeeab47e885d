"""``_native.Worker``: a read that may block, made on the library's bounded worker: coalesced
while one runs, waited for within a deadline, its exception raised to the waiter."""

from __future__ import annotations

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
