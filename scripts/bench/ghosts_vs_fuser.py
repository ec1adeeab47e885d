#!/usr/bin/env python3
"""`hmn ghosts` beside `fuser -v` on the same host in one run: how long it takes to find who holds
a GPU's device file, against the tool people reach for.

The host is a GPU node as `hmn` reads one, stood in by a private mount namespace (root only,
the script enters one itself): `/proc/devices` names major 1 NVIDIA's `nvidia-frontend`, the
driver's information file gives GPU 0 minor 7, and `/dev/nvidia0` (a tmpfs `/dev`) is the
character device 1:7, which `hmn` tells by its device number and `fuser` by its inode.

N real `sleep` processes run (2,000 by default), each with a few descriptors; K of them (10)
hold that device node. `hmn ghosts --json` runs against the fake NVML with
a scenario whose only process is a pid that has exited (a reaped child), so it scans every
process's descriptors, as it does when it has something to explain; `fuser -v FILE` looks for
the holders of that file. The two run in turn, R times each (7) after one warm-up, and each
run's wall time is taken around the whole command (hmn's includes loading the fake NVML and
reading the GPU's figures); the medians and the median of the pairwise ratios are printed, with
the scan's own time as `hmn` reports it (`holder_scan.elapsed_seconds`).

With --fds N each sleeper also holds N more descriptors (of /dev/null), for a host with many
(10,000 processes with 100 each: a million); a scan that does not complete is reported as such
(how many processes it reached), not as a failure.

Usage: scripts/bench/ghosts_vs_fuser.py [--processes 2000] [--holders 10] [--runs 7] [--fds 0]
         [--hmn PATH] [--fake PATH] [--markdown]

Needs `fuser` (Debian's psmisc) and a release build of hmn and the fake NVML
(`cargo build --release -p hypomnesis-cli -p fake-nvml`)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import TARGET  # noqa: E402  (scripts/lib)

MIB = 1 << 20


def die(msg):
    sys.exit(f"ghosts_vs_fuser: {msg}")


UUID = "GPU-fa4e0000-0000-4000-8000-000000000000"


def stand_in_node():
    """Enter a private mount namespace made a GPU node's (see the module docs): the script runs
    again there, with HMN_NODE_STANDIN set; this call does not return."""
    if os.environ.get("HMN_NODE_STANDIN") == "1":
        return
    if os.geteuid() != 0:
        die("the GPU node stand-in needs root (mounts in a private mount namespace)")
    setup = f"""set -e
mount --make-rprivate /
node=$(mktemp -d)
printf 'Character devices:\\n  1 nvidia-frontend\\n' > "$node/devices"
mount --bind "$node/devices" /proc/devices
mount -t tmpfs hmn-driver /proc/driver
mkdir -p /proc/driver/nvidia/gpus/0000:01:00.0
printf 'GPU UUID: \\t {UUID}\\nBus Location: \\t 0000:01:00.0\\nDevice Minor: \\t 7\\n' > /proc/driver/nvidia/gpus/0000:01:00.0/information
mount -t tmpfs hmn-dev /dev
mknod -m 666 /dev/nvidia0 c 1 7
mknod -m 666 /dev/null c 1 3
exec "$@"
"""
    env = dict(os.environ, HMN_NODE_STANDIN="1")
    argv = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
    os.execvpe("unshare", ["unshare", "--mount", "sh", "-c", setup, "sh"] + argv, env)


def timed(cmd, env=None):
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=2000)
    p.add_argument("--holders", type=int, default=10)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--fds", type=int, default=0)
    p.add_argument("--hmn", default=os.path.join(TARGET, "release", "hmn"))
    p.add_argument("--fake", default=os.path.join(TARGET, "release", "libnvidia_ml.so"))
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args()
    fuser = shutil.which("fuser")
    if not fuser:
        die("fuser is missing: apt-get install -y psmisc")
    for path, what in ((a.hmn, "hmn"), (a.fake, "the fake NVML")):
        if not os.path.isfile(path):
            die(f"{path} ({what}) is missing: cargo build --release -p hypomnesis-cli -p fake-nvml")
    stand_in_node()
    work = tempfile.mkdtemp(prefix="ghosts-vs-fuser-")
    node = "/dev/nvidia0"
    sleepers = []
    extra = [os.open(os.devnull, os.O_RDONLY) for _ in range(a.fds)]
    try:
        for i in range(a.processes):
            stdin = open(node) if i < a.holders else subprocess.DEVNULL
            sleepers.append(subprocess.Popen(["sleep", "3600"], stdin=stdin, pass_fds=extra,
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            if stdin is not subprocess.DEVNULL:
                stdin.close()
        gone = subprocess.Popen(["true"])
        gone.wait()
        scenario = os.path.join(work, "scenario.json")
        total, reserved, used = 143771 * MIB, 614 * MIB, 2048 * MIB
        with open(scenario, "w") as f:
            json.dump({"devices": [{"name": "NVIDIA H200", "uuid": UUID, "total": total,
                                    "reserved": reserved,
                                    "free": total - reserved - used,
                                    "compute_processes": [{"pid": gone.pid, "used": used}]}]}, f)
        env = dict(os.environ, HYPOMNESIS_NVML_LIBRARY=a.fake, FAKE_NVML_SCENARIO=scenario,
                   HYPOMNESIS_SYSFS=work)
        hmn_cmd = [a.hmn, "ghosts", "--json"]
        fuser_cmd = [fuser, "-v", node]
        timed(hmn_cmd, env)
        timed(fuser_cmd)
        hmn_t, fuser_t, scans, ratios = [], [], [], []
        for _ in range(a.runs):
            th, out = timed(hmn_cmd, env)
            if out.returncode != 1:
                die(f"hmn ghosts exited {out.returncode}: {out.stderr}")
            report = json.loads(out.stdout)
            scan = report["holder_scan"]
            if not scan or (not scan["complete"] and not a.fds):
                die(f"the scan did not complete: {scan}")
            tf, fout = timed(fuser_cmd)
            if fout.returncode != 0:
                die(f"fuser exited {fout.returncode}: {fout.stderr}")
            hmn_t.append(th)
            fuser_t.append(tf)
            scans.append(scan["elapsed_seconds"])
            ratios.append(th / tf)
        procs = report["holder_scan"]["processes"]
        fds = report["holder_scan"]["descriptors"]
        complete = report["holder_scan"]["complete"]
    finally:
        for fd in extra:
            os.close(fd)
        for s in sleepers:
            s.kill()
        for s in sleepers:
            s.wait()
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    ms = lambda s: f"{s * 1000:.1f} ms"  # noqa: E731
    lines = [
        f"`scripts/bench/ghosts_vs_fuser.py --processes {a.processes} --holders {a.holders} "
        f"--runs {a.runs}{f' --fds {a.fds}' if a.fds else ''}` ({time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}): {procs} processes and {fds} "
        f"descriptors scanned{'' if complete else ', and the scan did not complete'}.",
        "",
        "| command | wall, median (min–max) |",
        "|---|---:|",
        f"| `hmn ghosts --json` (whole command) | {ms(med(hmn_t))} ({ms(min(hmn_t))}–{ms(max(hmn_t))}) |",
        f"| its descriptor scan (`holder_scan.elapsed_seconds`) | {ms(med(scans))} ({ms(min(scans))}–{ms(max(scans))}) |",
        f"| `fuser -v FILE` | {ms(med(fuser_t))} ({ms(min(fuser_t))}–{ms(max(fuser_t))}) |",
        "",
        f"`hmn ghosts` / `fuser`, median of the {a.runs} pairs: {med(ratios):.2f}x.",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
