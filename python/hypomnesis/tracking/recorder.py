"""The ledger at each sample of ``track(ledger=True)``.

The sampling thread reads the driver's figures without the GIL; what the frameworks hold can
only be asked of them in Python. So one Python thread, shared by every block tracked with a
ledger, reads the imported frameworks (PyTorch, JAX, CuPy: :func:`frameworks.read_one`) at the
sampling interval, at most every :data:`LEDGER_FLOOR` seconds, once for all the blocks then
running, and each block keeps a bounded list of those readings. The tracked thread itself
reads them as the block starts and ends. Every reading is waited for at most the tracker's
deadline (:mod:`hypomnesis._bounded`): a framework whose calls block is a note, and a read
already past the deadline is not waited for again. A
sample's ledger is then the sample's driver figures set against the reading nearest to it in
time, and the ledger at the peak uses the first reading taken at or after the moment the peak
was first sampled (the block asks the sampler when, as it ends, and keeps the readings around
that moment however its list was thinned).

The GPUs' names, UUIDs, MIG devices and sizes are read once per tracker, waited for at most the
deadline (a GPU not read in time is a note in each ledger).
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

from .. import _bounded, _native
from ..device import DeviceInfo, device_count, device_info, mig_instances
from ..errors import HypomnesisError
from ..frameworks import FrameworkMemory, cuda_ordinal_uuids
from ..ledger import GpuLedger, Ledger, entry, holds, uuid_key


class SampleFigures(Protocol):
    """What a ledger reads of a sample (a :class:`hypomnesis.Sample`)."""

    @property
    def gpu_bytes(self) -> Mapping[int, Optional[int]]: ...
    @property
    def device_used_bytes(self) -> Mapping[int, Optional[int]]: ...
    @property
    def missed_deadline(self) -> bool: ...

#: The shortest time between two framework readings of the shared thread, seconds: each holds
#: the GIL for the length of the frameworks' calls (tens of microseconds per device).
LEDGER_FLOOR = 0.005

#: Most framework readings a block keeps between entry and exit: when full, every other one
#: is let go (the entry one stays), as the timeline merges its samples.
LEDGER_READINGS = 2048


@dataclass(frozen=True)
class Reading:
    """What the imported frameworks said at one time of a block."""

    time: float
    """Seconds since the block started."""
    frameworks: Tuple[FrameworkMemory, ...]
    notes: Tuple[str, ...]


@dataclass(frozen=True)
class Gpus:
    """What a ledger needs of the GPUs and does not change while a block runs."""

    infos: Dict[int, DeviceInfo]
    """The tracked GPUs that could be read, by NVML index."""
    mig_keys: Dict[str, int]
    """Each MIG device's UUID (as :func:`uuid_key` gives it) and its GPU's index."""
    ordinals: Tuple[Optional[List[str]], str]
    """:func:`cuda_ordinal_uuids`'s answer (JAX's devices carry no UUID)."""
    notes: Tuple[str, ...]
    """The GPUs that could not be read, and why."""
    devices: Tuple[int, ...] = ()
    """The GPU indices asked for."""
    timed_out: bool = False
    """Whether they were not read within the deadline (asked again at the next block)."""


def _read_gpus(devices: Sequence[int]) -> Gpus:
    infos: Dict[int, DeviceInfo] = {}
    notes: List[str] = []
    mig_keys: Dict[str, int] = {}
    every: List[Optional[DeviceInfo]] = []
    try:
        count = device_count()
    except HypomnesisError as e:
        why = f"no GPU could be read: {e}"
        return Gpus({}, {}, (None, why), (why,) if devices else (), tuple(devices))
    for i in range(count):
        try:
            every.append(device_info(i))
        except HypomnesisError as e:
            every.append(None)
            if i in devices:
                notes.append(f"GPU {i} could not be read: {e}")
    for i in devices:
        info = every[i] if i < len(every) else None
        if info is None:
            if i >= len(every):
                notes.append(f"there is no GPU {i}: this host has {len(every)}")
            continue
        infos[i] = info
        if info.mig_enabled:
            try:
                for m in mig_instances(i):
                    key = uuid_key(m.uuid)
                    if key is not None:
                        mig_keys[key] = i
            except HypomnesisError as e:
                notes.append(f"the MIG devices of GPU {i} could not be read: {e}")
    uuids = [d.uuid if d else None for d in every]
    mig = any(d is not None and bool(d.mig_enabled) for d in every)
    return Gpus(infos, mig_keys, cuda_ordinal_uuids(uuids, mig), tuple(notes), tuple(devices))


def read_gpus(devices: Sequence[int], deadline: float) -> Gpus:
    """:class:`Gpus` for ``devices``, asked on a worker of their own (``_bounded``: a read
    still running answers the next ask too) and waited for at most ``deadline`` seconds (the
    wait lets Ctrl-C through)."""
    wanted = tuple(devices)
    w = _bounded.worker(("ledger-gpus", wanted))
    answered, answer = _bounded.wait(
        w, w.ask(lambda: _read_gpus(wanted)), time.monotonic() + deadline
    )
    if answered and isinstance(answer, Gpus):
        return answer
    why = f"the GPUs' details did not come within the deadline ({deadline:g} s)"
    return Gpus({}, {}, (None, why), (why,), tuple(devices), timed_out=True)


def read_frameworks(gpus: Gpus, at: float, deadline: float) -> Reading:
    """What the imported frameworks hold now (``at``: seconds since the block started), waited
    for at most ``deadline`` seconds."""
    try:
        fws, notes = _bounded.frameworks(
            None, lambda: gpus.ordinals, deadline, time.monotonic() + deadline
        )
    except Exception as e:  # noqa: BLE001 - the frameworks' errors are notes; any other is said
        return Reading(at, (), (f"the frameworks could not be read: {type(e).__name__}: {e}",))
    return Reading(at, tuple(fws), tuple(notes))


def ledger_of(sample: SampleFigures, reading: Optional[Reading], gpus: Gpus) -> Ledger:
    """The ledger of one sample: its driver figures against ``reading``'s frameworks.

    A GPU in MIG mode is one entry (the sampler's figures are the whole GPU's), its frameworks
    those on any of its MIG devices; :func:`hypomnesis.explain` splits it per MIG device."""
    fws = reading.frameworks if reading is not None else ()
    notes = list(gpus.notes) + (list(reading.notes) if reading is not None else [])
    if reading is None:
        notes.append("no framework reading was taken in this block")
    by_key: Dict[str, List[FrameworkMemory]] = {}
    for f in fws:
        key = uuid_key(f.uuid)
        if key is not None:
            by_key.setdefault(key, []).append(f)
    out: List[GpuLedger] = []
    for i, info in gpus.infos.items():
        matched = by_key.pop(uuid_key(info.uuid) or "", [])
        for key in [k for k, gpu in gpus.mig_keys.items() if gpu == i and k in by_key]:
            matched += by_key.pop(key)
        own = sample.gpu_bytes.get(i)
        used = sample.device_used_bytes.get(i)
        note: Optional[str] = None
        if own is None:
            note = (
                "the driver's figures did not come within the deadline in this sample"
                if sample.missed_deadline
                else "the driver attributes no memory to this process here (another PID "
                "namespace, or no per-process figure on this GPU)"
            )
        free = None if used is None else info.total_bytes - used
        if holds(own, matched):
            g = entry(i, None, info.name, info.uuid, own, note, matched, free, info.total_bytes)
            if info.mig_enabled:
                g = _with_note(g, "MIG mode: the whole GPU's figures (explain() splits them)")
            out.append(g)
    unmatched = [f for f in fws if uuid_key(f.uuid) is None] + [
        f for rest in by_key.values() for f in rest
    ]
    return Ledger(gpus=tuple(out), unmatched=tuple(unmatched), notes=tuple(notes))


def _with_note(g: GpuLedger, note: str) -> GpuLedger:
    return replace(g, notes=g.notes + (note,))


class Recorder:
    """The framework readings of one block: the entry and exit ones (taken on the tracked
    thread), and between them the shared thread's readings of its time (handed over as the
    block ends): at most :data:`LEDGER_READINGS`, and the two around the peak's moment."""

    def __init__(
        self, gpus: Gpus, interval: float, sampler: _native.Sampler, deadline: float
    ) -> None:
        self.gpus = gpus
        self.interval = max(interval, LEDGER_FLOOR)
        self.deadline = deadline
        self._sampler = sampler
        self._start = 0.0
        self._lock = threading.Lock()
        self.entry: Optional[Reading] = None
        self.exit: Optional[Reading] = None
        self.between: List[Reading] = []
        """The shared thread's readings of the block's time (dated on ``time.monotonic()``;
        :meth:`readings` dates them to the block)."""

    def key(self) -> "Key":
        """What a reading depends on: blocks of the same key share the shared thread's."""
        ordinals, why = self.gpus.ordinals
        return (None if ordinals is None else tuple(ordinals), why, self.deadline)

    def begin(self, start: float) -> None:
        """Takes the entry reading; ``start`` is the block's start on ``time.monotonic()``."""
        self._start = start
        self.entry = read_frameworks(self.gpus, time.monotonic() - start, self.deadline)

    def hand_over(self, shared: List[Reading]) -> None:
        """The shared thread's readings of the block's time (dated on ``time.monotonic()``),
        thinned to at most :data:`LEDGER_READINGS` (every k-th, the first kept), and the two
        around the moment the block's peak so far was first sampled (the sampler still runs
        when this is called), which :meth:`at_peak` chooses from."""
        step = -(-len(shared) // LEDGER_READINGS) if shared else 1
        kept = shared[::step]
        peak = self._sampler.peak_time()
        if peak is not None and shared:
            times = [r.time for r in shared]
            i = bisect.bisect_left(times, self._start + peak)
            around = [shared[j] for j in (i - 1, i) if 0 <= j < len(shared)]
            kept = sorted({id(r): r for r in kept + around}.values(), key=lambda r: r.time)
        with self._lock:
            self.between = kept

    def end(self, exit_time: float) -> None:
        """Takes the exit reading, dated as the exit sample."""
        reading = read_frameworks(self.gpus, exit_time, self.deadline)
        with self._lock:
            self.exit = reading

    def readings(self) -> List[Reading]:
        """Every reading kept, in time order."""
        with self._lock:
            middle = [replace(r, time=r.time - self._start) for r in self.between]
        ends = [r for r in (self.entry, self.exit) if r is not None]
        return sorted(middle + ends, key=lambda r: r.time)

    def at_peak(self, peak_time: float) -> Optional[Reading]:
        """The reading of the peak: the first taken at or after ``peak_time``, when the peak
        was first sampled (from then on the block was known to hold it; a reading just
        before may be of the state before it), else the last before (the entry and exit
        ones among them)."""
        candidates = self.readings()
        if not candidates:
            return None
        times = [r.time for r in candidates]
        i = bisect.bisect_left(times, peak_time)
        return candidates[i] if i < len(candidates) else candidates[-1]


Key = Tuple[Optional[Tuple[str, ...]], str, float]
"""What a reading depends on (:meth:`Recorder.key`)."""


class _Journal:
    """The shared thread's readings for the blocks of one key, in time order (on
    ``time.monotonic()``), from the start of the oldest block still running."""

    def __init__(self) -> None:
        self.times: List[float] = []
        self.readings: List[Reading] = []

    def add(self, reading: Reading, oldest: Callable[[], float]) -> None:
        self.times.append(reading.time)
        self.readings.append(reading)
        if len(self.readings) >= 2 * LEDGER_READINGS:
            # Long: what no running block needs goes, then, if still long, every other one
            # (as each block's own list was thinned).
            cut = bisect.bisect_left(self.times, oldest())
            del self.times[:cut], self.readings[:cut]
            if len(self.readings) >= 2 * LEDGER_READINGS:
                del self.times[1::2], self.readings[1::2]

    def since(self, start: float) -> List[Reading]:
        return self.readings[bisect.bisect_left(self.times, start) :]


class _Shared:
    """The one thread that takes the readings between entry and exit of every block: once per
    tick for every block of a key, into that key's journal; a block takes its part as it ends
    (so a tick's work does not grow with the number of blocks running)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()  # an RLock: _oldest is called holding it
        self.by_key: Dict[Key, Dict[int, Recorder]] = {}
        self.journals: Dict[Key, _Journal] = {}
        self.intervals: Counter[float] = Counter()
        self.thread: Optional[threading.Thread] = None

    def add(self, recorder: Recorder) -> None:
        with self.cond:
            key = recorder.key()
            self.by_key.setdefault(key, {})[id(recorder)] = recorder
            self.journals.setdefault(key, _Journal())
            self.intervals[recorder.interval] += 1
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="hypomnesis-ledger", daemon=True
                )
                self.thread.start()
            self.cond.notify_all()

    def remove(self, recorder: Recorder) -> None:
        shared: List[Reading] = []
        with self.cond:
            key = recorder.key()
            group = self.by_key.get(key, {})
            if group.pop(id(recorder), None) is not None:
                self.intervals[recorder.interval] -= 1
                if self.intervals[recorder.interval] <= 0:
                    del self.intervals[recorder.interval]
            journal = self.journals.get(key)
            if journal is not None:
                shared = journal.since(recorder._start)
            if not group:
                self.by_key.pop(key, None)
                self.journals.pop(key, None)
        recorder.hand_over(shared)

    def _oldest(self, key: Key) -> float:
        with self.cond:
            starts = [r._start for r in self.by_key.get(key, {}).values()]
        return min(starts, default=time.monotonic())

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.intervals:
                    self.cond.wait()
                self.cond.wait(min(self.intervals))
                due = [(key, next(iter(g.values()))) for key, g in self.by_key.items() if g]
            for key, r in due:
                reading = read_frameworks(r.gpus, time.monotonic(), r.deadline)
                with self.cond:
                    journal = self.journals.get(key)
                    if journal is not None:
                        journal.add(reading, functools.partial(self._oldest, key))


_SHARED = _Shared()


def _forget_in_child() -> None:
    # The thread is not in a forked child (and its lock may have been held): a new one starts
    # when the child tracks a block with a ledger.
    global _SHARED
    _SHARED = _Shared()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def start(recorder: Recorder, start: float) -> None:
    """Takes the entry reading and has the shared thread take readings from now on."""
    recorder.begin(start)
    _SHARED.add(recorder)


def stop(recorder: Recorder) -> None:
    """No more readings by the shared thread (the exit one is :meth:`Recorder.end`'s)."""
    _SHARED.remove(recorder)
