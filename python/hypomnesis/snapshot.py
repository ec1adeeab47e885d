"""Snapshots: this process's RAM and GPU memory and its device's figures at one moment, and what
changed between two.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional

from . import _native
from ._convert import values
from .device import DeviceInfo
from .errors import HypomnesisError
from .process import ProcessGpuInfo
from .units import format_bytes


def _delta(after: Optional[int], before: Optional[int]) -> Optional[int]:
    return None if after is None or before is None else after - before


@dataclass(frozen=True)
class SnapshotDelta:
    """What changed between two :class:`Snapshot` s of one device (``later - earlier``)."""

    device_index: int
    """The device both snapshots are of."""
    seconds: float
    """Time between the two snapshots."""
    ram_bytes: int
    """Change of this process's RSS."""
    gpu_bytes: Optional[int]
    """Change of this process's own GPU memory; ``None`` unless both snapshots had it."""
    device_used_bytes: Optional[int]
    """Change of the device's used memory; ``None`` unless both snapshots had it."""

    def __repr__(self) -> str:
        return (
            f"SnapshotDelta(gpu={self.device_index}, {self.seconds:.3f} s, "
            f"ram={format_bytes(self.ram_bytes, signed=True)}, "
            f"gpu_bytes={format_bytes(self.gpu_bytes, signed=True)}, "
            f"device_used={format_bytes(self.device_used_bytes, signed=True)})"
        )


@dataclass(frozen=True)
class Snapshot:
    """RAM and GPU memory of this process at one moment, and the device's figures.

    Subtracting two snapshots of the same device gives a :class:`SnapshotDelta`:

    >>> import hypomnesis
    >>> before = hypomnesis.Snapshot.now(0)
    >>> buf = bytearray(64 << 20)
    >>> buf[:] = b"x" * len(buf)
    >>> delta = hypomnesis.Snapshot.now(0) - before
    >>> delta.ram_bytes >= 60 << 20
    True
    """

    device_index: int
    """The device whose figures these are."""
    ram_bytes: int
    """Resident set size of this process."""
    gpu: Optional[ProcessGpuInfo]
    """This process's GPU memory on the device; ``None`` when no source could tell."""
    gpu_device: Optional[DeviceInfo]
    """The device's figures; ``None`` when no source could tell."""
    taken_at: float
    """When it was taken, :func:`time.monotonic` seconds."""

    @classmethod
    def now(cls, index: int = 0) -> Snapshot:
        """RAM of this process, plus its GPU memory and the device's figures on GPU ``index``
        where a GPU source can tell (a GPU failure never fails the snapshot; only a failure to
        read the RSS raises)."""
        taken_at = time.monotonic()
        return cls(device_index=index, taken_at=taken_at, **values("Snapshot", _native.snapshot(index)))

    @classmethod
    def all(cls) -> List[Snapshot]:
        """One snapshot per GPU, in index order; one RAM-only snapshot (of device 0) when there
        is no GPU or the device count cannot be read."""
        try:
            count = _native.device_count()
        except HypomnesisError:
            count = 0
        return [cls.now(i) for i in range(max(count, 1))]

    @property
    def gpu_bytes(self) -> Optional[int]:
        """This process's own GPU memory; ``None`` when it cannot be attributed to it."""
        if self.gpu is None or not self.gpu.is_per_process:
            return None
        return self.gpu.used_bytes

    def __sub__(self, other: Snapshot) -> SnapshotDelta:
        if not isinstance(other, Snapshot):
            return NotImplemented
        if other.device_index != self.device_index:
            raise ValueError(
                f"snapshots of different devices ({self.device_index} and "
                f"{other.device_index}) cannot be subtracted"
            )
        return SnapshotDelta(
            device_index=self.device_index,
            seconds=self.taken_at - other.taken_at,
            ram_bytes=self.ram_bytes - other.ram_bytes,
            gpu_bytes=_delta(self.gpu_bytes, other.gpu_bytes),
            device_used_bytes=_delta(
                self.gpu_device.used_bytes if self.gpu_device else None,
                other.gpu_device.used_bytes if other.gpu_device else None,
            ),
        )

    def __repr__(self) -> str:
        gpu = format_bytes(self.gpu.used_bytes) if self.gpu is not None else "unknown"
        if self.gpu is not None and not self.gpu.is_per_process:
            gpu += " (whole device)"
        device = (
            f"{self.gpu_device.name_or_unknown} used {format_bytes(self.gpu_device.used_bytes)}"
            f" of {format_bytes(self.gpu_device.total_bytes)}"
            if self.gpu_device is not None
            else "unknown"
        )
        return (
            f"Snapshot(gpu={self.device_index}, ram={format_bytes(self.ram_bytes)}, "
            f"gpu_bytes={gpu}, device={device})"
        )
