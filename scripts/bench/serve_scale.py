#!/usr/bin/env python3
"""`hmn serve` at scale, with the fake NVML and real processes.

Part 1: one exporter, 8 GPUs each listing the same N real `sleep` processes (1,000 by default, so
8,000 GPU process rows): scrape latency (fresh measurement per scrape, and from the cache), body
size plain and gzipped, with the default `--max-process-series` (1,000) and with every series,
and the exporter's resident set after the scrapes.

Part 2: E exporters (50 by default) on loopback ports, each a node with two fake GPUs and a few of
the processes, scraped by one real Prometheus every 5 s for a bounded minute; then the fleet
queries (nodes, GPUs, memory by node, the largest processes across the fleet) and what Prometheus
saw of the scrapes (duration, samples).

Usage: scripts/bench/serve_scale.py [--procs N] [--exporters E] [--seconds S] [--markdown | --write]
  --write puts the section into BENCHMARKS.md (replacing the one there).
Needs a release build (`cargo build --release`), the fake NVML as scripts/bench/bench.sh builds it
(target/fake-builds/modern) and `prometheus` on PATH."""
import argparse, gzip, http.client, json, os, shutil, socket, statistics, subprocess, sys, tempfile, time
import urllib.parse
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from paths import ROOT, TARGET, FAKE  # noqa: E402  (scripts/lib)
import benchmarks_md  # noqa: E402  (scripts/lib)
from procstat import status_kib as rss_kib  # noqa: E402


HMN = os.path.join(TARGET, "release", "hmn")
#: The exporters' PATH: no nvidia-smi unless a caller puts a stand-in there (scrape_cost.py).
PATH = "/nonexistent"
MIB = 1 << 20


