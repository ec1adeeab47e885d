#!/usr/bin/env python3
"""What a fresh `hmn serve` scrape costs beyond its NVML calls, for one or more builds of hmn.

One exporter per build and scenario, 8 fake GPUs each listing the same N processes (1,000 by
default: 8,000 GPU process rows), every scrape measuring (`--min-interval 1ms`), every process
series kept. Two scenarios per build, run alternately, medians of S scrapes each:

- "real": the N processes are real `sleep`s, so a measurement reads who each one is (name,
  owner, container; the build decides how often);
- "NVML alone": the same rows with pids no process has (above `pid_max`), so the measurement
  makes the same NVML calls and reads no process file.

The ratio real / NVML alone is what reading the processes adds. Builds are given as
LABEL=PATH (a release `hmn` each), e.g. a build of the commit before a change and one after.

Usage: scripts/bench/scrape_cost.py LABEL=HMN [LABEL=HMN ...] [--procs N] [--scrapes S]
       [--markdown | --write]   (--write puts the section into BENCHMARKS.md)
Needs the fake NVML as scripts/bench/bench.sh builds it (target/fake-builds/modern)."""
import argparse, os, statistics, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths import FAKE  # noqa: E402  (scripts/lib)
import benchmarks_md  # noqa: E402  (scripts/lib)
import serve_scale  # noqa: E402  (its Exporter and scenario)

MIB = 1 << 20
#: Above the kernel's largest pid_max (2^22): no process has these.
NOBODY = 4_194_400


def scrapes(hmn, lib, work, name, text, n):
    serve_scale.HMN = hmn
    e = serve_scale.Exporter(lib, text, work, name, "--min-interval", "1ms",
                             "--max-process-series", "100000")
    try:
        e.scrape()  # warm-up: NVML load, the first reads of who each process is
        return [e.scrape()[0] for _ in range(n)]
    finally:
        e.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="+", help="LABEL=PATH of a release hmn")
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.builds]
    for label, path in builds:
        if not os.access(path, os.X_OK):
            sys.exit(f"scrape_cost: {label}: {path} is not an executable")
    lib = FAKE
    sleepers = [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
                for _ in range(a.procs)]
    rows = {}
    try:
        pids = [p.pid for p in sleepers]
        used = [MIB * (1 + i % 97) for i in range(a.procs)]
        real = serve_scale.scenario(8, list(zip(pids, used)))
        alone = serve_scale.scenario(8, [(NOBODY + i, u) for i, u in enumerate(used)])
        with tempfile.TemporaryDirectory(prefix="hmn-scrape-cost-") as work:
            os.makedirs(os.path.join(work, "no-sysfs"))
            for label, path in builds:
                r = scrapes(path, lib, work, f"{label}-real", real, a.scrapes)
                n = scrapes(path, lib, work, f"{label}-alone", alone, a.scrapes)
                rows[label] = (statistics.median(r) * 1000, statistics.median(n) * 1000)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
    lines = [
        "## A fresh scrape against its NVML calls (measured "
        + subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
        + ")",
        "",
        f"`scripts/bench/scrape_cost.py`: release builds, fake NVML, 8 GPUs each listing the same "
        f"{a.procs:,} processes ({8 * a.procs:,} GPU process rows), every scrape measuring, every "
        f"process series kept; medians of {a.scrapes} scrapes, all in one run on this 2-core "
        "machine. \"Real\": the processes are real `sleep`s, whose name, owner and container a "
        "measurement reads; \"NVML alone\": the same rows under pids no process has, so the same "
        "NVML calls and no process file read (by a build that reads nothing for a pid it cannot "
        "see; an older build still tries each row's files, which fail at once). \"Against the "
        "floor\" divides by the smallest NVML-alone figure of the run: the measurement and "
        "exposition without any process read.",
        "",
        "| build | fresh scrape, real | fresh scrape, NVML alone | ratio | against the floor |",
        "|---|---:|---:|---:|---:|",
    ]
    floor = min(n for _, n in rows.values())
    for label, (r, n) in rows.items():
        lines.append(f"| {label} | {r:.1f} ms | {n:.1f} ms | {r / n:.2f}x | {r / floor:.2f}x |")
    text = "\n".join(lines) + "\n"
    if a.write:
        benchmarks_md.write_section("## A fresh scrape against its NVML calls", text + "\n")
    print(text)


if __name__ == "__main__":
    main()
