"""explain(): the driver's figure for this process against what stand-in frameworks (tests/
standins.py, put in sys.modules by each child) say they hold, over the fake NVML; devices
matched by UUID."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from conftest import GIB, MIB, h200, run_child

STANDINS = (Path(__file__).parent / "standins.py").read_text(encoding="utf-8")

GPU0 = "GPU-11111111-2222-3333-4444-555555555555"
GPU1 = "GPU-22222222-2222-3333-4444-555555555555"
MIG = "MIG-aaaaaaaa-0000-4000-8000-000000000000"

#: The ledger as plain data, with its repr and HTML.
SHOW = """
ledger = hypomnesis.explain()
out({"ledger": ledger, "repr": repr(ledger), "html": ledger._repr_html_(),
     "first": next((repr(f) for g in ledger.gpus for f in g.frameworks), None),
     "slack": [g.allocator_slack_bytes for g in ledger.gpus],
     "modules": sorted(m for m in ("torch", "jax", "cupy") if m in sys.modules),
     "asked": watch.asked})
"""


def two_gpus(own0: int, own1: int, **extra: Any) -> Dict[str, Any]:
    """Two H200s, this process holding ``own0`` on the first and ``own1`` on the second."""
    own = lambda n: [{"pid": "__SELF_PID__", "used": n}] if n else []  # noqa: E731
    return {
        "devices": [
            h200(compute_processes=own(own0), **extra),
            h200(uuid=GPU1, pci_bus_id="00000000:2A:00.0", compute_processes=own(own1)),
        ]
    }


def explain(setup: str, scenario: Dict[str, Any], env: Optional[Dict[str, str]] = None) -> Any:
    code = STANDINS + "\nwatch = import_watch()\n" + setup + "\n" + SHOW
    return run_child(code, scenario, env=env)


def test_cuda_visible_devices_remaps_torch_device_0_to_gpu_1_by_uuid() -> None:
    torch = f"""standin_torch([{{"uuid": "{GPU1[4:]}", "allocated": {1946 * MIB},
        "reserved": {2560 * MIB}, "peak_allocated": {2 * GIB}}}])"""
    r = explain(torch, two_gpus(0, 3 * GIB + 256 * MIB), env={"CUDA_VISIBLE_DEVICES": "1"})
    (g,) = r["ledger"]["gpus"]
    assert g["index"] == 1 and g["uuid"] == GPU1 and g["mig_slot"] is None
    assert g["driver_bytes"] == 3 * GIB + 256 * MIB
    (t,) = g["frameworks"]
    assert t["framework"] == "torch" and t["device"] == "cuda:0"
    assert t["reserved_bytes"] == 2560 * MIB and t["allocated_bytes"] == 1946 * MIB
    assert t["peak_allocated_bytes"] == 2 * GIB and t["peak_reserved_bytes"] == 2560 * MIB
    assert g["framework_reserved_bytes"] == 2560 * MIB
    assert g["outside_bytes"] == 3 * GIB + 256 * MIB - 2560 * MIB
    free = 110_796 * MIB
    assert g["free_bytes"] == free and g["headroom_bytes"] == free + (2560 - 1946) * MIB
    assert g["notes"] == [] and r["ledger"]["unmatched"] == [] and r["ledger"]["notes"] == []
    # The terms of hmn run's engine ledger: reserved that no tensor holds is allocator slack.
    assert r["slack"] == [(2560 - 1946) * MIB]
    assert r["first"] == (
        "FrameworkMemory(torch cuda:0, reserved=2.5 GiB, allocated=1.9 GiB, "
        f"peak_reserved=2.5 GiB, peak_allocated=2.0 GiB, uuid='{GPU1[4:]}')"
    )
    assert r["repr"] == (
        "GPU 1 NVIDIA H200: driver 3.2 GiB = torch reserved 2.5 GiB (allocated 1.9 GiB, allocator slack 614.0 MiB) + "
        "outside frameworks 768.0 MiB; free 108.2 GiB, headroom 108.8 GiB"
    )
    # Never read: the other frameworks, which nothing imported, nor imported by explain().
    assert r["modules"] == ["torch"] and r["asked"] == []


def test_uuids_match_in_any_case_and_with_either_prefix() -> None:
    for given in (GPU1.upper(), GPU1[4:].upper(), GPU1.lower()):
        r = explain(
            f'standin_torch([{{"uuid": "{given}", "allocated": 0, "reserved": {GIB}}}])',
            two_gpus(0, 2 * GIB),
        )
        assert [g["index"] for g in r["ledger"]["gpus"]] == [1], given


def test_a_framework_counting_more_than_the_driver_gives_no_negative_outside() -> None:
    torch = f"""standin_torch([{{"uuid": "{GPU0[4:]}", "allocated": {2 * GIB},
        "reserved": {3 * GIB}}}])"""
    r = explain(torch, two_gpus(GIB, 0))
    (g,) = r["ledger"]["gpus"]
    assert g["driver_bytes"] == GIB and g["framework_reserved_bytes"] == 3 * GIB
    assert g["outside_bytes"] is None
    (note,) = g["notes"]
    assert "count 2.0 GiB more than the driver" in note
    assert "-" not in r["repr"].split("(")[0]
    assert r["repr"].startswith(
        "GPU 0 NVIDIA H200: driver 1.0 GiB, torch reserved 3.0 GiB (allocated 2.0 GiB, allocator slack 1.0 GiB); free "
    )
    assert "2.0 GiB more than the driver" in r["repr"] and "2.0 GiB more" in r["html"]


def test_torch_before_cuda_is_initialised_is_not_read() -> None:
    r = explain('standin_torch([{"uuid": "x"}], initialized=False)', two_gpus(GIB, 0))
    (g,) = r["ledger"]["gpus"]
    assert g["frameworks"] == [] and g["outside_bytes"] == GIB
    assert r["ledger"]["notes"] == [
        "torch is imported but has not initialised CUDA: nothing to read"
    ]
    assert r["repr"].splitlines()[0].startswith(
        "GPU 0 NVIDIA H200: driver 1.0 GiB = outside frameworks 1.0 GiB; free "
    )


def test_no_framework_and_no_gpu_memory() -> None:
    r = explain("", two_gpus(0, 0))
    assert r["ledger"] == {"gpus": [], "unmatched": [], "notes": []}
    assert r["repr"] == "no GPU memory held by this process"
    assert r["modules"] == [] and r["asked"] == []


def mig_scenario() -> Dict[str, Any]:
    gi = {"total": 71_424 * MIB, "free": 60_000 * MIB, "reserved": 0}
    return {
        "devices": [
            h200(
                mig_mode=1,
                mig_devices=[
                    {"slot": 0, "gpu_instance_id": 2, "compute_instance_id": 0,
                     "name": "NVIDIA H200 MIG 3g.71gb", "uuid": MIG, **gi,
                     "compute_processes": [{"pid": "__SELF_PID__", "used": 900 * MIB}]},
                    {"slot": 1, "gpu_instance_id": 5, "compute_instance_id": 0,
                     "name": "NVIDIA H200 MIG 1g.18gb",
                     "uuid": "MIG-bbbbbbbb-0000-4000-8000-000000000000"},
                ],
            ),
        ]
    }


def test_mig_devices_by_uuid_torch_without_prefix_jax_through_cuda_visible_devices() -> None:
    setup = f"""
