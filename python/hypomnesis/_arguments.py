"""The checks of :func:`hypomnesis.track`'s arguments, made when it is called: a wrong type is a
``TypeError``, a value out of range a ``ValueError``, each saying what was expected."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

#: Longest interval and deadline accepted, seconds (a day).
MAX_SECONDS = 86_400.0


def seconds(name: str, value: Any) -> float:
    """``value`` as a float, if it is a real number (not a bool) of seconds above 0 and at most
    :data:`MAX_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and 0 < v <= MAX_SECONDS):
        raise ValueError(
            f"{name} must be a number of seconds above 0 and at most {MAX_SECONDS:g}, not {value!r}"
        )
    return v


def devices(value: Any) -> Optional[Tuple[int, ...]]:
    """``value`` as a tuple of GPU indices (each an int, 0 or more), or ``None``."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"devices must be a sequence of GPU indices, not {type(value).__name__}")
    out = []
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int):
            raise TypeError(f"a GPU index must be an int, not {type(d).__name__}")
        if not 0 <= d < 1 << 32:
            raise ValueError(f"GPU index {d} is out of range: indices are 0 to 4294967295")
        out.append(d)
    return tuple(out)


def count(name: str, value: Any) -> int:
    """``value`` if it is an int (not a bool), 0 or more."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, not {value}")
    return value


def optional_callable(name: str, value: Any) -> Any:
    """``value`` if it is callable or ``None``."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable or None, not {type(value).__name__}")
    return value


def flag(name: str, value: Any) -> bool:
    """``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return value
