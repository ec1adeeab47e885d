"""The bindings through the real NVML loader, against the fake libnvidia-ml: each scenario in
a child process of its own (NVML is loaded once per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import GHOST, GHOST_REASON, GIB, MIB, REPO, h200, run_child

ALL = """
out({
    "count": hypomnesis.device_count(),
    "devices": hypomnesis.devices(),
    "own": [hypomnesis.process_gpu_info(i) for i in range(hypomnesis.device_count())],
    "procs": [hypomnesis.gpu_processes(i) for i in range(hypomnesis.device_count())],
    "pid": os.getpid(),
    "uid": os.getuid(),
    "ppid": os.getppid(),
})
"""


def test_r510_device_figures_processes_and_their_context() -> None:
    scenario = {
        "driver_version": "590.48.01",
        "devices": [
            h200(
                compute_processes=[
                    {"pid": "__SELF_PID__", "used": 2 * GIB},
                    {"pid": GHOST, "used": 3 * GIB},
                ],
                graphics_processes=[{"pid": "__SELF_PID__", "used": 2 * GIB}],
            ),
            {"name": "NVIDIA L40S", "total": 46_068 * MIB, "reserved": 583 * MIB},
        ],
        "process_names": {str(GHOST): "ghost"},
    }
    r = run_child(ALL, scenario)
    assert r["count"] == 2
    d0, d1 = r["devices"]
    assert d0 == {
        "index": 0,
        "name": "NVIDIA H200",
        "total_bytes": 143_771 * MIB,
        "free_bytes": 110_796 * MIB,
        "used_bytes": (143_771 - 110_796) * MIB,
        "reserved_bytes": 614 * MIB,
        "allocated_bytes": (143_771 - 614 - 110_796) * MIB,
        "allocatable_bytes": (143_771 - 614) * MIB,
        "driver_version": "590.48.01",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:18:00.0",
        "vendor": "nvidia",
        "source": "nvml",
        "gtt_total_bytes": None,
        "gtt_used_bytes": None,
        "visible_vram_total_bytes": None,
        "visible_vram_used_bytes": None,
        "mig_enabled": None,
        "memory_model": None,
        "memory_model_evidence": None,
        "numa_node": None,
        "numa_node_total_bytes": None,
        "numa_node_used_bytes": None,
    }
    # The fake's default free figure: total - reserved; nothing allocated.
    assert d1["name"] == "NVIDIA L40S" and d1["index"] == 1
    assert d1["free_bytes"] == (46_068 - 583) * MIB and d1["allocated_bytes"] == 0
    own0, own1 = r["own"]
    assert own0 == {"used_bytes": 2 * GIB, "is_per_process": True, "source": "nvml"}
    assert own1 == {"used_bytes": 0, "is_per_process": True, "source": "nvml"}
    rows = r["procs"][0]
    assert [p["pid"] for p in rows] == [r["pid"], GHOST]
    me, ghost = rows
    # In both lists: merged, counted once.
    assert me["used_bytes"] == 2 * GIB and me["context"] == "compute+graphics"
    ctx = me["process_context"]
    assert ctx["uid"] == r["uid"] and ctx["user"]
    assert "HMN-RESULT" in ctx["command"] and ctx["rss_bytes"] > 0
    assert ghost["process_context"] is None
    # Beyond any pid_max: a number no process of this namespace can have (none at all, in the
    # initial one).
    assert ghost["unreadable"] == GHOST_REASON
    assert ghost["outside_pid_namespace"] is (GHOST_REASON == "outside_pid_namespace")
    assert me["unreadable"] is None
    assert ghost["used_bytes"] == 3 * GIB and ghost["context"] == "compute"
    assert r["procs"][1] == []


def test_mps_clients_are_listed_once_with_their_kind() -> None:
    scenario = {
        "devices": [
            h200(
                compute_processes=[{"pid": "__SELF_PID__", "used": GIB}],
                mps_processes=[
                    {"pid": "__SELF_PID__", "used": GIB},
                    {"pid": GHOST, "used": 2 * GIB},
                ],
            ),
        ],
    }
    r = run_child(ALL, scenario)
    me, ghost = r["procs"][0]
    assert me["context"] == "mps+compute" and me["used_bytes"] == GIB, me
    assert ghost["context"] == "mps" and ghost["used_bytes"] == 2 * GIB, ghost
    assert me["mps_server"] is False and ghost["mps_server"] is False


def test_pre_r510_has_no_reservation() -> None:
    r = run_child(ALL, {"devices": [h200(compute_processes=[{"pid": "__SELF_PID__", "used": GIB}])]},
                  variant="pre-r510")
    (d,) = r["devices"]
    assert d["reserved_bytes"] is None
    assert d["allocated_bytes"] is None and d["allocatable_bytes"] is None
    assert d["total_bytes"] == 143_771 * MIB and d["used_bytes"] == (143_771 - 110_796) * MIB
    assert r["own"] == [{"used_bytes": GIB, "is_per_process": True, "source": "nvml"}]


def test_r450_v1_process_lists() -> None:
    r = run_child(ALL, {"devices": [h200(compute_processes=[{"pid": "__SELF_PID__", "used": 7 * MIB}])]},
                  variant="r450")
    assert r["devices"][0]["reserved_bytes"] is None
    assert [p["used_bytes"] for p in r["procs"][0]] == [7 * MIB]


def test_no_gpu_at_all() -> None:
    r = run_child(
        """
