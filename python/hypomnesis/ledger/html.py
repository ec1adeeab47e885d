"""The ledger as HTML for Jupyter: per GPU a stacked bar over the device's memory (each
framework's allocated and cached bytes, the memory outside the frameworks, the rest of the
device, free), with a legend of the figures. Inline CSS only; every name and note escaped."""

from __future__ import annotations

from html import escape
from typing import List, Optional, Protocol, Sequence, Tuple

from ..units import format_bytes


class _Framework(Protocol):
    """What the bar reads of a framework's figures (a :class:`FrameworkMemory`)."""

    @property
    def framework(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def allocated_bytes(self) -> Optional[int]: ...
    @property
    def cached_bytes(self) -> Optional[int]: ...


class _Gpu(Protocol):
    """What the bar reads of one GPU's entry (a :class:`GpuLedger`): this view takes the
    model's values, not its module."""

    @property
    def frameworks(self) -> Sequence[_Framework]: ...
    @property
    def outside_bytes(self) -> Optional[int]: ...
    @property
    def total_bytes(self) -> Optional[int]: ...
    @property
    def free_bytes(self) -> Optional[int]: ...
    @property
    def driver_bytes(self) -> Optional[int]: ...
    @property
    def headroom_bytes(self) -> Optional[int]: ...
    @property
    def label(self) -> str: ...
    @property
    def notes(self) -> Sequence[str]: ...

#: Colours of each framework's (allocated, cached) segments.
_COLOURS = {
    "torch": ("#ee4c2c", "#f6a494"),
    "jax": ("#5e97f6", "#b3cdfb"),
    "cupy": ("#43a047", "#a5d6a7"),
}
_OUTSIDE = "#8e24aa"
_REST = "#9e9e9e"
_FREE = "#eeeeee"


def _segments(g: _Gpu) -> List[Tuple[str, Optional[int], str]]:
    """(label, bytes, colour) of each part of the bar, in order."""
    segs: List[Tuple[str, Optional[int], str]] = []
    for f in g.frameworks:
        strong, light = _COLOURS.get(f.framework, ("#607d8b", "#b0bec5"))
        segs.append((f"{f.framework} {f.device} allocated", f.allocated_bytes, strong))
        segs.append((f"{f.framework} {f.device} cached", f.cached_bytes, light))
    segs.append(("outside frameworks (CUDA context, libraries)", g.outside_bytes, _OUTSIDE))
    rest = None
    if g.total_bytes is not None and g.free_bytes is not None and g.driver_bytes is not None:
        rest = g.total_bytes - g.free_bytes - g.driver_bytes
        rest = rest if rest >= 0 else None
    segs.append(("other processes and the driver's reservation", rest, _REST))
    segs.append(("free", g.free_bytes, _FREE))
    return segs


def _gpu_html(g: _Gpu) -> str:
    segs = _segments(g)
    scale = g.total_bytes or sum(b for _, b, _ in segs if b) or 1
    bar = "".join(
        f'<div title="{escape(label)}: {format_bytes(b)}" style="width:{100.0 * b / scale:.3f}%;'
        f'background:{colour}"></div>'
        for label, b, colour in segs
        if b
    )
    legend = "".join(
        f'<span style="margin-right:1em;white-space:nowrap"><span style="display:inline-block;'
        f'width:0.8em;height:0.8em;background:{colour};margin-right:0.3em"></span>'
        f"{escape(label)} {escape(format_bytes(b))}</span>"
        for label, b, colour in segs
        if b is not None
    )
    notes = "".join(f"<li>{escape(n)}</li>" for n in g.notes)
    return (
        f'<div style="margin:0.5em 0"><div><b>{escape(g.label)}</b>: driver '
        f"{escape(format_bytes(g.driver_bytes))}, headroom {escape(format_bytes(g.headroom_bytes))}"
        f'</div><div style="display:flex;height:1.2em;border:1px solid #999;width:100%">{bar}'
        f'</div><div style="font-size:85%">{legend}</div>'
        + (f'<ul style="font-size:85%;margin:0">{notes}</ul>' if notes else "")
        + "</div>"
    )


def ledger_html(gpus: Sequence[_Gpu], items: List[str]) -> str:
    """The whole ledger: a bar per GPU, then its footnotes (the unmatched devices, the notes)."""
    parts = [_gpu_html(g) for g in gpus] or ["<div>no GPU memory held by this process</div>"]
    if items:
        parts.append(
            '<ul style="font-size:85%;margin:0">'
            + "".join(f"<li>{escape(i)}</li>" for i in items)
            + "</ul>"
        )
    return '<div class="hypomnesis-ledger">' + "".join(parts) + "</div>"
