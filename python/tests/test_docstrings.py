"""The examples in the package's docstrings run as doctests (against the session's fake)."""

from __future__ import annotations

import doctest

import pytest

import hypomnesis
from hypomnesis import _errors, _track, _types


@pytest.mark.parametrize("module", [hypomnesis, _errors, _track, _types])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0
    if module is not hypomnesis:
        assert result.attempted > 0