class Exporter:
    """`hmn serve` on a free loopback port with its own scenario file."""

    def __init__(self, lib, scenario_text, workdir, name, *args):
        self.scenario = os.path.join(workdir, f"{name}.json")
        with open(self.scenario, "w") as f:
            f.write(scenario_text)
        env = dict(os.environ, HYPOMNESIS_NVML_LIBRARY=lib, FAKE_NVML_SCENARIO=self.scenario,
                   HYPOMNESIS_SYSFS=os.path.join(workdir, "no-sysfs"), PATH=PATH)
        self.proc = subprocess.Popen([HMN, "serve", "--listen", "127.0.0.1:0", *args], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        prefix = "hmn: serving metrics on http://"
        if not line.startswith(prefix):
            sys.exit(f"serve_scale: hmn serve did not start: {line}{self.proc.stderr.read()}")
        self.addr = line[len(prefix):].strip().removesuffix("/metrics")

    def scrape(self, gzip_ok=False):
        host, port = self.addr.rsplit(":", 1)
        c = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {"Accept-Encoding": "gzip"} if gzip_ok else {"Accept-Encoding": "identity"}
        t0 = time.perf_counter()
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        body = r.read()
        took = time.perf_counter() - t0
        c.close()
        if r.status != 200:
            sys.exit(f"serve_scale: scrape answered {r.status}")
        if gzip_ok and r.getheader("Content-Encoding") != "gzip":
            sys.exit("serve_scale: asked for gzip, got none")
        return took, body

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def scenario(gpus, rows, model="NVIDIA H200", uuid_base="GPU-5ca1e000-0000-4000-8000-"):
    devices = []
    for g in range(gpus):
        held = sum(u for _, u in rows)
        procs = ",".join(f'{{"pid": {p}, "used": {u}}}' for p, u in rows)
        devices.append(
            f'{{"name": "{model}", "uuid": "{uuid_base}{g:012x}", "total": {143771 * MIB}, '
            f'"reserved": {614 * MIB}, "free": {143771 * MIB - 614 * MIB - held - 512 * MIB}, '
            f'"compute_processes": [{procs}]}}')
    return f'{{"devices": [{",".join(devices)}]}}'


def median_ms(xs):
    return statistics.median(xs) * 1000


def part_one(lib, work, pids, scrapes):
    rows = [(p, MIB * (1 + i % 97)) for i, p in enumerate(pids)]
    text = scenario(8, rows)
    out = {}
    for label, args in (("default cap (1,000 process series)", []),
                        ("every process series (8,000)", ["--max-process-series", "8000"])):
        fresh = Exporter(lib, text, work, f"scale-fresh-{len(out)}", "--min-interval", "1ms", *args)
        try:
            fresh.scrape()  # warm-up: NVML load, first contexts
            plain = [fresh.scrape()[0] for _ in range(scrapes)]
            packed = [fresh.scrape(True)[0] for _ in range(scrapes)]
            _, body = fresh.scrape()
            _, gz = fresh.scrape(True)
            rss, hwm = rss_kib(fresh.proc.pid), rss_kib(fresh.proc.pid, "VmHWM:")
        finally:
            fresh.stop()
        cached = Exporter(lib, text, work, f"scale-cached-{len(out)}", "--min-interval", "1h", *args)
        try:
            cached.scrape()
            hits = [cached.scrape(True)[0] for _ in range(scrapes)]
        finally:
            cached.stop()
        series = sum(1 for line in body.decode().splitlines()
                     if line.startswith("hypomnesis_gpu_process_memory_bytes{"))
        # Two measurements: the same series (their figures, such as the scrape duration, differ).
        def names(text):
            return sorted(line.split(" ")[0] for line in text.splitlines() if not line.startswith("#"))
        if names(gzip.decompress(gz).decode()) != names(body.decode()):
            sys.exit("serve_scale: the gzipped body does not hold the plain one's series")
        out[label] = dict(plain=median_ms(plain), packed=median_ms(packed), cached=median_ms(hits),
                          body=len(body), gz=len(gz), rss=rss / 1024, hwm=hwm / 1024, series=series)
    return out


class Prometheus:
    def __init__(self, work, targets, interval):
        self.dir = os.path.join(work, "prometheus")
        os.makedirs(os.path.join(self.dir, "data"))
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write(f"global:\n  scrape_interval: {interval}\n  scrape_timeout: {interval}\n"
                    "scrape_configs:\n  - job_name: hmn\n    static_configs:\n"
                    f"      - targets: [{', '.join(repr(t) for t in targets)}]\n")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir}/prometheus.yml",
             f"--storage.tsdb.path={self.dir}/data", f"--web.listen-address=127.0.0.1:{self.port}"],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def query(self, q):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", "/api/v1/query?query=" + urllib.parse.quote(q))
        r = c.getresponse()
        data = json.loads(r.read())
        c.close()
        if data.get("status") != "success":
            sys.exit(f"serve_scale: Prometheus refused {q}: {data}")
        return data["data"]["result"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def part_two(lib, work, pids, n, seconds):
    exporters = []
    try:
        for i in range(n):
            mine = pids[(i * 20) % len(pids):][:20] or pids[:20]
            rows = [(p, MIB * (100 + 10 * i + j)) for j, p in enumerate(mine)]
            text = scenario(2, rows, uuid_base=f"GPU-f1ee7000-{i:04x}-4000-8000-")
            exporters.append(Exporter(lib, text, work, f"fleet-{i}"))
        prom = Prometheus(work, [e.addr for e in exporters], "5s")
        try:
            start = time.monotonic()
            while time.monotonic() - start < 60:
                try:
                    if prom.query("up"):
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            time.sleep(seconds)
            window = f"{seconds}s"
            results = {}
            results["nodes"] = prom.query("count(count by (instance) (hypomnesis_gpu_info))")
            results["gpus"] = prom.query("sum(hypomnesis_gpu_devices)")
            results["up"] = prom.query('count(up{job="hmn"} == 1)')
            results["ok"] = prom.query("count(hypomnesis_scrape_success == 1)")
            results["top"] = prom.query("topk(3, hypomnesis_gpu_process_memory_bytes)")
            results["by_node"] = prom.query("count(sum by (instance) (hypomnesis_gpu_memory_used_bytes))")
            results["scrapes"] = prom.query(f"min(count_over_time(up[{window}]))")
            results["dur_med"] = prom.query(f"quantile(0.5, quantile_over_time(0.5, scrape_duration_seconds[{window}]))")
            results["dur_max"] = prom.query(f"max(max_over_time(scrape_duration_seconds[{window}]))")
            results["samples"] = prom.query("sum(scrape_samples_scraped)")
            results["prom_rss"] = rss_kib(prom.proc.pid) / 1024
            results["hmn_rss"] = statistics.median(rss_kib(e.proc.pid) for e in exporters) / 1024
        finally:
            prom.stop()
    finally:
        for e in exporters:
            e.stop()

    def one(key):
        r = results[key]
        return float(r[0]["value"][1]) if r else None

    if one("nodes") != n or one("up") != n or one("ok") != n or one("by_node") != n:
        sys.exit(f"serve_scale: the fleet queries did not answer for {n} nodes: {results}")
    return dict(nodes=one("nodes"), gpus=one("gpus"), scrapes=one("scrapes"),
                dur_med=one("dur_med") * 1000, dur_max=one("dur_max") * 1000, samples=one("samples"),
                top=[(r["metric"]["instance"], r["metric"]["pid"], float(r["value"][1]) / MIB)
                     for r in results["top"]],
                prom_rss=results["prom_rss"], hmn_rss=results["hmn_rss"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--exporters", type=int, default=50)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    for need in (HMN, FAKE):
        if not os.path.exists(need):
            sys.exit(f"serve_scale: {need} is missing (cargo build --release; scripts/bench/bench.sh builds the fake)")
    if not shutil.which("prometheus"):
        sys.exit("serve_scale: prometheus is needed (Debian: apt-get install prometheus)")
    work = tempfile.mkdtemp(prefix="hmn-serve-scale-")
    os.makedirs(os.path.join(work, "no-sysfs"))
    lib = os.path.join(work, "libnvidia-ml.so.1")  # a private copy (see scripts/bench/top_cost.py)
    shutil.copy(FAKE, lib)
    sleepers = [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL) for _ in range(a.procs)]
    try:
        pids = [p.pid for p in sleepers]
        one = part_one(lib, work, pids, a.scrapes)
        two = part_two(lib, work, pids, a.exporters, a.seconds)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    lines = [
        f"## `hmn serve` at scale (measured {day})\n",
        f"`scripts/bench/serve_scale.py`: release build, fake NVML. One exporter with 8 GPUs each listing the "
        f"same {a.procs:,} real `sleep` processes ({8 * a.procs:,} GPU process rows); medians of "
        f"{a.scrapes} scrapes on one connection each, on this 2-core machine. \"Fresh\" is "
        "`--min-interval 1ms` (every scrape measures: NVML, the process lists, each listed process's "
        "user and cgroup); \"cached\" is a scrape inside `--min-interval`.\n",
        "| process series | series in body | fresh scrape | fresh, gzip | cached, gzip | body | gzipped | RSS after (peak) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in one.items():
        lines.append(f"| {label} | {r['series']:,} | {r['plain']:.1f} ms | {r['packed']:.1f} ms | "
                     f"{r['cached']:.2f} ms | {r['body'] / 1024:.0f} KiB | {r['gz'] / 1024:.0f} KiB "
                     f"({r['body'] / r['gz']:.1f}x) | {r['rss']:.1f} MiB ({r['hwm']:.1f}) |")
    lines += [
        "",
        f"{a.exporters} exporters on loopback ports (each a node with 2 fake GPUs and 20 processes), "
        f"scraped by one Prometheus every 5 s for {a.seconds} s:\n",
        "| what | figure |\n|---|---:|",
        f"| nodes answering the fleet query (`count(count by (instance) (hypomnesis_gpu_info))`) | {two['nodes']:.0f} |",
        f"| GPUs (`sum(hypomnesis_gpu_devices)`) | {two['gpus']:.0f} |",
        f"| scrapes of the least-scraped target in the window | {two['scrapes']:.0f} |",
        f"| scrape duration as Prometheus saw it, median / max | {two['dur_med']:.1f} ms / {two['dur_max']:.1f} ms |",
        f"| samples per scrape round, all targets | {two['samples']:,.0f} |",
        f"| largest process across the fleet (`topk`) | pid {two['top'][0][1]} on {two['top'][0][0]}, {two['top'][0][2]:,.0f} MiB |",
        f"| exporter RSS, median of {a.exporters} | {two['hmn_rss']:.1f} MiB |",
        f"| Prometheus RSS | {two['prom_rss']:.0f} MiB |",
        "",
    ]
    text = "\n".join(lines)
    if a.write:
        benchmarks_md.write_section('## `hmn serve` at scale', text + "\n")
    print(text)



if __name__ == "__main__":
    main()
