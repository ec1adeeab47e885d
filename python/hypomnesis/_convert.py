"""The native module's dicts made into the package's dataclasses, field by field as
:data:`hypomnesis._fields.FIELDS` (generated from the library's types) lists them: no class
names its fields here, and a field the Rust side gains or loses fails ``tests/test_fields.py``
until ``_fields.py`` is regenerated and the dataclass follows.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Type, TypeVar

from ._fields import FIELDS

T = TypeVar("T")

#: The dataclass of each name :data:`FIELDS` uses for a nested object.
_CLASSES: Dict[str, type] = {}

#: Values the serde form names otherwise than the Python API always has (the library's
#: ``as_str`` names), by field name: the one place where a value is renamed.
RENAMED_VALUES: Dict[str, Dict[str, str]] = {
    "source": {"nvidia_smi": "nvidia-smi"},
    "context": {
        "compute_and_graphics": "compute+graphics",
        "mps_and_compute": "mps+compute",
        "mps_and_graphics": "mps+graphics",
        "mps_compute_and_graphics": "mps+compute+graphics",
    },
}


def native_type(cls: Type[T]) -> Type[T]:
    """Class decorator: ``cls`` is what the native objects of its name become."""
    if cls.__name__ not in FIELDS:
        raise TypeError(f"{cls.__name__} is no type of hypomnesis._fields.FIELDS")
    _CLASSES[cls.__name__] = cls
    return cls


def _split(args: str) -> List[str]:
    """The top-level comma-separated parts of a type's arguments (``"int, Tuple[str, str]"``)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(args):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(args[start:i].strip())
            start = i + 1
    parts.append(args[start:].strip())
    return parts


def _convert(annotation: str, value: Any) -> Any:
    """``value`` as the type ``annotation`` (a :data:`FIELDS` annotation) says."""
    if value is None:
        return None
    if annotation.startswith("Optional[") and annotation.endswith("]"):
        return _convert(annotation[len("Optional[") : -1], value)
    if annotation.startswith("Tuple[") and annotation.endswith("]"):
        args = _split(annotation[len("Tuple[") : -1])
        if len(args) == 2 and args[1] == "...":
            return tuple(_convert(args[0], v) for v in value)
        return tuple(_convert(a, v) for a, v in zip(args, value))
    cls = _CLASSES.get(annotation)
    if cls is not None:
        return build(cls, value)
    return value


def values(name: str, d: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields of the native object ``d`` of type ``name``, converted (a field the native
    side leaves out, like the ``reason`` of a source that answered, is ``None``)."""
    out: Dict[str, Any] = {}
    for field, annotation in FIELDS[name]:
        value = d.get(field)
        if isinstance(value, str):
            value = RENAMED_VALUES.get(field, {}).get(value, value)
        out[field] = _convert(annotation, value)
    return out


def build(cls: Type[T], d: Mapping[str, Any]) -> T:
    """The dataclass ``cls`` of the native object ``d``."""
    make: Callable[..., T] = cls
    return make(**values(cls.__name__, d))
