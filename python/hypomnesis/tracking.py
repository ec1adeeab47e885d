"""``track()``: the peak RSS and GPU memory of a block of code, sampled on a Rust thread.

The sampling thread never holds the GIL: the block, and every other Python thread, runs at
full speed while it samples. One sample is taken on entry and one on exit, so even a block
shorter than the interval has a baseline, a final figure and a peak.
"""

from __future__ import annotations

import functools
import importlib
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from . import _native
from .errors import HypomnesisError
from .units import format_bytes

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Sample:
    """One sample of a :class:`Tracking`."""

    time: float
    """Seconds since tracking started."""
    rss_bytes: int
    """This process's resident set size."""
    gpu_bytes: Dict[int, Optional[int]]
    """This process's own GPU memory per device index; ``None`` where no source could
    attribute memory to this process."""
    device_used_bytes: Dict[int, Optional[int]]
    """Used memory of each whole device (all processes, and the driver reservation); ``None``
    where it could not be read."""


def _peak(values: Sequence[Optional[int]]) -> Optional[int]:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _minus(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return None if a is None or b is None else a - b


class Tracking:
    """The record of one tracked block: what :func:`track` gives in a ``with`` statement.

    Its figures are there once the block has ended (reading them before raises
    ``RuntimeError``). GPU figures are per device index; this process's own GPU memory
    (``gpu_…``) is ``None`` where no source could attribute memory to it.

    >>> import hypomnesis
    >>> with hypomnesis.track(interval=0.005) as t:
    ...     buf = bytearray(b"x") * (64 << 20)
    >>> t.peak_rss_delta_bytes >= 60 << 20
    True
    >>> len(t.samples) >= 2
    True
    """

    def __init__(self, interval: float, devices: Tuple[int, ...]) -> None:
        self.interval = interval
        """Seconds between samples."""
        self.devices = devices
        """The device indices sampled."""
        self._sampler = _native.Sampler(interval, list(devices))
        self._samples: Optional[List[Sample]] = None

    def _start(self) -> None:
        self._sampler.start()

    def _stop(self) -> None:
        raw = self._sampler.stop()
        self._samples = [
            Sample(
                time=t,
                rss_bytes=rss,
                gpu_bytes=dict(zip(self.devices, own)),
                device_used_bytes=dict(zip(self.devices, used)),
            )
            for (t, rss, own, used) in raw
        ]

    @property
    def running(self) -> bool:
        """Whether the block is still being sampled."""
        return self._samples is None

    @property
    def samples(self) -> List[Sample]:
        """Every sample in time order: the entry one, one per interval, the exit one."""
        if self._samples is None:
            raise RuntimeError("the tracked block has not ended yet: its samples come on exit")
        return self._samples

    @property
    def baseline(self) -> Sample:
        """The sample taken on entry."""
        return self.samples[0]

    @property
    def final(self) -> Sample:
        """The sample taken on exit."""
        return self.samples[-1]

    @property
    def duration(self) -> float:
        """Seconds from the entry sample to the exit sample."""
        return self.final.time - self.baseline.time

    @property
    def peak_rss_bytes(self) -> int:
        """The largest RSS sampled."""
        return max(s.rss_bytes for s in self.samples)

    @property
    def rss_delta_bytes(self) -> int:
        """RSS on exit minus RSS on entry."""
        return self.final.rss_bytes - self.baseline.rss_bytes

    @property
    def peak_rss_delta_bytes(self) -> int:
        """Peak RSS minus RSS on entry: what the block needed at most."""
        return self.peak_rss_bytes - self.baseline.rss_bytes

    @property
    def peak_gpu_bytes(self) -> Dict[int, Optional[int]]:
        """The largest GPU memory of this process sampled, per device."""
        return {d: _peak([s.gpu_bytes[d] for s in self.samples]) for d in self.devices}

    @property
    def gpu_delta_bytes(self) -> Dict[int, Optional[int]]:
        """This process's GPU memory on exit minus on entry, per device."""
        return {
            d: _minus(self.final.gpu_bytes[d], self.baseline.gpu_bytes[d]) for d in self.devices
        }

    @property
    def peak_gpu_delta_bytes(self) -> Dict[int, Optional[int]]:
        """Peak GPU memory of this process minus its GPU memory on entry, per device."""
        peak = self.peak_gpu_bytes
        return {d: _minus(peak[d], self.baseline.gpu_bytes[d]) for d in self.devices}

    @property
    def peak_device_used_bytes(self) -> Dict[int, Optional[int]]:
        """The largest used memory of each whole device sampled."""
        return {d: _peak([s.device_used_bytes[d] for s in self.samples]) for d in self.devices}

    def plot(self, ax: Any = None, *, unit: str = "MiB") -> Any:
        """Plot the timeline (RSS, and this process's GPU memory per device) with matplotlib,
        which this needs (``pip install matplotlib``); returns the ``Axes``.

        ``unit`` is ``"KiB"``, ``"MiB"`` or ``"GiB"``.
        """
        scale = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}.get(unit)
        if scale is None:
            raise ValueError(f"unit must be 'KiB', 'MiB' or 'GiB', not {unit!r}")
        try:
            # Imported by name: matplotlib is optional (and untyped to the type checkers).
            plt: Any = importlib.import_module("matplotlib.pyplot")
        except ImportError as e:
            raise ImportError(
                "Tracking.plot needs matplotlib: pip install matplotlib"
            ) from e
        samples = self.samples
        if ax is None:
            _, ax = plt.subplots()
        times = [s.time for s in samples]
        ax.plot(times, [s.rss_bytes / scale for s in samples], label="RSS")
        for d in self.devices:
            points = [(s.time, s.gpu_bytes[d]) for s in samples if s.gpu_bytes[d] is not None]
            if points:
                ax.plot(
                    [t for t, _ in points],
                    [v / scale for _, v in points if v is not None],
                    label=f"GPU {d} (this process)",
                )
        ax.set_xlabel("seconds")
        ax.set_ylabel(unit)
        ax.legend()
        return ax

    def __repr__(self) -> str:
        if self._samples is None:
            return f"<Tracking running, interval {self.interval} s, devices {list(self.devices)}>"
        parts = [
            f"{self.duration:.3f} s",
            f"{len(self.samples)} samples",
            f"RSS peak {format_bytes(self.peak_rss_bytes)} "
            f"({format_bytes(self.peak_rss_delta_bytes, signed=True)})",
        ]
        peak = self.peak_gpu_bytes
        peak_delta = self.peak_gpu_delta_bytes
        for d in self.devices:
            if peak[d] is None:
                parts.append(f"GPU {d} unknown")
            else:
                parts.append(
                    f"GPU {d} peak {format_bytes(peak[d])} "
                    f"({format_bytes(peak_delta[d], signed=True)})"
                )
        return f"<Tracking {', '.join(parts)}>"


