"""Reads that may block, made within the caller's deadline: the frameworks' figures and the
driver's, for :func:`hypomnesis.explain` and ``track(ledger=True)``.

A framework's memory calls are its own code, and one may block (a CUDA call waiting on a hung
kernel, a lock another thread holds); a driver call may hang too. Each kind of read runs on a
thread of its own (a :class:`Worker`), kept for the process's life and reading only when asked,
and the caller waits for its answer at most until its deadline: a read not answered by then is
a note, and the others are used all the same. A read still running when the next is asked
answers that one too, so a blocked framework holds one thread, never one per call.

After ``fork()`` the child has none of these threads: new ones start at its first read.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Generic, Hashable, List, Optional, Sequence, Tuple, TypeVar

from .frameworks import FrameworkMemory, names, read_one

T = TypeVar("T")
Ordinals = Callable[[], Tuple[Optional[List[str]], str]]


class Worker(Generic[T]):
    """The thread that makes one kind of read, one at a time, when asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cond = threading.Condition()
        self.asked = 0
        """The number of the latest read asked for."""
        self.done = 0
        """The number of the latest read finished (its answer is ``answer``)."""
        self.answer: Optional[T] = None
        self.running_since: Optional[float] = None
        """When the read now running started (``time.monotonic()``), ``None`` when idle."""
        self.fn: Optional[Callable[[], T]] = None
        self.thread: Optional[threading.Thread] = None
        self.missed = 0
        """The number of the latest read a caller stopped waiting for."""

    def ask(self, fn: Callable[[], T]) -> int:
        """Asks for a read made by ``fn`` and returns the number of the read that will answer:
        the one running or waiting to, if any (its own ``fn``), else a new one."""
        with self.cond:
            if self.running_since is not None or self.asked > self.done:
                return self.asked
            self.asked = self.done + 1
            self.fn = fn
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name=f"hypomnesis-read-{self.name}", daemon=True
                )
                self.thread.start()
            self.cond.notify_all()
            return self.asked

    def wait(self, number: int, until: float) -> Tuple[bool, Optional[T]]:
        """Whether read ``number`` answered by ``until`` (``time.monotonic()``), and its answer;
        the wait lets Ctrl-C through."""
        with self.cond:
            while self.done < number:
                left = until - time.monotonic()
                if left <= 0:
                    self.missed = max(self.missed, number)
                    return False, None
                self.cond.wait(min(left, 0.1))
            return True, self.answer

    def running_for(self) -> Optional[float]:
        """Seconds the read now running has taken so far."""
        with self.cond:
            since = self.running_since
        return None if since is None else time.monotonic() - since

    def _run(self) -> None:
        while True:
            with self.cond:
                while self.asked <= self.done or self.fn is None:
                    self.cond.wait()
                number = self.asked
                fn = self.fn
                self.running_since = time.monotonic()
            answer = fn()
            with self.cond:
                self.answer = answer
                self.done = number
                self.running_since = None
                self.cond.notify_all()


_LOCK = threading.Lock()
_WORKERS: Dict[Hashable, Worker[Any]] = {}


def worker(key: Hashable) -> Worker[Any]:
    """The worker for reads of kind ``key`` (made at its first use)."""
    with _LOCK:
        w = _WORKERS.get(key)
        if w is None:
            w = _WORKERS[key] = Worker(str(key))
        return w


def _forget_in_child() -> None:
    global _LOCK, _WORKERS
    _LOCK = threading.Lock()
    _WORKERS = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def overdue(w: Worker[Any], number: int) -> bool:
    """Whether a caller has already stopped waiting for ``w``'s read ``number``: it is not
    waited for again (a blocked read costs one deadline, not one per caller)."""
    with w.cond:
        return w.missed >= number


def late(what: str, w: Worker[Any], deadline: float) -> str:
    """The note for a read of ``what`` not answered within ``deadline`` seconds."""
    running = w.running_for()
    took = "" if running is None else f"; the read has run {running:.1f} s"
    return f"{what} did not answer within the deadline ({deadline:g} s){took}: not read"


def _reading(name: str, ordinals: Ordinals) -> Callable[[], Tuple[List[FrameworkMemory], List[str]]]:
    """The read of framework ``name``, for its worker."""
    return lambda: read_one(name, ordinals)


def frameworks(
    wanted: Optional[Sequence[str]], ordinals: Ordinals, deadline: float, until: float
) -> Tuple[List[FrameworkMemory], List[str]]:
    """What the imported frameworks of ``wanted`` (default: all) hold, each read on its own
    thread, waited for until ``until`` (``time.monotonic()``); one not read in time is a note
    (``deadline`` is the caller's, to say it). An unknown framework name is a
    ``ValueError``, raised before any read."""
    imported = [n for n in names(wanted) if n in sys.modules]
    asked = []
    for name in imported:
        w = worker(("framework", name))
        asked.append((name, w, w.ask(_reading(name, ordinals))))
    found: List[FrameworkMemory] = []
    notes: List[str] = []
    for name, w, number in asked:
        answered, answer = w.wait(number, 0.0 if overdue(w, number) else until)
        if not answered or answer is None:
            notes.append(late(name, w, deadline))
            continue
        found += answer[0]
        notes += answer[1]
    return found, notes
