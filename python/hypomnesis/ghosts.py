"""Ghosts: GPU memory still held after the work that allocated it is over, sorted into the
class the evidence shows, with who really holds it and what would free it (the library's
``ghosts``; ``hmn ghosts`` prints the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from . import _native
from ._convert import build, native_type
from .units import format_bytes

#: Every class, in the library's order.
CLASSES: Tuple[str, ...] = (
    "exited",
    "zombie",
    "stuck",
    "orphan",
    "gone_pod",
    "idle",
    "unaccounted",
)


@native_type
@dataclass(frozen=True)
class Ghost:
    """Memory held on one GPU that should not be: its class, what shows it, what frees it."""

    ghost_class: str
    """Why it is held: one of :data:`CLASSES`."""
    device_index: int
    """The GPU it is held on."""
    pid: Optional[int]
    """The pid the driver charges; ``None`` for memory no listed process accounts for."""
    name: Optional[str]
    """Its name, where it could be read."""
    bytes: int
    """The memory it holds on this GPU."""
    holders: Tuple[int, ...]
    """Processes holding this GPU's device file that may hold this memory (for memory whose
    charged process is not here): never hmn itself, nor a client without a context."""
    evidence: Tuple[str, ...]
    """What was read that shows the class, one fact a line."""
    remedy: str
    """What frees it: ``kill`` (the pids of :attr:`kill`), ``reap`` (by :attr:`reap_parent`),
    ``gpu_reset``, or ``unknown`` (:attr:`remedy_text` says why). A kill or a GPU reset is
    given only from evidence read on this host, which :attr:`evidence` shows."""
    kill: Tuple[int, ...]
    """The processes to end, when :attr:`remedy` is ``kill``."""
    reap_parent: Optional[int]
    """The parent that must reap the zombie, when :attr:`remedy` is ``reap``."""
    remedy_text: str
    """The remedy in words (``kill 4411 4412``)."""

    def __repr__(self) -> str:
        pid = "-" if self.pid is None else str(self.pid)
        return (
            f"Ghost({self.ghost_class} on GPU {self.device_index}, pid {pid}, "
            f"{format_bytes(self.bytes)}: {self.remedy_text})"
        )


@native_type
@dataclass(frozen=True)
class GhostFact:
    """A fact about a listed process that is no proof its memory is abandoned (an orphan at
    work, a zombie leader whose threads run, or one whose activity is not known)."""

    ghost_class: str
    """The class it would be, were it idle: one of :data:`CLASSES`."""
    device_index: int
    """The GPU it holds memory on."""
    pid: int
    """The process."""
    evidence: Tuple[str, ...]
    """What was read, one fact a line, the last saying why it is no ghost."""


@native_type
@dataclass(frozen=True)
class GhostReport:
    """Every ghost found, the facts that are no ghosts, and what could not be looked at."""

    ghosts: Tuple[Ghost, ...]
    """The ghosts, by GPU row order, then the memory no process accounts for."""
    facts: Tuple[GhostFact, ...]
    """Facts about listed processes that are not ghosts."""
    complete: bool
    """Whether every listed GPU process was looked at (none hidden, outside this PID namespace
    or unreadable, every GPU's list read): "no ghosts" means something only then."""
    unseen: Tuple[str, ...]
    """What could not be seen or read, and why (never guessed into a class)."""
    scanned_processes: Optional[int]
    """Processes whose descriptors were scanned; ``None`` when nothing needed the scan."""
    scan_complete: Optional[bool]
    """Whether the scan saw every process of the host and each one's descriptors (only then
    may it conclude that nothing holds a ghost's memory); ``None`` without a scan."""

    @property
    def bytes_by_class(self) -> Dict[str, int]:
        """The bytes held by each class found, in :data:`CLASSES` order."""
        out: Dict[str, int] = {}
        for c in CLASSES:
            held = sum(g.bytes for g in self.ghosts if g.ghost_class == c)
            if any(g.ghost_class == c for g in self.ghosts):
                out[c] = held
        return out

    def __repr__(self) -> str:
        if not self.ghosts:
            return "GhostReport(no ghosts)"
        parts = ", ".join(f"{c} {format_bytes(b)}" for c, b in self.bytes_by_class.items())
        return f"GhostReport({len(self.ghosts)} ghosts: {parts})"


def ghosts(stuck_after: float = 2.0, idle_after: float = 600.0) -> GhostReport:
    """The ghosts on every GPU, at one look: a process in uninterruptible sleep is looked at
    again after ``stuck_after`` seconds, and a holder is idle when the driver's activity
    samples show no engine at work for it for ``idle_after`` seconds.

    Raises :class:`hypomnesis.NoGpuSourceError` on a host without a GPU source, and
    ``ValueError`` for a negative duration.

    >>> import hypomnesis
    >>> try:
    ...     report = hypomnesis.ghosts(stuck_after=0.1)
    ... except hypomnesis.NoGpuSourceError:
    ...     report = None
    >>> report is None or isinstance(report.bytes_by_class, dict)
    True
    """
    return build(GhostReport, _native.ghosts(stuck_after, idle_after))
