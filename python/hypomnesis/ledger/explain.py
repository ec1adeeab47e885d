"""``explain()``: why ``nvidia-smi`` shows more than ``torch.cuda.memory_allocated()``: the
driver and each imported framework read at once, each bounded by the deadline, set against
each other per GPU (and MIG device)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .. import _arguments, _bounded
from ..device import DeviceInfo, MigInstance, device_count, device_info, mig_instances
from ..errors import HypomnesisError
from ..frameworks import FrameworkMemory, cuda_ordinal_uuids, names
from ..process import gpu_processes, process_gpu_info
from ..units import format_bytes
from .model import GpuLedger, Ledger, entry, holds, uuid_key

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
        if holds(driver, matched):
            found.append(
                entry(index, m.slot, m.name, m.uuid, driver, None, matched, m.free_bytes,
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
        answered, d = _bounded.wait(driver, number, until)
        if not isinstance(d, _Driver):
            return None, "the GPUs' details did not come within the deadline"
        return d.ordinals

    fws, fw_notes = _bounded.frameworks(wanted, ordinals, deadline, until)
    answered, d = _bounded.wait(driver, number, until)
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
        if holds(own, matched):
            gpus.append(
                entry(i, None, info.name, info.uuid, own, driver_note, matched,
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
