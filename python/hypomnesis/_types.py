"""The measured figures as typed, immutable objects, and the functions that measure them.

All memory figures are bytes (``int``); ``None`` is a figure the source does not give, never a
guess. The ``__repr__`` of each object shows its figures in binary units (MiB, GiB) for
notebooks; the attributes keep the exact bytes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from . import _native
from ._errors import HypomnesisError

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(n: Optional[int], *, signed: bool = False) -> str:
    """Bytes in binary units with one decimal (``"614.0 MiB"``); ``"unknown"`` for ``None``.

    >>> format_bytes(643825664)
    '614.0 MiB'
    >>> format_bytes(-3 << 30, signed=True)
    '-3.0 GiB'
    >>> format_bytes(512, signed=True)
    '+512 B'
    """
    if n is None:
        return "unknown"
    sign = "-" if n < 0 else ("+" if signed else "")
    size = float(abs(n))
    if size < 1024:
        return f"{sign}{abs(n)} B"
    unit = ""
    for unit in _UNITS:
        size /= 1024.0
        if size < 1024 or unit == _UNITS[-1]:
            break
    return f"{sign}{size:.1f} {unit}"


def _fields(cls: type, d: Dict[str, Any]) -> Dict[str, Any]:
    """The items of ``d`` that are fields of dataclass ``cls`` (the native side may add more)."""
    names = cls.__dataclass_fields__  # type: ignore[attr-defined]
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True)
class DeviceInfo:
    """Device-wide memory of one GPU, in bytes, as :func:`device_info` reads it.

    ``used_bytes = total_bytes - free_bytes`` and so *includes* the driver reservation;
    ``reserved_bytes`` breaks that reservation out (a subset of ``used_bytes``, ``None`` where
    the source does not report it: pre-R510 NVIDIA drivers, other vendors), and
    ``allocated_bytes`` is what is allocated on top of it (``total - reserved - free``: what
    ``nvidia-smi``, gpustat and nvitop call "used").

    >>> import hypomnesis
    >>> gpu = hypomnesis.device_info(0)        # doctest: +SKIP
    >>> gpu.total_bytes - gpu.free_bytes == gpu.used_bytes   # doctest: +SKIP
    True
    """

    index: int
    """Index of the device (NVML order on NVIDIA hosts)."""
    name: Optional[str]
    """Product name, e.g. ``NVIDIA H200``."""
    total_bytes: int
    """Total memory the driver reports (``nvidia-smi``'s Total)."""
    free_bytes: int
    """Free memory."""
    used_bytes: int
    """``total_bytes - free_bytes`` (includes the driver reservation)."""
    reserved_bytes: Optional[int]
    """The driver/firmware reservation, a subset of ``used_bytes``; never inferred."""
    allocated_bytes: Optional[int]
    """Allocated memory, the reservation left out (``total - reserved - free``)."""
    allocatable_bytes: Optional[int]
    """Memory allocations can ever use: ``total_bytes - reserved_bytes``."""
    driver_version: Optional[str]
    """Driver version in the vendor's form (``590.48.01``)."""
    uuid: Optional[str]
    """Device UUID (``GPU-…`` on NVIDIA)."""
    pci_bus_id: Optional[str]
    """PCI bus id as the source prints it (``00000000:18:00.0``)."""
    vendor: Optional[str]
    """``nvidia``, ``amd``, ``intel`` or ``apple``."""
    source: str
    """Which source answered: ``nvml``, ``nvidia-smi``, ``drm``, ``dxgi``, ``pdh``, ``metal``."""
    gtt_total_bytes: Optional[int]
    """GTT size (system memory the GPU maps), amdgpu only."""
    gtt_used_bytes: Optional[int]
    """GTT in use, amdgpu only."""
    visible_vram_total_bytes: Optional[int]
    """CPU-visible VRAM size, amdgpu only."""
    visible_vram_used_bytes: Optional[int]
    """CPU-visible VRAM in use, amdgpu only."""
    mig_enabled: Optional[bool]
    """Whether the GPU runs in MIG mode; ``None`` when it cannot be split."""

    @property
    def name_or_unknown(self) -> str:
        """The name, or ``unknown GPU``."""
        return self.name if self.name is not None else "unknown GPU"

    def __repr__(self) -> str:
        parts = [
            f"index={self.index}",
            repr(self.name_or_unknown),
            f"total={format_bytes(self.total_bytes)}",
            f"used={format_bytes(self.used_bytes)}",
            f"free={format_bytes(self.free_bytes)}",
            f"reserved={format_bytes(self.reserved_bytes)}",
            f"allocated={format_bytes(self.allocated_bytes)}",
            f"source={self.source!r}",
        ]
        if self.mig_enabled:
            parts.append("mig=on")
        return f"DeviceInfo({', '.join(parts)})"


@dataclass(frozen=True)
class ProcessGpuInfo:
    """This process's GPU memory on one device, as :func:`process_gpu_info` reads it."""

    used_bytes: int
    """Bytes; the whole device's usage when ``is_per_process`` is false."""
    is_per_process: bool
    """True: ``used_bytes`` is this process's own. False: the source could not attribute memory
    to this process (another PID namespace, say) and gave the device-wide usage instead."""
    source: str
    """Which source answered."""

    def __repr__(self) -> str:
        whose = "this process" if self.is_per_process else "whole device (not attributable)"
        return (
            f"ProcessGpuInfo(used={format_bytes(self.used_bytes)}, {whose}, "
            f"source={self.source!r})"
        )


@dataclass(frozen=True)
class Container:
    """A container, as a process's cgroup path names it."""

    id: str
    """The container id (64 hex digits for docker, containerd, CRI-O, podman)."""
    runtime: Optional[str]
    """``docker``, ``containerd``, ``crio`` or ``podman``, when the path says."""
    pod_uid: Optional[str]
    """The Kubernetes pod UID, when the container belongs to a pod."""

    def __repr__(self) -> str:
        extra = f", pod_uid={self.pod_uid!r}" if self.pod_uid else ""
        return f"Container({self.runtime or 'unknown'}:{self.id[:12]}{extra})"


@dataclass(frozen=True)
class ProcessContext:
    """Who a process is; each field ``None`` where it cannot be read."""

    uid: Optional[int]
    """Effective user id."""
    user: Optional[str]
    """The owner's user name (the uid as text when the user database has none)."""
    command: Optional[str]
    """The full command line, arguments separated by spaces."""
    rss_bytes: Optional[int]
    """Resident set (host memory), bytes."""
    container: Optional[Container]
    """The container it runs in, from its cgroup."""
    cpu_seconds: Optional[float]
    """CPU time used so far, user and system together."""

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> ProcessContext:
        c = d.get("container")
        return cls(**{**_fields(cls, d), "container": Container(**c) if c else None})

    def __repr__(self) -> str:
        return (
            f"ProcessContext(user={self.user!r}, command={self.command!r}, "
            f"rss={format_bytes(self.rss_bytes)}, container={self.container!r})"
        )


@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on a GPU, with its context, as :func:`gpu_processes` lists it."""

    pid: int
    """Process id as the source reports it."""
    name: Optional[str]
    """Short process name."""
    used_bytes: int
    """Device memory held."""
    source: str
    """Which source listed it."""
    device_index: int
    """Index of the device the memory is on."""
    shared_used_bytes: int
    """Shared system memory the GPU uses for it (Windows); 0 elsewhere."""
    context: Optional[str]
    """The GPU context it holds: ``compute``, ``graphics`` or ``compute+graphics``."""
    host_pid: Optional[int]
    """Its pid in the host's PID namespace, when the source mapped it."""
    outside_pid_namespace: bool
    """True when the process is not visible from this PID namespace (another container)."""
    gpu_instance_id: Optional[int]
    """The MIG GPU instance it runs in."""
    compute_instance_id: Optional[int]
    """The MIG compute instance it runs in."""
    process_context: Optional[ProcessContext]
    """Owner, command line, container…; ``None`` for a process outside this PID namespace."""

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> GpuProcess:
        c = d.get("process_context")
        return cls(
            **{
                **_fields(cls, d),
                "process_context": ProcessContext._from_dict(c) if c is not None else None,
            }
        )

    @property
    def user(self) -> Optional[str]:
        """The owner's user name, where known."""
        return self.process_context.user if self.process_context else None

    @property
    def command(self) -> Optional[str]:
        """The full command line, where known."""
        return self.process_context.command if self.process_context else None

    @property
    def container(self) -> Optional[Container]:
        """The container the process runs in, where known."""
        return self.process_context.container if self.process_context else None

    def __repr__(self) -> str:
        parts = [
            f"pid={self.pid}",
            repr(self.name),
            f"used={format_bytes(self.used_bytes)}",
            f"gpu={self.device_index}",
        ]
        if self.context:
            parts.append(f"context={self.context!r}")
        if self.outside_pid_namespace:
            parts.append("outside this PID namespace")
        if self.user is not None:
            parts.append(f"user={self.user!r}")
        if self.command is not None:
            command = self.command if len(self.command) <= 60 else self.command[:59] + "…"
            parts.append(f"command={command!r}")
        if self.container is not None:
            parts.append(f"container={self.container!r}")
        return f"GpuProcess({', '.join(parts)})"


@dataclass(frozen=True)
class Utilization:
    """How busy a GPU is, percent of the driver's last sample period."""

    gpu_percent: Optional[int]
    """Share of time a kernel ran."""
    memory_percent: Optional[int]
    """Share of time device memory was read or written."""
    source: str
    """Which source answered."""


@dataclass(frozen=True)
class HostMemory:
    """The host's physical memory."""

    total_bytes: int
    """Physical memory the OS manages."""
    available_bytes: Optional[int]
    """Memory available for new allocations without swapping."""

    def __repr__(self) -> str:
        return (
            f"HostMemory(total={format_bytes(self.total_bytes)}, "
            f"available={format_bytes(self.available_bytes)})"
        )


@dataclass(frozen=True)
class MigInstance:
    """One MIG device: a compute instance inside a GPU instance, with that GPU instance's memory.

    Compute instances of one GPU instance report the same (shared) figures: never add up the
    figures of a list of instances; :func:`mig_gpu_instances` counts shared memory once.
    """

    parent_index: int
    """Index of the GPU it is part of."""
    slot: int
    """The MIG device's index on its GPU."""
    uuid: Optional[str]
    """MIG device UUID (``MIG-…``)."""
    name: Optional[str]
    """Name as the source gives it, e.g. ``NVIDIA H200 MIG 1c.3g.71gb``."""
    profile: Optional[str]
    """Profile, e.g. ``1g.18gb`` or ``1c.3g.71gb``."""
    gpu_instance_profile: Optional[str]
    """The GPU-instance part of the profile (``3g.71gb`` for ``1c.3g.71gb``)."""
    gpu_instance_id: Optional[int]
    """GPU instance id (``GI``)."""
    compute_instance_id: Optional[int]
    """Compute instance id (``CI``)."""
    total_bytes: Optional[int]
    """Memory of the GPU instance."""
    free_bytes: Optional[int]
    """Free memory of the GPU instance."""
    used_bytes: Optional[int]
    """``total_bytes - free_bytes``."""
    reserved_bytes: Optional[int]
    """The instance's reservation, where the source gives it."""
    memory_error: Optional[str]
    """Why the memory figures are ``None``, in the source's words."""
    memory_error_kind: Optional[str]
    """The kind of ``memory_error`` (as :attr:`HypomnesisError.kind`)."""
    source: str
    """Which source answered."""

    def __repr__(self) -> str:
        figures = (
            f"total={format_bytes(self.total_bytes)}, used={format_bytes(self.used_bytes)}"
            if self.memory_error is None
            else f"memory_error={self.memory_error!r}"
        )
        return (
            f"MigInstance(gpu={self.parent_index}, slot={self.slot}, "
            f"profile={self.profile!r}, gi={self.gpu_instance_id}, "
            f"ci={self.compute_instance_id}, {figures})"
        )


@dataclass(frozen=True)
class MigState:
    """The MIG view of one GPU: whether MIG is on, and its MIG devices."""

    index: int
    """Index of the GPU."""
    name: Optional[str]
    """Product name of the GPU."""
    uuid: Optional[str]
    """GPU UUID."""
    enabled: Optional[bool]
    """Current MIG mode; ``None`` when the GPU cannot be split."""
    pending: Optional[bool]
    """MIG mode after the next GPU reset."""
    instances: Tuple[MigInstance, ...]
    """The MIG devices; empty when MIG is off."""
    device_memory_error: Optional[str]
    """With MIG on: why the GPU's own figures could not be read (unprivileged callers)."""
    device_memory_error_kind: Optional[str]
    """The kind of ``device_memory_error``."""
    source: str
    """Which source answered."""

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> MigState:
        return cls(
            **{
                **_fields(cls, d),
                "instances": tuple(MigInstance(**_fields(MigInstance, m)) for m in d["instances"]),
            }
        )

    def __repr__(self) -> str:
        mode = {True: "on", False: "off", None: "unsupported"}[self.enabled]
        return (
            f"MigState(index={self.index}, {self.name!r}, mig={mode}, "
            f"instances={len(self.instances)})"
        )


@dataclass(frozen=True)
class MigGpuInstance:
    """The memory of one MIG GPU instance, counted once however many compute instances share it."""

    parent_index: int
    """Index of the GPU it is part of."""
    gpu_instance_id: Optional[int]
    """GPU instance id."""
    profile: Optional[str]
    """GPU-instance profile, e.g. ``3g.71gb``."""
    slots: Tuple[int, ...]
    """The MIG device slots of its compute instances."""
    compute_instance_ids: Tuple[int, ...]
    """Its compute instance ids, where known."""
    total_bytes: Optional[int]
    """Memory of the GPU instance."""
    free_bytes: Optional[int]
    """Free memory."""
    used_bytes: Optional[int]
    """``total_bytes - free_bytes``."""
    reserved_bytes: Optional[int]
    """Reservation, where the source gives it."""

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> MigGpuInstance:
        return cls(
            **{
                **_fields(cls, d),
                "slots": tuple(d["slots"]),
                "compute_instance_ids": tuple(d["compute_instance_ids"]),
            }
        )


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
        d = _native.snapshot(index)
        gpu = d["gpu"]
        device = d["gpu_device"]
        return cls(
            device_index=index,
            ram_bytes=d["ram_bytes"],
            gpu=ProcessGpuInfo(**gpu) if gpu is not None else None,
            gpu_device=DeviceInfo(**_fields(DeviceInfo, device)) if device is not None else None,
            taken_at=taken_at,
        )

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


def process_rss() -> int:
    """Resident set size of this process, bytes (Linux ``/proc/self/statm``, the working set on
    Windows, ``phys_footprint`` on macOS).

    >>> import hypomnesis
    >>> hypomnesis.process_rss() > 0
    True
    """
    return _native.process_rss()



def process_rss_of(pid: int) -> int:
    """Resident set size of process ``pid``, bytes (Linux ``/proc/<pid>/statm``, the working set
    on Windows, ``proc_pid_rusage`` on macOS). Raises :class:`HypomnesisError` when the process
    is gone, unreadable, or has no resident set (a zombie, a kernel thread).

    >>> import os, hypomnesis
    >>> hypomnesis.process_rss_of(os.getpid()) > 0
    True
    """
    return _native.process_rss_of(pid)


@dataclass(frozen=True)
class SourceReport:
    """One GPU source of this build (``nvml``, ``nvidia-smi``, ``drm``, ``dxgi``, ``pdh``,
    ``metal``): whether it answered, why not, and what it said about itself."""

    source: str
    """The source's name."""
    state: str
    """``answered``, ``failed`` (present but not answering) or ``absent`` (not on this host)."""
    reason: Optional[str]
    """Why it failed or is absent, in the library's words; ``None`` when it answered."""
    details: Tuple[Tuple[str, str], ...]
    """Facts it gave (library path, driver and library versions, …), in a stable order."""
    dropped_process_rows: int
    """Process rows it left out of its latest lists (no memory figure, pid 0, impossible)."""

    def __repr__(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"<SourceReport {self.source} {self.state}{why}>"


def sources() -> List[SourceReport]:
    """What each GPU source of this build says about itself, as ``hmn doctor`` prints it: the
    first thing to look at when :func:`device_count` raises :class:`NoGpuSourceError`.

    >>> import hypomnesis
    >>> [s.source for s in hypomnesis.sources()][:2]
    ['nvml', 'nvidia-smi']
    """
    return [
        SourceReport(
            source=d["source"],
            state=d["state"],
            reason=d["reason"],
            details=tuple((str(k), str(v)) for k, v in d["details"]),
            dropped_process_rows=d["dropped_process_rows"],
        )
        for d in _native.sources()
    ]

def device_count() -> int:
    """Number of GPUs this host can measure.

    Raises :class:`NoGpuSourceError` when there is no GPU source at all (no NVML library, no
    ``nvidia-smi``, no DRM device), or the failing source's error.
    """
    return _native.device_count()


def device_info(index: int = 0) -> DeviceInfo:
    """Device-wide memory of GPU ``index``: total, free, used, driver-reserved, allocated.

    >>> import hypomnesis
    >>> gpu = hypomnesis.device_info(0)        # doctest: +SKIP
    >>> print(gpu.name, gpu.reserved_bytes >> 20, "MiB reserved")   # doctest: +SKIP
    NVIDIA H200 614 MiB reserved
    """
    return DeviceInfo(**_fields(DeviceInfo, _native.device_info(index)))


def devices() -> List[DeviceInfo]:
    """:func:`device_info` of every GPU, in index order."""
    return [device_info(i) for i in range(device_count())]


def process_gpu_info(index: int = 0) -> ProcessGpuInfo:
    """This process's GPU memory on device ``index``, read from outside any framework (the
    driver's process list), so it counts every allocator and the CUDA context itself."""
    return ProcessGpuInfo(**_native.process_gpu_info(index))


def gpu_processes(index: int = 0) -> List[GpuProcess]:
    """Every process holding memory on device ``index``, sorted by pid, each with its owner,
    command line and container where they can be read.

    >>> import hypomnesis
    >>> for p in hypomnesis.gpu_processes(0):        # doctest: +SKIP
    ...     print(p.pid, p.user, p.used_bytes >> 20, "MiB", p.command)
    """
    return [GpuProcess._from_dict(d) for d in _native.gpu_processes(index)]


def process_context(pid: int) -> ProcessContext:
    """The owner, command line, resident set, container and CPU time of process ``pid``
    (fields ``None`` where they cannot be read).

    >>> import os, hypomnesis
    >>> hypomnesis.process_context(os.getpid()).rss_bytes > 0
    True
    """
    return ProcessContext._from_dict(_native.process_context(pid))


def device_utilization(index: int = 0) -> Utilization:
    """GPU and memory-controller utilization of device ``index``, percent."""
    return Utilization(**_native.device_utilization(index))


def host_memory() -> HostMemory:
    """The host's physical memory: total and available."""
    return HostMemory(**_native.host_memory())


def mig_state(index: int = 0) -> MigState:
    """Whether GPU ``index`` runs in MIG mode, and its MIG devices with their memory."""
    return MigState._from_dict(_native.mig_state(index))


def mig_instances(index: int = 0) -> List[MigInstance]:
    """The MIG devices of GPU ``index`` (empty when MIG is off), sorted by GPU instance id,
    then compute instance id."""
    return list(mig_state(index).instances)


def mig_instance(uuid: str) -> MigInstance:
    """The MIG device whose UUID is ``uuid`` (``MIG-…``, as ``nvidia-smi -L`` prints it)."""
    return MigInstance(**_fields(MigInstance, _native.mig_instance(uuid)))


def mig_gpu_instances(index: int = 0) -> List[MigGpuInstance]:
    """The MIG GPU instances of GPU ``index``, the memory their compute instances share
    counted once."""
    return [MigGpuInstance._from_dict(d) for d in _native.mig_gpu_instances(index)]
