"""``track()``: the peak of a block of code, sampled on one thread for the whole process.

- :mod:`.block`: :func:`track`, :class:`Tracker`, :class:`Tracking` and :class:`Sample`;
- :mod:`.recorder`: the ledger at each sample of ``track(ledger=True)``.
"""

from .block import (
    HISTORY_LIMIT,
    PROBE_READINGS,
    TIMELINE_SAMPLES,
    Sample,
    Tracker,
    Tracking,
    track,
)

__all__ = [
    "HISTORY_LIMIT",
    "PROBE_READINGS",
    "TIMELINE_SAMPLES",
    "Sample",
    "Tracker",
    "Tracking",
    "track",
]
