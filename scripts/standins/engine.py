#!/usr/bin/env python3
"""A stand-in serving engine: starts like vLLM, SGLang or TensorRT-LLM as far as its GPU memory
and its log are concerned, on the fake NVML (crates/fake-nvml), for `hmn run`'s tests, demo and
README. No GPU, no model: it prints the startup lines the real engine prints (their wording as
the versions named in docs/engines.md print them) and, as it goes, rewrites the fake's figures
for its own process and for the device's free memory, so the driver "sees" it load its weights,
profile, allocate its KV cache and capture CUDA graphs. It sizes its KV cache the way the real
engine does, from the device's free memory, so another process that loads meanwhile shrinks it,
or makes it fail with the real engine's message.

Usage: engine.py {vllm,sglang,trtllm} [--serve SECONDS]

Environment:
  HMN_STANDIN_DIR    where the fake's files are: engine.pid (this process), engine.used (its
                     bytes), free (the device's free bytes); the scenario names them
  HMN_STANDIN_TOTAL  the device's total bytes
  HMN_STANDIN_OTHERS other processes' used files (":"-separated), counted in free memory
  HMN_STANDIN_STEP   seconds between steps (default 0.3)
  HMN_STANDIN_UTILIZATION  vLLM's --gpu-memory-utilization (default 0.9)
  HMN_STANDIN_HOOK_<STEP>  a shell command run when a step begins (STEP: LOAD, PROFILE, KV,
                     GRAPHS): another process loading or letting go of memory then
  HMN_STANDIN_FIXED  set: fixed timestamps and pid in the log prefixes (byte-for-byte tests)
"""

import os
import subprocess
import sys
import time

GIB = 1 << 30
MIB = 1 << 20

DIR = os.environ["HMN_STANDIN_DIR"]
TOTAL = int(os.environ["HMN_STANDIN_TOTAL"])
OTHERS = [p for p in os.environ.get("HMN_STANDIN_OTHERS", "").split(":") if p]
STEP = float(os.environ.get("HMN_STANDIN_STEP", "0.3"))
FIXED = bool(os.environ.get("HMN_STANDIN_FIXED"))

#: The model: an 8B model in bf16 (15.27 GiB of weights, 128 KiB of KV cache per token).
WEIGHTS = int(15.27 * GIB)
KV_PER_TOKEN = 128 * 1024
CONTEXT = 512 * MIB  # the CUDA context, which no engine counts
SLACK = 160 * MIB  # the caching allocator's rounding, which no engine counts either
ACTIVATIONS = int(1.21 * GIB)
NON_TORCH = int(0.06 * GIB)  # cuBLAS workspaces and the like
GRAPHS = int(0.6 * GIB)

own = 0


def write(path, value):
    with open(path + ".new", "w") as f:
        f.write(str(value))
    os.replace(path + ".new", path)


def others():
    total = 0
    for p in OTHERS:
        try:
            with open(p) as f:
                total += int(f.read().strip() or 0)
        except (OSError, ValueError):
            pass
    return total


def free():
    return max(TOTAL - own - others(), 0)


def hold(delta):
    """This process's memory changes by ``delta``: its figure and the device's free one."""
    global own
    own = max(own + delta, 0)
    write(os.path.join(DIR, "engine.used"), own)
    write(os.path.join(DIR, "free"), free())


def step(name):
    time.sleep(STEP)
    hook = os.environ.get("HMN_STANDIN_HOOK_" + name)
    if hook:
        subprocess.run(hook, shell=True, check=False)
        write(os.path.join(DIR, "free"), free())
    time.sleep(STEP)


def stamp(fmt):
    return "2026-12-06 10:11:12" if FIXED else time.strftime(fmt)


def pid():
    return 4242 if FIXED else os.getpid()


def g(b, digits=2):
    """GiB as the engines print them."""
    return f"{b / GIB:.{digits}f}"


def say(line):
    print(line, flush=True)


def leave():
    """Its memory freed and its process gone from the driver's list, as at a real exit."""
    write(os.path.join(DIR, "engine.used"), 0)
    write(os.path.join(DIR, "free"), max(TOTAL - others(), 0))
    try:
        os.unlink(os.path.join(DIR, "engine.pid"))
    except OSError:
        pass


