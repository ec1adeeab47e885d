#!/usr/bin/env python3
"""The cost of `hmn top`: with N real processes listed by the fake NVML as GPU processes (2,000 by
default) on top of the host's own, `hmn top --interval 1s` runs in a tmux terminal; its CPU time
over a minute (after a warm-up) is reported as a share of one core, and its resident set is sampled
for the memory run's length to show whether it stays flat.

Usage: scripts/bench/top_cost.py [--procs N] [--cpu-seconds S] [--minutes M] [--markdown | --write]
  --write puts the section into BENCHMARKS.md (replacing the one there; scripts/bench/bench.sh keeps it).
Needs tmux and a release build (`cargo build --release`), and the fake NVML built as
scripts/bench/bench.sh builds it (target/fake-builds/modern)."""
import argparse, os, shutil, subprocess, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import ROOT, TARGET, FAKE  # noqa: E402  (scripts/lib)
import benchmarks_md  # noqa: E402  (scripts/lib)
from procstat import status_kib as rss_kib  # noqa: E402


HMN = os.path.join(TARGET, "release", "hmn")
MIB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / TICKS


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=2000)
    ap.add_argument("--cpu-seconds", type=int, default=60)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    for need in (HMN, FAKE):
        if not os.path.exists(need):
            sys.exit(f"top_cost: {need} is missing (cargo build --release; scripts/bench/bench.sh --only-ps builds the fake)")
    if not shutil.which("tmux"):
        sys.exit("top_cost: tmux is needed")
    # A private copy of the fake: a build that rewrites the shared one while this runs would crash it.
    lib = f"/tmp/hmn-top-cost-{os.getpid()}.so"
    shutil.copy(FAKE, lib)
    sleepers = [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL) for _ in range(a.procs)]
    socket = f"hmn-top-cost-{os.getpid()}"
    try:
        rows = ",".join(f'{{"pid": {p.pid}, "used": {MIB * (1 + i % 50)}}}' for i, p in enumerate(sleepers))
        used = sum(MIB * (1 + i % 50) for i in range(a.procs))
        scenario = f"/tmp/hmn-top-cost-{os.getpid()}.json"
        with open(scenario, "w") as f:
            f.write(f'{{"devices": [{{"name": "NVIDIA H200", "total": {143771 * MIB}, "reserved": {614 * MIB}, '
                    f'"free": {143771 * MIB - 614 * MIB - used}, "compute_processes": [{rows}]}}]}}')
        empty = os.path.join(TARGET, "hmn-bench-empty-sysfs")
        os.makedirs(empty, exist_ok=True)
        subprocess.run(["tmux", "-L", socket, "-f", "/dev/null", "new-session", "-d", "-s", "cost", "-x", "120",
                        "-y", "40", "env", f"HYPOMNESIS_NVML_LIBRARY={lib}", f"FAKE_NVML_SCENARIO={scenario}",
                        f"HYPOMNESIS_SYSFS={empty}", "TERM=xterm-256color", HMN, "top", "--interval", "1s"],
                       check=True)
        pid = int(subprocess.run(["tmux", "-L", socket, "display", "-p", "-t", "cost", "#{pane_pid}"],
                                 check=True, capture_output=True, text=True).stdout)
        time.sleep(10)  # warm-up: the first refreshes, the fake's load
        screen = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "cost"],
                                capture_output=True, text=True).stdout
        if f"{a.procs} processes" not in screen:
            sys.exit(f"top_cost: hmn top does not show the {a.procs} processes:\n{screen}")
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(a.cpu_seconds)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        share = (c1 - c0) / (t1 - t0) * 100
        rss = [(0.0, rss_kib(pid))]
        start = time.monotonic()
        while time.monotonic() - start < a.minutes * 60:
            time.sleep(min(30, a.minutes * 60))
            rss.append(((time.monotonic() - start) / 60, rss_kib(pid)))
        lines = [
            f"## `hmn top` with {a.procs:,} GPU processes (measured {time.strftime('%Y-%m-%d', time.gmtime())})\n",
            f"`scripts/bench/top_cost.py`: {a.procs:,} real `sleep` processes listed by the fake NVML as GPU processes, "
            "on top of the host's own; `hmn top --interval 1s` in a 120x40 tmux terminal, default view "
            "(sorted by GPU memory, so a refresh reads the contexts of the rows on screen only).\n",
            "| what | figure |\n|---|---:|",
            f"| CPU over {a.cpu_seconds} s, after a 10 s warm-up | {c1 - c0:.2f} CPU s = {share:.2f}% of one core |",
            f"| RSS at the start of the memory run | {rss[0][1] / 1024:.1f} MiB |",
            f"| RSS after {rss[-1][0]:.1f} min | {rss[-1][1] / 1024:.1f} MiB |",
            f"| largest RSS seen (every 30 s) | {max(r for _, r in rss) / 1024:.1f} MiB |",
            "",
        ]
        if a.write:
            benchmarks_md.write_section('## `hmn top` with', "\n".join(lines) + "\n")
        print("\n".join(lines) if a.markdown or a.write else "\n".join(lines[3:]))
        if not (a.markdown or a.write):
            print("RSS samples (min, KiB):", rss)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
        os.remove(lib)
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()



if __name__ == "__main__":
    main()
