#!/usr/bin/env python3
"""`hmn fits --prometheus` at fleet scale: 1,000 nodes × 8 GPUs of hypomnesis's series (each
GPU's info, total, free, used, reserved and not-visible bytes, seven ghost classes, a pod and two
processes), backfilled into a real Prometheus with `promtool tsdb create-blocks-from
openmetrics` (samples every 15 s over the last minute), then:

- `hmn fits SIZE --prometheus URL --json`, run RUNS times: its wall time (min/median/max), the
  number of queries (the same for any fleet) and the size of its answer;
- `hmn fits SIZE --count 4 …` likewise (four GPUs on one node);
- `hmn top --prometheus URL --interval 1s` in tmux (200 x 50) for FLEET_SCALE_TOP seconds
  (default 20; 0 leaves it out): its CPU each second (one refresh a second) from
  /proc/PID/stat, its RSS (VmRSS, VmHWM), the queries a refresh and the time one took, as its
  title says; then the same with a node open (its GPUs, pods and processes asked too);
- the way people do it today, for comparison: one `hmn --json` per node (as `ssh node hmn
  --json` would run it, without ssh's own cost), here against the fake NVML with 8 GPUs on
  loopback, run NODES times one after the other, and two at a time (this VM has 2 cores).

Usage: scripts/bench/fleet_scale.py [NODES] [RUNS]   (defaults 1000 and 5)
Needs `prometheus` and `promtool` on PATH, and a built `hmn` (cargo build --release; or the one
HMN names). FLEET_SCALE_COMPARE=0 leaves out the comparison (a test runs it so, small)."""
import json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.parse, urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import paths  # noqa: E402

GIB = 1 << 30
GPUS = 8
#: The queries `hmn fits --prometheus` sends (crates/fleet/src/fleet/mod.rs), to time one by one.
QUERIES = (
    '{__name__=~"hypomnesis_gpu_memory_(free|total|reserved|not_visible)_bytes|hypomnesis_gpu_info|hypomnesis_gpu_mig_memory_(free|total|reserved)_bytes"}',
    'hypomnesis_gpu_ghost_bytes{class!="unaccounted"} > 0',
    "hypomnesis_gpu_pod_memory_bytes",
    "timestamp(hypomnesis_gpu_memory_free_bytes)",
    "last_over_time(hypomnesis_gpu_memory_free_bytes[15m]) unless hypomnesis_gpu_memory_free_bytes",
    '{__name__=~"DCGM_FI_DEV_FB_(FREE|USED|RESERVED|TOTAL)"}',
    "timestamp(DCGM_FI_DEV_FB_FREE)",
    "last_over_time(DCGM_FI_DEV_FB_FREE[15m]) unless DCGM_FI_DEV_FB_FREE",
)
CLASSES = ("exited", "zombie", "stuck", "orphan", "gone_pod", "idle", "unaccounted")