out({"count": error(hypomnesis.device_count), "info": error(hypomnesis.device_info, 0),
     "snapshots": [repr(s) for s in hypomnesis.Snapshot.all()],
     "snap": hypomnesis.Snapshot.now(0)})
""",
        variant=None,
    )
    count = r["count"]
    assert count["type"] == "NoGpuSourceError" and count["kind"] == "not_installed"
    assert count["mro"][:3] == ["NoGpuSourceError", "NotInstalledError", "HypomnesisError"]
    assert count["message"].startswith("no GPU source is available on this host")
    assert r["info"]["type"] == "NoGpuSourceError"
    assert len(r["snapshots"]) == 1 and "gpu_bytes=unknown" in r["snapshots"][0]
    snap = r["snap"]
    assert snap["ram_bytes"] > 0 and snap["gpu"] is None and snap["gpu_device"] is None


def test_no_gpu_track_samples_ram_only() -> None:
    r = run_child(
        """
with hypomnesis.track(interval=0.001) as t:
    pass
out({"devices": list(t.devices), "samples": len(t.samples), "peak": t.peak_gpu_bytes,
     "rss": t.peak_rss_bytes})
""",
        variant=None,
    )
    assert r["devices"] == [] and r["peak"] == {}
    assert r["samples"] >= 2 and r["rss"] > 0


def test_zero_devices() -> None:
    r = run_child(
        'out({"count": hypomnesis.device_count(), "e": error(hypomnesis.device_info, 0)})',
        {"devices": []},
    )
    assert r["count"] == 0
    e = r["e"]
    assert e["type"] == "NoSuchDeviceError" and e["kind"] == "no_such_device"
    assert e["message"] == "GPU index 0 is out of range: 0 device(s) present"
    assert "IndexError" in e["mro"]


def test_errors_keep_their_kind_and_message() -> None:
    r = run_child(
        """
