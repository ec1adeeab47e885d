"""``track()``: the peak RSS and GPU memory of a block of code, sampled on a Rust thread.

One sampling thread serves every tracked block of the process and never holds the GIL: the
block, and every other Python thread, runs at full speed while it samples. One sample is taken
on entry and one on exit, so even a block shorter than the interval has a baseline, a final
figure and a peak.

What a block keeps is bounded however long it runs: its exact peaks (and when they were
sampled), how many samples were taken, and a timeline of at most :data:`TIMELINE_SAMPLES`
samples (when full, neighbouring samples merge pairwise, each figure keeping its maximum, as
``hmn run``'s plot does). A :class:`Tracker` keeps the last ``history_limit`` records.

GPU figures come from driver calls made on a thread of their own and waited for at most
``deadline`` seconds: a sample whose call did not return in time has ``None`` for them and
``missed_deadline`` set, and sampling goes on. The entry and exit samples are read at the
edge: RSS then, and GPU figures from a driver reading that began after the block's edge, never
an older one (on an H200 a 3 GiB allocation showed in the driver's list 0.2 ms before
``torch.empty`` returned, and a reading a few milliseconds old missed it).

Records are kept per thread and per asyncio task (:mod:`contextvars`), and a process forked
inside a tracked block ends that block quietly in the child (with its entry and exit samples)
and can track again.
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import importlib
import inspect
import os
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar

from .. import _arguments, _native
from ..ledger import Ledger
from ..units import format_bytes
from . import recorder as recording
from .recorder import Gpus, Reading, Recorder

#: Most samples a :class:`Tracking` keeps: the entry one, at most 2,046 between, the exit one
#: (the native sampler's bound, read from it).
TIMELINE_SAMPLES: int = _native.TIMELINE_SAMPLES

#: Seconds the GPU figures of a sample are waited for at most, by default (``deadline``).
DEFAULT_DEADLINE = 5.0


def _reads(deadline: Optional[float]) -> float:
    """The deadline of the reads other than the edges': the block's, or the default without."""
    return DEFAULT_DEADLINE if deadline is None else deadline


#: How many finished records a :class:`Tracker` keeps by default (``history_limit``).
HISTORY_LIMIT = 1000

#: Most probe readings a :class:`Tracking` keeps between entry and exit (``probe_interval``):
#: when full, every other one is let go and the readings go on at twice the interval.
PROBE_READINGS = 256

if hasattr(os, "register_at_fork"):
    # No fork in the middle of a driver call of the sampling threads (whose locks the child
    # would find held); and they are not in a forked child: it starts its own when it tracks.
    os.register_at_fork(
        before=_native._before_fork,
        after_in_parent=_native._after_fork_in_parent,
        after_in_child=_native._after_fork,
    )

F = TypeVar("F", bound=Callable[..., Any])

#: A peak as the native sampler gives it: (bytes, seconds since the block started).
_Peak = Tuple[int, float]
#: A sample as the native sampler hands it over: the fields of `_RawSample`, in order.
_NativeSample = Tuple[float, int, List[Optional[int]], List[Optional[int]], bool]


class _RawSample(NamedTuple):
    """A sample as the native sampler gives it (per sampled device, in order)."""

    time: float
    rss_bytes: int
    gpu_bytes: List[Optional[int]]
    device_used_bytes: List[Optional[int]]
    missed_deadline: bool


@dataclass(frozen=True)
class Sample:
    """One sample of a :class:`Tracking` (in a long block, a merge of neighbouring samples:
    each figure the largest of them, the time the first's)."""

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
    missed_deadline: bool = False
    """Whether the GPU figures did not come within the deadline (they are ``None`` then)."""
    probe: Any = None
    """What the tracker's ``probe`` returned, on the entry and exit samples (``None``
    elsewhere, and without a probe)."""
    ledger: Optional[Ledger] = None
    """With ``track(ledger=True)``: this sample's driver figures set against what the imported
    frameworks held (the reading nearest in time; see :attr:`ledger_lag`), as
    :func:`hypomnesis.explain` gives them. ``None`` without it."""
    ledger_lag: Optional[float] = None
    """Seconds from this sample to the framework reading in its :attr:`ledger` (negative: the
    reading came before it); 0 for the entry and exit samples, ``None`` without a ledger."""


def _device_count(deadline: float) -> Optional[int]:
    """How many GPUs there are (0 when no source answers), asked on the library's bounded
    worker and waited for at most ``deadline`` seconds (``None`` then, and while an earlier
    count has not returned); the wait lets Ctrl-C through."""
    return _native.device_count_within(deadline)


def _minus(a: Optional[int], b: Optional[int]) -> Optional[int]:
    return None if a is None or b is None else a - b


class Tracking:
    """The record of one tracked block: what :func:`track` gives in a ``with`` statement.

    Its figures are there once the block has ended (reading them before raises
    ``RuntimeError``). GPU figures are per device index; this process's own GPU memory
    (``gpu_…``) is ``None`` where no source could attribute memory to it. The peaks are exact
    however long the block; :attr:`samples` is bounded (:data:`TIMELINE_SAMPLES`).

    >>> import hypomnesis
    >>> with hypomnesis.track(interval=0.005) as t:
    ...     buf = bytearray(b"x") * (64 << 20)
    >>> t.peak_rss_delta_bytes >= 60 << 20
    True
    >>> len(t.samples) >= 2
    True
    """

    def __init__(
        self,
        interval: float,
        devices: Tuple[int, ...],
        deadline: Optional[float] = DEFAULT_DEADLINE,
        probe: Optional[Callable[[], Any]] = None,
        probe_interval: Optional[float] = None,
        gpus: Optional[Gpus] = None,
    ) -> None:
        self.interval = interval
        """Seconds between samples."""
        self.devices = devices
        """The device indices sampled."""
        self.deadline = deadline
        """Seconds the GPU figures of a sample are waited for at most; ``None``: the entry and
        exit samples read them on the tracked thread, unguarded (the samples between keep
        :data:`DEFAULT_DEADLINE`)."""
        self._probe = probe
        self._probes: List[Any] = []
        self._probe_interval = probe_interval
        self._readings: List[Tuple[float, Any]] = []
        self._probing: Optional[Tuple[threading.Thread, threading.Event]] = None
        self._sampler = _native.Sampler(interval, list(devices), deadline)
        self._recorder = (
            None if gpus is None else Recorder(gpus, interval, self._sampler, _reads(deadline))
        )
        # The entry and exit samples as the sampler gave them; None while running.
        self._edges: Optional[Tuple[_NativeSample, _NativeSample]] = None
        self._samples: Optional[List[Sample]] = None
        self._taken = 0
        self._missed = 0
        self._peak_rss: _Peak = (0, 0.0)
        # Per sampled device, in order (made dicts when read: a decorated call that nobody
        # inspects costs less).
        self._own_peaks: Sequence[Optional[_Peak]] = ()
        self._used_peaks: Sequence[Optional[_Peak]] = ()

    def _start(self) -> None:
        if self._probe is not None:
            self._probes.append(self._probe())
        if self._recorder is None:
            self._sampler.start()
        else:
            start = time.monotonic()
            self._sampler.start()
            recording.start(self._recorder, start)
        if self._probe is not None and self._probe_interval is not None:
            done = threading.Event()
            thread = threading.Thread(
                target=self._probe_loop,
                args=(self._probe, self._probe_interval, done, time.monotonic()),
                name="hypomnesis-probe",
                daemon=True,
            )
            thread.start()
            self._probing = (thread, done)

    def _probe_loop(
        self, probe: Callable[[], Any], every: float, done: threading.Event, start: float
    ) -> None:
        """Calls ``probe`` every ``every`` seconds until ``done``: a bounded list of readings
        (time since the block started, what it returned), thinned when full."""
        while not done.wait(every):
            try:
                value = probe()
            except Exception as e:  # noqa: BLE001 - a failing probe is recorded, not fatal
                value = e
            self._readings.append((time.monotonic() - start, value))
            if len(self._readings) >= PROBE_READINGS:
                del self._readings[1::2]
                every *= 2

    def _stop(self) -> None:
        if self._probing is not None:
            thread, done = self._probing
            done.set()
            # A probe in the middle of a framework call is let finish; not waited for long.
            thread.join(timeout=max(1.0, self._probe_interval or 0.0))
            self._probing = None
        if self._recorder is not None:
            recording.stop(self._recorder)
        # (taken, missed, RSS peak, GPU peaks, used peaks, entry, exit), each peak (bytes,
        # seconds since the start): named here, the samples made `_RawSample`s when read.
        taken, missed, rss, own, used, first, last = self._sampler.stop()
        if self._recorder is not None:
            self._recorder.end(last[0])
        if self._probe is not None:
            self._probes.append(self._probe())
        self._edges = (first, last)
        self._taken, self._missed, self._peak_rss = taken, missed, rss
        self._own_peaks, self._used_peaks = own, used

    @property
    def _peak_gpu(self) -> Dict[int, Optional[_Peak]]:
        return dict(zip(self.devices, self._own_peaks))

    @property
    def _peak_used(self) -> Dict[int, Optional[_Peak]]:
        return dict(zip(self.devices, self._used_peaks))

    def _ended(self) -> None:
        if self._edges is None:
            raise RuntimeError("the tracked block has not ended yet: its samples come on exit")

    @property
    def running(self) -> bool:
        """Whether the block is still being sampled."""
        return self._edges is None

    @property
    def samples(self) -> List[Sample]:
        """The timeline in time order: the entry sample, those taken every interval (at most
        :data:`TIMELINE_SAMPLES` in all: in a long block each merges neighbouring samples,
        keeping each figure's maximum), the exit sample."""
        if self._samples is None:
            self._ended()
            # Made when first read: a decorated call that nobody inspects costs less, and the
            # timeline stays in the sampler's compact form until then.
            assert self._edges is not None
            first, last_raw = self._edges
            raw = [first, *self._sampler.between(), last_raw]
            last = len(raw) - 1
            probes = {0: self._probes[0], last: self._probes[-1]} if self._probes else {}
            samples = [self._sample(s, probes.get(i)) for i, s in enumerate(raw)]
            if self._recorder is not None:
                samples = self._with_ledgers(samples, self._recorder)
            self._samples = samples
        return self._samples

    @staticmethod
    def _with_ledgers(samples: List[Sample], recorder: Recorder) -> List[Sample]:
        """Each sample with its ledger: the entry and exit readings for the entry and exit
        samples, the reading nearest in time for the others."""
        readings = recorder.readings()
        times = [r.time for r in readings]
        last = len(samples) - 1
        out = []
        for i, s in enumerate(samples):
            reading: Optional[Reading] = None
            if i == 0 and recorder.entry is not None:
                reading = recorder.entry
            elif i == last and recorder.exit is not None:
                reading = recorder.exit
            elif readings:
                at = bisect.bisect_left(times, s.time)
                near = [readings[j] for j in (at - 1, at) if 0 <= j < len(readings)]
                reading = min(near, key=lambda r: abs(r.time - s.time))
            lag = None if reading is None else (
                0.0 if i in (0, last) else reading.time - s.time
            )
            out.append(
                replace(
                    s,
                    ledger=recording.ledger_of(s, reading, recorder.gpus),
                    ledger_lag=lag,
                )
            )
        return out

    @property
    def peak_ledger(self) -> Optional[Ledger]:
        """With ``track(ledger=True)``: the ledger at the peak of this process's GPU memory
        (the device with the largest peak; the RSS peak where no GPU figure is known): the
        sample holding that peak set against the first framework reading taken at or after it.
        ``None`` without a ledger."""
        self._ended()
        if self._recorder is None:
            return None
        samples = self.samples
        gpu = [(p, d) for d, p in self._peak_gpu.items() if p is not None]
        if gpu:
            (peak, at), d = max(gpu, key=lambda x: (x[0][0], -x[0][1]))
            held = next((s for s in samples if s.gpu_bytes.get(d) == peak), samples[0])
        else:
            peak, at = self._peak_rss
            held = next((s for s in samples if s.rss_bytes == peak), samples[0])
        reading = self._recorder.at_peak(at)
        return recording.ledger_of(held, reading, self._recorder.gpus)

    @property
    def probe_readings(self) -> List[Tuple[float, Any]]:
        """With ``probe_interval``: what the probe returned between entry and exit, as
        ``(seconds since the block started, value)`` pairs (at most :data:`PROBE_READINGS`; a
        probe that raised gives its exception). Empty otherwise."""
        self._ended()
        return list(self._readings)

    @property
    def peak_probe(self) -> Any:
        """What the probe returned nearest in time to the peak of this process's GPU memory
        (the device with the largest peak; the RSS peak where no GPU figure is known): with
        ``probe=hypomnesis.explain``, the ledger at the peak. Among the entry, exit and
        ``probe_interval`` readings; ``None`` without a probe."""
        self._ended()
        if not self._probes and not self._readings:
            return None
        gpu = [p for p in self._peak_gpu.values() if p is not None]
        at = max(gpu)[1] if gpu else self._peak_rss[1]
        samples = self.samples
        readings = [(samples[0].time, self._probes[0])] if self._probes else []
        readings += self._readings
        if len(self._probes) > 1:
            readings.append((samples[-1].time, self._probes[-1]))
        return min(readings, key=lambda r: abs(r[0] - at))[1]

    @property
    def sample_count(self) -> int:
        """How many samples were taken in all (:attr:`samples` may hold fewer, merged)."""
        self._ended()
        return self._taken

    @property
    def missed_count(self) -> int:
        """How many samples' GPU figures did not come within the deadline."""
        self._ended()
        return self._missed

    def _sample(self, native: _NativeSample, probe: Any) -> Sample:
        raw = _RawSample(*native)
        return Sample(
            time=raw.time,
            rss_bytes=raw.rss_bytes,
            gpu_bytes=dict(zip(self.devices, raw.gpu_bytes)),
            device_used_bytes=dict(zip(self.devices, raw.device_used_bytes)),
            missed_deadline=raw.missed_deadline,
            probe=probe,
        )

    def _edge(self, last: bool) -> Sample:
        """The entry or exit sample, without making the whole timeline where it need not
        (with a ledger, the timeline's own carries its ledger)."""
        self._ended()
        assert self._edges is not None
        if self._samples is None and self._recorder is None:
            probe = (self._probes[-1] if last else self._probes[0]) if self._probes else None
            return self._sample(self._edges[1 if last else 0], probe)
        return self.samples[-1 if last else 0]

    @property
    def baseline(self) -> Sample:
        """The sample taken on entry."""
        return self._edge(False)

    @property
    def final(self) -> Sample:
        """The sample taken on exit."""
        return self._edge(True)

    @property
    def duration(self) -> float:
        """Seconds from the entry sample to the exit sample."""
        return self.final.time - self.baseline.time

    @property
    def peak_rss_bytes(self) -> int:
        """The largest RSS sampled."""
        self._ended()
        return self._peak_rss[0]

    @property
    def peak_rss_time(self) -> float:
        """When the largest RSS was first sampled, seconds since tracking started."""
        self._ended()
        return self._peak_rss[1]

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
        self._ended()
        return {d: None if p is None else p[0] for d, p in self._peak_gpu.items()}

    @property
    def peak_gpu_time(self) -> Dict[int, Optional[float]]:
        """When :attr:`peak_gpu_bytes` was first sampled, per device (seconds since tracking
        started; ``None`` where unknown)."""
        self._ended()
        return {d: None if p is None else p[1] for d, p in self._peak_gpu.items()}

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
        self._ended()
        return {d: None if p is None else p[0] for d, p in self._peak_used.items()}

    @property
    def peak_device_used_time(self) -> Dict[int, Optional[float]]:
        """When :attr:`peak_device_used_bytes` was first sampled, per device."""
        self._ended()
        return {d: None if p is None else p[1] for d, p in self._peak_used.items()}

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
        if self._edges is None:
            return f"<Tracking running, interval {self.interval} s, devices {list(self.devices)}>"
        parts = [
            f"{self.duration:.3f} s",
            f"{self.sample_count} samples",
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


#: A block open in a thread or task, and those it is nested in.
_Open = Tuple["Tracking", Any]


class Tracker:
    """What :func:`track` returns: a context manager (each ``with`` gives a new
    :class:`Tracking`) and a decorator (each call of the function is tracked; an ``async def``
    stays one, its awaited run tracked). Reusable, nestable, and usable from several threads
    and asyncio tasks at once: each thread and task has its own records. One thread samples
    every block of the process.
    """

    def __init__(
        self,
        interval: float = 0.01,
        devices: Optional[Sequence[int]] = None,
        callback: Optional[Callable[[Tracking], None]] = None,
        *,
        deadline: Optional[float] = DEFAULT_DEADLINE,
        history_limit: int = HISTORY_LIMIT,
        probe: Optional[Callable[[], Any]] = None,
        probe_interval: Optional[float] = None,
        ledger: bool = False,
    ) -> None:
        self.interval = _arguments.seconds("interval", interval)
        """Seconds between samples."""
        self.deadline: Optional[float] = (
            None if deadline is None else _arguments.seconds("deadline", deadline)
        )
        """Seconds the GPU figures of a sample are waited for at most; ``None``: the entry and
        exit samples read them on the tracked thread, with no hang guard (for hot paths: a
        driver call that hangs then hangs the caller); the samples between, the device count
        and the ledgers keep :data:`DEFAULT_DEADLINE`."""
        self.devices = _arguments.devices(devices)
        """The device indices to sample; ``None``: every device present at the first entry."""
        self.callback: Optional[Callable[[Tracking], None]] = _arguments.optional_callable(
            "callback", callback
        )
        """Called with each finished :class:`Tracking`."""
        self.history_limit = _arguments.count("history_limit", history_limit)
        """How many finished records :attr:`history` keeps at most."""
        self.probe: Optional[Callable[[], Any]] = _arguments.optional_callable("probe", probe)
        """Called (on the tracked thread) with no argument as each block starts and ends; what
        it returns is the ``probe`` of the entry and exit :class:`Sample`. The place for
        figures the sampling thread cannot read without the GIL (a framework's allocator)."""
        self.probe_interval: Optional[float] = (
            None if probe_interval is None else _arguments.seconds("probe_interval", probe_interval)
        )
        """With a probe: also call it every this many seconds while a block runs, on a thread
        of the block's own (it holds the GIL while the probe runs); see
        :attr:`Tracking.probe_readings` and :attr:`Tracking.peak_probe`."""
        self.ledger = _arguments.flag("ledger", ledger)
        """Whether each sample gets its ledger (:attr:`Sample.ledger`,
        :attr:`Tracking.peak_ledger`): the imported frameworks are read as each block starts
        and ends, and every interval between (at most every 5 ms) on one thread shared by every
        block, which holds the GIL for the frameworks' calls."""
        self.history: List[Tracking] = []
        """The last :attr:`history_limit` finished :class:`Tracking` of this tracker, in the
        order they ended."""
        self._lock = threading.Lock()
        # The blocks this thread or task is in, innermost first, as a linked list (the
        # innermost and the rest): entering and leaving are O(1) however deep the nesting.
        self._stack: contextvars.ContextVar[Optional[_Open]] = contextvars.ContextVar(
            f"hypomnesis-tracker-{id(self):x}", default=None
        )
        self._all_devices: Optional[Tuple[int, ...]] = None
        self._gpus: Optional[Gpus] = None

    @property
    def last(self) -> Optional[Tracking]:
        """The latest finished :class:`Tracking`, if any."""
        with self._lock:
            return self.history[-1] if self.history else None

    def _devices(self) -> Tuple[int, ...]:
        if self.devices is not None:
            return self.devices
        if self._all_devices is None:
            count = _device_count(_reads(self.deadline))
            if count is None:
                return ()  # not in time: none this block, asked again at the next
            self._all_devices = tuple(range(count))
        return self._all_devices

    def _ledger_gpus(self, devices: Tuple[int, ...]) -> Gpus:
        """What the ledgers need of ``devices``, read at the first block; read again at the
        next block when it did not come in time."""
        gpus = self._gpus
        if gpus is None or tuple(gpus.devices) != devices:
            gpus = recording.read_gpus(devices, _reads(self.deadline))
            if not gpus.timed_out:
                self._gpus = gpus
        return gpus

    def __enter__(self) -> Tracking:
        devices = self.devices
        if devices is None:
            devices = self._devices()
        tracking = Tracking(
            self.interval,
            devices,
            self.deadline,
            self.probe,
            self.probe_interval,
            self._ledger_gpus(devices) if self.ledger else None,
        )
        tracking._start()
        self._stack.set((tracking, self._stack.get()))
        return tracking

    def __exit__(self, *exc: object) -> None:
        stack = self._stack.get()
        if stack is None:
            raise RuntimeError("this tracker's block was left without being entered")
        tracking, rest = stack
        self._stack.set(rest)
        tracking._stop()
        with self._lock:
            self.history.append(tracking)
            if len(self.history) > self.history_limit:
                del self.history[: len(self.history) - self.history_limit]
        if self.callback is not None:
            self.callback(tracking)

    def __call__(self, fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def tracked_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await fn(*args, **kwargs)

            tracked_async.tracker = self  # type: ignore[attr-defined]
            return tracked_async  # type: ignore[return-value]

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
    *,
    deadline: Optional[float] = DEFAULT_DEADLINE,
    history_limit: int = HISTORY_LIMIT,
    probe: Optional[Callable[[], Any]] = None,
    probe_interval: Optional[float] = None,
    ledger: bool = False,
) -> Tracker:
    """Track this process's RSS and GPU memory (per device) over a block or a function call:
    peaks, baseline, deltas and the timeline.

    Samples every ``interval`` seconds on the process's one sampling thread, which does not
    hold the GIL, plus one sample on entry and one on exit. ``devices`` are the GPU indices to
    sample (default: every device present; none when there is no GPU). ``callback`` is called
    with each finished :class:`Tracking`. The GPU figures of a sample are waited for at most
    ``deadline`` seconds (a sample without them is marked ``missed_deadline``): the driver is
    asked on a worker thread, one round trip per edge. ``deadline=None`` reads the entry and
    exit samples on the calling thread instead, with no hang guard: the cheapest decorated
    call, for hot paths, but a driver call that hangs then hangs the caller. The tracker
    keeps its last ``history_limit`` records; each keeps its exact peaks and at most
    :data:`TIMELINE_SAMPLES` samples, however long the block. ``probe``, if given, is called
    as each block starts and ends (see :attr:`Tracker.probe`), and every ``probe_interval``
    seconds between when that is given: ``track(probe=hypomnesis.explain, probe_interval=1)``
    keeps the ledger over a run, and :attr:`Tracking.peak_probe` is the ledger at the peak.
    ``ledger=True`` does that at every sample: each :class:`Sample` has its
    :attr:`~Sample.ledger` (the driver's figure for this process against what each imported
    framework holds, as :func:`hypomnesis.explain`) and :attr:`Tracking.peak_ledger` is the
    ledger at the peak; the frameworks are read on one shared thread holding the GIL for
    their calls, at the interval but at most every 5 ms (see :attr:`Tracker.ledger`).
    ``interval``, ``deadline`` and ``probe_interval`` are above 0 and at most a day; bad
    arguments raise ``TypeError`` or ``ValueError`` here.

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
    return Tracker(
        interval,
        devices,
        callback,
        deadline=deadline,
        history_limit=history_limit,
        probe=probe,
        probe_interval=probe_interval,
        ledger=ledger,
    )
