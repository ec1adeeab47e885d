"""Processes: this process's RSS and GPU memory, every process holding memory on a GPU, and who
a process is (owner, command line, container).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

from . import _native
from ._convert import build, native_type
from .units import format_bytes


@native_type
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


@native_type
@dataclass(frozen=True)
class Container:
    """A container, as a process's cgroup path names it, and for one in a Kubernetes pod the
    names the kubelet's logs on the node give it (``HYPOMNESIS_ROOTFS``, default ``/``)."""

    id: str
    """The container id (64 hex digits for docker, containerd, CRI-O, podman)."""
    runtime: Optional[str]
    """``docker``, ``containerd``, ``crio`` or ``podman``, when the path says."""
    pod_uid: Optional[str]
    """The Kubernetes pod UID, when the container belongs to a pod."""
    namespace: Optional[str]
    """The pod's namespace, from ``<rootfs>/var/log/pods/<namespace>_<pod>_<uid>``."""
    pod: Optional[str]
    """The pod's name, from the same directory."""
    name: Optional[str]
    """The container's name, from its link in ``<rootfs>/var/log/containers``."""

    def __repr__(self) -> str:
        if self.namespace and self.pod:
            where = f"{self.namespace}/{self.pod}" + (f"/{self.name}" if self.name else "")
            extra = f", pod={where!r}"
        else:
            extra = f", pod_uid={self.pod_uid!r}" if self.pod_uid else ""
        return f"Container({self.runtime or 'unknown'}:{self.id[:12]}{extra})"


@native_type
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

    def __repr__(self) -> str:
        return (
            f"ProcessContext(user={self.user!r}, command={self.command!r}, "
            f"rss={format_bytes(self.rss_bytes)}, container={self.container!r})"
        )


@native_type
@dataclass(frozen=True)
class GpuProcess:
    """One process holding memory on a GPU, with its context, as :func:`gpu_processes` lists it."""

    pid: int
    """Process id as the source reports it."""
    name: Optional[str]
    """Process name (on Linux ``comm``, made whole where the kernel cut it at 15 bytes)."""
    used_bytes: int
    """Device memory held."""
    source: str
    """Which source listed it."""
    device_index: int
    """Index of the device the memory is on."""
    shared_used_bytes: int
    """Shared system memory the GPU uses for it (Windows); 0 elsewhere."""
    context: Optional[str]
    """The lists the driver has it in: ``compute``, ``graphics`` or ``compute+graphics``; an
    MPS client is ``mps`` (``mps+compute``, ``mps+graphics``, ``mps+compute+graphics`` when
    the other lists have it too)."""
    host_pid: Optional[int]
    """Its pid in the host's PID namespace, when the source mapped it."""
    outside_pid_namespace: bool
    """True when the process is known to be outside this PID namespace (another container)."""
    unreadable: Optional[str]
    """Why its files (owner, command line…) cannot be read here: ``outside_pid_namespace``,
    ``hidden_by_hidepid`` (the procfs mount's ``hidepid`` hides another user's process: run as
    root or in the mount's ``gid=`` group), ``exited`` (since the driver listed it),
    ``not_readable``, ``no_such_pid`` (a pid no process here can have: above ``pid_max`` in
    the initial PID namespace); ``None`` when they can be."""
    gpu_instance_id: Optional[int]
    """The MIG GPU instance it runs in."""
    compute_instance_id: Optional[int]
    """The MIG compute instance it runs in."""
    mps_server: bool
    """True for the MPS server (``nvidia-cuda-mps-server``), which holds its clients' contexts."""
    process_context: Optional[ProcessContext]
    """Owner, command line, container…; ``None`` for a process whose files cannot be read
    (see :attr:`unreadable`)."""

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
        if self.mps_server:
            parts.append("MPS server")
        if self.outside_pid_namespace:
            parts.append("outside this PID namespace")
        elif self.unreadable is not None:
            parts.append(f"unreadable={self.unreadable!r}")
        if self.user is not None:
            parts.append(f"user={self.user!r}")
        if self.command is not None:
            command = self.command if len(self.command) <= 60 else self.command[:59] + "…"
            parts.append(f"command={command!r}")
        if self.container is not None:
            parts.append(f"container={self.container!r}")
        return f"GpuProcess({', '.join(parts)})"


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


def process_numa_bytes(pid: int) -> Dict[int, int]:
    """Where the pages of process ``pid`` lie: its resident bytes on each NUMA node, from its
    ``/proc/<pid>/numa_maps`` (Linux). On a coherent machine whose GPU memory is a NUMA node
    (``DeviceInfo.numa_node``: Grace Hopper, Grace Blackwell in NUMA mode), the bytes on that
    node are memory the kernel placed in the GPU's memory (``malloc``'d, ``mmap``'d or migrated
    pages): part of the process's RSS, not of what the driver counts as its GPU memory. Raises
    :class:`HypomnesisError` when the file cannot be read (another user's process, a kernel
    without NUMA, not Linux).

    >>> import os, sys, hypomnesis
    >>> sys.platform != "linux" or sum(hypomnesis.process_numa_bytes(os.getpid()).values()) > 0
    True
    """
    return _native.process_numa_bytes(pid)


def process_gpu_info(index: int = 0) -> ProcessGpuInfo:
    """This process's GPU memory on device ``index``, read from outside any framework (the
    driver's process list), so it counts every allocator and the CUDA context itself."""
    return build(ProcessGpuInfo, _native.process_gpu_info(index))


def gpu_processes(index: int = 0) -> List[GpuProcess]:
    """Every process holding memory on device ``index``, sorted by pid, each with its owner,
    command line and container where they can be read.

    >>> import hypomnesis
    >>> for p in hypomnesis.gpu_processes(0):        # doctest: +SKIP
    ...     print(p.pid, p.user, p.used_bytes >> 20, "MiB", p.command)
    """
    return [build(GpuProcess, d) for d in _native.gpu_processes(index)]


def process_context(pid: int) -> ProcessContext:
    """The owner, command line, resident set, container and CPU time of process ``pid``
    (fields ``None`` where they cannot be read).

    >>> import os, hypomnesis
    >>> hypomnesis.process_context(os.getpid()).rss_bytes > 0
    True
    """
    return build(ProcessContext, _native.process_context(pid))
