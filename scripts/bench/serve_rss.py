#!/usr/bin/env python3
"""`hmn serve`'s resident set against the number of GPU processes it lists.

One exporter, one fake GPU (the fake NVML, release build) listing N real `sleep` processes, for
each N of --sizes (20 and 2,000 by default); every scrape measures afresh (`--min-interval 1ms`),
with the default `--max-process-series`. After a warm-up scrape and --scrapes more, the
exporter's VmRSS and VmHWM (from /proc/<pid>/status), and its resident set split by mapping
(from /proc/<pid>/smaps): the binary's own pages, `[heap]` (the main arena), other anonymous
maps (the other threads' malloc arenas, stacks), the rest (shared libraries).

Usage: scripts/bench/serve_rss.py [--sizes 20,2000] [--scrapes 30] [--env NAME=VALUE] [--markdown]
Needs a release build (`cargo build --release`) and the fake NVML as scripts/bench/bench.sh
builds it (target/fake-builds/modern)."""
import argparse, os, subprocess, sys, tempfile, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paths import FAKE  # noqa: E402  (scripts/lib)
from procstat import status_kib  # noqa: E402  (scripts/lib)
import serve_scale  # noqa: E402  (this folder: the exporter and scenario helpers)

MIB = 1 << 20


def smaps_split(pid):
    """KiB of resident memory: the hmn binary's mappings, [heap], other anonymous, the rest."""
    out = dict(binary=0, heap=0, anon=0, other=0)
    kind = "other"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else ""
                if name.endswith("/hmn"):
                    kind = "binary"
                elif name == "[heap]":
                    kind = "heap"
                elif name == "":
                    kind = "anon"
                else:
                    kind = "other"
            elif first == "Rss:":
                out[kind] += int(line.split()[1])
    return out


def measure(lib, work, n, scrapes, extra_env):
    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(n)]
    try:
        rows = [(p.pid, MIB * (1 + i % 97)) for i, p in enumerate(sleepers)]
        text = serve_scale.scenario(1, rows)
        old = {k: os.environ.get(k) for k in extra_env}
        os.environ.update(extra_env)
        try:
            e = serve_scale.Exporter(lib, text, work, f"rss-{n}-{len(extra_env)}", "--min-interval", "1ms")
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        try:
            _, body = e.scrape()
            series = sum(1 for line in body.decode().splitlines()
                         if line.startswith("hypomnesis_gpu_process_memory_bytes{"))
            for _ in range(scrapes):
                e.scrape()
            time.sleep(0.2)
            rss, hwm = status_kib(e.proc.pid), status_kib(e.proc.pid, "VmHWM:")
            split = smaps_split(e.proc.pid)
        finally:
            e.stop()
        return dict(n=n, series=series, rss=rss / 1024, hwm=hwm / 1024, split=split)
    finally:
        for p in sleepers:
            p.kill()
        for p in sleepers:
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="20,2000")
    ap.add_argument("--scrapes", type=int, default=30)
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for the exporter (repeatable), e.g. MALLOC_ARENA_MAX=1")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    lib = FAKE
    if not os.path.exists(lib):
        sys.exit(f"serve_rss: no fake NVML at {lib} (scripts/bench/bench.sh builds it)")
    extra = dict(kv.split("=", 1) for kv in a.env)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "no-sysfs"))  # the exporters' empty sysfs (no DRM GPUs)
        for n in (int(s) for s in a.sizes.split(",")):
            rows.append(measure(lib, work, n, a.scrapes, extra))
    env = " ".join(a.env) or "(none)"
    if a.markdown:
        print(f"Environment added: {env}. Scrapes: 1 + {a.scrapes}, each measuring afresh.\n")
        print("| GPU processes | process series | VmRSS | VmHWM | binary | [heap] | anonymous | other |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            s = r["split"]
            print(f"| {r['n']:,} | {r['series']:,} | {r['rss']:.1f} MiB | {r['hwm']:.1f} MiB | "
                  f"{s['binary'] / 1024:.1f} | {s['heap'] / 1024:.1f} | {s['anon'] / 1024:.1f} | "
                  f"{s['other'] / 1024:.1f} |")
    else:
        for r in rows:
            print(f"env {env}: {r['n']} GPU processes, {r['series']} series: VmRSS {r['rss']:.1f} MiB, "
                  f"VmHWM {r['hwm']:.1f} MiB, split (KiB) {r['split']}")


if __name__ == "__main__":
    main()
