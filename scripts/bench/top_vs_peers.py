#!/usr/bin/env python3
"""`hmn top` beside nvtop and nvitop: each runs alone in its own 160x45 tmux terminal with a 1 s
refresh, against the same fake NVML listing N real `sleep` processes as GPU processes (20 and
2,000 by default); once its screen shows them and a settling time has passed, its CPU time over a window is taken from /proc (user +
system, of the tool's process and any children it has or has reaped) as a share of one core, and
its resident set (VmRSS, children included) at the window's end. The tools run one after another,
never together, so they do not disturb each other; the same sleepers and scenario serve every tool
of one size.

Usage: scripts/bench/top_vs_peers.py [--sizes 20,2000] [--cpu-seconds 60] [--settle 5] [--startup-timeout 180]
         [--tools hmn,nvtop,nvitop] [--hmn PATH] [--nvtop PATH] [--nvitop PATH] [--fake PATH]
         [--screens DIR] [--markdown | --write]
  --write puts the section into BENCHMARKS.md (replacing the one there).

What it needs (it stops, naming what is missing, when one of the chosen tools is not there):
  * tmux;
  * `hmn`: a release build, `cargo build --release -p hypomnesis-cli` (<target>/release/hmn);
  * nvtop: Debian's package, which is in the `contrib` component (bookworm: nvtop 3.0.1):
    add `contrib` to the apt sources, then `apt-get install -y nvtop`;
  * nvitop (PyPI, with nvidia-ml-py): `python3 -m venv <target>/bench-venv &&
    <target>/bench-venv/bin/pip install nvitop` (found there, else on PATH);
  * the fake NVML: built here in release (`cargo build --release -p fake-nvml`) unless --fake
    names one.

How each tool meets the fake: a private directory holds a copy of the fake with the names
`libnvidia-ml.so.1` and `libnvidia-ml.so` pointing at it. nvtop dlopens `libnvidia-ml.so` (then
`.so.1`) and nvitop's pynvml loads `libnvidia-ml.so.1`, both through LD_LIBRARY_PATH; `hmn` is
given the file by HYPOMNESIS_NVML_LIBRARY. Neither peer needs /dev/nvidia* or
/proc/driver/nvidia to start: nvtop needs every symbol it looks up at start (it gives up on NVIDIA
when one is missing), nvitop none in particular; the fake answers what a scenario has no figures
for (clocks, temperatures, fans, power, PCIe link, encoder and decoder) with NOT_SUPPORTED, so
both show "N/A" there, as on a board without those sensors. `hmn`'s DRM probe is pointed at an
empty sysfs (as scripts/bench/top_cost.py does). The fake also writes how many NVML calls each
tool made (FAKE_NVML_CALL_LOG), reported as calls per second."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import ROOT, TARGET  # noqa: E402  (scripts/lib)
import benchmarks_md  # noqa: E402  (scripts/lib)

MIB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")
HEADING = "## `hmn top`, nvtop and nvitop side by side"
TOOLS = ("hmn", "nvtop", "nvitop")


def die(msg):
    sys.exit(f"top_vs_peers: {msg}")


def stat_fields(pid):
    """The fields of /proc/<pid>/stat after the command name (field 3 on), or None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def tree(pid):
    """`pid` and its live descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = stat_fields(entry)
            if fields:
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid):
    """User + system time of `pid` (all its threads), of the children it has reaped, and of its
    live descendants."""
    total = 0
    for p in tree(pid):
        fields = stat_fields(p)
        if fields:
            total += int(fields[11]) + int(fields[12])
            if p == pid:
                total += int(fields[13]) + int(fields[14])
    return total / TICKS


def sched_seconds(pid):
    """Time on a CPU of every thread of `pid` and its live descendants, from schedstat (in
    nanoseconds, so finer than the 10 ms ticks of `stat` at these small shares)."""
    total = 0
    for p in tree(pid):
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    return total / 1e9


def rss_kib(pid):
    """VmRSS of `pid` and its live descendants."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def nvml_calls(path):
    """The total of the fake's call log, or None when it has not been written."""
    try:
        with open(path) as f:
            return sum(int(line.split()[1]) for line in f if line.strip())
    except (OSError, ValueError, IndexError):
        return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def version(cmd):
    try:
        out = run(cmd, timeout=30)
    except OSError:
        return "?"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0].strip() if text else "?"