out({
    "refused": error(hypomnesis.device_info, 1),
    "unsupported": error(hypomnesis.device_info, 0),
    "lost": error(hypomnesis.device_info, 2),
    "procs_refused": error(hypomnesis.gpu_processes, 1),
    "negative": error(hypomnesis.device_info, -1),
    "past": error(hypomnesis.process_gpu_info, 3),
    "snap": hypomnesis.Snapshot.now(1),
})
""",
        {
            "devices": [h200(), h200(handle_error=4), h200(handle_error=15)],
            # Refused once, the v2 query answering: a failure (a GPU that never reports its
            # memory is a unified one, test_a_gpu_without_memory_of_its_own_is_the_hosts_pool).
            "fail": [{"function": "nvmlDeviceGetMemoryInfo", "code": 3, "device": 0}],
        },
    )
    refused = r["refused"]
    assert refused["type"] == "NoPermissionError" and refused["source"] == "nvml"
    assert "PermissionError" in refused["mro"]
    assert refused["message"] == (
        "NVML: nvmlDeviceGetHandleByIndex_v2 for GPU 1 failed: "
        'NVML_ERROR_NO_PERMISSION (4, "Insufficient Permissions")'
    )
    assert r["procs_refused"]["type"] == "NoPermissionError"
    unsupported = r["unsupported"]
    assert unsupported["type"] == "NotSupportedError" and unsupported["kind"] == "not_supported"
    assert "NVML_ERROR_NOT_SUPPORTED" in unsupported["message"]
    lost = r["lost"]
    assert lost["type"] == "GpuLostError" and "NVML_ERROR_GPU_IS_LOST" in lost["message"]
    assert r["negative"]["type"] == "NoSuchDeviceError"
    assert r["past"]["message"] == "GPU index 3 is out of range: 3 device(s) present"
    # A GPU failure never fails a snapshot: it is RAM-only.
    assert r["snap"]["gpu_device"] is None and r["snap"]["ram_bytes"] > 0


def test_init_refused() -> None:
    for code, kind, cls in [
        (18, "driver_version_mismatch", "DriverVersionMismatchError"),
        (4, "no_permission", "NoPermissionError"),
        (999, "other", "HypomnesisError"),
    ]:
        r = run_child('out(error(hypomnesis.device_count))', {"init_error": code, "devices": [h200()]})
        assert (r["type"], r["kind"], r["source"]) == (cls, kind, "nvml"), r
        assert r["message"].startswith("NVML: nvmlInit_v2 failed: "), r
    # A driver that is not loaded is no GPU to measure (as the library has it since 0.2.15);
    # the source says why.
    r = run_child(
        """
out({"count": error(hypomnesis.device_count),
     "nvml": [s.reason for s in hypomnesis.sources() if s.source == "nvml"]})
""",
        {"init_error": 9, "devices": [h200()]},
    )
    assert r["count"]["type"] == "NoGpuSourceError", r
    assert "driver may not be loaded" in r["count"]["message"], r
    assert r["nvml"] and "NVML_ERROR_DRIVER_NOT_LOADED" in json.dumps(r["nvml"]), r


def test_library_that_cannot_be_loaded() -> None:
    r = run_child(
        'out(error(hypomnesis.device_count))',
        variant=None,
        env={"HYPOMNESIS_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"},
    )
    assert r["type"] == "HypomnesisError" and r["source"] == "nvml"
    assert "/nonexistent/libnvidia-ml.so.1" in r["message"]


def test_mig_instances_and_gpu_instances() -> None:
    gi2 = {"total": 71_424 * MIB, "free": 60_000 * MIB, "reserved": 0}
    scenario = {
        "devices": [
            h200(
                mig_mode=1,
                mig_devices=[
                    {"slot": 0, "gpu_instance_id": 2, "compute_instance_id": 0,
                     "name": "NVIDIA H200 MIG 1c.3g.71gb",
                     "uuid": "MIG-aaaaaaaa-0000-4000-8000-000000000000", **gi2,
                     "compute_processes": [{"pid": "__SELF_PID__", "used": 512 * MIB}]},
                    {"slot": 1, "gpu_instance_id": 2, "compute_instance_id": 1,
                     "name": "NVIDIA H200 MIG 1c.3g.71gb"},
                    {"slot": 2, "gpu_instance_id": 5, "compute_instance_id": 0,
                     "name": "NVIDIA H200 MIG 1g.18gb", "total": 17_664 * MIB,
                     "free": 17_000 * MIB, "memory_error": 999},
                ],
            ),
            h200(),
        ]
    }
    r = run_child(
        """
