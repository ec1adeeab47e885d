"""Stand-ins for ``torch``, ``jax`` and ``cupy``: modules with just the calls
``hypomnesis.explain()`` makes, answering figures a test gives. A child process (``run_child``)
runs this file's source first and puts them in ``sys.modules`` itself: no framework is
installed here, nor any GPU.

``import_watch()`` records every import of a framework the child attempts from then on, so a
test can show that ``explain()`` imports none.
"""

import sys
import types


class _Uuid:
    """PyTorch's device UUID: ``str()`` gives it without the ``GPU-`` prefix."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


class _Props:
    def __init__(self, uuid):
        self.uuid = _Uuid(uuid)


def standin_torch(devices, initialized=True):
    """``torch`` whose CUDA devices are ``devices``: dicts with ``uuid``, ``allocated``,
    ``reserved``, ``peak_allocated``, ``peak_reserved``."""
    torch = types.ModuleType("torch")
    cuda = types.ModuleType("torch.cuda")

    def used(d):
        if not initialized:
            raise AssertionError("read before CUDA was initialised")
        return devices[d]

    cuda.is_initialized = lambda: initialized
    cuda.device_count = lambda: len(devices)
    cuda.get_device_properties = lambda d: _Props(used(d)["uuid"])
    cuda.memory_allocated = lambda d: used(d)["allocated"]
    cuda.memory_reserved = lambda d: used(d)["reserved"]
    cuda.max_memory_allocated = lambda d: used(d).get("peak_allocated", used(d)["allocated"])
    cuda.max_memory_reserved = lambda d: used(d).get("peak_reserved", used(d)["reserved"])
    torch.cuda = cuda
    sys.modules["torch"] = torch
    sys.modules["torch.cuda"] = cuda
    return torch


class _JaxDevice:
    def __init__(self, id, stats, platform="gpu"):
        self.id = id
        self.local_hardware_id = id
        self.platform = platform
        self._stats = stats

    def memory_stats(self):
        return self._stats


def standin_jax(devices, started=True):
    """``jax`` whose local devices have ``devices`` as their ``memory_stats()`` (``None``: a
    CPU device), its backends started or not (``jax._src.xla_bridge._backends``)."""
    jax = types.ModuleType("jax")
    bridge = types.ModuleType("jax._src.xla_bridge")
    bridge._backends = {"cuda": object()} if started else {}

    def local_devices():
        if not started:
            raise AssertionError("local_devices() would start JAX's backends")
        return [
            _JaxDevice(i, s) if s is not None else _JaxDevice(i, None, "cpu")
            for i, s in enumerate(devices)
        ]

    jax.local_devices = local_devices
    sys.modules["jax"] = jax
    sys.modules["jax._src.xla_bridge"] = bridge
    return jax


def standin_cupy(current, uuids, used, total):
    """``cupy`` whose current device is ``current`` among devices with ``uuids`` (16 raw
    bytes each, as CuPy gives them) and whose default pool holds ``total``, ``used`` of it."""
    cupy = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: len(uuids),
        getDevice=lambda: current,
        getDeviceProperties=lambda d: {"name": b"stand-in", "uuid": uuids[d]},
    )
    cupy.cuda = types.SimpleNamespace(runtime=runtime)
    pool = types.SimpleNamespace(used_bytes=lambda: used, total_bytes=lambda: total)
    cupy.get_default_memory_pool = lambda: pool
    sys.modules["cupy"] = cupy
    return cupy


class _Watch:
    """A meta-path finder that finds nothing and records the frameworks asked for."""

    def __init__(self):
        self.asked = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "jax", "cupy"):
            self.asked.append(name)
        return None


def import_watch():
    watch = _Watch()
    sys.meta_path.insert(0, watch)
    return watch
