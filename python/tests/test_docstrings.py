"""The examples in the package's docstrings run as doctests (against the session's fake)."""

from __future__ import annotations

import doctest

import pytest

import hypomnesis
from hypomnesis import (
    device,
    errors,
    frameworks,
    host,
    process,
    snapshot,
    units,
)
from hypomnesis.ledger import model as ledger_model
from hypomnesis.tracking import block as tracking_block


@pytest.mark.parametrize(
    "module",
    [
        hypomnesis,
        device,
        errors,
        frameworks,
        host,
        ledger_model,
        process,
        snapshot,
        tracking_block,
        units,
    ],
)
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)  # type: ignore[arg-type]
    assert result.failed == 0
    if module is not hypomnesis:
        assert result.attempted > 0
