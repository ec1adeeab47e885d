#!/usr/bin/env python3
"""What looking for ghosts costs `hmn serve`'s scrape, against the scrape's budget.

One exporter per case, one fake GPU (the fake NVML, release build) listing N real `sleep`
processes (2,000 by default), every scrape measuring afresh (`--min-interval 1ms`); medians of
--scrapes fresh scrapes, the cases interleaved scrape by scrape so that the machine's noise
falls on each alike:

- "no ghost": every listed process alive; the look reads each one's `stat` and no descriptor;
- "exited pid": the same plus a pid that has exited, charged 3 GiB: every scrape then scans
  every process's descriptors for the GPU's device file (the costly case);
- "off": the same as "exited pid" under `hmn serve --no-ghosts`: the measurement without them.

Prints the medians, the ratios to "off", and each against the 5 s budget of a scrape.

Usage: scripts/bench/ghost_scrape_cost.py [--processes 2000] [--scrapes 30] [--markdown]
Needs a release build (`cargo build --release`) and the fake NVML as scripts/bench/bench.sh
builds it (target/fake-builds/modern)."""
import argparse, os, statistics, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths import FAKE  # noqa: E402  (scripts/lib)
import serve_scale  # noqa: E402  (this folder: the exporter and scenario helpers)

MIB = 1 << 20
BUDGET_S = 5.0


def exited_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=2000)
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(FAKE):
        sys.exit(f"ghost_scrape_cost: no fake NVML at {FAKE} (scripts/bench/bench.sh builds it)")
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(a.processes)]
    exporters = {}
    try:
        rows = [(p.pid, MIB * (1 + i % 97)) for i, p in enumerate(sleepers)]
        with tempfile.TemporaryDirectory() as work:
            os.makedirs(os.path.join(work, "no-sysfs"))
            gone = exited_pid()
            cases = {
                "off": (rows + [(gone, 3 << 30)], ["--no-ghosts"]),
                "no ghost": (rows, []),
                "exited pid": (rows + [(gone, 3 << 30)], []),
            }
            for name, (r, extra) in cases.items():
                exporters[name] = serve_scale.Exporter(
                    FAKE, serve_scale.scenario(1, r), work, name.replace(" ", "-"),
                    "--min-interval", "1ms", *extra)
            times = {n: [] for n in exporters}
            for e in exporters.values():
                e.scrape()  # warm-up
            for _ in range(a.scrapes):
                for n, e in exporters.items():
                    times[n].append(e.scrape()[0])
            _, body = exporters["exited pid"].scrape()
            ghost_line = next((line for line in body.decode().splitlines()
                               if line.startswith("hypomnesis_gpu_ghost_bytes{")
                               and 'class="exited"' in line), "(no exited series)")
    finally:
        for e in exporters.values():
            e.stop()
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
    med = {n: statistics.median(t) * 1000 for n, t in times.items()}
    base = med["off"]
    if a.markdown:
        print(f"{a.processes:,} GPU processes, medians of {a.scrapes} fresh scrapes each.\n")
        print("| case | fresh scrape | against off | share of the 5 s budget |")
        print("|---|---:|---:|---:|")
        for n, m in med.items():
            print(f"| {n} | {m:.1f} ms | {m / base:.2f}x | {m / (BUDGET_S * 1000) * 100:.2f}% |")
    else:
        for n, m in med.items():
            print(f"{n}: median {m:.1f} ms ({m / base:.2f}x off, "
                  f"{m / (BUDGET_S * 1000) * 100:.2f}% of the budget)")
    print(f"\nthe exited pid's series: {ghost_line}")


if __name__ == "__main__":
    main()
