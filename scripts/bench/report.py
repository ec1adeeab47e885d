#!/usr/bin/env python3
"""Reads criterion's results (target/criterion) and measures hmn as a process, then prints
BENCHMARKS.md. Called by scripts/bench/bench.sh after the benches have run."""
import json, os, platform, re, resource, signal, subprocess, sys, threading, time, http.client
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import ROOT, TARGET, FAKE  # noqa: E402  (scripts/lib)

CRIT = os.path.join(TARGET, "criterion")
HMN = os.path.join(TARGET, "release", "hmn")
MIB = 1 << 20
# An empty sysfs: no AMD/Intel devices, so the DRM source stays out of the measurements.
EMPTY_SYSFS = os.path.join(TARGET, "hmn-bench-empty-sysfs")
os.makedirs(EMPTY_SYSFS, exist_ok=True)


def median_ns(group, name):
    path = os.path.join(CRIT, group, name, "new", "estimates.json")
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def run_date(*groups):
    """The day criterion wrote the newest result of these groups (when they were measured)."""
    newest = 0
    for g in groups:
        for dirpath, _, files in os.walk(os.path.join(CRIT, g)):
            if "estimates.json" in files and os.path.basename(dirpath) == "new":
                newest = max(newest, os.path.getmtime(os.path.join(dirpath, "estimates.json")))
    return time.strftime("%Y-%m-%d", time.gmtime(newest)) if newest else "unknown"


def this_machine():
    """CPU count and model, memory and kernel of the machine this report runs on."""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except Exception:
        model = platform.processor() or platform.machine()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 30
    return f"{os.cpu_count()} CPUs ({model}), {mem} GiB RAM, Linux {platform.release()}"


