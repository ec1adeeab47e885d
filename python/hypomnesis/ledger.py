"""``explain()``: why ``nvidia-smi`` shows more than ``torch.cuda.memory_allocated()``.

For each GPU (or MIG device) this process holds memory on, the driver's figure for this
process set against what each imported framework says it holds there, the rest being outside
the frameworks (the CUDA context, cuBLAS/cuDNN workspaces, NCCL, other allocators); and the
device's free memory with this process's headroom. Frameworks' devices are matched to the
driver's GPUs by UUID, never by index.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from . import _arguments, _bounded
from .device import DeviceInfo, MigInstance, device_count, device_info, mig_instances
from .errors import HypomnesisError
from .frameworks import FrameworkMemory, cuda_ordinal_uuids, names
from .process import gpu_processes, process_gpu_info
from .units import format_bytes


def uuid_key(uuid: Optional[str]) -> Optional[str]:
    """A UUID as matching compares it: lower case, without its ``GPU-`` or ``MIG-`` prefix
    (PyTorch and CuPy give none). ``MIG-GPU-…/gi/ci`` (pre-R470 drivers) keeps its form.

    >>> uuid_key("GPU-8932F937-d72c-4106-c12f-20bd9faed9f6")
    '8932f937-d72c-4106-c12f-20bd9faed9f6'
    >>> mig = "MIG-aaaaaaaa-0000-4000-8000-000000000000"
    >>> uuid_key(mig) == uuid_key(mig[4:].upper())
    True
    """
    if not uuid:
        return None
    u = uuid.strip().lower()
    if u.startswith("mig-") and not u.startswith("mig-gpu-"):
        u = u[4:]
    elif u.startswith("gpu-"):
        u = u[4:]
    return u or None


@dataclass(frozen=True)
class GpuLedger:
    """One GPU, or one MIG device, in :func:`explain`'s ledger.

    ``driver_bytes = framework_reserved_bytes + outside_bytes`` where all three are known; a
    figure that cannot be known, or that would be negative, is ``None`` with ``notes`` saying
    why.
    """

    index: int
    """NVML index of the GPU (of the parent GPU for a MIG device)."""
    mig_slot: Optional[int]
    """The MIG device's slot on its GPU; ``None`` for a whole GPU."""
    name: Optional[str]
    """Product name (the MIG device's, with its profile)."""
    uuid: Optional[str]
    """The driver's UUID (``GPU-…`` or ``MIG-…``)."""
    driver_bytes: Optional[int]
    """This process's memory as the driver counts it (every allocator and the CUDA context)."""
    frameworks: Tuple[FrameworkMemory, ...]
    """What each framework says it holds here."""
    framework_reserved_bytes: Optional[int]
    """The frameworks' ``reserved_bytes`` added up."""
    outside_bytes: Optional[int]
    """``driver_bytes - framework_reserved_bytes``: memory of this process outside the
    frameworks."""
    free_bytes: Optional[int]
    """Free memory of the device (of the MIG GPU instance)."""
    headroom_bytes: Optional[int]
    """What this process could still allocate: ``free_bytes`` and the frameworks' cached
    bytes (each framework's cache serves that framework alone)."""
    total_bytes: Optional[int]
    """Total memory of the device (of the MIG GPU instance)."""
    notes: Tuple[str, ...]
    """Why a figure is ``None``, in words."""

    @property
    def label(self) -> str:
        """``GPU 1 NVIDIA H200``, or ``GPU 0 MIG 2 NVIDIA H200 MIG 1g.18gb``."""
        mig = "" if self.mig_slot is None else f" MIG {self.mig_slot}"
        return f"GPU {self.index}{mig} {self.name or 'unknown GPU'}"

    def __repr__(self) -> str:
        fb = format_bytes
        parts = [
            f"{f.framework} reserved {fb(f.reserved_bytes)} (allocated {fb(f.allocated_bytes)})"
            for f in self.frameworks
        ]
        if self.outside_bytes is not None:
            parts.append(f"outside frameworks {fb(self.outside_bytes)}")
        line = f"{self.label}: driver {fb(self.driver_bytes)}"
        if parts:
            # An equation only when it adds up; else the figures side by side, notes saying why.
            joined = " + ".join(parts) if self.outside_bytes is not None else ", ".join(parts)
            line += (" = " if self.outside_bytes is not None else ", ") + joined
        line += f"; free {fb(self.free_bytes)}, headroom {fb(self.headroom_bytes)}"
        if self.notes:
            line += " (" + "; ".join(self.notes) + ")"
        return line


