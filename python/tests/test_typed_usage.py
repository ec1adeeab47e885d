"""The typed usage file (checked by mypy --strict) also runs, against the session's fake."""

from __future__ import annotations

from conftest import MIB
from typed_usage import main


def test_typed_usage_runs() -> None:
    r = main()
    assert r["rss"] and r["doubled"] == 42 and r["last"] is True
    assert r["headroom"] == [110_796 * MIB] * 2  # allocatable - allocated = free
    assert r["kind"] == "no_such_device" and r["index"] == 7
    assert r["len"] == 1 << 20
    assert r["outside"] == {0: 2 * 1024 * MIB}  # no framework imported: all of it outside
