"""hypomnesis: process RSS and GPU memory from outside any framework.

Each GPU's total, free, used and **driver-reserved** memory, which processes hold it (with
their owner, command line and container), this process's own GPU memory as the driver counts
it (every allocator, and the CUDA context), and the peak of a block of code:

>>> import hypomnesis
>>> with hypomnesis.track() as t:                       # doctest: +SKIP
...     x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
>>> t.peak_gpu_bytes[0] >= 3 << 30                      # doctest: +SKIP
True

The Rust library does the measuring (NVML loaded at run time, ``nvidia-smi``, Linux DRM,
DXGI/PDH on Windows, Metal on macOS); see the repository's README for the memory semantics.

The package by concept: :mod:`hypomnesis.device` (GPUs, their MIG instances, the GPU
sources), :mod:`hypomnesis.process` (RSS, the processes on a GPU and their context),
:mod:`hypomnesis.host`, :mod:`hypomnesis.snapshot`, :mod:`hypomnesis.tracking` (``track()``),
:mod:`hypomnesis.ledger` (``explain()``: the driver's figure against the frameworks'),
:mod:`hypomnesis.frameworks`, :mod:`hypomnesis.errors` and :mod:`hypomnesis.units`; this module
re-exports all of them.
"""

from .errors import (
    BadAnswerError,
    BadSettingError,
    DriverNotLoadedError,
    DriverVersionMismatchError,
    GpuLostError,
    HypomnesisError,
    NoGpuError,
    NoGpuSourceError,
    NoPermissionError,
    NoSuchDeviceError,
    NotBuiltInError,
    NotInstalledError,
    NotSupportedError,
    PausedError,
    TimedOutError,
)
from ._native import __version__
from .device import (
    DeviceInfo,
    MigGpuInstance,
    MigInstance,
    MigState,
    SourceReport,
    Utilization,
    device_count,
    device_info,
    device_utilization,
    devices,
    mig_gpu_instances,
    mig_instance,
    mig_instances,
    mig_state,
    sources,
)
from .frameworks import FrameworkMemory
from .ghosts import Ghost, GhostFact, GhostReport, ghosts
from .host import HostMemory, host_memory
from .ledger import GpuLedger, Ledger, explain
from .process import (
    Container,
    GpuProcess,
    ProcessContext,
    ProcessGpuInfo,
    gpu_processes,
    process_context,
    process_gpu_info,
    process_numa_bytes,
    process_rss,
    process_rss_of,
)
from .snapshot import Snapshot, SnapshotDelta
from .tracking import Sample, Tracker, Tracking, track
from .units import format_bytes

__all__ = [
    "BadAnswerError",
    "BadSettingError",
    "Container",
    "DeviceInfo",
    "DriverNotLoadedError",
    "DriverVersionMismatchError",
    "FrameworkMemory",
    "Ghost",
    "GhostFact",
    "GhostReport",
    "GpuLedger",
    "GpuLostError",
    "GpuProcess",
    "HostMemory",
    "HypomnesisError",
    "Ledger",
    "MigGpuInstance",
    "MigInstance",
    "MigState",
    "NoGpuError",
    "NoGpuSourceError",
    "NoPermissionError",
    "NoSuchDeviceError",
    "NotBuiltInError",
    "NotInstalledError",
    "NotSupportedError",
    "PausedError",
    "ProcessContext",
    "ProcessGpuInfo",
    "Sample",
    "Snapshot",
    "SnapshotDelta",
    "SourceReport",
    "TimedOutError",
    "Tracker",
    "Tracking",
    "Utilization",
    "__version__",
    "device_count",
    "device_info",
    "device_utilization",
    "devices",
    "explain",
    "format_bytes",
    "ghosts",
    "gpu_processes",
    "host_memory",
    "mig_gpu_instances",
    "mig_instance",
    "mig_instances",
    "mig_state",
    "process_context",
    "process_gpu_info",
    "process_numa_bytes",
    "process_rss",
    "process_rss_of",
    "sources",
    "track",
]
