"""What the frameworks this process has already imported say they hold on each GPU: PyTorch,
JAX and CuPy, read through their own APIs.

A framework is looked up in ``sys.modules`` only, never imported, and read only once it has
set CUDA up itself: nothing here creates a CUDA context or starts a framework's backend (which
for JAX would preallocate most of a GPU). A figure a framework does not give is ``None``.
"""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .units import format_bytes

#: The frameworks :func:`probe` knows, by their module name.
FRAMEWORKS: Tuple[str, ...] = ("torch", "jax", "cupy")

#: The most devices a framework is believed to have (as the library's ``device_count()``): a
#: framework that says it has more is not read, rather than asked about each one.
MAX_DEVICES = 1024


@dataclass(frozen=True)
class FrameworkMemory:
    """One framework's memory on one of its devices, as that framework counts it.

    ``reserved_bytes`` is what its allocator holds from the driver (PyTorch's
    ``memory_reserved``, JAX's ``pool_bytes``, CuPy's pool ``total_bytes``);
    ``allocated_bytes`` the part of it handed out to arrays and tensors. The rest is cached:
    free for that framework, not for anything else.
    """

    framework: str
    """``torch``, ``jax`` or ``cupy``."""
    device: str
    """The device in the framework's words: ``cuda:0`` (PyTorch), ``gpu 0`` (JAX's device id),
    ``device 0`` (CuPy)."""
    uuid: Optional[str]
    """The GPU's (or MIG device's) UUID as the framework gave it, or as ``CUDA_VISIBLE_DEVICES``
    names it; ``None`` when it cannot be told honestly (see ``why_no_uuid``)."""
    why_no_uuid: Optional[str]
    """Why ``uuid`` is ``None``."""
    allocated_bytes: Optional[int]
    """Bytes in use by arrays and tensors."""
    reserved_bytes: Optional[int]
    """Bytes the framework's allocator holds (allocated and cached)."""
    peak_allocated_bytes: Optional[int]
    """The largest ``allocated_bytes`` since the framework started (or its peaks were reset)."""
    peak_reserved_bytes: Optional[int]
    """The largest ``reserved_bytes`` likewise."""
    limit_bytes: Optional[int]
    """The most the framework lets itself allocate (JAX's ``bytes_limit``)."""

    @property
    def cached_bytes(self) -> Optional[int]:
        """Reserved but not allocated: ``reserved_bytes - allocated_bytes``."""
        if self.reserved_bytes is None or self.allocated_bytes is None:
            return None
        return self.reserved_bytes - self.allocated_bytes

    def __repr__(self) -> str:
        fb = format_bytes
        return (
            f"FrameworkMemory({self.framework} {self.device}, reserved={fb(self.reserved_bytes)}, "
            f"allocated={fb(self.allocated_bytes)}, peak_reserved={fb(self.peak_reserved_bytes)}, "
            f"peak_allocated={fb(self.peak_allocated_bytes)}, uuid={self.uuid!r})"
        )


def _known(value: Any) -> Optional[int]:
    """A framework's figure as bytes: ``None`` for a missing one or its ``-1`` (unknown)."""
    if value is None or isinstance(value, bool):
        return None
    n = int(value)
    return n if n >= 0 else None


