"""Time zone lookup and the facts about a wall-clock slot that DST decides.

Everything is derived from ``zoneinfo`` offsets and PEP 495 ``fold``, never from assumptions
about how long a shift is or at what hour it happens: Lord Howe shifts by 30 minutes, Santiago
and Havana shift at midnight, and historical zones did stranger things.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import ScheduleError

MAX_ZONE_NAME_CHARS = 64

# Keys that exist in the tz database but do not name a place whose clocks a job could follow:
# 'localtime' is whatever the host says (replicas could disagree), 'posixrules' is a template,
# 'Factory' is a placeholder with offset "-00".
_REFUSED_KEYS = frozenset({"localtime", "posixrules", "Factory"})
# 'right/' zones count leap seconds, which our integer-microsecond instants do not; 'posix/'
# duplicates the main tree. Both are install-dependent copies; accept only the main names.
_REFUSED_PREFIXES = ("posix/", "right/")

# Zones whose offset has never changed: all of 'Etc/' (fixed by definition in the tz database)
# and the aliases of UTC. They get the fast path with no DST handling at all.
_UTC_ALIASES = frozenset({"UTC", "UCT", "GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich", "Universal", "Zulu"})


def _refuse(message: str) -> ScheduleError:
    return ScheduleError("timezone", message)


def load_zone(name: str) -> ZoneInfo:
    """Validate an IANA key and return its ZoneInfo, or raise ScheduleError(field="timezone")."""
    if not isinstance(name, str):
        raise _refuse(f"expected a string, got {type(name).__name__}")
    if not name:
        raise _refuse("time zone must not be empty; name an IANA zone such as Europe/Berlin, or leave it out for UTC")
    if len(name) > MAX_ZONE_NAME_CHARS:
        raise _refuse(f"name is {len(name)} characters long; the limit is {MAX_ZONE_NAME_CHARS}")
    if any(ch.isspace() or not ch.isprintable() for ch in name):
        raise _refuse(f"{name!r} contains whitespace or control characters")
    if name.startswith("/") or ".." in name or "\\" in name:
        raise _refuse(f"{name!r} looks like a file path; use an IANA name such as Europe/Paris")
    if name in _REFUSED_KEYS or name.startswith(_REFUSED_PREFIXES):
        raise _refuse(f"{name!r} is not a location; use an IANA name such as Europe/Paris")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, UnicodeError) as error:
        # OSError covers directories ("America") and unreadable files; ValueError covers files
        # in the zone directory that are not zones (e.g. "zone.tab").
        raise _refuse(f"{name!r} is not a known IANA time zone") from error


def fixed_offset_seconds(zone: ZoneInfo) -> int | None:
    """The zone's offset if it can never change, else None."""
    key = zone.key
    if key in _UTC_ALIASES or key.startswith("Etc/"):
        return offset_seconds(zone.utcoffset(datetime(2000, 1, 1)))
    return None


def offset_seconds(offset: timedelta | None) -> int:
    """A UTC offset as whole seconds (tz database offsets are whole seconds)."""
    if offset is None:  # only a naive datetime has none, and every caller reads an aware one
        raise ValueError("a UTC offset is needed")
    return offset.days * 86_400 + offset.seconds


def slot_offsets(zone: ZoneInfo, naive: datetime) -> tuple[int, int]:
    """The UTC offsets of a wall-clock time read with fold=0 and fold=1.

    Per PEP 495: equal offsets mean the time exists once; a first offset larger than the
    second means it exists twice (a repeated hour: the first offset is the earlier
    occurrence's); a first offset smaller than the second means it does not exist (a gap:
    the first offset is the one before the transition, the second the one after).
    """
    return (
        offset_seconds(zone.utcoffset(naive)),
        offset_seconds(zone.utcoffset(naive.replace(fold=1))),
    )


def _offset_at(zone: ZoneInfo, instant_s: int) -> int:
    return offset_seconds(datetime.fromtimestamp(instant_s, zone).utcoffset())


@lru_cache(maxsize=1024)
def gap_end_seconds(zone: ZoneInfo, before_s: int, not_before_s: int) -> int:
    """The instant (epoch seconds) a gap ends, i.e. the transition that opened it.

    The caller knows a wall time inside the gap; read with the offset after the transition it
    gives ``before_s``, strictly before the transition, and with the offset before it gives
    ``not_before_s``, at or after it. Bisect on whole seconds (tz database transitions are on
    whole seconds) for the first instant whose offset differs from the one at ``before_s``.
    """
    offset_before = _offset_at(zone, before_s)
    low, high = before_s, not_before_s
    while high - low > 1:
        middle = (low + high) // 2
        if _offset_at(zone, middle) == offset_before:
            low = middle
        else:
            high = middle
    return high
