"""Finding matching wall-clock slots on the proleptic Gregorian calendar, zone-free.

A wall-clock slot is a tuple ``(year, month, day, hour, minute, second)``: what a clock on the
wall shows, before any time zone decides which real instant(s) that is. This module only knows
the calendar; the zone rules live in ``zones`` and ``schedule``.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from datetime import date
from functools import lru_cache

from .cron_fields import CronFields
from .day_modifiers import day_of_month_dates, day_of_week_dates

WallSlot = tuple[int, int, int, int, int, int]

# The Gregorian calendar repeats exactly every 400 years (146,097 days = 20,871 weeks), so an
# expression that matches no day in 400 consecutive years matches none ever, and one that
# matches at all matches within any 400-year window. Searches are bounded by this.
CALENDAR_CYCLE_YEARS = 400
LAST_YEAR = 9999  # datetime's limit
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_SECONDS_PER_DAY = 86_400


@lru_cache(maxsize=16_384)
def matching_days(day_rule: tuple, year: int, month: int) -> tuple[int, ...]:
    """The days of ``year-month`` that the day-of-month/day-of-week rule accepts, sorted.

    Cached across schedules: the rule is usually one of a handful, and a month's answer is
    needed by every next-fire computation that touches it.
    """
    days_in_month = calendar.monthrange(year, month)[1]
    # Cron numbers weekdays from Sunday = 0; date.weekday() from Monday = 0.
    first_weekday = (date(year, month, 1).weekday() + 1) % 7
    return layout_days(day_rule, days_in_month, first_weekday)


@lru_cache(maxsize=4096)
def layout_days(day_rule: tuple, days_in_month: int, first_weekday: int) -> tuple[int, ...]:
    """The days the rule accepts in a month of ``days_in_month`` days starting on
    ``first_weekday`` (Sunday 0): every rule depends on the month's layout only."""
    days_of_month, days_of_week, both_must_match, modifiers = day_rule
    weekday_set = frozenset(days_of_week)
    if not modifiers:
        if both_must_match:
            return tuple(
                day for day in days_of_month if day <= days_in_month and (first_weekday + day - 1) % 7 in weekday_set
            )
        day_set = frozenset(days_of_month)
        return tuple(
            day for day in range(1, days_in_month + 1) if day in day_set or (first_weekday + day - 1) % 7 in weekday_set
        )
    by_month = {day for day in days_of_month if day <= days_in_month}
    by_month |= day_of_month_dates(modifiers, days_in_month, first_weekday)
    by_week = {day for day in range(1, days_in_month + 1) if (first_weekday + day - 1) % 7 in weekday_set}
    by_week |= day_of_week_dates(modifiers, days_in_month, first_weekday)
    return tuple(sorted(by_month & by_week if both_must_match else by_month | by_week))


# The most days each month has in some year (February: 29, in leap years).
_MOST_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def days_can_match(fields: CronFields) -> bool:
    """Whether any calendar date matches the day fields: what a search of one calendar cycle
    answers, decided from the fields alone (a search took up to 10 ms for an expression that
    never fires, so a request of thousands of distinct ones cost a node seconds).

    When a day need only match either field, every month has every weekday. When it must match
    both, the weekday rules no date out: over the 400-year cycle every date, February 29
    included, falls on every weekday. So a day of the month in a month that has it is enough.

    With L, W or # modifiers the answer is read off the layouts the months can have: over the
    cycle each month starts on every weekday, and February does so with 28 and with 29 days.
    """
    _, _, both_must_match, modifiers = fields.day_rule
    if modifiers:
        return any(
            layout_days(fields.day_rule, days, first_weekday)
            for month in fields.months
            for days in ((28, 29) if month == 2 else (_MOST_DAYS[month - 1],))
            for first_weekday in range(7)
        )
    if not both_must_match:
        return True
    return any(day <= _MOST_DAYS[month - 1] for month in fields.months for day in fields.days_of_month)


def next_wall_slot(fields: CronFields, start: WallSlot, last_year: int) -> WallSlot | None:
    """The first slot at or after ``start`` matching ``fields``, or None past ``last_year``.

    Works field by field from the month down: when a field has no allowed value left in the
    current unit, carry into the next larger unit and reset the smaller ones. Overflowing
    values (day 32, hour 24, month 13) are left for the next round to carry.
    """
    year, month, day, hour, minute, second = start
    months, hours, minutes, seconds = fields.months, fields.hours, fields.minutes, fields.seconds
    day_rule = fields.day_rule
    while year <= last_year:
        index = bisect_left(months, month)
        if index == len(months):
            year, month, day, hour, minute, second = year + 1, months[0], 1, 0, 0, 0
            continue
        if months[index] != month:
            month, day, hour, minute, second = months[index], 1, 0, 0, 0
        days = matching_days(day_rule, year, month)
        index = bisect_left(days, day)
        if index == len(days):
            month, day, hour, minute, second = month + 1, 1, 0, 0, 0
            continue
        if days[index] != day:
            day, hour, minute, second = days[index], 0, 0, 0
        index = bisect_left(hours, hour)
        if index == len(hours):
            day, hour, minute, second = day + 1, 0, 0, 0
            continue
        if hours[index] != hour:
            hour, minute, second = hours[index], 0, 0
        index = bisect_left(minutes, minute)
        if index == len(minutes):
            hour, minute, second = hour + 1, 0, 0
            continue
        if minutes[index] != minute:
            minute, second = minutes[index], 0
        index = bisect_left(seconds, second)
        if index == len(seconds):
            minute, second = minute + 1, 0
            continue
        return (year, month, day, hour, minute, seconds[index])
    return None


def search_limit_year(start_year: int) -> int:
    """The last year a search starting in ``start_year`` needs to look at."""
    return min(start_year + CALENDAR_CYCLE_YEARS, LAST_YEAR)


def slot_to_wall_seconds(slot: WallSlot) -> int:
    """Seconds from 1970-01-01T00:00:00 to ``slot``, counted on the wall-clock calendar."""
    year, month, day, hour, minute, second = slot
    days = date(year, month, day).toordinal() - _EPOCH_ORDINAL
    return days * _SECONDS_PER_DAY + hour * 3600 + minute * 60 + second


def wall_seconds_to_slot(wall_seconds: int) -> WallSlot | None:
    """Inverse of ``slot_to_wall_seconds``; None past the last second of year 9999."""
    if wall_seconds > LAST_WALL_SECONDS:
        return None
    days, rest = divmod(wall_seconds, _SECONDS_PER_DAY)
    calendar_day = date.fromordinal(days + _EPOCH_ORDINAL)
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return (calendar_day.year, calendar_day.month, calendar_day.day, hour, minute, second)


LAST_WALL_SECONDS = slot_to_wall_seconds((LAST_YEAR, 12, 31, 23, 59, 59))


def format_slot(slot: WallSlot) -> str:
    """ISO-8601 without offset, e.g. ``2026-03-08T02:30:00``."""
    year, month, day, hour, minute, second = slot
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}"