out({
    "state": hypomnesis.mig_state(0),
    "off": hypomnesis.mig_state(1),
    "instances": hypomnesis.mig_instances(0),
    "groups": hypomnesis.mig_gpu_instances(0),
    "one": hypomnesis.mig_instance("MIG-aaaaaaaa-0000-4000-8000-000000000000"),
    "missing": error(hypomnesis.mig_instance, "MIG-ffffffff-0000-4000-8000-000000000000"),
    "device": hypomnesis.device_info(0),
    "procs": hypomnesis.gpu_processes(0),
    "repr": repr(hypomnesis.mig_state(0)),
})
""",
        scenario,
    )
    state = r["state"]
    assert state["enabled"] is True and state["source"] == "nvml"
    assert [(m["gpu_instance_id"], m["compute_instance_id"], m["slot"]) for m in state["instances"]] == [
        (2, 0, 0),
        (2, 1, 1),
        (5, 0, 2),
    ]
    first, second, third = r["instances"]
    assert first["profile"] == "1c.3g.71gb" and first["gpu_instance_profile"] == "3g.71gb"
    assert first["total_bytes"] == second["total_bytes"] == 71_424 * MIB
    assert third["total_bytes"] is None and third["memory_error"]
    assert third["memory_error_kind"] == "other"
    assert r["off"]["enabled"] is None and r["off"]["instances"] == []
    groups = r["groups"]
    assert [(g["gpu_instance_id"], g["slots"]) for g in groups] == [(2, [0, 1]), (5, [2])]
    assert groups[0]["total_bytes"] == 71_424 * MIB
    assert r["one"]["slot"] == 0 and r["one"]["parent_index"] == 0
    assert r["missing"]["type"] != "NoneType" and r["missing"]["message"]
    assert r["device"]["mig_enabled"] is True
    mine = [p for p in r["procs"] if p["used_bytes"] == 512 * MIB]
    assert mine and mine[0]["gpu_instance_id"] == 2 and mine[0]["compute_instance_id"] == 0
    assert "mig=on" in r["repr"] and "instances=3" in r["repr"]


SOURCES = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
try:
    child_rss = hypomnesis.process_rss_of(child.pid)
finally:
    child.kill()
    child.wait()
out({
    "sources": [[s.source, s.state, s.reason, list(map(list, s.details)), repr(s)]
                for s in hypomnesis.sources()],
    "own_rss": hypomnesis.process_rss_of(os.getpid()),
    "child_rss": child_rss,
    "gone": error(hypomnesis.process_rss_of, child.pid),
})
"""


def test_sources_say_which_answered_and_why_not() -> None:
    r = run_child(SOURCES, {"driver_version": "590.48.01", "devices": [h200()]})
    by_name = {s[0]: s for s in r["sources"]}
    nvml = by_name["nvml"]
    assert nvml[1] == "answered" and nvml[2] is None, nvml
    assert ["driver version", "590.48.01"] in nvml[3], nvml
    assert nvml[4] == "<SourceReport nvml answered>"
    # No nvidia-smi on the child's (empty) PATH: absent, with where it was looked for.
    smi = by_name["nvidia-smi"]
    assert smi[1] == "absent" and smi[2], smi
    assert smi[4].startswith("<SourceReport nvidia-smi absent: ")
    assert r["own_rss"] > 0 and r["child_rss"] > 0
    # A reaped process has no resident set to read: an error, not 0.
    assert r["gone"] is not None and "HypomnesisError" in r["gone"]["mro"], r["gone"]

    r = run_child(SOURCES, variant=None)
    nvml = {s[0]: s for s in r["sources"]}["nvml"]
    assert nvml[1] == "absent" and "NVML" in nvml[2], nvml


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's 15-byte comm")
def test_a_name_the_kernel_cut_is_whole(tmp_path: Path) -> None:
    long = "Trainer-Worker-Number-Seven"
    exe = tmp_path / long
    shutil.copy("/bin/sleep", exe)
    holder = subprocess.Popen([str(exe), "60"])
    try:
        started = time.monotonic()
        comm = Path(f"/proc/{holder.pid}/comm")
        while comm.read_text().strip() != long[:15]:
            assert time.monotonic() - started < 5, "it never ran"
            time.sleep(0.005)
        r = run_child(
            "out([p.name for p in hypomnesis.gpu_processes(0)])",
            {"devices": [h200(compute_processes=[{"pid": holder.pid, "used": GIB}])]},
        )
        assert r == [long]
    finally:
        holder.kill()
        holder.wait()