def fail(line, code=1):
    say(line)
    leave()
    sys.exit(code)


def vllm(utilization=float(os.environ.get("HMN_STANDIN_UTILIZATION", "0.9"))):
    """vLLM 0.19.1's V1 engine (its lines at DEBUG level, as VLLM_LOGGING_LEVEL=DEBUG prints)."""
    date = stamp("%m-%d %H:%M:%S")[5:] if FIXED else time.strftime("%m-%d %H:%M:%S")

    def log(level, where, text):
        say(f"\x1b[36m(EngineCore pid={pid()})\x1b[0m {level} {date} [{where}] {text}")

    hold(CONTEXT)
    initial_free = free()
    requested = int(utilization * TOTAL)
    if initial_free < requested:
        fail(
            f"ValueError: Free memory on device cuda:0 ({g(initial_free)}/{g(TOTAL)} GiB) on "
            f"startup is less than desired GPU memory utilization ({utilization}, "
            f"{g(requested)} GiB). Decrease GPU memory utilization or reduce GPU memory used by "
            "other processes."
        )
    step("LOAD")
    hold(WEIGHTS + SLACK)
    log("INFO", "gpu_model_runner.py:4820", f"Model loading took {g(WEIGHTS)} GiB memory and 4.543456 seconds")
    step("PROFILE")
    hold(ACTIVATIONS + NON_TORCH)
    hold(-ACTIVATIONS)
    after = free()
    if after > initial_free:
        fail(
            f"AssertionError: Error in memory profiling. Initial free memory {g(initial_free)} GiB, "
            f"current free memory {g(after)} GiB. This happens when other processes sharing the "
            "same container release GPU memory while vLLM is profiling during initialization."
        )
    # Everything the device lost since start-up that is not weights or activations is counted
    # as this engine's own non-torch memory: a neighbour's loading included.
    non_torch = max(initial_free - after - WEIGHTS - SLACK, 0)
    non_kv = WEIGHTS + ACTIVATIONS + non_torch
    log(
        "DEBUG",
        "gpu_worker.py:430",
        f"Memory profiling takes 1.52 seconds. Total non KV cache memory: {g(non_kv)}GiB; torch "
        f"peak memory increase: {g(ACTIVATIONS)}GiB; non-torch forward increase memory: "
        f"{g(non_torch)}GiB; weights memory: {g(WEIGHTS)}GiB.",
    )
    kv = requested - non_kv - CONTEXT
    if kv <= 0:
        fail(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
        )
    log("INFO", "gpu_worker.py:436", f"Available KV cache memory: {g(kv)} GiB")
    step("KV")
    if kv > free():
        fail_torch(kv)
    hold(kv)
    log("INFO", "kv_cache_utils.py:1319", f"GPU KV cache size: {kv // KV_PER_TOKEN:,} tokens")
    log("INFO", "kv_cache_utils.py:1323", f"Maximum concurrency for 32,768 tokens per request: {kv / KV_PER_TOKEN / 32768:.2f}x")
    log("INFO", "gpu_model_runner.py:5955", f"Estimated CUDA graph memory: {g(GRAPHS + 64 * MIB)} GiB total")
    step("GRAPHS")
    hold(GRAPHS)
    log("INFO", "gpu_model_runner.py:6046", f"Graph capturing finished in 4 secs, took {g(GRAPHS)} GiB")
    log(
        "INFO",
        "gpu_worker.py:597",
        f"CUDA graph pool memory: {g(GRAPHS)} GiB (actual), {g(GRAPHS + 64 * MIB)} GiB "
        "(estimated), difference: 0.06 GiB (10.4%).",
    )
    log("INFO", "core.py:283", "init engine (profile, create kv cache, warmup model) took 11.08 seconds")