@dataclass(frozen=True)
class Ledger:
    """What :func:`explain` gives: a :class:`GpuLedger` per GPU this process holds memory on,
    the framework devices no GPU could be matched to, and notes on frameworks imported but not
    read. ``repr`` is one line per GPU; in Jupyter it draws a stacked bar per GPU."""

    gpus: Tuple[GpuLedger, ...]
    """The GPUs (and MIG devices) this process holds memory on, in NVML order."""
    unmatched: Tuple[FrameworkMemory, ...]
    """Framework devices matched to no GPU the driver lists (``why_no_uuid`` says why)."""
    notes: Tuple[str, ...]
    """Frameworks imported but not read, and why."""

    def __repr__(self) -> str:
        lines = [repr(g) for g in self.gpus] or ["no GPU memory held by this process"]
        return "\n".join(lines + self._footnotes())

    def _footnotes(self) -> List[str]:
        """The lines after the GPUs': each unmatched framework device, each note."""
        lines = []
        for f in self.unmatched:
            why = f.why_no_uuid or f"no GPU the driver lists has UUID {f.uuid}"
            lines.append(
                f"{f.framework} {f.device} (unmatched: {why}): reserved "
                f"{format_bytes(f.reserved_bytes)}, allocated {format_bytes(f.allocated_bytes)}"
            )
        return lines + [f"note: {n}" for n in self.notes]

    def _repr_html_(self) -> str:
        from ._ledger_html import ledger_html

        return ledger_html(self)


def _sum(values: Sequence[Optional[int]]) -> Optional[int]:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _entry(
    index: int,
    mig_slot: Optional[int],
    name: Optional[str],
    uuid: Optional[str],
    driver: Optional[int],
    driver_note: Optional[str],
    fws: List[FrameworkMemory],
    free: Optional[int],
    total: Optional[int],
) -> GpuLedger:
    notes = [driver_note] if driver_note else []
    reserved = _sum([f.reserved_bytes for f in fws])
    for f in fws:
        if f.reserved_bytes is None:
            notes.append(f"{f.framework} gives no reserved figure")
    outside: Optional[int] = None
    if driver is not None and reserved is not None:
        outside = driver - reserved
        if outside < 0:
            notes.append(
                f"the frameworks count {format_bytes(-outside)} more than the driver does for "
                "this process: memory the driver does not attribute to it (managed memory, an "
                "MPS server holding it) or a change between the two reads; outside unknown"
            )
            outside = None
    cached = _sum([f.cached_bytes for f in fws])
    headroom = None if free is None or cached is None else free + cached
    return GpuLedger(
        index=index,
        mig_slot=mig_slot,
        name=name,
        uuid=uuid,
        driver_bytes=driver,
        frameworks=tuple(fws),
        framework_reserved_bytes=reserved,
        outside_bytes=outside,
        free_bytes=free,
        headroom_bytes=headroom,
        total_bytes=total,
        notes=tuple(notes),
    )


def _holds(driver: Optional[int], fws: List[FrameworkMemory]) -> bool:
    figures = [driver] + [
        v
        for f in fws
        for v in (f.allocated_bytes, f.reserved_bytes, f.peak_allocated_bytes,
                  f.peak_reserved_bytes)
    ]
    return any(v for v in figures)


@dataclass
class _Driver:
    """What the driver says for a ledger, read in one go (within the deadline)."""

    infos: Dict[int, DeviceInfo] = field(default_factory=dict)
    own: Dict[int, Tuple[Optional[int], Optional[str]]] = field(default_factory=dict)
    """Per GPU: this process's figure, or why there is none."""
    migs: Dict[int, List[Tuple[MigInstance, int]]] = field(default_factory=dict)
    """Per GPU in MIG mode: each MIG device and this process's memory on it."""
    notes: List[str] = field(default_factory=list)
    ordinals: Tuple[Optional[List[str]], str] = (None, "")
    error: Optional[HypomnesisError] = None
    """Raised by the caller: no GPU source answers."""


