"""Human time expressions of the CLI."""

from __future__ import annotations

import pytest

from scheduler.cli import times


@pytest.fixture
def frozen(monkeypatch):
    from datetime import datetime, timezone

    now = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
    monkeypatch.setattr(times, "_local_now", lambda: now)
    return int(now.timestamp() * 1_000_000)


@pytest.mark.parametrize(
    ("text", "offset_s"),
    [("now", 0), ("2h ago", -7200), ("in 2h", 7200), ("+30m", 1800), ("90s ago", -90), ("in 1d", 86400)],
)
def test_relative_forms(frozen, text, offset_s):
    assert times.parse_when(text) == frozen + offset_s * 1_000_000


def test_iso_with_zone_and_errors(frozen):
    assert times.parse_when("2026-11-29T12:00:00Z") == frozen
    with pytest.raises(ValueError, match="not a time"):
        times.parse_when("tomorrowish")
    with pytest.raises(ValueError, match="no such time"):
        times.parse_when("today 25:00")
