#!/usr/bin/env python3
"""CPU time of `hmn run --interval 100ms -- sleep 10` with 100, 3,000 and 10,000 processes on the
host (real `sleep` processes fill it up), for one or more hmn binaries measured in the same run.
Usage: scripts/bench/run_cost.py HMN [HMN…]   (prints one row per host size, CPU seconds per binary)"""
import os, subprocess, sys

SIZES = (100, 3000, 10000)


def host_processes():
    return sum(1 for n in os.listdir("/proc") if n.isdigit())


def cpu_of(hmn):
    p = subprocess.Popen([hmn, "run", "--interval", "100ms", "--", "sleep", "10"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime


def main():
    binaries = sys.argv[1:]
    if not binaries:
        sys.exit(__doc__)
    sleepers = []
    print("| host processes | " + " | ".join(f"`{b}` CPU s" for b in binaries) + " |")
    print("|---:|" + "---:|" * len(binaries))
    try:
        for n in SIZES:
            while host_processes() < n:
                sleepers.append(subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL))
            counted = host_processes()
            print(f"| {counted:,} | " + " | ".join(f"{cpu_of(b):.2f}" for b in binaries) + " |", flush=True)
    finally:
        for s in sleepers:
            s.kill()
        for s in sleepers:
            s.wait()


if __name__ == "__main__":
    main()