def find_tools(a):
    """Paths of the chosen tools; stops naming the first that is missing."""
    found = {}
    if not shutil.which("tmux"):
        die("tmux is needed (apt-get install -y tmux)")
    if "hmn" in a.tools:
        found["hmn"] = a.hmn or os.path.join(TARGET, "release", "hmn")
        if not os.access(found["hmn"], os.X_OK):
            die(f"{found['hmn']} is missing: cargo build --release -p hypomnesis-cli (or --hmn PATH)")
    if "nvtop" in a.tools:
        found["nvtop"] = a.nvtop or shutil.which("nvtop")
        if not found["nvtop"]:
            die("nvtop is missing: add Debian's `contrib` component to the apt sources, then "
                "apt-get install -y nvtop (or --nvtop PATH, or leave it out of --tools)")
    if "nvitop" in a.tools:
        venv = os.path.join(TARGET, "bench-venv", "bin", "nvitop")
        found["nvitop"] = a.nvitop or (venv if os.access(venv, os.X_OK) else shutil.which("nvitop"))
        if not found["nvitop"]:
            die(f"nvitop is missing: python3 -m venv {os.path.dirname(os.path.dirname(venv))} && "
                f"{os.path.dirname(venv)}/pip install nvitop (or --nvitop PATH)")
    return found


def versions(tools):
    out = {}
    if "hmn" in tools:
        out["hmn"] = version([tools["hmn"], "--version"])
    if "nvtop" in tools:
        out["nvtop"] = version([tools["nvtop"], "--version"])
    if "nvitop" in tools:
        v = version([tools["nvitop"], "--version"])
        py = os.path.join(os.path.dirname(tools["nvitop"]), "python")
        if os.access(py, os.X_OK):
            ml = version([py, "-c", "import importlib.metadata as m; print(m.version('nvidia-ml-py'))"])
            v += f", nvidia-ml-py {ml}"
        out["nvitop"] = v
    out["tmux"] = version(["tmux", "-V"])
    return out


def fake_library(a):
    if a.fake:
        if not os.path.isfile(a.fake):
            die(f"--fake {a.fake} is not a file")
        return a.fake
    if not shutil.which("cargo"):
        die("cargo is needed to build the fake NVML (or give --fake PATH)")
    d = os.path.join(TARGET, "fake-builds", "bench-release")
    subprocess.run(["cargo", "build", "-q", "--release", "-p", "fake-nvml", "--target-dir", d],
                   check=True, cwd=ROOT)
    return os.path.join(d, "release", "libnvidia_ml.so")


def command(tool, path):
    """The tool's command line for a 1 s refresh."""
    if tool == "hmn":
        return [path, "top", "--interval", "1s"]
    if tool == "nvtop":
        return [path, "-d", "10"]  # tenths of a second
    return [path, "-m", "full", "--interval", "1"]


def shows_a_sleeper(screen, pids):
    shown = set(re.findall(r"\b\d+\b", screen))
    return any(str(p) in shown for p in pids)


