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
"""

from ._errors import (
    BadAnswerError,
    BadSettingError,
    DriverNotLoadedError,
    DriverVersionMismatchError,
    GpuLostError,
    HypomnesisError,
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
from ._track import Sample, Tracker, Tracking, track
from ._types import (
    Container,
    DeviceInfo,
    GpuProcess,
    HostMemory,
    MigGpuInstance,
    MigInstance,
    MigState,
    ProcessContext,
    ProcessGpuInfo,
    Snapshot,
    SnapshotDelta,
    SourceReport,
    Utilization,
    device_count,
    device_info,
    device_utilization,
    devices,
    format_bytes,
    gpu_processes,
    host_memory,
    mig_gpu_instances,
    mig_instance,
    mig_instances,
    mig_state,
    process_context,
    process_gpu_info,
    process_rss,
    process_rss_of,
    sources,
)

__all__ = [
    "BadAnswerError",
    "BadSettingError",
    "Container",
    "DeviceInfo",
    "DriverNotLoadedError",
    "DriverVersionMismatchError",
    "GpuLostError",
    "GpuProcess",
    "HostMemory",
    "HypomnesisError",
    "MigGpuInstance",
    "MigInstance",
    "MigState",
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
    "format_bytes",
    "gpu_processes",
    "host_memory",
    "mig_gpu_instances",
    "mig_instance",
    "mig_instances",
    "mig_state",
    "process_context",
    "process_gpu_info",
    "process_rss",
    "process_rss_of",
    "sources",
    "track",
]
