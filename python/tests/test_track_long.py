"""track() over long runs: what a block and a tracker keep stays bounded whatever the duration
and interval, the peaks stay exact (and timed) after the timeline is downsampled, and the
arguments are checked when track() is called."""

from __future__ import annotations

import sys
import time
from typing import Any, List

import pytest

import hypomnesis
from hypomnesis.tracking import HISTORY_LIMIT, TIMELINE_SAMPLES

BLOCK = 128 << 20


def test_a_long_block_at_a_tiny_interval_keeps_a_bounded_timeline() -> None:
    with hypomnesis.track(interval=1e-6) as t:
        time.sleep(1.5)
    # Many more samples taken than kept: the timeline merged them.
    assert t.sample_count > 2 * TIMELINE_SAMPLES, t.sample_count
    assert 2 <= len(t.samples) <= TIMELINE_SAMPLES
    times = [s.time for s in t.samples]
    assert times == sorted(times)
    # Bounded in bytes too: 2,048 samples of two devices, well under 2 MiB of Python objects.
    size = sum(
        sys.getsizeof(s) + sys.getsizeof(s.gpu_bytes) + sys.getsizeof(s.device_used_bytes)
        for s in t.samples
    )
    assert size < 2 << 20, size


def test_peaks_are_exact_and_timed_after_downsampling() -> None:
    with hypomnesis.track(interval=1e-5) as t:
        time.sleep(0.5)
        start = time.monotonic()
        buf = bytearray(b"\x01") * BLOCK
        grown = time.monotonic()
        time.sleep(0.05)
        del buf
        time.sleep(0.5)
    assert t.sample_count > 2 * TIMELINE_SAMPLES, t.sample_count
    assert t.peak_rss_delta_bytes >= BLOCK * 0.95, t
    # The peak the timeline shows is the exact one (merging keeps maxima)...
    assert max(s.rss_bytes for s in t.samples) == t.peak_rss_bytes
    assert t.final.rss_bytes < t.peak_rss_bytes - BLOCK // 2
    # ... and it was sampled while the block held the buffer.
    assert 0.4 < t.peak_rss_time < t.duration - 0.4, (t.peak_rss_time, t.duration)
    assert grown - start < 5
    assert t.peak_gpu_bytes == {0: 2 << 30, 1: 0}
    assert all(v is not None and 0 <= v <= t.duration for v in t.peak_gpu_time.values())
    assert set(t.peak_device_used_time) == {0, 1}
    assert t.missed_count == 0 and not any(s.missed_deadline for s in t.samples)


def test_history_keeps_the_last_records_only() -> None:
    tracker = hypomnesis.track(history_limit=50)

    @tracker
    def step(i: int) -> int:
        return i

    for i in range(500):
        step(i)
    assert len(tracker.history) == 50
    assert tracker.last is tracker.history[-1]
    # The most recent ones, in order.
    ends = [t.final.time for t in tracker.history]
    assert all(t.sample_count >= 2 for t in tracker.history)
    assert len(ends) == 50
    assert hypomnesis.track().history_limit == HISTORY_LIMIT == 1000
    none_kept = hypomnesis.track(history_limit=0)
    with none_kept:
        pass
    assert none_kept.history == [] and none_kept.last is None


def test_the_probe_is_called_as_each_block_starts_and_ends() -> None:
    calls: List[int] = []

    def probe() -> int:
        calls.append(len(calls))
        return len(calls)

    with hypomnesis.track(probe=probe) as t:
        pass
    assert (t.baseline.probe, t.final.probe) == (1, 2)
    assert calls == [0, 1]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"interval": 0}, ValueError, "interval must be a number of seconds above 0"),
        ({"interval": -1.0}, ValueError, "interval"),
        ({"interval": float("nan")}, ValueError, "interval"),
        ({"interval": float("inf")}, ValueError, "interval"),
        ({"interval": 1e300}, ValueError, "at most 86400"),
        ({"interval": "0.1"}, TypeError, "interval must be a number of seconds, not str"),
        ({"interval": True}, TypeError, "interval"),
        ({"interval": None}, TypeError, "interval"),
        ({"deadline": 0}, ValueError, "deadline"),
        ({"deadline": 1e9}, ValueError, "deadline"),
        ({"deadline": "5"}, TypeError, "deadline"),
        ({"devices": 0}, TypeError, "devices must be a sequence"),
        ({"devices": "01"}, TypeError, "devices"),
        ({"devices": [0.5]}, TypeError, "GPU index must be an int"),
        ({"devices": [-1]}, ValueError, "out of range"),
        ({"callback": 3}, TypeError, "callback must be callable"),
        ({"probe": "x"}, TypeError, "probe must be callable"),
        ({"history_limit": -1}, ValueError, "history_limit"),
        ({"history_limit": 1.5}, TypeError, "history_limit"),
    ],
)
def test_bad_arguments_are_refused_by_track_itself(
    kwargs: Any, error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        hypomnesis.track(**kwargs)


def test_the_native_sampler_checks_its_deadline_too() -> None:
    with pytest.raises(ValueError, match="deadline"):
        hypomnesis._native.Sampler(0.01, [], float("inf"))
    s = hypomnesis._native.Sampler(0.01, [], 0.5)
    s.start()
    taken, missed, rss, own, used, first, last = s.stop()
    samples = [first] + s.between() + [last]
    assert len(samples) >= 2 and taken >= 2 and missed == 0
    assert rss[0] == max(x[1] for x in samples) and own == [] and used == []


def test_the_ledger_of_explain_is_recorded_through_the_probe() -> None:
    with hypomnesis.track(probe=hypomnesis.explain) as t:
        pass
    for sample in (t.baseline, t.final):
        assert isinstance(sample.probe, hypomnesis.Ledger), sample.probe
    assert all(s.probe is None for s in t.samples[1:-1])
