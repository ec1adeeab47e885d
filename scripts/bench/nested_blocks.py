"""Time and memory of N nested ``track()`` blocks (with ``ledger=True`` when asked): entered
one after the other through an ExitStack, then all left. One line per run.

Usage (after ``pip install ./python``; a fake NVML keeps it off any real GPU):

    HYPOMNESIS_NVML_LIBRARY=target/fake-builds/modern/libnvidia-ml.so.1 \\
    FAKE_NVML_SCENARIO=scenario.json python3 scripts/bench/nested_blocks.py 10000 [ledger] \
        [HOLD]

With HOLD (seconds), the blocks stay open that long at a 1 ms interval before they are left:
the ticks sample once for all of them, so the process's CPU time while they are held, and the
time to leave them, grow with their number, linearly.

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
    hold = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    tracker = hypomnesis.track(interval=0.001 if hold else 0.01, ledger=ledger)
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        for _ in range(n):
            stack.enter_context(tracker)
        t1 = time.monotonic()
        cpu = time.process_time()
        time.sleep(hold)
        cpu = time.process_time() - cpu
        t2 = time.monotonic()
    t3 = time.monotonic()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    held = f" held {hold:g}s (cpu {cpu:.2f}s)" if hold else ""
    print(
        f"{n} nested{' ledger' if ledger else ''}: enter {t1 - t0:.2f}s{held} "
        f"exit {t3 - t2:.2f}s maxrss {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
