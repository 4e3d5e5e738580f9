"""Human time expressions for the CLI, read in the operator's local zone.

Accepts ISO-8601 (with an offset or Z; without one it is local time), `now`,
`today HH:MM`, `yesterday HH:MM`, `N{s,m,h,d} ago` and `in N{s,m,h,d}`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

_AGO = re.compile(r"^(\d+)\s*([smhd])\s+ago$")
_AHEAD = re.compile(r"^(?:in\s+|\+)(\d+)\s*([smhd])$")
_DAY = re.compile(r"^(today|yesterday)(?:\s+(\d{1,2}):(\d{2}))?$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _local_now() -> datetime:
    return datetime.now().astimezone()


def now_iso() -> str:
    return _local_now().isoformat()


def parse_when(text: str) -> int:
    """Microseconds since the epoch; ValueError with the accepted forms otherwise."""
    value = text.strip().lower()
    now = _local_now()
    if value == "now":
        moment = now
    elif match := _AGO.match(value):
        moment = now - timedelta(**{_UNITS[match[2]]: int(match[1])})
    elif match := _AHEAD.match(value):
        moment = now + timedelta(**{_UNITS[match[2]]: int(match[1])})
    elif match := _DAY.match(value):
        day = now.date() - timedelta(days=1 if match[1] == "yesterday" else 0)
        hour, minute = int(match[2] or 0), int(match[3] or 0)
        if hour > 23 or minute > 59:
            raise ValueError(f"{text!r}: no such time of day")
        moment = datetime(day.year, day.month, day.day, hour, minute).astimezone()
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{text!r} is not a time: use ISO-8601, 'now', 'today 06:00', 'yesterday 18:00', '2h ago' or 'in 2h'"
            ) from None
        if moment.tzinfo is None:
            moment = moment.astimezone()
    return int(moment.timestamp() * 1_000_000)