def _mig_figures(index: int) -> List[Tuple[MigInstance, int]]:
    """The MIG devices of GPU ``index``, each with this process's rows in the driver's process
    list of that GPU added up (GPU and compute instance)."""
    pid = os.getpid()
    rows = [p for p in gpu_processes(index) if p.pid == pid]
    return [
        (
            m,
            sum(
                p.used_bytes
                for p in rows
                if p.gpu_instance_id == m.gpu_instance_id
                and p.compute_instance_id in (None, m.compute_instance_id)
            ),
        )
        for m in mig_instances(index)
    ]


def _mig_entries(
    index: int, figures: List[Tuple[MigInstance, int]], by_key: Dict[str, List[FrameworkMemory]]
) -> List[GpuLedger]:
    """The MIG devices of GPU ``index`` this process holds memory on, with the frameworks'
    devices whose UUID is the MIG device's (taken out of ``by_key``)."""
    found = []
    for m, driver in figures:
        matched = by_key.pop(uuid_key(m.uuid) or "", [])
        if _holds(driver, matched):
            found.append(
                _entry(index, m.slot, m.name, m.uuid, driver, None, matched, m.free_bytes,
                       m.total_bytes)
            )
    return found


def _ordinals(infos: Dict[int, DeviceInfo]) -> Tuple[Optional[List[str]], str]:
    """:func:`cuda_ordinal_uuids` over every GPU in NVML order (``infos`` may hold some)."""
    every: List[Optional[DeviceInfo]] = []
    for i in range(device_count()):
        try:
            every.append(infos[i] if i in infos else device_info(i))
        except HypomnesisError:
            every.append(None)
    uuids = [d.uuid if d else None for d in every]
    return cuda_ordinal_uuids(uuids, any(d is not None and bool(d.mig_enabled) for d in every))


def _read_driver(devices: Optional[Tuple[int, ...]], ordinals: bool) -> _Driver:
    """The driver's part of a ledger for ``devices`` (default: every GPU); with ``ordinals``,
    the UUID of each CUDA ordinal too (for JAX)."""
    d = _Driver()
    try:
        indices = list(range(device_count())) if devices is None else list(devices)
        for i in indices:
            try:
                d.infos[i] = device_info(i)
            except HypomnesisError as e:
                d.notes.append(f"GPU {i} could not be read: {e}")
        if ordinals:
            try:
                d.ordinals = _ordinals(d.infos)
            except HypomnesisError as e:
                d.ordinals = (None, f"the GPUs could not be counted: {e}")
        for i, info in d.infos.items():
            if info.mig_enabled:
                try:
                    d.migs[i] = _mig_figures(i)
                except HypomnesisError as e:
                    d.notes.append(f"the MIG devices of GPU {i} could not be read: {e}")
            try:
                got = process_gpu_info(i)
                d.own[i] = (
                    (got.used_bytes, None)
                    if got.is_per_process
                    else (
                        None,
                        "the driver does not attribute memory to this process (another PID "
                        f"namespace?); the whole device uses {format_bytes(got.used_bytes)}",
                    )
                )
            except HypomnesisError as e:
                d.own[i] = (None, f"the driver's figure could not be read: {e}")
    except HypomnesisError as e:
        d.error = e
    return d