def uuid_text(value: Any) -> Optional[str]:
    """A UUID as text from what a framework gives: a string (any prefix and case, kept as is),
    a UUID object (PyTorch's, whose ``str()`` has no ``GPU-`` prefix), or 16 raw bytes (CuPy's
    ``getDeviceProperties()['uuid']``).

    >>> uuid_text(bytes(range(16)))
    '00010203-0405-0607-0809-0a0b0c0d0e0f'
    >>> uuid_text(" GPU-8932f937-d72c-4106-c12f-20bd9faed9f6 ")
    'GPU-8932f937-d72c-4106-c12f-20bd9faed9f6'
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        if len(value) == 16:
            h = bytes(value).hex()
            return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        text = bytes(value).split(b"\0", 1)[0].decode("ascii", "replace")
    else:
        text = str(value)
    text = text.strip()
    return text or None


def cuda_ordinal_uuids(
    gpu_uuids: Sequence[Optional[str]], mig: bool
) -> Tuple[Optional[List[str]], str]:
    """The UUID of each CUDA device ordinal of this process, from ``CUDA_VISIBLE_DEVICES`` and
    ``CUDA_DEVICE_ORDER``, where that can be told without asking CUDA; else ``None`` and why.

    ``gpu_uuids`` are the GPUs' UUIDs in NVML order (PCI bus order); ``mig`` whether any GPU
    runs in MIG mode. CUDA numbers its devices fastest first unless ``CUDA_DEVICE_ORDER`` is
    ``PCI_BUS_ID``, so an index is NVML's index only then; a UUID in the list names its device
    whatever the order (CUDA accepts a unique prefix of one).
    """
    order_pci = os.environ.get("CUDA_DEVICE_ORDER", "").strip().upper() == "PCI_BUS_ID"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    known = [u for u in gpu_uuids if u]
    if visible is not None and not visible.strip():
        return [], ""  # set and empty: CUDA shows no device
    if visible is None:
        if mig:
            return None, "a GPU runs in MIG mode and CUDA_VISIBLE_DEVICES names no MIG device"
        if len(gpu_uuids) == 1 and gpu_uuids[0]:
            return [gpu_uuids[0]], ""
        if order_pci and len(known) == len(gpu_uuids):
            return list(known), ""
        return None, (
            "CUDA numbers GPUs fastest first, NVML by PCI bus: set CUDA_DEVICE_ORDER=PCI_BUS_ID "
            "or name the GPUs by UUID in CUDA_VISIBLE_DEVICES"
        )
    out: List[str] = []
    for entry in visible.split(","):
        entry = entry.strip()
        if entry.isdigit():
            if not order_pci:
                return None, (
                    f"CUDA_VISIBLE_DEVICES names GPU {entry} by index, which CUDA counts "
                    "fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID"
                )
            i = int(entry)
            if i >= len(gpu_uuids) or not gpu_uuids[i]:
                break  # CUDA stops at the first entry it cannot use
            out.append(str(gpu_uuids[i]))
        elif entry.upper().startswith("MIG-"):
            out.append(entry)
        elif entry.upper().startswith("GPU-"):
            hits = [u for u in known if u.lower().startswith(entry.lower())]
            if len(hits) != 1:
                break
            out.append(hits[0])
        else:
            break
    return out, ""


def _device_total(name: str, value: Any, notes: List[str]) -> Optional[int]:
    """A framework's device count, if it is one a host can have; else a note and ``None``."""
    n = int(value)
    if 0 <= n <= MAX_DEVICES:
        return n
    notes.append(
        f"{name} says it has {n} devices, which no host has (at most {MAX_DEVICES}): not read"
    )
    return None