def fmt_ns(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def scenario(path, n_procs=8):
    rows = ",".join(f'{{"pid": {4194400 + k}, "used": {MIB}}}' for k in range(n_procs))
    with open(path, "w") as f:
        f.write(f'{{"devices": [{{"name": "NVIDIA H200", "total": {143771 * MIB}, "reserved": {614 * MIB}, '
                f'"free": {110796 * MIB}, "compute_processes": [{rows}]}}]}}')
    return path


def env():
    e = dict(os.environ)
    e.update(HYPOMNESIS_NVML_LIBRARY=FAKE, FAKE_NVML_SCENARIO=scenario("/tmp/hmn-bench-scenario.json"),
             HYPOMNESIS_SYSFS=EMPTY_SYSFS)
    return e


def cpu_of(args, seconds):
    """CPU seconds per minute of `hmn args…` (rusage of the hmn process and what it waited for)."""
    p = subprocess.Popen([HMN] + args, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, ru = os.wait4(p.pid, 0)
    return (ru.ru_utime + ru.ru_stime) / seconds * 60


def serve_load(seconds=10, clients=64):
    p = subprocess.Popen([HMN, "serve", "--listen", "127.0.0.1:0", "--min-interval", "1s"], env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    m = re.search(r"http://([\d.]+):(\d+)/metrics", line)
    if not m:
        p.kill()
        return None
    host, port = m.group(1), int(m.group(2))
    done = time.time() + seconds
    counts = [0] * clients

    def worker(i):
        c = http.client.HTTPConnection(host, port, timeout=5)
        while time.time() < done:
            c.request("GET", "/metrics")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hwm = None
    with open(f"/proc/{p.pid}/status") as f:
        for l in f:
            if l.startswith("VmHWM:"):
                hwm = int(l.split()[1]) * 1024
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    return sum(counts) / seconds, hwm


def ps_cost(binaries, n=1000, runs=15):
    """Median wall time of `hmn ps` and `hmn ps --json` for each binary (runs alternate between
    them), with `n` real `sleep` processes listed by the fake NVML as holding 1 MiB each, so their
    context is read. Returns {(binary, "text" or "json"): seconds}."""
    sleepers = [subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL) for _ in range(n)]
    try:
        rows = ",".join(f'{{"pid": {p.pid}, "used": {MIB}}}' for p in sleepers)
        path = "/tmp/hmn-bench-ps-scenario.json"
        with open(path, "w") as f:
            f.write(f'{{"devices": [{{"name": "NVIDIA H200", "total": {143771 * MIB}, "reserved": {614 * MIB}, '
                    f'"free": {(143771 - 614) * MIB - n * MIB}, "compute_processes": [{rows}]}}]}}')
        e = env()
        e["FAKE_NVML_SCENARIO"] = path
        times = {}
        for _ in range(runs):
            for b in binaries:
                for form, args in (("text", ["ps"]), ("json", ["ps", "--json"])):
                    t = time.perf_counter()
                    subprocess.run([b] + args, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
                    times.setdefault((b, form), []).append(time.perf_counter() - t)
        return {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


def ps_section():
    """The lines of the `hmn ps` cost section: this build against `HMN_BEFORE` when set."""
    before = os.environ.get("HMN_BEFORE")
    bins = [HMN] + ([before] if before else [])
    med = ps_cost(bins)
    out = [f"## `hmn ps` with 1,000 GPU processes (measured {time.strftime('%Y-%m-%d', time.gmtime())})\n",
           "Real `sleep` processes, listed by the fake NVML as holding 1 MiB each, so `hmn ps` reads each "
           "one's context: the text its owner, command line and RSS, `--json` also its cgroup (the "
           "container, which only the JSON shows); median of 15 runs, alternating; per process: the "
           "median divided by 1,000.\n",
           "| binary | `hmn ps` | per process | `hmn ps --json` | per process |\n|---|---:|---:|---:|---:|"]
    labels = [(HMN, "this build")]
    if before:
        labels.append((before, os.environ.get("HMN_BEFORE_LABEL", before)))
    for b, label in labels:
        t, j = med[(b, "text")] * 1e9, med[(b, "json")] * 1e9
        out.append(f"| {label} | {fmt_ns(t)} | {fmt_ns(t / 1000)} | {fmt_ns(j)} | {fmt_ns(j / 1000)} |")
    if before:
        rt = med[(HMN, "text")] / med[(before, "text")]
        rj = med[(HMN, "json")] / med[(before, "json")]
        out.append(f"\nRatio {rt:.2f}x (text), {rj:.2f}x (JSON). Per process, the build before read "
                   "the name (`comm`) after a `stat` of the process's directory; this one reads the name "
                   "(which proves the directory, so no `stat`), the command line (its open file's owner "
                   "is the user), `statm`, and for JSON the cgroup.\n")
    return out


def replace_ps_section(path):
    """Rewrite the `hmn ps` section of BENCHMARKS.md in place (the rest needs criterion's data)."""
    text = open(path).read()
    start = text.index("## `hmn ps` with 1,000 GPU processes")
    end = text.find("\n## ", start + 1)
    new = "\n".join(ps_section()) + "\n"
    text = text[:start] + new + (text[end + 1:] if end >= 0 else "")
    open(path, "w").write(text)


def main():
    out = []
    w = out.append
    w("# Benchmarks\n")
    w(f"Machine: {this_machine()}, no GPU (read by `scripts/bench/report.py` when it wrote this file); "
      "shared and noisy, so compare the ratios (measured in one run), not absolute times.\n")
    w("Produced by `scripts/bench/bench.sh` (criterion medians; `BENCH_TIME` seconds per benchmark). "
      "NVML figures are against the fake NVML of this repository, whose calls cost almost nothing, "
      "so they show this crate's own overhead; `scripts/gpu/bench.sh` runs the same on a GPU host.\n")

    w(f"## Resident set of this process (measured {run_date('rss')})\n")
    floor = median_ns("rss", "floor_statm")
    w("The floor is the cheapest read + parse there is: one `read` of `/proc/self/statm` into a stack "
      "buffer and the digits of its second field summed in place, no allocation.\n")
    w("| what | median | ratio to the floor |\n|---|---:|---:|")
    for name, label in (("floor_statm", "one read into a stack buffer + in-place parse (floor)"),
                        ("hypomnesis_process_rss", "`hypomnesis::process_rss()`"),
                        ("memory_stats", "`memory-stats` crate"), ("sysinfo", "`sysinfo` crate (one process, memory only)")):
        v = median_ns("rss", name)
        w(f"| {label} | {fmt_ns(v)} | {v / floor:.2f}x |")
    ours = median_ns("rss", "hypomnesis_process_rss")
    w(f"\nTarget ≤ 1.5x the floor: **{ours / floor:.2f}x**; faster than memory-stats "
      f"({median_ns('rss', 'memory_stats') / ours:.2f}x slower than ours) and sysinfo "
      f"({median_ns('rss', 'sysinfo') / ours:.2f}x slower than ours).\n")

    w(f"## Device figures and snapshots (steady state, fake NVML; measured {run_date('device_info', 'snapshot')})\n")
    w("The per-call comparison loads a fake that reads a one-GPU, one-process scenario at each load, so "
      "it does no more work than a library load, initialisation and one query need.\n")
    w("| what | median | ratio |\n|---|---:|---:|")
    f_dev = median_ns("device_info", "floor_raw_ffi")
    dev = median_ns("device_info", "hypomnesis_device_info")
    per_call = median_ns("device_info", "load_init_per_call")
    f_snap = median_ns("snapshot", "floor_raw_ffi")
    snap = median_ns("snapshot", "hypomnesis_snapshot_now")
    w(f"| raw FFI calls `device_info` makes (floor) | {fmt_ns(f_dev)} | 1.00x |")
    w(f"| `device_info(0)` | {fmt_ns(dev)} | {dev / f_dev:.2f}x the floor |")
    w(f"| load + init + query + shutdown per call (a peer's approach) | {fmt_ns(per_call)} | {per_call / dev:.1f}x slower than `device_info` |")
    w(f"| raw statm read + process lists + device calls (floor) | {fmt_ns(f_snap)} | 1.00x |")
    w(f"| `Snapshot::now(0)` | {fmt_ns(snap)} | {snap / f_snap:.2f}x the floor |")
    w(f"\nTargets: ≤ 2x the floor (`device_info` {dev / f_dev:.2f}x, `Snapshot::now` {snap / f_snap:.2f}x); "
      f"≥ 20x faster than loading per call ({per_call / dev:.1f}x).\n")

    w(f"## Process lists (`gpu_processes`, fake NVML; measured {run_date('gpu_processes')})\n")
    w("| NVML processes | median | per process |\n|---:|---:|---:|")
    for n in (1, 100, 1000, 10000):
        v = median_ns("gpu_processes", str(n))
        w(f"| {n:,} | {fmt_ns(v)} | {fmt_ns(v / n)} |")
    w("")

    w(f"## `hmn` as a process vs `nvidia-smi` (measured {run_date('process')})\n")
    h = median_ns("process", "hmn_fake_nvml")
    s = median_ns("process", "stand_in_nvidia_smi")
    w("| what | median |\n|---|---:|")
    w(f"| `hmn` (fake NVML, one line per GPU) | {fmt_ns(h)} |")
    w(f"| stand-in `nvidia-smi --query-gpu=…` answering from a capture | {fmt_ns(s)} |")
    w(f"\nRatio {h / s:.2f}x. The stand-in does no driver work, so this compares process start-up and "
      "output only; a real `nvidia-smi` takes ~10–20 ms per call warm and seconds cold (peers.md §3).\n")

    w(f"## DRM fdinfo sweep (`crates/hypomnesis/benches/fdinfo_sweep.rs`; measured {run_date('fdinfo_sweep')})\n")
    w("| processes | median | per 1,000 processes |\n|---:|---:|---:|")
    for n in (100, 1000, 2000, 10000):
        v = median_ns("fdinfo_sweep", str(n))
        w(f"| {n:,} | {fmt_ns(v)} | {fmt_ns(v / n * 1000)} |")
    w("\nSynthetic procfs trees on disk (4 fds per process, 1 in 10 holding an amdgpu node). Hosts whose "
      "DRM drivers publish no fdinfo memory (NVIDIA-only) skip the sweep entirely.\n")

    w(f"## Finding the command's processes, per `hmn run` sample (`crates/hypomnesis/benches/process_tree.rs`; measured {run_date('process_tree')})\n")
    w("| host processes | walk (`children` files) | scan of every `stat` (before) | walk vs. 100 processes |\n|---:|---:|---:|---:|")
    base = median_ns("process_tree", "walk/100")
    for n in (100, 3000, 10000):
        walk, scan = median_ns("process_tree", f"walk/{n}"), median_ns("process_tree", f"scan/{n}")
        w(f"| {n:,} | {fmt_ns(walk)} | {fmt_ns(scan)} | {walk / base:.2f}x |")
    w("\nReal `sleep` processes fill the host to each count; the measured command is a shell with two "
      "children, and each sample also reads their resident sets. Kernels without "
      "`/proc/<pid>/task/<tid>/children` get the scan, at most once a second.\n")

    w(f"## Sampling overhead and the exporter (measured {time.strftime('%Y-%m-%d', time.gmtime())})\n")
    w("| what | result |\n|---|---:|")
    if os.path.exists(HMN):
        w(f"| `hmn run --interval 100ms -- sleep 20` | {cpu_of(['run', '--interval', '100ms', '--', 'sleep', '20'], 20):.2f} CPU s per minute |")
        sleeper = subprocess.Popen(["sleep", "25"])
        w(f"| `hmn watch PID --interval 100ms --duration 20s` | {cpu_of(['watch', str(sleeper.pid), '--interval', '100ms', '--duration', '20s'], 20):.2f} CPU s per minute |")
        sleeper.kill()
        try:
            r = serve_load()
        except Exception as e:
            r = None
            print(f"serve load failed: {e}", file=sys.stderr)
        if r:
            w(f"| `hmn serve` on loopback, 64 concurrent clients, 10 s | {r[0]:,.0f} requests/s |")
            w(f"| `hmn serve` peak RSS under that load | {r[1] / MIB:.1f} MiB |")
    if os.path.exists(HMN):
        w("")
        out.extend(ps_section())
    # `scripts/bench/top_cost.py --write` measures `hmn top` (ten minutes) and
    # `scripts/bench/top_vs_peers.py --write` it beside nvtop and nvitop; their sections are kept.
    old = os.path.join(ROOT, "BENCHMARKS.md")
    if os.path.exists(old):
        text = open(old).read()
        for heading in ("## `hmn top` with", "## `hmn top`, nvtop and nvitop"):
            start = text.find(heading)
            if start >= 0:
                end = text.find("\n## ", start + 1)
                w("\n" + (text[start:end] if end >= 0 else text[start:]).rstrip("\n"))
    h200 = os.path.join(ROOT, "docs", "h200", "gpu-bench.txt")
    if os.path.exists(h200):
        text = open(h200).read()
        meta = dict(re.findall(r"^# (date|machine|driver): (.*)$", text, re.M))
        w("\n## On a real NVIDIA H200, `scripts/gpu/bench.sh`\n")
        w(f"Real NVML and the real driver. Run: {meta.get('date', 'date not recorded by that run')}; "
          f"machine: {meta.get('machine', 'not recorded by that run')}; "
          f"driver: {meta.get('driver', 'as in the nvidia-smi line of the raw output')}. "
          "Raw output in `docs/h200/gpu-bench.txt`.\n")
        med = {}
        for m in re.finditer(r"^(\S+/\S+)\s*\n?\s*time:\s+\[\S+ \S+ (\S+) (\S+)", text, re.M):
            v, unit = float(m.group(2)), m.group(3)
            med[m.group(1)] = v * {"ns": 1, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]
        def row(label, key, base=None, note=""):
            if key in med:
                ratio = f"{med[key] / med[base]:.2f}x {note}" if base in med else ""
                w(f"| {label} | {fmt_ns(med[key])} | {ratio} |")
        w("| what | median | ratio |\n|---|---:|---:|")
        row("bare `/proc/self/statm` read (floor)", "rss/floor_statm")
        row("`process_rss()`", "rss/hypomnesis_process_rss", "rss/floor_statm", "the floor")
        row("`memory-stats`", "rss/memory_stats", "rss/hypomnesis_process_rss", "ours")
        row("`sysinfo`", "rss/sysinfo", "rss/hypomnesis_process_rss", "ours")
        row("raw NVML calls of `device_info` (floor)", "device_info/floor_raw_ffi")
        row("`device_info(0)`", "device_info/hypomnesis_device_info", "device_info/floor_raw_ffi", "the floor")
        row("load + init + query + shutdown per call", "device_info/load_init_per_call", "device_info/hypomnesis_device_info", "`device_info`")
        row("raw calls of a snapshot (floor)", "snapshot/floor_raw_ffi")
        row("`Snapshot::now(0)`", "snapshot/hypomnesis_snapshot_now", "snapshot/floor_raw_ffi", "the floor")
        row("`gpu_processes(0)` (idle GPU)", "gpu_processes/live")
    w(f"\nWritten {time.strftime('%Y-%m-%d', time.gmtime())} by `scripts/bench/bench.sh`.")
    print("\n".join(out))


if __name__ == "__main__":
    if sys.argv[1:] == ["--only-ps"]:
        replace_ps_section(os.path.join(ROOT, "BENCHMARKS.md"))
    else:
        main()
