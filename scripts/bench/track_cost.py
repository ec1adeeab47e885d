#!/usr/bin/env python3
"""What `hypomnesis.track()` costs, with the installed package, against the fake NVML (one H200
listing this process; built here with cargo): the time of a decorated call as a ratio to the
bare call, the history kept after 20,000 decorated calls, and the RSS after a block tracked
for a while at a 1 µs interval.

Usage: scripts/bench/track_cost.py [SECONDS]   (SECONDS of the 1 µs block, default 30)
Run it with the Python whose site-packages holds the package, e.g. /work/venv/bin/python."""
import json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import paths  # noqa: E402


def child() -> None:
    import hypomnesis

    def rss_mib() -> float:
        return hypomnesis.process_rss() / 2**20

    def bare() -> int:
        return 1

    tracker = hypomnesis.track()
    tracked = tracker(bare)
    for f in (bare, tracked):  # warm up
        for _ in range(1000):
            f()
    n = 20_000
    best = {}
    for name, f in (("bare", bare), ("tracked", tracked)):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            times.append((time.perf_counter() - t0) / n)
        best[name] = min(times)
    print(f"bare call       {best['bare'] * 1e6:8.2f} µs")
    print(f"decorated call  {best['tracked'] * 1e6:8.2f} µs  "
          f"(ratio {best['tracked'] / best['bare']:.0f}x, overhead "
          f"{(best['tracked'] - best['bare']) * 1e6:.2f} µs)")

    fresh = hypomnesis.track()
    counted = fresh(bare)
    before = rss_mib()
    for _ in range(20_000):
        counted()
    print(f"history after 20,000 decorated calls: {len(fresh.history)} records, "
          f"RSS {before:.0f} -> {rss_mib():.0f} MiB")

    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    before = rss_mib()
    with hypomnesis.track(interval=1e-6) as t:
        time.sleep(seconds)
    print(f"{seconds:.0f} s at a 1 µs interval: {len(t.samples)} samples kept, "
          f"RSS {before:.0f} -> {rss_mib():.0f} MiB")


def main() -> None:
    if os.environ.get("HMN_TRACK_COST_CHILD"):
        child()
        return
    lib = paths.build_fake()
    fd, scenario = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"devices": [{"name": "NVIDIA H200", "total": 143771 << 20,
                                "free": 110796 << 20, "reserved": 614 << 20,
                                "compute_processes": [{"pid": os.getpid(), "used": 1 << 30}]}]}, f)
    env = dict(os.environ, HMN_TRACK_COST_CHILD="1", HYPOMNESIS_NVML_LIBRARY=lib,
               FAKE_NVML_SCENARIO=scenario)
    try:
        subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env, check=True,
                       cwd=tempfile.gettempdir())
    finally:
        os.unlink(scenario)


if __name__ == "__main__":
    main()
