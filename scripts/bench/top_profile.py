#!/usr/bin/env python3
"""Where one refresh of `hmn top` goes: with N real `sleep` processes listed by the fake NVML as
GPU processes (20 by default), `hmn top --interval 1s` runs in a 160x45 tmux terminal as
scripts/bench/top_vs_peers.py runs it; after a settling time this attaches strace to it and
reports, per refresh (per second of the window):

  * the system calls, by name (`strace -c -f`);
  * every file opened, by path pattern (pids replaced by N), and how many times;
  * the bytes written to the terminal and in how many writes;
  * the NVML calls, by function (from the fake's FAKE_NVML_CALL_LOG).

Usage: scripts/bench/top_profile.py [--procs 20] [--seconds 30] [--hmn PATH] [--fake PATH]
Needs tmux, strace (apt-get install -y strace) and the builds top_vs_peers.py needs. strace slows
the traced process down, so its CPU time here is no measure of cost: top_vs_peers.py measures that.
With --perf, `perf record` samples the process too (no strace then) and the top of
`perf report` is printed."""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import top_vs_peers as peers  # noqa: E402  (scripts/bench)


def calls_of(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                name, n = line.split()
                out[name] = int(n)
    except OSError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--settle", type=float, default=5)
    ap.add_argument("--hmn")
    ap.add_argument("--fake")
    ap.add_argument("--perf", action="store_true", help="sample with perf instead of strace")
    a = ap.parse_args()
    tracer = "perf" if a.perf else "strace"
    if not shutil.which(tracer):
        peers.die(f"{tracer} is needed (apt-get install -y {'linux-perf' if a.perf else 'strace'})")
    a.tools, a.nvtop, a.nvitop = ["hmn"], None, None
    hmn = peers.find_tools(a)["hmn"]
    fake = peers.fake_library(a)
    work = tempfile.mkdtemp(prefix="top-profile-")
    lib_dir = os.path.join(work, "lib")
    os.makedirs(lib_dir)
    shutil.copy(fake, os.path.join(lib_dir, "fake-nvml.so"))
    os.symlink("fake-nvml.so", os.path.join(lib_dir, "libnvidia-ml.so.1"))
    empty = os.path.join(work, "empty-sysfs")
    os.makedirs(empty)
    sleepers = [subprocess.Popen(["sleep", "86400"], stdin=subprocess.DEVNULL) for _ in range(a.procs)]
    socket = f"top-profile-{os.getpid()}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    calls = os.path.join(work, "calls")
    try:
        scenario = os.path.join(work, "scenario.json")
        peers.scenario_for([p.pid for p in sleepers], scenario)
        subprocess.run(tmux + ["new-session", "-d", "-s", "p", "-x", "160", "-y", "45", "env",
                               f"HYPOMNESIS_NVML_LIBRARY={lib_dir}/libnvidia-ml.so.1",
                               f"FAKE_NVML_SCENARIO={scenario}", f"FAKE_NVML_CALL_LOG={calls}",
                               f"HYPOMNESIS_SYSFS={empty}", "TERM=xterm-256color",
                               *peers.command("hmn", hmn)], check=True)
        pid = int(peers.run(tmux + ["display", "-p", "-t", "p", "#{pane_pid}"], check=True).stdout)
        time.sleep(a.settle)
        if a.perf:
            data = os.path.join(work, "perf.data")
            subprocess.run(["perf", "record", "-q", "-F", "4999", "-g", "-o", data, "-p", str(pid),
                            "--", "sleep", str(a.seconds)], check=True)
            for sort in ("dso", "sym"):
                rep = peers.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                                 "--sort", sort, "-g", "none", "--percent-limit", "1"]).stdout
                print("\n".join(line for line in rep.splitlines() if line and not line.startswith("#")))
            return
        c0 = calls_of(calls)
        summary = os.path.join(work, "summary")
        trace = os.path.join(work, "trace")
        # Two passes: counts alone (cheaper), then every call with its arguments.
        subprocess.run(["timeout", "-s", "INT", str(a.seconds), "strace", "-c", "-f", "-o", summary,
                        "-p", str(pid)], capture_output=True)
        c1 = calls_of(calls)
        subprocess.run(["timeout", "-s", "INT", str(a.seconds), "strace", "-f", "-s", "0", "-o", trace,
                        "-e", "trace=openat,open,write,read,pread64,readv,writev,statx,newfstatat,"
                              "readlink,getdents64", "-p", str(pid)], capture_output=True)
        per = 1.0 / a.seconds
        print(f"hmn top, {a.procs} GPU processes, {a.seconds} s (about {a.seconds} refreshes)\n")
        print("system calls per refresh (strace -c -f):")
        with open(summary) as f:
            for line in f:
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
                if m:
                    print(f"  {int(m.group(1)) * per:8.1f}  {m.group(2)}")
        opened = collections.Counter()
        writes = collections.Counter()
        written = collections.Counter()
        with open(trace) as f:
            for line in f:
                m = re.search(r'openat\(\w+, "([^"]*)".*= (\d+)', line)
                if m:
                    path = re.sub(r"/\d+(?=/|$)", "/N", m.group(1))
                    opened[path] += 1
                    continue
                m = re.match(r"\d+\s+write\((\d+), .*= (\d+)", line)
                if m:
                    writes[m.group(1)] += 1
                    written[m.group(1)] += int(m.group(2))
        print("\nfiles opened per refresh (pids as N):")
        for path, n in opened.most_common():
            print(f"  {n * per:8.1f}  {path}")
        print("\nwrites per refresh, by file descriptor (1 = the terminal):")
        for fd, n in writes.most_common():
            print(f"  fd {fd}: {n * per:.1f} writes, {written[fd] * per:.0f} bytes")
        print("\nNVML calls per refresh (fake's call log):")
        for name in sorted(c1):
            d = c1[name] - c0.get(name, 0)
            if d:
                print(f"  {d * per:8.2f}  {name}")
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
