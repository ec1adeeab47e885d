#!/usr/bin/env python3
"""What a fresh `hmn serve` scrape costs beyond its NVML calls, for one or more builds of hmn.

One exporter per build and scenario, every scrape measuring (`--min-interval 1ms`), every process
series kept, and on PATH an `nvidia-smi` that takes MS milliseconds a run (20 by default, what a
real one takes on an idle H200; 0: none on PATH): the fake one replaying a recorded L40S capture
after that pause, through a script that counts its runs. Three scenarios per build, run in turn,
medians of S scrapes each:

- "one GPU": one fake GPU, no process: the measurement alone, where any nvidia-smi run shows;
- "real": 8 fake GPUs each listing the same N processes (1,000 by default: 8,000 GPU process
  rows), real `sleep`s, so a measurement reads who each one is (name, owner, container; the
  build decides how often);
- "NVML alone": the same rows with pids no process has (above `pid_max`), so the measurement
  makes the same NVML calls and reads no process file.

The ratio real / NVML alone is what reading the processes adds. Builds are given as
LABEL=PATH (a release `hmn` each), e.g. a build of the commit before a change and one after.

Usage: scripts/bench/scrape_cost.py LABEL=HMN [LABEL=HMN ...] [--procs N] [--scrapes S]
       [--smi-ms MS] [--markdown | --write]   (--write puts the section into BENCHMARKS.md)
Needs the fake NVML as scripts/bench/bench.sh builds it (target/fake-builds/modern); builds the
fake nvidia-smi (target/fake-builds/smi) when it is not there."""
import argparse, os, shlex, statistics, subprocess, sys, tempfile
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths import FAKE, ROOT, TARGET  # noqa: E402  (scripts/lib)
import benchmarks_md  # noqa: E402  (scripts/lib)
import serve_scale  # noqa: E402  (its Exporter and scenario)

MIB = 1 << 20
#: Above the kernel's largest pid_max (2^22): no process has these.
NOBODY = 4_194_400


CAPTURE = os.path.join(ROOT, "crates", "testkit", "fixtures", "nvidia-smi", "recorded",
                       "linux-x86_64__nvidia-l40s__595.80.txt")


def fake_smi():
    """The fake nvidia-smi, built as the tests build it when it is not there."""
    d = os.path.join(TARGET, "fake-builds", "smi")
    exe = os.path.join(d, "debug", "nvidia-smi")
    if not os.access(exe, os.X_OK):
        subprocess.run(["cargo", "build", "-q", "-p", "fake-nvidia-smi", "--target-dir", d],
                       check=True, cwd=ROOT)
    return exe


def stand_in(work, ms):
    """A folder holding `nvidia-smi`: a script that logs each run to the returned log, then runs
    the fake one, which answers from the L40S capture after `ms` milliseconds."""
    d = os.path.join(work, "smi-bin")
    os.makedirs(d)
    log = os.path.join(work, "smi-runs.log")
    with open(os.path.join(d, "nvidia-smi"), "w") as f:
        f.write(f"#!/bin/sh\necho \"$*\" >> {shlex.quote(log)}\n"
                f"FAKE_SMI_MODE=sleep-ms:{ms} FAKE_SMI_CAPTURE={shlex.quote(CAPTURE)} "
                f"exec {shlex.quote(fake_smi())} \"$@\"\n")
    os.chmod(os.path.join(d, "nvidia-smi"), 0o755)
    return d, log


def runs(log):
    if not log or not os.path.exists(log):
        return 0
    with open(log) as f:
        return sum(1 for _ in f)


def scrapes(hmn, lib, work, name, text, n, log):
    """Medians of `n` fresh scrapes after one warm-up, and the nvidia-smi runs per scrape
    (those of the exporter's whole life, start included, over the n + 1 scrapes)."""
    serve_scale.HMN = hmn
    ran = runs(log)
    e = serve_scale.Exporter(lib, text, work, name, "--min-interval", "1ms",
                             "--max-process-series", "100000")
    try:
        e.scrape()  # warm-up: NVML load, the first reads of who each process is
        took = [e.scrape()[0] for _ in range(n)]
    finally:
        e.stop()
    return statistics.median(took) * 1000, (runs(log) - ran) / (n + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="+", help="LABEL=PATH of a release hmn")
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--smi-ms", type=int, default=20)
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
        one = serve_scale.scenario(1, [])
        with tempfile.TemporaryDirectory(prefix="hmn-scrape-cost-") as work:
            os.makedirs(os.path.join(work, "no-sysfs"))
            log = None
            if a.smi_ms > 0:
                serve_scale.PATH, log = stand_in(work, a.smi_ms)
            for label, path in builds:
                rows[label] = (scrapes(path, lib, work, f"{label}-one", one, a.scrapes, log),
                               scrapes(path, lib, work, f"{label}-real", real, a.scrapes, log),
                               scrapes(path, lib, work, f"{label}-alone", alone, a.scrapes, log))
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
    smi = (f"an `nvidia-smi` on PATH that takes {a.smi_ms} ms a run (the fake one replaying a recorded "
           "L40S capture after that pause; a real one takes ~20 ms on an idle H200, seconds on a cold "
           "host)" if a.smi_ms > 0 else "no `nvidia-smi` on PATH")
    lines = [
        "## A fresh scrape against its NVML calls (measured "
        + subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
        + ")",
        "",
        f"`scripts/bench/scrape_cost.py --smi-ms {a.smi_ms}`: release builds, fake NVML answering, "
        f"{smi}; every scrape measuring, every process series kept; medians of {a.scrapes} scrapes, "
        "all in one run on this 2-core machine. \"One GPU\": one idle GPU, the measurement alone. "
        f"\"Real\": 8 GPUs each listing the same {a.procs:,} processes ({8 * a.procs:,} GPU process "
        "rows), real `sleep`s, whose name, owner and container a measurement reads; \"NVML "
        "alone\": the same rows under pids no process has, so the same NVML calls and no process "
        "file read. \"Against the floor\" divides by the smallest NVML-alone figure of the run. "
        "\"nvidia-smi runs\" counts the stand-in's runs over an exporter's life (its start "
        "included) per scrape, in the one-GPU scenario.",
        "",
        "| build | fresh scrape, one GPU | nvidia-smi runs per scrape | fresh scrape, real "
        "| fresh scrape, NVML alone | ratio | against the floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    floor = min(n for _, _, (n, _) in rows.values())
    for label, ((o, smi_runs), (r, _), (n, _)) in rows.items():
        lines.append(f"| {label} | {o:.2f} ms | {smi_runs:.2f} | {r:.1f} ms | {n:.1f} ms "
                     f"| {r / n:.2f}x | {r / floor:.2f}x |")
    text = "\n".join(lines) + "\n"
    if a.write:
        benchmarks_md.write_section("## A fresh scrape against its NVML calls", text + "\n")
    print(text)


if __name__ == "__main__":
    main()
