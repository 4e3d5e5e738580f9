"""The dashboard's grouped herd forecast counts exactly what scheduler.forecast counts."""

from __future__ import annotations

import random

from scheduler.core.model import JobSpec
from scheduler.dashboard.herd import grouped_forecast
from scheduler.planning import parse_iso_to_us
from scheduler.planning.forecast import MINUTE_US, forecast

START_US = parse_iso_to_us("2026-03-08T05:00:00Z")  # New York springs forward within the first hours
HOUR_US = 60 * MINUTE_US
SCHEDULES = ["0 * * * *", "*/5 * * * *", "30 2 * * *", "0 0 * * *", "*/7 * * * * *", "15 9 * * 1-5", "0 2 * * *"]


def random_specs(seed: int, count: int) -> list[JobSpec]:
    rng = random.Random(seed)
    return [
        JobSpec(
            id=f"job-{seed}-{i}",
            schedule=rng.choice(SCHEDULES),
            timezone=rng.choice(["UTC", "America/New_York", "Asia/Kolkata"]),
            target_kind="handler",
            target="h",
            jitter=rng.choice(["auto", "pinned", "15m", "90s"]),
            uses=rng.choice([(), ("db",), ("db", "api")]),
            paused=rng.random() < 0.1,
        )
        for i in range(count)
    ]


def test_grouped_forecast_equals_the_per_job_forecast():
    for seed in range(4):
        specs = random_specs(seed, 120)
        start_us = START_US + seed * 7 * MINUTE_US + seed * 13_000_000  # not on a minute boundary too
        expected = forecast(specs, start_us, 6, HOUR_US)
        actual = grouped_forecast(specs, start_us, 6, HOUR_US)
        assert actual.series() == expected.series(), f"seed {seed}"
        assert {k: actual.series(v) for k, v in actual.by_resource.items()} == {
            k: expected.series(v) for k, v in expected.by_resource.items()
        }


def test_a_spread_herd_of_one_schedule():
    specs = [JobSpec(id=f"n{i}", schedule="0 2 * * *", target_kind="handler", target="h") for i in range(2000)]
    result = grouped_forecast(specs, START_US, 24, HOUR_US)
    assert result.series() == forecast(specs, START_US, 24, HOUR_US).series()
    assert sum(result.total.values()) == 2000 and set(result.total) <= set(range(21 * 60, 22 * 60))  # 02:00-03:00Z
