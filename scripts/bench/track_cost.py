#!/usr/bin/env python3
"""What `hypomnesis.track()` costs, with the installed package, against the fake NVML (one H200
listing this process; built here with cargo, optimised), all in one run of one process:

- the floor: what a decorated call must read at the least, made through ctypes with the same
  NVML library: per edge (entry and exit) NVML's process lists (compute and graphics) of every
  device and ``/proc/self/statm``;
- one round trip to the library's bounded worker (`_native._round_trip_seconds`): what the hang
  guard adds to each edge;
- a decorated call with the guard (the default deadline) and with ``deadline=None`` (edges read
  on the calling thread), as times and against the floor, the floor and the two calls timed in
  turns (20 rounds of 5,000 calls each, the fastest round of each kept: this VM's speed drifts
  by half within a minute);
- the history kept after 20,000 decorated calls, and the RSS after a block tracked for a while
  at a 1 µs interval.

Usage: scripts/bench/track_cost.py [SECONDS]   (SECONDS of the 1 µs block, default 30)
Run it with the Python whose site-packages holds the package, e.g. /work/venv/bin/python."""
import ctypes, json, os, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import paths  # noqa: E402

CALLS = 20_000


def interleaved(fs, n: int = CALLS // 4, rounds: int = 20):
    """Per name of ``fs``: the fastest of ``rounds`` runs of ``n`` calls, seconds per call, the
    runs of the functions taking turns (this VM's speed drifts by half within a minute: each
    figure is then taken in the same conditions as the others)."""
    for f in fs.values():
        for _ in range(1000):
            f()
    best = {name: float("inf") for name in fs}
    for _ in range(rounds):
        for name, f in fs.items():
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return best


def floor_call(lib_path: str, devices: int):
    """One decorated call's floor: two edges, each NVML's two process lists per device and
    /proc/self/statm, through ctypes."""
    nv = ctypes.CDLL(lib_path)
    if nv.nvmlInit_v2() != 0:
        raise SystemExit("nvmlInit_v2 failed")
    handles = []
    for i in range(devices):
        h = ctypes.c_void_p()
        nv.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        handles.append(h)
    compute = nv.nvmlDeviceGetComputeRunningProcesses_v3
    graphics = nv.nvmlDeviceGetGraphicsRunningProcesses_v3
    buf = (ctypes.c_ubyte * (24 * 64))()
    count = ctypes.c_uint()
    statm = os.open("/proc/self/statm", os.O_RDONLY)

    def edge() -> None:
        os.pread(statm, 128, 0)
        for h in handles:
            count.value = 64
            compute(h, ctypes.byref(count), buf)
            count.value = 64
            graphics(h, ctypes.byref(count), buf)

    def call() -> None:
        edge()
        edge()

    return call


def child() -> None:
    # The scenario lists this process (the child), written before NVML is first loaded.
    with open(os.environ["FAKE_NVML_SCENARIO"], "w") as f:
        json.dump({"devices": [{"name": "NVIDIA H200", "total": 143771 << 20,
                                "free": 110796 << 20, "reserved": 614 << 20,
                                "compute_processes": [{"pid": os.getpid(), "used": 1 << 30}]}]}, f)
    import hypomnesis
    from hypomnesis import _native

    def rss_mib() -> float:
        return hypomnesis.process_rss() / 2**20

    def bare() -> int:
        return 1

    devices = hypomnesis.device_count()
    trip = _native._round_trip_seconds(20_000)
    own = hypomnesis.process_gpu_info(0)
    if not own.is_per_process or own.used_bytes != 1 << 30:
        raise SystemExit(f"the fake NVML does not list this process: {own}")
    best = interleaved({
        "floor": floor_call(os.environ["HYPOMNESIS_NVML_LIBRARY"], devices),
        "guarded": hypomnesis.track()(bare),
        "unguarded": hypomnesis.track(deadline=None)(bare),
        "bare": bare,
    })
    floor, guarded, unguarded, plain = (best[k] for k in ("floor", "guarded", "unguarded", "bare"))
    us = 1e6
    print(f"devices                       {devices}")
    print(f"bare call                     {plain * us:8.2f} µs")
    print(f"floor (2 edges, ctypes)       {floor * us:8.2f} µs")
    print(f"worker round trip (median)    {trip * us:8.2f} µs")
    print(f"decorated, guarded            {guarded * us:8.2f} µs  = floor + 2 round trips "
          f"{(guarded - floor - 2 * trip) * us:+.2f} µs")
    print(f"decorated, deadline=None      {unguarded * us:8.2f} µs  = floor "
          f"{(unguarded - floor) * us:+.2f} µs")

    fresh = hypomnesis.track()
    counted = fresh(bare)
    before = rss_mib()
    for _ in range(20_000):
        counted()
    print(f"history after 20,000 decorated calls: {len(fresh.history)} records, "
          f"RSS {before:.0f} -> {rss_mib():.0f} MiB")

    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    before = rss_mib()
    with hypomnesis.track(interval=1e-6) as t:
        time.sleep(seconds)
    print(f"{seconds:.0f} s at a 1 µs interval: {len(t.samples)} samples kept, "
          f"RSS {before:.0f} -> {rss_mib():.0f} MiB")


def main() -> None:
    if os.environ.get("HMN_TRACK_COST_CHILD"):
        child()
        return
    lib = paths.build_fake(release=True)
    fd, scenario = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, HMN_TRACK_COST_CHILD="1", HYPOMNESIS_NVML_LIBRARY=lib,
               FAKE_NVML_SCENARIO=scenario)
    try:
        subprocess.run([sys.executable, __file__, *sys.argv[1:]], env=env, check=True,
                       cwd=tempfile.gettempdir())
    finally:
        os.unlink(scenario)


if __name__ == "__main__":
    main()