def _ledger_now(
    frameworks: Optional[Sequence[str]] = None,
    devices: Optional[Sequence[int]] = None,
    deadline: float = 5.0,
) -> Ledger:
    """One ledger: :func:`explain`'s work. ``devices`` limits it to those NVML indices
    (default: every GPU); a framework's devices on other GPUs are then in ``unmatched``. The
    driver and each framework are read at once, each on a thread of its own, waited for at
    most ``deadline`` seconds in all."""
    wanted = names(frameworks)
    until = time.monotonic() + deadline
    key = (None if devices is None else tuple(devices), "jax" in wanted and "jax" in sys.modules)
    driver = _bounded.worker(("driver",) + key)
    number = driver.ask(lambda: _read_driver(*key))

    def ordinals() -> Tuple[Optional[List[str]], str]:
        answered, d = driver.wait(number, 0.0 if _bounded.overdue(driver, number) else until)
        if not isinstance(d, _Driver):
            return None, "the GPUs' details did not come within the deadline"
        return d.ordinals

    fws, fw_notes = _bounded.frameworks(wanted, ordinals, deadline, until)
    answered, d = driver.wait(number, 0.0 if _bounded.overdue(driver, number) else until)
    if not answered or d is None:
        d = _Driver(notes=[_bounded.late("the driver", driver, deadline)])
    if d.error is not None:
        raise d.error
    notes = list(d.notes) + fw_notes
    by_key: Dict[str, List[FrameworkMemory]] = {}
    for f in fws:
        k = uuid_key(f.uuid)
        if k is not None:
            by_key.setdefault(k, []).append(f)
    gpus: List[GpuLedger] = []
    for i, info in d.infos.items():
        if info.mig_enabled:
            gpus += _mig_entries(i, d.migs.get(i, []), by_key)
        matched = by_key.pop(uuid_key(info.uuid) or "", [])
        if info.mig_enabled and not matched:
            continue
        own, driver_note = d.own.get(i, (None, "the driver's figure was not read"))
        if _holds(own, matched):
            gpus.append(
                _entry(i, None, info.name, info.uuid, own, driver_note, matched,
                       info.free_bytes, info.total_bytes)
            )
    unmatched = [f for f in fws if uuid_key(f.uuid) is None] + [
        f for rest in by_key.values() for f in rest
    ]
    return Ledger(gpus=tuple(gpus), unmatched=tuple(unmatched), notes=tuple(notes))


def explain(frameworks: Optional[Sequence[str]] = None, *, deadline: float = 5.0) -> Ledger:
    """Why ``nvidia-smi`` shows more than the framework: for each GPU this process holds memory
    on, the driver's figure for this process = each framework's reserved memory + what is
    outside the frameworks (CUDA context, libraries), with the device's free memory and this
    process's headroom (free + the frameworks' cached bytes).

    ``frameworks`` picks among ``torch``, ``jax`` and ``cupy`` (default: all); only those
    already imported are read, and only once they have set CUDA up: ``explain()`` never imports
    one nor creates a CUDA context. Devices are matched by UUID, so ``CUDA_VISIBLE_DEVICES``
    remapping is followed; JAX gives no UUID, so its devices are matched only when the
    environment says which GPU each ordinal is, else listed in ``unmatched``.

    The driver and each framework are read at once, each on a thread of its own, and waited
    for at most ``deadline`` seconds in all (as with :func:`track`): one that has not answered
    by then (a blocked CUDA call, a hung driver) is a note, the others are in the ledger. A
    framework is believed about at most 1,024 devices.

    Raises :class:`NoGpuSourceError` when no GPU source answers (as :func:`device_count`); a
    GPU, or a framework, that cannot be read is a note in the ledger instead. A ``deadline``
    that is not a number of seconds above 0 and at most a day is a ``TypeError`` or
    ``ValueError``.

    >>> import hypomnesis
    >>> hypomnesis.explain()                  # doctest: +SKIP
    GPU 1 NVIDIA H200: driver 3.2 GiB = torch reserved 2.5 GiB (allocated 1.9 GiB) + outside \
frameworks 768.0 MiB; free 108.2 GiB, headroom 108.8 GiB
    >>> ledger = hypomnesis.explain()
    >>> all(g.outside_bytes is None or g.outside_bytes >= 0 for g in ledger.gpus)
    True
    >>> all(g.driver_bytes == g.framework_reserved_bytes + g.outside_bytes
    ...     for g in ledger.gpus if g.outside_bytes is not None and g.driver_bytes is not None)
    True
    """
    return _ledger_now(frameworks, None, _arguments.seconds("deadline", deadline))
