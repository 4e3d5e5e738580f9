"""Listing upcoming fires without a cluster, for the ``raftcron next`` command."""

from __future__ import annotations

from .errors import ScheduleError
from .schedule import compile_schedule
from .timeconv import format_offset, format_us, from_us, parse_iso_to_us

MAX_PREVIEW_FIRES = 1000


def preview(
    expr: str,
    timezone: str,
    after: str,
    n: int,
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
) -> list[dict]:
    """The next ``n`` fires strictly after ``after`` as JSON-ready dicts.

    ``after`` is ISO-8601 with an offset or ``Z``; without one it is read as UTC (not as the
    schedule's zone, so that the same command means the same thing on every machine). Each
    dict has ``at`` (local time with the zone's offset), ``at_utc``, ``nominal_local``,
    ``adjustment`` and ``utc_offset``.
    """
    schedule = compile_schedule(expr, timezone, dst_gap, dst_repeat)
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_PREVIEW_FIRES:
        raise ScheduleError("n", f"must be an integer from 0 to {MAX_PREVIEW_FIRES}, got {n!r}")
    try:
        after_us = parse_iso_to_us(after)
    except (TypeError, ValueError, OverflowError) as error:
        raise ScheduleError("after", f"{after!r} is not an ISO-8601 date-time such as 2026-03-08T00:00:00Z") from error
    return [
        {
            "at": from_us(fire.at_us).astimezone(schedule.zone).isoformat(),
            "at_utc": format_us(fire.at_us),
            "nominal_local": fire.nominal_local,
            "adjustment": fire.adjustment,
            "utc_offset": format_offset(fire.utc_offset_s),
        }
        for fire in schedule.next_fires(after_us, n)
    ]