standin_torch([{{"uuid": "{MIG[4:].upper()}", "allocated": {256 * MIB}, "reserved": {512 * MIB}}}])
standin_jax([{{"bytes_in_use": {64 * MIB}, "pool_bytes": {128 * MIB}, "bytes_limit": {GIB}}}])
"""
    r = explain(setup, mig_scenario(), env={"CUDA_VISIBLE_DEVICES": MIG})
    (g,) = r["ledger"]["gpus"]
    assert (g["index"], g["mig_slot"], g["uuid"]) == (0, 0, MIG)
    assert g["name"] == "NVIDIA H200 MIG 3g.71gb" and g["driver_bytes"] == 900 * MIB
    assert [f["framework"] for f in g["frameworks"]] == ["torch", "jax"]
    assert g["frameworks"][1]["limit_bytes"] == GIB
    assert g["outside_bytes"] == (900 - 512 - 128) * MIB
    assert g["free_bytes"] == 60_000 * MIB and g["total_bytes"] == 71_424 * MIB
    assert g["headroom_bytes"] == (60_000 + 256 + 64) * MIB
    assert r["repr"].startswith("GPU 0 MIG 0 NVIDIA H200 MIG 3g.71gb: driver 900.0 MiB = torch ")


def test_jax_missing_and_minus_one_fields_are_unknown_not_zero() -> None:
    stats = {"bytes_in_use": GIB, "peak_bytes_in_use": -1, "bytes_reserved": -1}
    # CUDA_VISIBLE_DEVICES may name a GPU by a unique prefix of its UUID.
    r = explain(
        f"standin_jax([{stats!r}, None])",
        two_gpus(2 * GIB, 0),
        env={"CUDA_VISIBLE_DEVICES": GPU0[:12]},
    )
    (g,) = r["ledger"]["gpus"]
    (j,) = g["frameworks"]  # the CPU device is no GPU: left out
    assert j["allocated_bytes"] == GIB
    assert j["reserved_bytes"] is None and j["peak_allocated_bytes"] is None
    assert j["peak_reserved_bytes"] is None and j["limit_bytes"] is None
    assert g["framework_reserved_bytes"] is None and g["outside_bytes"] is None
    assert g["headroom_bytes"] is None and "jax gives no reserved figure" in g["notes"]
    assert "jax reserved unknown (allocated 1.0 GiB)" in r["repr"]


def test_jax_ordinals_are_matched_only_when_the_environment_says_which_gpu() -> None:
    stats = {"bytes_in_use": GIB, "pool_bytes": 2 * GIB}
    r = explain(f"standin_jax([None, {stats!r}])", two_gpus(0, 3 * GIB))
    # Fastest-first CUDA order: ordinal 1 is not honestly NVML's GPU 1.
    (u,) = r["ledger"]["unmatched"]
    assert u["uuid"] is None and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in u["why_no_uuid"]
    assert r["ledger"]["gpus"][0]["frameworks"] == []
    assert "jax gpu 1 (unmatched: " in r["repr"]

    r = explain(
        f"standin_jax([{stats!r}])",
        two_gpus(0, 3 * GIB),
        env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"},
    )
    (g,) = r["ledger"]["gpus"]
    assert g["index"] == 1 and g["outside_bytes"] == GIB and r["ledger"]["unmatched"] == []


def test_jax_whose_backends_have_not_started_is_not_started() -> None:
    r = explain("standin_jax([{}], started=False)", two_gpus(GIB, 0))
    assert r["ledger"]["notes"] == [
        "jax is imported but its backends have not started: nothing to read"
    ]
    assert r["ledger"]["gpus"][0]["frameworks"] == []


def test_cupy_current_device_by_raw_uuid_bytes() -> None:
    raw = "bytes.fromhex('" + GPU1[4:].replace("-", "") + "')"
    setup = f"standin_cupy(1, [b'\\0' * 16, {raw}], used={100 * MIB}, total={300 * MIB})"
    r = explain(setup, two_gpus(GIB, GIB))
    g0, g1 = r["ledger"]["gpus"]
    assert g0["frameworks"] == [] and g0["outside_bytes"] == GIB
    (c,) = g1["frameworks"]
    assert c["device"] == "device 1" and c["uuid"] == GPU1[4:]
    assert c["reserved_bytes"] == 300 * MIB and c["peak_allocated_bytes"] is None
    assert g1["outside_bytes"] == GIB - 300 * MIB


def test_a_framework_that_raises_is_a_note_not_a_failure() -> None:
    setup = "standin_torch([{'uuid': 'x'}]).cuda.device_count = lambda: 1 / 0"
    r = explain(setup, two_gpus(GIB, 0))
    assert r["ledger"]["notes"] == ["torch could not be read: ZeroDivisionError: division by zero"]
    assert r["ledger"]["gpus"][0]["driver_bytes"] == GIB


def test_html_is_a_stacked_bar_with_every_name_escaped() -> None:
    torch = f'standin_torch([{{"uuid": "{GPU0}", "allocated": {GIB}, "reserved": {2 * GIB}}}])'
    r = explain(torch, two_gpus(3 * GIB, 0, name="NVIDIA <b>H200</b> & co"))
    page = r["html"]
    assert "<b>H200</b>" not in page
    assert "GPU 0 NVIDIA &lt;b&gt;H200&lt;/b&gt; &amp; co" in page
    assert "display:flex" in page and "torch cuda:0 allocated 1.0 GiB" in page
    assert "outside frameworks (CUDA context, libraries) 1.0 GiB" in page
    # Each segment's width is its share of the device's total.
    assert f"width:{100.0 * GIB / (143_771 * MIB):.3f}%" in page


def test_cuda_ordinals_from_the_environment(monkeypatch: Any) -> None:
    from hypomnesis.frameworks import cuda_ordinal_uuids

    def ordinals(visible: Optional[str], order: Optional[str] = None, mig: bool = False) -> Any:
        for key, value in (("CUDA_VISIBLE_DEVICES", visible), ("CUDA_DEVICE_ORDER", order)):
            if value is None:
                monkeypatch.delenv(key, raising=False)
            else:
                monkeypatch.setenv(key, value)
        return cuda_ordinal_uuids([GPU0, GPU1], mig)

    assert ordinals(None) == (None, ordinals(None)[1]) and "PCI_BUS_ID" in ordinals(None)[1]
    assert ordinals(None, "PCI_BUS_ID") == ([GPU0, GPU1], "")
    assert ordinals(None, "PCI_BUS_ID", mig=True)[0] is None
    assert ordinals("1,0", "PCI_BUS_ID") == ([GPU1, GPU0], "")
    assert ordinals("1")[0] is None  # an index, fastest-first order: not NVML's
    assert ordinals(f"{GPU1[:10]},{MIG}") == ([GPU1, MIG], "")
    assert ordinals("") == ([], "")  # set and empty: no device at all
    assert ordinals("-1,0") == ([], "")  # CUDA stops at the first invalid entry
    assert ordinals("GPU-", "PCI_BUS_ID") == ([], "")  # a prefix of both: ambiguous


def test_an_unknown_framework_is_an_error_and_none_imported_reads_nothing() -> None:
    import sys

    import pytest

    import hypomnesis

    with pytest.raises(ValueError, match="unknown framework 'tensorflow'"):
        hypomnesis.explain(["tensorflow"])
    ledger = hypomnesis.explain(["torch", "jax", "cupy"])  # this process imports none
    (g,) = ledger.gpus
    assert g.frameworks == () and g.outside_bytes == g.driver_bytes == 2 * GIB
    assert not {"torch", "jax", "cupy"} & set(sys.modules)


def test_a_driver_figure_not_this_process_s_is_unknown_with_its_reason() -> None:
    from hypomnesis.frameworks import FrameworkMemory
    from hypomnesis.ledger import entry

    torch = FrameworkMemory("torch", "cuda:0", GPU0, None, GIB, 2 * GIB, None, None, None)
    why = "the driver does not attribute memory to this process (another PID namespace?)"
    g = entry(0, None, "NVIDIA H200", GPU0, None, why, [torch], 100 * GIB, 140 * GIB)
    assert g.driver_bytes is None and g.outside_bytes is None and g.notes == (why,)
    assert g.framework_reserved_bytes == 2 * GIB and g.headroom_bytes == 101 * GIB
    assert repr(g) == (
        "GPU 0 NVIDIA H200: driver unknown, torch reserved 2.0 GiB (allocated 1.0 GiB, allocator "
        "slack 1.0 GiB); "
        f"free 100.0 GiB, headroom 101.0 GiB ({why})"
    )
    assert torch.cached_bytes == GIB


def test_ledger_now_of_one_gpu_still_tells_jax_ordinals_by_every_gpu() -> None:
    stats = {"bytes_in_use": GIB, "pool_bytes": 2 * GIB}
    code = STANDINS + f"""
standin_jax([{stats!r}])
from hypomnesis.ledger.explain import _ledger_now
ledger = _ledger_now(["jax"], [1])
out({{"gpus": [(g.index, g.outside_bytes) for g in ledger.gpus], "unmatched": ledger.unmatched}})
"""
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}
    r = run_child(code, two_gpus(GIB, 3 * GIB), env=env)
    assert r == {"gpus": [[1, GIB]], "unmatched": []}
