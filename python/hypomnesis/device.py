"""GPUs: each device's memory and utilization, its MIG instances, and the GPU sources of this
build.

All memory figures are bytes (``int``); ``None`` is a figure the source does not give, never a
guess. The ``__repr__`` of each object shows its figures in binary units (MiB, GiB) for
notebooks; the attributes keep the exact bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from . import _native
from ._convert import build, native_type, values
from .units import format_bytes


@native_type
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
    memory_model: Optional[str]
    """``discrete`` (memory of its own), ``unified`` (one pool with the CPU: GB10, AMD APUs,
    Apple silicon; the figures above are then the pool's, the host's RAM) or ``coherent``
    (its own memory, and the CPU's within its reach: Grace Hopper); ``None`` when the driver
    does not tell."""
    memory_model_evidence: Optional[str]
    """What ``memory_model`` was told from, in a sentence."""
    numa_node: Optional[int]
    """The NUMA node that is this GPU's memory, where the driver hands it to the kernel
    (Grace Hopper, Grace Blackwell in NUMA mode); ``None`` elsewhere."""
    numa_node_total_bytes: Optional[int]
    """That node's memory as the kernel counts it (``MemTotal``)."""
    numa_node_used_bytes: Optional[int]
    """What the kernel has placed on that node (``malloc``'d and migrated pages), which the
    driver's figures do not count as the GPU's."""

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
        if self.memory_model in ("unified", "coherent"):
            parts.append(f"memory={self.memory_model}")
        return f"DeviceInfo({', '.join(parts)})"


@native_type
@dataclass(frozen=True)
class Utilization:
    """How busy a GPU is, percent of the driver's last sample period."""

    gpu_percent: Optional[int]
    """Share of time a kernel ran."""
    memory_percent: Optional[int]
    """Share of time device memory was read or written."""
    source: str
    """Which source answered."""


@native_type
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


@native_type
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

    def __repr__(self) -> str:
        mode = {True: "on", False: "off", None: "unsupported"}[self.enabled]
        return (
            f"MigState(index={self.index}, {self.name!r}, mig={mode}, "
            f"instances={len(self.instances)})"
        )


@native_type
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
    kind: Optional[str]
    """What kind of failure keeps it from answering (as :attr:`HypomnesisError.kind`:
    ``not_installed`` when absent, ``not_built_in`` when not compiled in); ``None`` when it
    answered."""
    details: Tuple[Tuple[str, str], ...]
    """Facts it gave (library path, driver and library versions, …), in a stable order."""
    dropped_process_rows: int
    """Process rows it left out of its latest lists (no memory figure, pid 0, impossible)."""

    @classmethod
    def _from_native(cls, d: _native._SourceReport) -> SourceReport:
        # The native ``state`` is a dict of its own (``state``, and ``reason`` unless it
        # answered): its fields are this object's.
        fields = values("SourceReport", d)
        del fields["state"]
        return cls(**fields, **values("SourceState", d["state"]))

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
    return [SourceReport._from_native(d) for d in _native.sources()]


def device_count() -> int:
    """Number of GPUs this host can measure.

    Raises :class:`NoGpuSourceError` when there is no GPU to measure: no GPU source at all (no
    NVML library, no ``nvidia-smi``, no DRM device), or one that finds no GPU (the NVIDIA driver
    is not loaded: :func:`sources` says so); else the failing source's error (an NVML that
    loads but cannot start: :class:`DriverVersionMismatchError`, …).
    """
    return _native.device_count()


def device_info(index: int = 0) -> DeviceInfo:
    """Device-wide memory of GPU ``index``: total, free, used, driver-reserved, allocated.

    >>> import hypomnesis
    >>> gpu = hypomnesis.device_info(0)        # doctest: +SKIP
    >>> print(gpu.name, gpu.reserved_bytes >> 20, "MiB reserved")   # doctest: +SKIP
    NVIDIA H200 614 MiB reserved
    """
    return build(DeviceInfo, _native.device_info(index))


def devices() -> List[DeviceInfo]:
    """:func:`device_info` of every GPU, in index order.

    >>> import hypomnesis
    >>> [d.index for d in hypomnesis.devices()] == list(range(hypomnesis.device_count()))
    True
    """
    return [device_info(i) for i in range(device_count())]


def device_utilization(index: int = 0) -> Utilization:
    """GPU and memory-controller utilization of device ``index``, percent."""
    return build(Utilization, _native.device_utilization(index))


def mig_state(index: int = 0) -> MigState:
    """Whether GPU ``index`` runs in MIG mode, and its MIG devices with their memory."""
    return build(MigState, _native.mig_state(index))


def mig_instances(index: int = 0) -> List[MigInstance]:
    """The MIG devices of GPU ``index`` (empty when MIG is off), sorted by GPU instance id,
    then compute instance id."""
    return list(mig_state(index).instances)


def mig_instance(uuid: str) -> MigInstance:
    """The MIG device whose UUID is ``uuid`` (``MIG-…``, as ``nvidia-smi -L`` prints it)."""
    return build(MigInstance, _native.mig_instance(uuid))


def mig_gpu_instances(index: int = 0) -> List[MigGpuInstance]:
    """The MIG GPU instances of GPU ``index``, the memory their compute instances share
    counted once."""
    return [build(MigGpuInstance, d) for d in _native.mig_gpu_instances(index)]
