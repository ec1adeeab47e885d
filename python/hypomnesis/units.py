"""Figures for people: bytes in binary units."""

from __future__ import annotations

from typing import Optional

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(n: Optional[int], *, signed: bool = False) -> str:
    """Bytes in binary units with one decimal (``"614.0 MiB"``); ``"unknown"`` for ``None``.

    >>> format_bytes(643825664)
    '614.0 MiB'
    >>> format_bytes(-3 << 30, signed=True)
    '-3.0 GiB'
    >>> format_bytes(512, signed=True)
    '+512 B'
    """
    if n is None:
        return "unknown"
    sign = "-" if n < 0 else ("+" if signed else "")
    size = float(abs(n))
    if size < 1024:
        return f"{sign}{abs(n)} B"
    unit = ""
    for unit in _UNITS:
        size /= 1024.0
        if size < 1024 or unit == _UNITS[-1]:
            break
    return f"{sign}{size:.1f} {unit}"
