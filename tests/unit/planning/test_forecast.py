"""The herd forecast counts fires per minute as the dispatcher will release them."""

from __future__ import annotations

from scheduler.cli.plot import plot_png
from scheduler.core.model import JobSpec
from scheduler.planning import parse_iso_to_us
from scheduler.planning.forecast import MINUTE_US, forecast, name_peaks, peak_text, to_json

START_US = parse_iso_to_us("2026-06-01T00:00:00Z")
HOUR_US = 60 * MINUTE_US


def nightly(job_id: str, **fields) -> JobSpec:
    return JobSpec(id=job_id, schedule="0 2 * * *", target_kind="handler", target="h", **fields)


def test_pinned_herd_lands_in_one_minute():
    result = forecast([nightly(f"j{i}", jitter="pinned") for i in range(500)], START_US, 24, HOUR_US)
    assert result.total == {120: 500}
    assert result.peaks(1) == [(START_US + 2 * HOUR_US, 500)]


def test_auto_spreading_spreads_the_same_herd_over_the_window():
    result = forecast([nightly(f"j{i}") for i in range(500)], START_US, 24, HOUR_US)
    assert sum(result.total.values()) == 500
    assert set(result.total) <= set(range(120, 180))  # 02:00 to 03:00
    assert max(result.total.values()) < 30  # 500 over 60 minutes: about 8 per minute


def test_resources_and_paused_jobs():
    specs = [nightly("a", jitter="pinned", uses=("db",)), nightly("b", jitter="pinned"), nightly("c", paused=True)]
    result = forecast(specs, START_US, 24, HOUR_US)
    assert result.total == {120: 2} and result.by_resource == {"db": {120: 1}}
    document = to_json(result)
    assert document["by_resource"]["db"][120] == 1 and document["peaks"][0]["fires"] == 2


def test_time_zone_and_every_second_cap():
    berlin = JobSpec(
        id="b", schedule="0 6 * * *", timezone="Europe/Berlin", target_kind="handler", target="h", jitter="pinned"
    )
    result = forecast([berlin], START_US, 24, HOUR_US)
    assert result.total == {4 * 60: 1}  # 06:00 CEST is 04:00 UTC in June


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "herd.png"
    plot_png(forecast([nightly("a")], START_US, 6, HOUR_US), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def every_minute(job_id: str, **fields) -> JobSpec:
    return JobSpec(id=job_id, schedule="* * * * *", target_kind="handler", target="h", jitter="pinned", **fields)


def test_buckets_are_clock_minutes_whenever_the_forecast_starts():
    pinned = [nightly(f"j{i}", jitter="pinned") for i in range(3)]
    late_start_us = START_US + 90 * MINUTE_US + 42_500_000  # 01:31:42.5
    result = forecast(pinned, late_start_us, 1, HOUR_US)
    assert result.start_us == START_US + 90 * MINUTE_US  # 01:31:00
    assert result.peaks(1) == [(START_US + 2 * HOUR_US, 3)]  # the 02:00 minute, not 02:00:42.5


def test_peaks_name_their_busiest_jobs_and_count_the_rest():
    every_second = JobSpec(id="beat", schedule="* * * * * *", target_kind="handler", target="h", jitter="pinned")
    herd = [nightly(f"night.{i:02d}", jitter="pinned") for i in range(12)]
    specs = [every_second, *herd, every_minute("tick")]
    result = forecast(specs, START_US + 2 * HOUR_US - 5 * MINUTE_US, 1, HOUR_US)
    (peak, *_) = name_peaks(specs, result, HOUR_US)
    assert (peak.at_us, peak.fires) == (START_US + 2 * HOUR_US, 60 + 12 + 1)
    assert peak.jobs == (("beat", 60), ("night.00", 1), ("night.01", 1))
    assert peak.more_jobs == 11  # ten more nightly jobs and tick
    assert peak_text(peak) == "beat (60), night.00 (1), night.01 (1), +11 more"
    document = to_json(result, [peak])
    assert document["peaks"][0]["jobs"][0] == {"job_id": "beat", "fires": 60}
    assert document["peaks"][0]["more_jobs"] == 11


def test_spreads_reported_by_the_cluster_replace_the_computed_ones():
    herd = [nightly(f"j{i}") for i in range(4)]
    spreads = {"j0": 0, "j1": 0, "j2": 10 * MINUTE_US, "j3": 10 * MINUTE_US + 59_000_000}
    result = forecast(herd, START_US, 24, HOUR_US, spreads=spreads)
    assert result.total == {120: 2, 130: 2}
    peaks = name_peaks(herd, result, HOUR_US, spreads)
    assert [(p.at_us, [job for job, _ in p.jobs]) for p in peaks] == [
        (START_US + 120 * MINUTE_US, ["j0", "j1"]),
        (START_US + 130 * MINUTE_US, ["j2", "j3"]),
    ]


def test_plot_labels_peaks_on_a_clock_axis(tmp_path):
    specs = [nightly(f"night.{i}", jitter="pinned") for i in range(5)] + [every_minute("tick")]
    result = forecast(specs, START_US, 6, HOUR_US)
    path = tmp_path / "herd.png"
    plot_png(result, str(path), name_peaks(specs, result, HOUR_US))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
