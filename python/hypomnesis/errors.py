"""The exceptions of hypomnesis: one per kind of failure of the Rust library's ``ErrorKind``.

Every exception is a :class:`HypomnesisError` whose message is the library's, unchanged, and
which carries ``kind`` (what kind of failure, e.g. ``"no_permission"``) and ``source`` (which
part failed: ``"nvml"``, ``"nvidia-smi"``, ``"ram"``, ``"drm"``, ``"dxgi"``, ``"pdh"``,
``"metal"``, ``"unsupported"``, ``"device_index"``, ``"no_gpu_source"``, ``"io"``,
``"process_list_denied"``). A program
reacts to the class or to ``kind``; the message is for people.

>>> import hypomnesis
>>> try:
...     hypomnesis.device_info(99)
... except hypomnesis.NoSuchDeviceError as e:
...     print(e.kind, e.source)
... except hypomnesis.NoGpuSourceError:
...     print("no GPU here")
no_such_device device_index
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class HypomnesisError(Exception):
    """A measurement failed; ``str(e)`` is the library's message.

    Raised as itself for failures of no other kind (``kind == "other"``).
    """

    kind: str = "other"
    """What kind of failure this is (snake case of the Rust ``ErrorKind``)."""

    def __init__(self, message: str, *, source: str = "other") -> None:
        super().__init__(message)
        self.message = message
        """The library's message."""
        self.source = source
        """Which part failed (the Rust ``HypomnesisError`` variant, snake case)."""

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, source={self.source!r})"


class DriverNotLoadedError(HypomnesisError):
    """The GPU driver's kernel module is not loaded (``NVML_ERROR_DRIVER_NOT_LOADED``)."""

    kind = "driver_not_loaded"


class DriverVersionMismatchError(HypomnesisError):
    """The driver's library and kernel module differ in version (an upgrade without a reboot)."""

    kind = "driver_version_mismatch"


class NoPermissionError(HypomnesisError, PermissionError):
    """This user or container may not read it (``NVML_ERROR_NO_PERMISSION``, an unreadable file)."""

    kind = "no_permission"


class GpuLostError(HypomnesisError):
    """The GPU fell off the bus or needs a reset."""

    kind = "gpu_lost"


class NotSupportedError(HypomnesisError):
    """This GPU, driver or platform does not provide it (``NVML_ERROR_NOT_SUPPORTED``)."""

    kind = "not_supported"


class TimedOutError(HypomnesisError, TimeoutError):
    """A tool (``nvidia-smi``) did not finish within its time limit and was killed."""

    kind = "timed_out"


class PausedError(HypomnesisError):
    """A tool that timed out a moment ago is not run again yet."""

    kind = "paused"


class BadSettingError(HypomnesisError, ValueError):
    """A setting is wrong: an environment variable (``HYPOMNESIS_…``) or a root directory."""

    kind = "bad_setting"


class NotInstalledError(HypomnesisError):
    """The library, tool or file is not there."""

    kind = "not_installed"


class NoGpuError(NotInstalledError):
    """The driver is there and sees no GPU (``NVML_ERROR_GPU_NOT_FOUND``)."""

    kind = "no_gpu"


class NoGpuSourceError(NotInstalledError):
    """No GPU source exists on this host at all (no NVML library, no ``nvidia-smi``, …)."""


class NotBuiltInError(HypomnesisError):
    """The source is not compiled into this build."""

    kind = "not_built_in"


class NoSuchDeviceError(HypomnesisError, IndexError):
    """A device index past the last device (or below 0), or a UUID no device has."""

    kind = "no_such_device"

    def __init__(
        self,
        message: str,
        *,
        source: str = "other",
        index: Optional[int] = None,
        count: Optional[int] = None,
    ) -> None:
        super().__init__(message, source=source)
        self.index = index
        """The index asked for, when an index was out of range."""
        self.count = count
        """How many devices there are, when an index was out of range."""


class BadAnswerError(HypomnesisError):
    """The source answered something that makes no sense (impossible figures, unparsable output)."""

    kind = "bad_answer"


_BY_KIND: Dict[str, Type[HypomnesisError]] = {
    c.kind: c
    for c in (
        DriverNotLoadedError,
        DriverVersionMismatchError,
        NoPermissionError,
        GpuLostError,
        NotSupportedError,
        TimedOutError,
        PausedError,
        BadSettingError,
        NotInstalledError,
        NotBuiltInError,
        NoSuchDeviceError,
        BadAnswerError,
        NoGpuError,
    )
}


def _from_native(
    kind: str,
    source: str,
    message: str,
    index: Optional[int] = None,
    count: Optional[int] = None,
) -> HypomnesisError:
    """The exception for an error of the native module (which calls this)."""
    if source == "no_gpu_source":
        return NoGpuSourceError(message, source=source)
    if kind == NoSuchDeviceError.kind:
        return NoSuchDeviceError(message, source=source, index=index, count=count)
    return _BY_KIND.get(kind, HypomnesisError)(message, source=source)