def measure(tool, path, lib_dir, scenario, pids, a, work):
    """Runs one tool alone; returns its figures."""
    socket = f"top-vs-peers-{os.getpid()}-{tool}"
    calls = os.path.join(work, f"{tool}-{len(pids)}.calls")
    empty = os.path.join(work, "empty-sysfs")
    os.makedirs(empty, exist_ok=True)
    env = ["env", f"LD_LIBRARY_PATH={lib_dir}", f"FAKE_NVML_SCENARIO={scenario}",
           f"FAKE_NVML_CALL_LOG={calls}", "TERM=xterm-256color"]
    if tool == "hmn":
        env += [f"HYPOMNESIS_NVML_LIBRARY={os.path.join(lib_dir, 'libnvidia-ml.so.1')}",
                f"HYPOMNESIS_SYSFS={empty}"]
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    try:
        subprocess.run(tmux + ["new-session", "-d", "-s", "bench", "-x", "160", "-y", "45"]
                       + env + command(tool, path), check=True)
        started = time.monotonic()
        pid = int(run(tmux + ["display", "-p", "-t", "bench", "#{pane_pid}"], check=True).stdout)
        # The first screen with the processes can take a while (nvitop gathers 2,000 processes'
        # status first): wait for it, then settle.
        while True:
            screen = run(tmux + ["capture-pane", "-p", "-t", "bench"]).stdout
            if stat_fields(pid) is None:
                die(f"{tool} exited before showing the GPU processes; its screen:\n{screen}")
            if shows_a_sleeper(screen, pids):
                break
            if time.monotonic() - started > a.startup_timeout:
                die(f"{tool} does not show the GPU processes after {a.startup_timeout:g} s; "
                    f"its screen:\n{screen}")
            time.sleep(0.25)
        first_rows = time.monotonic() - started
        time.sleep(a.settle)
        if a.screens:
            os.makedirs(a.screens, exist_ok=True)
            with open(os.path.join(a.screens, f"{tool}-{len(pids)}.txt"), "w") as f:
                f.write(run(tmux + ["capture-pane", "-p", "-t", "bench"]).stdout)
        n0, s0, c0, t0 = nvml_calls(calls), sched_seconds(pid), cpu_seconds(pid), time.monotonic()
        rss = []
        while time.monotonic() - t0 < a.cpu_seconds:
            time.sleep(min(5, max(0.0, a.cpu_seconds - (time.monotonic() - t0))))
            rss.append(rss_kib(pid))
        c1, t1, s1, n1 = cpu_seconds(pid), time.monotonic(), sched_seconds(pid), nvml_calls(calls)
        if stat_fields(pid) is None:
            die(f"{tool} exited during the measurement")
        return {
            "first_rows_s": first_rows,
            "cpu_pct": (c1 - c0) / (t1 - t0) * 100,
            "cpu_s": c1 - c0,
            "sched_pct": (s1 - s0) / (t1 - t0) * 100,
            "rss_mib": rss[-1] / 1024,
            "rss_max_mib": max(rss) / 1024,
            "nvml_per_s": (n1 - n0) / (t1 - t0) if n0 is not None and n1 is not None else None,
        }
    finally:
        run(tmux + ["kill-server"])


def scenario_for(pids, path):
    rows = [{"pid": p, "used": MIB * (1 + i % 50)} for i, p in enumerate(pids)]
    used = sum(r["used"] for r in rows)
    total, reserved = 143771 * MIB, 614 * MIB
    with open(path, "w") as f:
        json.dump({"devices": [{"name": "NVIDIA H200", "total": total, "reserved": reserved,
                                "free": total - reserved - used, "compute_processes": rows}]}, f)