def test_ghosts_sort_an_exited_pid_a_zombie_and_an_idle_holder() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    zombie = subprocess.Popen(["true"])
    stat = Path(f"/proc/{zombie.pid}/stat")
    deadline = time.monotonic() + 10
    while ") Z " not in stat.read_text():
        assert time.monotonic() < deadline, "never a zombie"
        time.sleep(0.005)
    idle = subprocess.Popen(["sleep", "60"])
    time.sleep(1.3)  # older than the idle threshold below
    try:
        scenario = {
            "devices": [
                h200(
                    compute_processes=[
                        {"pid": gone.pid, "used": 3 * GIB},
                        {"pid": zombie.pid, "used": 2 * GIB},
                        {"pid": idle.pid, "used": GIB},
                    ],
                    # The driver's samples reach back 5 s and show nothing at work.
                    process_samples=[{"pid": idle.pid, "age_s": 5}],
                    # All of the allocation is the listed rows'.
                    free=(143_771 - 614) * MIB - 6 * GIB,
                )
            ]
        }
        r = run_child(
            """
report = hypomnesis.ghosts(stuck_after=0.05, idle_after=1.0)
out({"report": report, "by_class": report.bytes_by_class, "repr": repr(report.ghosts[0])})
""",
            scenario,
        )
    finally:
        zombie.wait()
        idle.kill()
        idle.wait()
    ghosts = {g["ghost_class"]: g for g in r["report"]["ghosts"]}
    assert set(ghosts) == {"exited", "zombie", "idle"}, r
    assert ghosts["exited"]["pid"] == gone.pid and ghosts["exited"]["bytes"] == 3 * GIB
    assert ghosts["zombie"]["remedy"] == "reap"
    assert ghosts["zombie"]["reap_parent"] == os.getpid()
    assert ghosts["idle"]["remedy"] == "kill" and ghosts["idle"]["kill"] == [idle.pid]
    assert any("no activity sample" in e for e in ghosts["idle"]["evidence"])
    assert r["by_class"] == {"exited": 3 * GIB, "zombie": 2 * GIB, "idle": GIB}
    # No GPU device file is known on a test machine (no NVIDIA major in /proc/devices): no scan,
    # and what frees the exited pid's memory is unknown, not guessed.
    assert r["report"]["scan_complete"] is None, r
    assert ghosts["exited"]["remedy"] == "unknown", ghosts["exited"]
    assert "device file is not known" in ghosts["exited"]["remedy_text"], ghosts["exited"]
    assert r["report"]["complete"] is True and r["report"]["facts"] == [], r
    assert r["repr"].startswith("Ghost(exited on GPU 0"), r["repr"]


def test_ghosts_of_a_bad_duration_is_a_value_error() -> None:
    r = run_child(
        """
try:
    hypomnesis.ghosts(stuck_after=-1)
    out("no error")
except ValueError as e:
    out(str(e))
""",
        {"devices": [h200()]},
    )
    assert "stuck_after must be a number of seconds" in r