class Tracker:
    """What :func:`track` returns: a context manager (each ``with`` gives a new
    :class:`Tracking`) and a decorator (each call of the function is tracked). Reusable,
    nestable, and usable from several threads at once: each entry samples on its own thread.
    """

    def __init__(
        self,
        interval: float = 0.01,
        devices: Optional[Sequence[int]] = None,
        callback: Optional[Callable[[Tracking], None]] = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be above 0 seconds, not {interval}")
        self.interval = float(interval)
        """Seconds between samples."""
        self.devices = None if devices is None else tuple(int(d) for d in devices)
        """The device indices to sample; ``None``: every device present at each entry."""
        self.callback = callback
        """Called with each finished :class:`Tracking`."""
        self.history: List[Tracking] = []
        """Every finished :class:`Tracking` of this tracker, in the order they ended."""
        self._lock = threading.Lock()
        self._local = threading.local()

    @property
    def last(self) -> Optional[Tracking]:
        """The latest finished :class:`Tracking`, if any."""
        with self._lock:
            return self.history[-1] if self.history else None

    def _stack(self) -> List[Tracking]:
        stack: Optional[List[Tracking]] = getattr(self._local, "stack", None)
        if stack is None:
            stack = []
            self._local.stack = stack
        return stack

    def __enter__(self) -> Tracking:
        if self.devices is not None:
            devices = self.devices
        else:
            try:
                devices = tuple(range(_native.device_count()))
            except HypomnesisError:
                devices = ()
        tracking = Tracking(self.interval, devices)
        tracking._start()
        self._stack().append(tracking)
        return tracking

    def __exit__(self, *exc: object) -> None:
        tracking = self._stack().pop()
        tracking._stop()
        with self._lock:
            self.history.append(tracking)
        if self.callback is not None:
            self.callback(tracking)

    def __call__(self, fn: F) -> F:
        @functools.wraps(fn)
        def tracked(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        tracked.tracker = self  # type: ignore[attr-defined]
        return tracked  # type: ignore[return-value]

    def __repr__(self) -> str:
        devices = "all" if self.devices is None else list(self.devices)
        return (
            f"Tracker(interval={self.interval}, devices={devices}, "
            f"finished={len(self.history)})"
        )


def track(
    interval: float = 0.01,
    devices: Optional[Sequence[int]] = None,
    callback: Optional[Callable[[Tracking], None]] = None,
) -> Tracker:
    """Track this process's RSS and GPU memory (per device) over a block or a function call:
    peaks, baseline, deltas and the timeline.

    Samples every ``interval`` seconds on a Rust thread that does not hold the GIL, plus one
    sample on entry and one on exit. ``devices`` are the GPU indices to sample (default: every
    device present; none when there is no GPU). ``callback`` is called with each finished
    :class:`Tracking`.

    As a context manager:

    >>> import hypomnesis
    >>> with hypomnesis.track() as t:
    ...     data = bytearray(b"x") * (64 << 20)
    >>> t.peak_rss_bytes >= t.baseline.rss_bytes + (60 << 20)
    True

    As a decorator (each call is tracked; the tracker keeps them):

    >>> tracker = hypomnesis.track(interval=0.005)
    >>> @tracker
    ... def step():
    ...     return bytearray(b"x") * (48 << 20)
    >>> len(step())
    50331648
    >>> tracker.last.peak_rss_delta_bytes >= 45 << 20
    True
    """
    return Tracker(interval, devices, callback)
