"""The exception classes follow the library's one table of error kinds.

`hypomnesis._native.ERROR_KINDS` is `ErrorKind::ALL` through `ErrorKind::as_str`; every kind but
``other`` must have exactly one class in `hypomnesis.errors`, and each class's ``kind`` must be
one of them, so a kind added to the library without a class here fails.
"""

from __future__ import annotations

import hypomnesis
from hypomnesis import _native, errors


def test_every_kind_has_one_class_and_every_class_a_kind() -> None:
    kinds = list(_native.ERROR_KINDS)
    assert kinds[-1] == "other" and len(set(kinds)) == len(kinds)
    assert set(errors._BY_KIND) == set(kinds) - {"other"}
    for name, cls in errors._BY_KIND.items():
        assert cls.kind == name
        assert issubclass(cls, errors.HypomnesisError)
        assert getattr(hypomnesis, cls.__name__) is cls
    assert errors.HypomnesisError.kind == "other"


def test_a_native_error_becomes_the_class_of_its_kind() -> None:
    for name in _native.ERROR_KINDS:
        e = errors._from_native(name, "nvml", "said")
        assert e.kind == name and str(e) == "said"
