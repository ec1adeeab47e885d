"""``probe_interval``: a probe called between entry and exit too, its readings bounded, and the
reading nearest the peak given as ``peak_probe`` (with ``probe=hypomnesis.explain``, the ledger
at the peak)."""

from __future__ import annotations

import time

import pytest

import hypomnesis
from hypomnesis.tracking import PROBE_READINGS

BLOCK = 256 << 20


def test_the_reading_nearest_the_peak_is_the_peak_probe() -> None:
    # No GPU here: the RSS peak decides. The probe says when it ran.
    with hypomnesis.track(
        interval=0.005, devices=[], probe=time.monotonic, probe_interval=0.02
    ) as t:
        start = time.monotonic()
        time.sleep(0.3)
        held_from = time.monotonic()
        buf = bytearray(b"\x01") * BLOCK
        time.sleep(0.3)
        held_until = time.monotonic()
        del buf
        time.sleep(0.3)
    readings = t.probe_readings
    assert len(readings) >= 10, readings
    assert [r[0] for r in readings] == sorted(r[0] for r in readings)
    at = t.peak_probe
    assert held_from - 0.05 <= at <= held_until + 0.05, (at - start, t.peak_rss_time)
    # The entry and exit readings are still the samples' probes.
    assert t.baseline.probe is not None and t.final.probe is not None


def test_readings_are_bounded_and_a_failing_probe_is_recorded() -> None:
    calls = 0
    failing = False

    def probe() -> int:
        nonlocal calls
        calls += 1
        if failing and calls % 3 == 0:
            raise RuntimeError("a framework said no")
        return calls

    with hypomnesis.track(devices=[], probe=probe, probe_interval=1e-4) as t:
        failing = True  # between entry and exit only: there the failure is recorded
        time.sleep(0.5)
        failing = False
    assert len(t.probe_readings) < PROBE_READINGS
    assert any(isinstance(v, RuntimeError) for _, v in t.probe_readings)


def test_without_probe_interval_or_probe_nothing_is_read_between() -> None:
    with hypomnesis.track(devices=[], probe=time.monotonic) as t:
        time.sleep(0.05)
    assert t.probe_readings == []
    assert t.peak_probe is not None, "entry or exit"
    with hypomnesis.track(devices=[], probe_interval=0.01) as u:
        time.sleep(0.05)
    assert u.probe_readings == [] and u.peak_probe is None


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), 1e300])
def test_a_bad_probe_interval_is_refused_at_track(bad: float) -> None:
    with pytest.raises(ValueError, match="probe_interval"):
        hypomnesis.track(probe=time.monotonic, probe_interval=bad)