def sglang(fraction=0.88):
    """SGLang 0.5.23."""

    def log(text):
        say(f"[{stamp('%Y-%m-%d %H:%M:%S')}] {text}")

    hold(CONTEXT)
    log(f"Load weight begin. avail mem={g(free())} GB")
    step("LOAD")
    hold(WEIGHTS + SLACK)
    log(f"Load weight end. elapsed=4.54 s, type=LlamaForCausalLM, avail mem={g(free())} GB, mem usage={g(WEIGHTS)} GB.")
    step("PROFILE")
    step("KV")
    # What is free now, less what the static fraction leaves to others: a neighbour's loading
    # before this line comes out of the cache.
    kv = free() - int(TOTAL * (1 - fraction))
    if kv <= 0:
        fail(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={fraction}"
        )
    hold(kv)
    log(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {kv // KV_PER_TOKEN}, K size: {g(kv // 2)} GB, V size: {g(kv // 2)} GB")
    log(f"Memory pool end. avail mem={g(free())} GB")
    log(f"Capture target decode CUDA graph begin. backend=flashinfer, num_tokens_per_req=1, avail mem={g(free())} GB")
    step("GRAPHS")
    hold(GRAPHS)
    log(f"Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 24, 32], elapsed=10.10 s, mem usage={g(GRAPHS)} GB, avail mem={g(free())} GB.")


def trtllm(fraction=0.9):
    """TensorRT-LLM 1.1.0rc3, PyTorch backend."""

    def log(text):
        when = "12/06/2026-10:11:12" if FIXED else time.strftime("%m/%d/%Y-%H:%M:%S")
        say(f"[{when}] [TRT-LLM] [I] {text}")

    hold(CONTEXT)
    initial_free = free()
    step("LOAD")
    hold(WEIGHTS + SLACK)
    log(f"Memory used after loading model weights (inside torch) in memory usage profiling: {g(WEIGHTS)} GiB")
    log(f"Memory used after loading model weights (outside torch) in memory usage profiling: {g(CONTEXT)} GiB")
    step("PROFILE")
    hold(ACTIVATIONS + NON_TORCH)
    hold(-ACTIVATIONS)
    outside = max(initial_free - free() - WEIGHTS - SLACK, 0) + CONTEXT
    log(f"Memory dynamically allocated during inference (inside torch) in memory usage profiling: {g(ACTIVATIONS)} GiB")
    log(f"Memory used outside torch (e.g., NCCL and CUDA graphs) in memory usage profiling: {g(outside)} GiB")
    peak = WEIGHTS + ACTIVATIONS + outside
    kv = int((TOTAL - peak) * fraction) - int(TOTAL * 0.05)
    log(
        f"Peak memory during memory usage profiling (torch + non-torch): {g(peak)} GiB, available "
        f"KV cache memory when calculating max tokens: {g(kv)} GiB, fraction is set "
        f"0.8999999761581421, kv size is 131072. device total memory {g(TOTAL)} GiB, , tmp kv_mem "
        "0.56 GiB"
    )
    step("KV")
    if kv <= 0 or kv > free():
        fail_torch(max(kv, 1 * GIB))
    hold(kv)
    say(f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {g(kv)} GiB for max tokens in paged KV cache ({kv // KV_PER_TOKEN}).")


def fail_torch(tried):
    """PyTorch 2.4+'s out-of-memory error, as the engine's traceback ends with it."""
    lines = f"this process has {g(own)} GiB memory in use."
    fail(
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {g(tried)} GiB. GPU 0 has "
        f"a total capacity of {g(TOTAL)} GiB of which {free() // MIB} MiB is free. Including "
        f"non-PyTorch memory, {lines} Of the allocated memory {g(own)} GiB is allocated by "
        "PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
    )


def main():
    engines = {"vllm": vllm, "sglang": sglang, "trtllm": trtllm}
    if len(sys.argv) < 2 or sys.argv[1] not in engines:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(engines)}}} [--serve SECONDS]")
    serve = 0.0
    if "--serve" in sys.argv:
        serve = float(sys.argv[sys.argv.index("--serve") + 1])
    write(os.path.join(DIR, "engine.pid"), os.getpid())
    engines[sys.argv[1]]()
    # Ready: it serves (holds its memory) a while, then stops, its memory freed.
    time.sleep(max(serve, STEP))
    leave()


if __name__ == "__main__":
    main()