def _torch(mod: Any, notes: List[str]) -> List[FrameworkMemory]:
    cuda = getattr(mod, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        notes.append("torch is imported but has not initialised CUDA: nothing to read")
        return []
    count = _device_total("torch", cuda.device_count(), notes)
    if count is None:
        return []
    found = []
    for d in range(count):
        props = cuda.get_device_properties(d)
        raw = getattr(props, "uuid", None)
        uuid = uuid_text(raw)
        found.append(
            FrameworkMemory(
                framework="torch",
                device=f"cuda:{d}",
                uuid=uuid,
                why_no_uuid=None if uuid else "this torch gives no device UUID",
                allocated_bytes=_known(cuda.memory_allocated(d)),
                reserved_bytes=_known(cuda.memory_reserved(d)),
                peak_allocated_bytes=_known(cuda.max_memory_allocated(d)),
                peak_reserved_bytes=_known(cuda.max_memory_reserved(d)),
                limit_bytes=None,
            )
        )
    return found


def _jax_started() -> Optional[bool]:
    """Whether JAX has started its backends (``None``: cannot tell). ``jax.local_devices()``
    starts them when they are not, which preallocates most of each GPU: asked only once they
    run. JAX has no public way to ask; its ``xla_bridge`` keeps them in ``_backends``."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    backends = getattr(bridge, "_backends", None)
    if not isinstance(backends, dict):
        return None
    return bool(backends)


def _jax(
    mod: Any, notes: List[str], ordinals: Optional[List[str]], why: str
) -> List[FrameworkMemory]:
    started = _jax_started()
    if not started:
        notes.append(
            "jax is imported but its backends have not started: nothing to read"
            if started is False
            else "jax is imported but whether its backends run cannot be told without starting "
            "them: not read"
        )
        return []
    devices = list(itertools.islice(iter(mod.local_devices()), MAX_DEVICES + 1))
    if len(devices) > MAX_DEVICES:
        notes.append(
            f"jax lists more than {MAX_DEVICES} local devices, which no host has: not read"
        )
        return []
    found = []
    for dev in devices:
        if str(getattr(dev, "platform", "")).lower() not in ("gpu", "cuda", "rocm"):
            continue
        stats: Dict[str, Any] = dev.memory_stats() or {}
        ordinal = getattr(dev, "local_hardware_id", None)
        if ordinal is None:
            ordinal = getattr(dev, "id", None)
        uuid: Optional[str] = None
        reason: Optional[str] = None
        if ordinal is None:
            reason = "the JAX device gives no CUDA ordinal"
        elif ordinals is None:
            reason = (
                f"JAX gives no device UUID and its ordinal {ordinal} is not NVML's index: {why}"
            )
        elif int(ordinal) >= len(ordinals):
            reason = f"CUDA_VISIBLE_DEVICES names no device {ordinal}"
        else:
            uuid = ordinals[int(ordinal)]
        pool = _known(stats.get("pool_bytes"))
        peak_pool = _known(stats.get("peak_pool_bytes"))
        found.append(
            FrameworkMemory(
                framework="jax",
                device=f"gpu {getattr(dev, 'id', ordinal)}",
                uuid=uuid,
                why_no_uuid=reason,
                allocated_bytes=_known(stats.get("bytes_in_use")),
                reserved_bytes=pool if pool is not None else _known(stats.get("bytes_reserved")),
                peak_allocated_bytes=_known(stats.get("peak_bytes_in_use")),
                peak_reserved_bytes=(
                    peak_pool if peak_pool is not None else _known(stats.get("peak_bytes_reserved"))
                ),
                limit_bytes=_known(stats.get("bytes_limit")),
            )
        )
    return found


def _cupy(mod: Any, notes: List[str]) -> List[FrameworkMemory]:
    runtime = mod.cuda.runtime
    if not _device_total("cupy", runtime.getDeviceCount(), notes):
        return []
    # The default pool answers for the current device; reading another would mean switching
    # to it, which creates a CUDA context there.
    d = int(runtime.getDevice())
    props = runtime.getDeviceProperties(d)
    uuid = uuid_text(props.get("uuid") if isinstance(props, dict) else None)
    pool = mod.get_default_memory_pool()
    return [
        FrameworkMemory(
            framework="cupy",
            device=f"device {d}",
            uuid=uuid,
            why_no_uuid=None if uuid else "this CuPy gives no device UUID",
            allocated_bytes=_known(pool.used_bytes()),
            reserved_bytes=_known(pool.total_bytes()),
            peak_allocated_bytes=None,
            peak_reserved_bytes=None,
            limit_bytes=None,
        )
    ]


def read_one(
    name: str, ordinal_uuids: Callable[[], Tuple[Optional[List[str]], str]]
) -> Tuple[List[FrameworkMemory], List[str]]:
    """What framework ``name`` (one of :data:`FRAMEWORKS`) holds, if it is imported and
    running, and notes on why not; its own errors are a note, never raised."""
    notes: List[str] = []
    mod = sys.modules.get(name)
    if mod is None:
        return [], notes
    try:
        if name == "torch":
            return _torch(mod, notes), notes
        if name == "jax":
            return _jax(mod, notes, *ordinal_uuids()), notes
        return _cupy(mod, notes), notes
    except Exception as e:  # a framework's own failure, not ours: said, not raised
        notes.append(f"{name} could not be read: {type(e).__name__}: {e}")
        return [], notes


def names(frameworks: Optional[Sequence[str]]) -> Tuple[str, ...]:
    """``frameworks`` checked (default: all of :data:`FRAMEWORKS`); an unknown one is a
    ``ValueError``."""
    out = FRAMEWORKS if frameworks is None else tuple(frameworks)
    for name in out:
        if name not in FRAMEWORKS:
            raise ValueError(f"unknown framework {name!r}: known are {', '.join(FRAMEWORKS)}")
    return out


def probe(
    frameworks: Optional[Sequence[str]],
    ordinal_uuids: Callable[[], Tuple[Optional[List[str]], str]],
) -> Tuple[List[FrameworkMemory], List[str]]:
    """The memory of every framework of ``frameworks`` (default: all of :data:`FRAMEWORKS`) that
    is imported and running, and notes on those imported but not read. ``ordinal_uuids`` gives
    :func:`cuda_ordinal_uuids`'s answer, asked only for a framework without UUIDs (JAX). Read
    here, without a bound (:mod:`hypomnesis._framework_reads` bounds them by a deadline).

    A framework whose API raises is left out with a note: its error never hides the others."""
    found: List[FrameworkMemory] = []
    notes: List[str] = []
    for name in names(frameworks):
        fws, said = read_one(name, ordinal_uuids)
        found += fws
        notes += said
    return found, notes
