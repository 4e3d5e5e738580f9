"""The herd forecast counts fires per minute as the dispatcher will release them."""

from __future__ import annotations

from scheduler.cli.plot import plot_png
from scheduler.core.model import JobSpec
from scheduler.planning import parse_iso_to_us
from scheduler.planning.forecast import MINUTE_US, forecast, to_json

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
