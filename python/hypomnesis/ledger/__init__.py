"""The ledger: per GPU, the driver's figure for this process set against what each imported
framework says it holds there (:func:`explain`, and each sample of ``track(ledger=True)``).

- :mod:`.model`: :class:`Ledger` and :class:`GpuLedger`, and how one GPU's entry is made;
- :mod:`.explain`: :func:`explain`, the driver and the frameworks read within a deadline;
- :mod:`.html`: the ledger as HTML for Jupyter.
"""

from .explain import explain
from .model import GpuLedger, Ledger, entry, holds, uuid_key

__all__ = ["GpuLedger", "Ledger", "entry", "explain", "holds", "uuid_key"]