def table(results, sizes, tools):
    lines = ["| GPU processes | tool | CPU, % of one core | (by schedstat) | RSS at the end (largest) | "
             "CPU vs nvtop (schedstat) | RSS vs nvtop | NVML calls/s | first rows after |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for n in sizes:
        base = results.get((n, "nvtop"))
        for tool in tools:
            r = results[(n, tool)]
            if base and tool != "nvtop":
                # From schedstat's nanoseconds: a tool at 20 processes takes a few 10 ms ticks
                # in a window, too few for a ratio (4 ticks against 2 read as 2x).
                ratio = f"{r['sched_pct'] / base['sched_pct']:.2f}x" if base["sched_pct"] > 0 else "n/a (nvtop 0)"
                drss = f"{r['rss_mib'] - base['rss_mib']:+.1f} MiB"
            else:
                ratio = drss = "—"
            calls = f"{r['nvml_per_s']:.1f}" if r["nvml_per_s"] is not None else "?"
            label = {"hmn": "`hmn top`"}.get(tool, tool)
            lines.append(f"| {n:,} | {label} | {r['cpu_pct']:.2f}% | {r['sched_pct']:.3f}% | {r['rss_mib']:.1f} MiB "
                         f"({r['rss_max_mib']:.1f}) | {ratio} | {drss} | {calls} | {r['first_rows_s']:.1f} s |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20,2000", help="GPU process counts, comma-separated")
    ap.add_argument("--cpu-seconds", type=int, default=60, help="measuring window per tool and size")
    ap.add_argument("--settle", type=float, default=5,
                    help="seconds after the processes first show before measuring")
    ap.add_argument("--startup-timeout", type=float, default=180,
                    help="seconds a tool may take to show the processes at all")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--hmn")
    ap.add_argument("--nvtop")
    ap.add_argument("--nvitop")
    ap.add_argument("--fake", help="the fake NVML .so (default: build it in release)")
    ap.add_argument("--screens", help="directory to keep each tool's screen after settling")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    try:
        sizes = [int(s.replace("_", "")) for s in a.sizes.split(",") if s.strip()]
    except ValueError:
        die(f"--sizes {a.sizes!r}: give counts such as 20,2000")
    a.tools = [t.strip() for t in a.tools.split(",") if t.strip()]
    for t in a.tools:
        if t not in TOOLS:
            die(f"unknown tool {t!r}; choose from {', '.join(TOOLS)}")
    if not sizes or any(n < 1 for n in sizes) or a.cpu_seconds < 1:
        die("sizes and --cpu-seconds must be positive")
    tools = find_tools(a)
    vers = versions(tools)
    fake = fake_library(a)
    work = tempfile.mkdtemp(prefix="top-vs-peers-")
    lib_dir = os.path.join(work, "lib")
    os.makedirs(lib_dir)
    # A private copy: a build that rewrites the fake while this runs would crash the tools.
    shutil.copy(fake, os.path.join(lib_dir, "fake-nvml.so"))
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so"):
        os.symlink("fake-nvml.so", os.path.join(lib_dir, name))
    results = {}
    load = [os.getloadavg()[0]]
    try:
        for n in sizes:
            sleepers = [subprocess.Popen(["sleep", "86400"], stdin=subprocess.DEVNULL) for _ in range(n)]
            try:
                scenario = os.path.join(work, f"scenario-{n}.json")
                scenario_for([p.pid for p in sleepers], scenario)
                for tool in a.tools:
                    r = measure(tool, tools[tool], lib_dir, scenario, [p.pid for p in sleepers], a, work)
                    results[(n, tool)] = r
                    print(f"{n:>6} {tool:>7}: {r['cpu_pct']:.2f}% CPU ({r['cpu_s']:.2f} s; schedstat "
                          f"{r['sched_pct']:.3f}%), "
                          f"RSS {r['rss_mib']:.1f} MiB, NVML {r['nvml_per_s']} calls/s", file=sys.stderr)
                    load.append(os.getloadavg()[0])
            finally:
                for p in sleepers:
                    p.kill()
                for p in sleepers:
                    p.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cmd = "scripts/bench/top_vs_peers.py " + " ".join(sys.argv[1:])
    lines = [
        f"{HEADING} (measured {time.strftime('%Y-%m-%d', time.gmtime())})\n",
        f"`{cmd.strip()}`: each tool alone in a 160x45 tmux terminal, 1 s refresh "
        "(`hmn top --interval 1s`, `nvtop -d 10`, `nvitop -m full --interval 1`), against the same "
        f"fake NVML ({'given by --fake' if a.fake else 'release build'}) listing N real `sleep` "
        "processes as the GPU's compute processes; "
        "once the tool shows the processes (\"first rows after\": seconds from its start, "
        "polled every 0.25 s) and "
        f"{a.settle:g} s more of settling, CPU time (user + system from /proc/<pid>/stat, in "
        f"10 ms ticks, children included) over {a.cpu_seconds} s as a share of one core, the "
        "same from the threads' schedstat (nanoseconds; the ratio to nvtop is taken from these), "
        "and VmRSS at the end of that window (the "
        "largest of the samples every 5 s in brackets). The fake answers NOT_SUPPORTED for "
        "clocks, temperatures, fans, power and the PCIe link, so the peers show N/A there and "
        "spend nothing on them; \"NVML calls/s\" is what each tool asked of the fake.\n",
        "Versions: " + "; ".join(f"{k}: {v}" for k, v in vers.items()) + ".\n",
        f"Machine: {os.cpu_count()} CPUs, shared; 1-minute load average "
        f"{min(load):.2f}–{max(load):.2f} during the run, so figures below 1% move by a few "
        "tenths from run to run.\n",
    ] + table(results, sizes, a.tools) + [""]
    text = "\n".join(lines)
    if a.write:
        benchmarks_md.write_section(HEADING, text + "\n")
    print(text if a.markdown or a.write else "\n".join(table(results, sizes, a.tools)))


if __name__ == "__main__":
    main()
