"""The ledger's model: what :func:`hypomnesis.explain` and ``track(ledger=True)`` give, and how
one GPU's entry is made from the driver's figure and the frameworks' (the rest of
``explain()`` is in :mod:`hypomnesis.ledger.explain`).

For each GPU (or MIG device) this process holds memory on, the driver's figure for this
process set against what each imported framework says it holds there, the rest being outside
the frameworks (the CUDA context, cuBLAS/cuDNN workspaces, NCCL, other allocators); and the
device's free memory with this process's headroom. Frameworks' devices are matched to the
driver's GPUs by UUID, never by index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ..frameworks import FrameworkMemory
from ..units import format_bytes


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


def _inside(f: FrameworkMemory) -> str:
    """``allocated 512.0 MiB, allocator slack 256.0 MiB``: how a framework's reserved bytes
    split."""
    said = f"allocated {format_bytes(f.allocated_bytes)}"
    if f.reserved_bytes is not None and f.allocated_bytes is not None:
        said += f", allocator slack {format_bytes(max(f.reserved_bytes - f.allocated_bytes, 0))}"
    return said


@dataclass(frozen=True)
class GpuLedger:
    """One GPU, or one MIG device, in :func:`explain`'s ledger.

    ``driver_bytes = framework_reserved_bytes + outside_bytes`` where all three are known; a
    figure that cannot be known, or that would be negative, is ``None`` with ``notes`` saying
    why.

    The terms are those of ``hmn run``'s ledger of a serving engine, seen from outside: what
    the driver charges beyond the engine's own figures is *allocator slack* (a framework's
    reserved bytes no tensor holds, :attr:`allocator_slack_bytes`) and memory *outside the
    frameworks* (the CUDA context, NCCL, cuBLAS workspaces: what the engines print as
    "non-torch" or "outside torch", :attr:`outside_bytes`).
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
    def allocator_slack_bytes(self) -> Optional[int]:
        """What the frameworks hold from the driver that no tensor or array holds (reserved less
        allocated, added up): the caching allocators' slack. ``None`` when no framework gives
        both figures."""
        known = [
            f.reserved_bytes - f.allocated_bytes
            for f in self.frameworks
            if f.reserved_bytes is not None and f.allocated_bytes is not None
        ]
        return sum(max(k, 0) for k in known) if known else None

    @property
    def label(self) -> str:
        """``GPU 1 NVIDIA H200``, or ``GPU 0 MIG 2 NVIDIA H200 MIG 1g.18gb``."""
        mig = "" if self.mig_slot is None else f" MIG {self.mig_slot}"
        return f"GPU {self.index}{mig} {self.name or 'unknown GPU'}"

    def __repr__(self) -> str:
        fb = format_bytes
        parts = [
            f"{f.framework} reserved {fb(f.reserved_bytes)} ({_inside(f)})"
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
        from .html import ledger_html

        return ledger_html(self.gpus, self._footnotes())


def _sum(values: Sequence[Optional[int]]) -> Optional[int]:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def entry(
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


def holds(driver: Optional[int], fws: List[FrameworkMemory]) -> bool:
    figures = [driver] + [
        v
        for f in fws
        for v in (f.allocated_bytes, f.reserved_bytes, f.peak_allocated_bytes,
                  f.peak_reserved_bytes)
    ]
    return any(v for v in figures)

