"""Reads that may block, made within the caller's deadline: the frameworks' figures and the
driver's, for :func:`hypomnesis.explain` and ``track(ledger=True)``.

A framework's memory calls are its own code, and one may block (a CUDA call waiting on a hung
kernel, a lock another thread holds); a driver call may hang too. Each kind of read runs on a
worker of its own (``_native.Worker``: the library's bounded worker, one thread kept for the
process's life, reading only when asked), and the caller waits for its answer at most until
its deadline: a read not answered by then is a note, and the others are used all the same. A
read still running when the next is asked answers that one too, so a blocked framework holds
one thread, never one per call.

After ``fork()`` the child has none of these threads: new workers start at its first read.

At exit (``atexit``, before the interpreter finalizes) no read enters Python any more: a
worker's thread is not one of Python's, and one that entered Python while the interpreter
finalizes could crash the process. A read still inside Python is given :data:`EXIT_WAIT`
seconds. A Python thread still in the package's native code then (a daemon thread waiting for
a read) stays there when it comes back rather than take the GIL from a finalizing interpreter,
which would crash the process too (``_native._exiting``).
"""

from __future__ import annotations

import atexit

import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from . import _native
from .frameworks import FrameworkMemory, names, read_one

Ordinals = Callable[[], Tuple[Optional[List[str]], str]]
Worker = _native.Worker


_LOCK = threading.Lock()
_WORKERS: Dict[Hashable, Worker] = {}


def worker(key: Hashable) -> Worker:
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

EXIT_WAIT = 1.0
"""Seconds that exit waits for the workers' reads still inside Python."""


def _at_exit() -> None:
    # No worker's read enters Python from now on and those inside are waited for; a thread of
    # the user's (a daemon) that comes back from this package's native code stays there rather
    # than take the GIL from a finalizing interpreter (both crash the process before 3.14).
    _native._exiting(EXIT_WAIT)


atexit.register(_at_exit)


def wait(w: Worker, number: int, until: float) -> Tuple[bool, Any]:
    """Whether ``w``'s read ``number`` answered by ``until`` (``time.monotonic()``; at once
    when a caller already stopped waiting for it), and its answer."""
    left = 0.0 if w.overdue(number) else until - time.monotonic()
    return w.wait(number, max(left, 0.0))


def late(what: str, w: Worker, deadline: float) -> str:
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
        answered, answer = wait(w, number, until)
        if not answered or answer is None:
            notes.append(late(name, w, deadline))
            continue
        found += answer[0]
        notes += answer[1]
    return found, notes
