"""The host's physical memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from . import _native
from ._convert import build, native_type
from .units import format_bytes


@native_type
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


def host_memory() -> HostMemory:
    """The host's physical memory: total and available.

    >>> import hypomnesis
    >>> hypomnesis.host_memory().total_bytes > 0
    True
    """
    return build(HostMemory, _native.host_memory())