def openmetrics(nodes: int, now: int, path: str) -> int:
    """Writes the fleet's series at now-60 … now (every 15 s); returns the number of series."""
    times = [now - 60 + 15 * i for i in range(5)]
    series = 0
    with open(path, "w") as f:
        def family(name: str, kind: str, rows):
            nonlocal series
            f.write(f"# TYPE {name} {kind}\n")
            for labels, value in rows:
                series += 1
                for t in times:
                    f.write(f"{name}{{{labels}}} {value} {t}\n")

        def gpus():
            for n in range(nodes):
                for g in range(GPUS):
                    base = (f'job="hmn",instance="node-{n:04d}:10466",node="node-{n:04d}",'
                            f'gpu="{g}",uuid="GPU-{n:08x}-0000-4000-8000-{g:012x}"')
                    free = ((n * 7 + g * 13) % 140 + 1) * GIB
                    yield base, free

        family("hypomnesis_gpu_info", "gauge",
               ((b + ',model="NVIDIA H200",driver="590.48.01",vendor="nvidia",source="nvml",'
                 'mig_mode="disabled"', 1) for b, _ in gpus()))
        family("hypomnesis_gpu_memory_total_bytes", "gauge", ((b, 141 * GIB) for b, _ in gpus()))
        family("hypomnesis_gpu_memory_free_bytes", "gauge", gpus())
        family("hypomnesis_gpu_memory_used_bytes", "gauge", ((b, 141 * GIB - x) for b, x in gpus()))
        family("hypomnesis_gpu_memory_reserved_bytes", "gauge", ((b, GIB // 2) for b, _ in gpus()))
        family("hypomnesis_gpu_memory_not_visible_bytes", "gauge", ((b, 0) for b, _ in gpus()))
        family("hypomnesis_gpu_ghost_bytes", "gauge",
               ((b + f',class="{c}"', GIB if c == "exited" and b.endswith('0"') else 0)
                for b, _ in gpus() for c in CLASSES))
        family("hypomnesis_gpu_pod_memory_bytes", "gauge",
               ((b + ',namespace="serve",pod="vllm-0"', 20 * GIB) for b, _ in gpus()))
        family("hypomnesis_gpu_process_memory_bytes", "gauge",
               ((b + f',pid="{p}",process="python3",user="svc",type="C"', 10 * GIB)
                for b, _ in gpus() for p in (100, 101)))
        f.write("# EOF\n")
    return series


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(cmd, env=None):
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, env=env)
    return time.perf_counter() - t, out


def spread(xs):
    return f"min {min(xs):.3f} s, median {statistics.median(xs):.3f} s, max {max(xs):.3f} s"


def top_phase(hmn: str, url: str, stale: str, seconds: int, nodes: int) -> None:
    """`hmn top --prometheus` live against the fleet: CPU a refresh, RSS, queries."""
    if not shutil.which("tmux"):
        raise SystemExit("fleet_scale: tmux is not on PATH (FLEET_SCALE_TOP=0 leaves it out)")
    sock = f"hmn-fleet-scale-{os.getpid()}"

    def tmux(*args: str) -> str:
        return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True,
                              check=True).stdout

    tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "200", "-y", "50",
         f"exec {hmn} top --prometheus {url} --interval 1s --stale-after {stale}")
    try:
        pid = int(tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        tick = os.sysconf("SC_CLK_TCK")

        def cpu() -> float:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick

        def rss() -> str:
            with open(f"/proc/{pid}/status") as f:
                kib = {l.split(":")[0]: int(l.split()[1]) for l in f if l.startswith("Vm")}
            return f"RSS {kib['VmRSS'] / 1024:.1f} MiB (peak {kib['VmHWM'] / 1024:.1f} MiB)"

        def wait_for(text: str) -> str:
            for _ in range(600):
                screen = tmux("capture-pane", "-p", "-t", "t")
                if text in screen:
                    return screen
                time.sleep(0.1)
            raise SystemExit(f"hmn top never showed {text!r}:\n{screen}")

        def window(label: str, want: str) -> None:
            wait_for(want)
            time.sleep(1.5)
            per = []
            last = cpu()
            for _ in range(seconds):
                time.sleep(1.0)
                now_cpu = cpu()
                per.append((now_cpu - last) * 1000)
                last = now_cpu
            title = tmux("capture-pane", "-p", "-t", "t").splitlines()[0]
            said = re.search(r"(\d+) queries took (\S+),", title)
            queries, took = said.groups() if said else ("?", "?")
            print(f"hmn top --prometheus, {label}: CPU a refresh (one a second, {seconds} s) "
                  f"median {statistics.median(per):.0f} ms, max {max(per):.0f} ms; {rss()}; "
                  f"{queries} queries, the last took {took}")

        window(f"{nodes} nodes", f"{nodes} nodes (")
        tmux("send-keys", "-t", "t", "Enter")
        window("a node open", "node node-")
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def main() -> None:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hmn = os.environ.get("HMN") or os.path.join(paths.TARGET, "release", "hmn")
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            raise SystemExit(f"fleet_scale: {tool} is not on PATH")
    if not os.path.exists(hmn):
        raise SystemExit(f"fleet_scale: no {hmn} (cargo build --release)")
    work = tempfile.mkdtemp(prefix="hmn-fleet-scale-")
    prom = None
    try:
        now = int(time.time())
        text = os.path.join(work, "fleet.om")
        t = time.perf_counter()
        series = openmetrics(nodes, now, text)
        print(f"{nodes} nodes × {GPUS} GPUs: {series} series, {os.path.getsize(text) >> 20} MiB "
              f"of OpenMetrics, written in {time.perf_counter() - t:.1f} s")
        data = os.path.join(work, "data")
        t = time.perf_counter()
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", text, data],
                       check=True, capture_output=True)
        print(f"backfilled in {time.perf_counter() - t:.1f} s")
        os.unlink(text)
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global: {scrape_interval: 15s}\nscrape_configs: []\n")
        port = free_port()
        prom = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=30d"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/-/ready", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        if os.environ.get("FLEET_SCALE_QUERIES"):
            for q in QUERIES:
                body = urllib.parse.urlencode({"query": q, "time": str(time.time())}).encode()
                t = time.perf_counter()
                answer = urllib.request.urlopen(url + "/api/v1/query", data=body, timeout=60).read()
                print(f"  {time.perf_counter() - t:6.3f} s  {len(answer) >> 10:6d} KiB  {q}")
        # The samples end at `now`: the staleness bound covers the time since.
        stale = f"{int(time.time()) - now + 120}s"
        for label, extra in (("fits 40GiB", []), ("fits 40GiB --count 4", ["--count", "4"])):
            times, answer = [], None
            for _ in range(runs):
                took, out = timed([hmn, "fits", "40GiB", *extra, "--prometheus", url, "--json",
                                   "--stale-after", stale])
                if out.returncode not in (0, 1):
                    raise SystemExit(f"hmn fits failed: {out.stderr.decode()}")
                times.append(took)
                answer = json.loads(out.stdout)
            print(f"hmn {label} --prometheus: {spread(times)}; {answer['queries']} queries, "
                  f"{len(answer['gpus'])} GPUs ranked, verdict {answer['verdict']}, "
                  f"answer {len(out.stdout) >> 10} KiB")
        top_seconds = int(os.environ.get("FLEET_SCALE_TOP", "20"))
        if top_seconds > 0:
            top_phase(hmn, url, f"{int(time.time()) - now + 600}s", top_seconds, nodes)
        if os.environ.get("FLEET_SCALE_COMPARE") == "0":
            return
        # Today's way: one `hmn --json` per node.
        lib = paths.build_fake(release=True)
        scenario = os.path.join(work, "node.json")
        with open(scenario, "w") as f:
            json.dump({"devices": [{"name": "NVIDIA H200", "total": 141 * GIB,
                                    "free": 100 * GIB} for _ in range(GPUS)]}, f)
        env = dict(os.environ, HYPOMNESIS_NVML_LIBRARY=lib, FAKE_NVML_SCENARIO=scenario)
        def one(_):
            took, out = timed([hmn, "--json"], env)
            if out.returncode != 0 or b'"free_bytes"' not in out.stdout:
                raise SystemExit(f"hmn --json failed: {out.stderr.decode()}")
            return took
        t = time.perf_counter()
        each = [one(i) for i in range(nodes)]
        serial = time.perf_counter() - t
        t = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, range(nodes)))
        two = time.perf_counter() - t
        print(f"{nodes} × `hmn --json` (one per node, on loopback, no ssh): {serial:.1f} s one "
              f"after the other ({statistics.median(each) * 1000:.1f} ms each, median), "
              f"{two:.1f} s two at a time")
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
