"""Time and memory of N nested ``track()`` blocks (with ``ledger=True`` when asked): entered
one after the other through an ExitStack, then all left. One line per run.

Usage (after ``pip install ./python``; a fake NVML keeps it off any real GPU):

    HYPOMNESIS_NVML_LIBRARY=target/fake-builds/modern/libnvidia-ml.so.1 \\
    FAKE_NVML_SCENARIO=scenario.json python3 scripts/bench/nested_blocks.py 10000 [ledger]

Run it beside the former package (PYTHONPATH pointing at an older copy) in one session to
compare: the machine's noise is large, so quote medians of paired runs.
"""

import contextlib
import resource
import sys
import time

import hypomnesis


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    ledger = len(sys.argv) > 2 and sys.argv[2] == "ledger"
    tracker = hypomnesis.track(interval=0.01, ledger=ledger)
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        for _ in range(n):
            stack.enter_context(tracker)
        t1 = time.monotonic()
    t2 = time.monotonic()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{n} nested{' ledger' if ledger else ''}: enter {t1 - t0:.2f}s exit {t2 - t1:.2f}s "
        f"maxrss {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