def test_ghosts_of_a_stuck_process_an_orphan_and_memory_no_process_accounts_for() -> None:
    # The parent of a vfork whose child never execs waits in D.
    script = (
        "import ctypes, os\nlibc = ctypes.CDLL(None)\nprint(os.getpid(), flush=True)\n"
        "if libc.vfork() == 0:\n    libc.pause()\n    os._exit(0)\n"
    )
    stuck = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert stuck.stdout is not None
    stuck_pid = int(stuck.stdout.readline())
    orphan = int(
        subprocess.run(
            ["setsid", "sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    deadline = time.monotonic() + 10
    while ") D " not in Path(f"/proc/{stuck_pid}/stat").read_text():
        assert time.monotonic() < deadline, "never in D"
        time.sleep(0.005)
    try:
        scenario = {
            "devices": [
                h200(
                    compute_processes=[
                        {"pid": stuck_pid, "used": 4 * GIB},
                        {"pid": orphan, "used": 5 * GIB},
                    ],
                    # 7 GiB allocated beyond the listed rows.
                    free=(143_771 - 614) * MIB - 16 * GIB,
                )
            ]
        }
        r = run_child(
            "report = hypomnesis.ghosts(stuck_after=0.1)\n"
            "out({'by_class': report.bytes_by_class, "
            "'facts': [(f.ghost_class, f.pid) for f in report.facts]})",
            scenario,
        )
    finally:
        os.killpg(stuck.pid, 9)
        stuck.wait()
        os.kill(orphan, 9)
    # The orphan is a fact, not a ghost: the driver keeps no activity samples here, so whether
    # it is idle is not known (structure alone is no proof of abandonment).
    assert r["by_class"] == {"stuck": 4 * GIB, "unaccounted": 7 * GIB}, r
    assert r["facts"] == [["orphan", orphan]], r


def test_ghosts_of_a_process_in_a_pod_the_kubelet_removed(tmp_path: Path) -> None:
    fixture = REPO / "crates" / "testkit" / "fixtures" / "kubelet"
    rootfs = tmp_path / "rootfs"
    shutil.copytree(fixture / "rootfs", rootfs, symlinks=True)
    shutil.rmtree(
        rootfs / "var/log/pods/ml-team_trainer-0_6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d"
    )
    scenario = {"devices": [h200(compute_processes=[{"pid": 4242, "used": 40 * GIB}])]}
    r = run_child(
        "out(hypomnesis.ghosts().ghosts[0])",
        scenario,
        env={"HYPOMNESIS_PROCFS": str(fixture / "proc"), "HYPOMNESIS_ROOTFS": str(rootfs)},
    )
    assert r["ghost_class"] == "gone_pod" and r["pid"] == 4242, r
    assert any("6a2b5c3d-1e2f-4a5b-8c9d-0e1f2a3b4c5d" in e for e in r["evidence"]), r


def test_a_gpu_without_memory_of_its_own_is_the_hosts_pool(tmp_path: Path) -> None:
    """GB10 as its driver answers (NOT_SUPPORTED for the memory, addressing mode ATS, a
    process listed): a unified device whose figures are the host's ``meminfo``."""
    (tmp_path / "meminfo").write_text(
        "MemTotal:       134217728 kB\nMemFree:         1048576 kB\n"
        "MemAvailable:   104857600 kB\n"
    )
    scenario = {
        "devices": [
            h200(
                name="NVIDIA GB10",
                memory_error=3,
                addressing_mode=2,
                compute_processes=[{"pid": GHOST, "used": 4 * GIB}],
            )
        ]
    }
    r = run_child(
        "d = hypomnesis.device_info(0)\n"
        "out({'d': d, 'model': d.memory_model, 'why': d.memory_model_evidence,"
        " 'repr': repr(d), 'procs': hypomnesis.gpu_processes(0)})",
        scenario,
        env={"HYPOMNESIS_PROCFS": str(tmp_path)},
    )
    assert r["model"] == "unified", r
    assert (r["d"]["total_bytes"], r["d"]["free_bytes"]) == (128 * GIB, 100 * GIB), r
    assert r["d"]["reserved_bytes"] is None and r["d"]["allocated_bytes"] is None, r
    assert "NOT_SUPPORTED" in r["why"] and "ATS" in r["why"], r
    assert "memory=unified" in r["repr"], r
    assert [p["used_bytes"] for p in r["procs"]] == [4 * GIB], r


def test_a_gpu_whose_memory_is_a_numa_node() -> None:
    """Grace Hopper in NUMA mode (the fixture ``numa/gh200``): NVML names node 1, a node of
    memory only, as the GPU's; the device says its figures, and a process's pages there are
    read from its ``numa_maps``."""
    fixture = REPO / "crates" / "testkit" / "fixtures" / "numa" / "gh200"
    scenario = {
        "devices": [
            h200(
                addressing_mode=2,
                numa_node=1,
                compute_processes=[{"pid": 5100, "used": 20 * GIB}],
            )
        ]
    }
    r = run_child(
        "d = hypomnesis.device_info(0)\n"
        "def missing(pid):\n"
        "    try:\n"
        "        hypomnesis.process_numa_bytes(pid)\n"
        "    except hypomnesis.HypomnesisError as e:\n"
        "        return str(e)\n"
        "out({'d': d, 'placed': hypomnesis.process_numa_bytes(5100),"
        " 'missing': missing(5200)})",
        scenario,
        env={
            "HYPOMNESIS_PROCFS": str(fixture / "proc"),
            "HYPOMNESIS_SYSFS": str(fixture / "sys"),
        },
    )
    d = r["d"]
    assert d["memory_model"] == "coherent" and d["numa_node"] == 1, d
    assert (d["numa_node_total_bytes"], d["numa_node_used_bytes"]) == (94 * GIB, 16 * GIB), d
    # JSON object keys come back as text.
    assert r["placed"]["1"] == 10 * GIB, r
    assert "5200/numa_maps" in r["missing"], r
