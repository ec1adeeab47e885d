"""Typed use of the public API: checked with ``mypy --strict`` (pyproject's [tool.mypy]) against
the package's stubs and annotations, and run by test_typed_usage.py."""

from __future__ import annotations

from typing import Dict, List, Optional

import hypomnesis
from hypomnesis import (
    DeviceInfo,
    FrameworkMemory,
    GpuLedger,
    GpuProcess,
    Ledger,
    Snapshot,
    SnapshotDelta,
    Tracking,
)


def headroom(d: DeviceInfo) -> Optional[int]:
    if d.allocatable_bytes is None:
        return None
    return d.allocatable_bytes - (d.allocated_bytes or 0)


def owners(rows: List[GpuProcess]) -> Dict[int, Optional[str]]:
    return {p.pid: p.user for p in rows}


def outside(ledger: Ledger) -> Dict[int, Optional[int]]:
    gpus: List[GpuLedger] = list(ledger.gpus)
    fws: List[FrameworkMemory] = [f for g in gpus for f in g.frameworks]
    assert all(f.cached_bytes is None or f.cached_bytes >= 0 for f in fws)
    return {g.index: g.outside_bytes for g in gpus}


def main() -> Dict[str, object]:
    rss: int = hypomnesis.process_rss()
    try:
        count: int = hypomnesis.device_count()
    except hypomnesis.NoGpuSourceError:
        count = 0
    infos: List[DeviceInfo] = [hypomnesis.device_info(i) for i in range(count)]
    rows = hypomnesis.gpu_processes(0) if count else []
    before: Snapshot = Snapshot.now(0)
    with hypomnesis.track(interval=0.005) as t:
        data = bytearray(b"\x01") * (1 << 20)
    tracking: Tracking = t
    delta: SnapshotDelta = Snapshot.now(0) - before
    peaks: Dict[int, Optional[int]] = tracking.peak_gpu_bytes
    tracker = hypomnesis.track(devices=[0])

    @tracker
    def step(n: int) -> int:
        return n * 2

    doubled: int = step(21)
    last: Optional[Tracking] = tracker.last
    bounded = hypomnesis.track(deadline=2.0, history_limit=10, probe=lambda: 1)
    with bounded as b:
        pass
    taken: int = b.sample_count + b.missed_count
    when: float = b.peak_rss_time
    gpu_when: Dict[int, Optional[float]] = b.peak_gpu_time
    missed: bool = b.final.missed_deadline
    try:
        hypomnesis.device_info(count + 5)
    except hypomnesis.NoSuchDeviceError as e:
        kind: str = e.kind
        index: Optional[int] = e.index
    except hypomnesis.HypomnesisError as e:
        kind = e.kind
        index = None
    return {
        "rss": rss,
        "headroom": [headroom(d) for d in infos],
        "owners": owners(rows),
        "delta": delta.ram_bytes,
        "peaks": peaks,
        "doubled": doubled,
        "last": last is not None,
        "kind": kind,
        "index": index,
        "len": len(data),
        "outside": outside(hypomnesis.explain(["torch"])),
    }
