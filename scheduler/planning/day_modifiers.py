"""Quartz's day modifiers, read into the dates of one month they allow.

Day-of-month items: ``L`` (the last day), ``L-n`` (n days before it, n 1-30), ``nW`` (the
weekday, Monday to Friday, nearest day n), ``LW`` (the last weekday) and ``L-nW`` (the weekday
nearest day ``last - n``). Day-of-week items: ``d#k`` (the k-th weekday d, k 1-5) and ``dL``
(the last weekday d), with d numbered the Unix way (0-7, 0 and 7 Sunday) or named.

Every rule is a function of the month's *layout* only: how many days it has and which weekday
its first day is. There are 28 layouts (28-31 days, 7 first weekdays), so a month's dates cost a
handful of integer operations, and whether an expression can ever fire is decided by looking at
each layout its months can have, never by scanning days or years.

Nearest weekday (``W``), as Quartz defines it, never leaves the month: a Saturday moves to the
Friday before, except the 1st, which moves to Monday the 3rd; a Sunday moves to the Monday
after, except the month's last day, which moves to the Friday two days before. A month without
day n (``31W`` in April, ``30W`` in February) does not fire that month, as in Quartz, where the
day is looked for only among the month's days. ``L-n`` and ``L-nW`` likewise do not fire in a
month of n days or fewer, where ``last - n`` would be before the 1st.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ScheduleError

MAX_LAST_DAY_OFFSET = 30
MAX_NTH_WEEKDAY = 5
_SATURDAY, _SUNDAY = 6, 0

_LAST_DAY = re.compile(r"L(?:-(\d+))?(W?)")
_NEAREST_WEEKDAY = re.compile(r"(\d+)W")
_NTH_WEEKDAY = re.compile(r"([0-9A-Z]+)#(\d+)")
_LAST_WEEKDAY = re.compile(r"([0-9A-Z]+)L")


@dataclass(frozen=True)
class DayModifiers:
    """The modifier items of the two day fields, each as sorted tuples (empty: none)."""

    last_day_offsets: tuple[int, ...] = ()  # L is 0, L-n is n
    nearest_weekdays: tuple[int, ...] = ()  # nW is n
    last_weekday_offsets: tuple[int, ...] = ()  # LW is 0, L-nW is n
    nth_weekdays: tuple[tuple[int, int], ...] = ()  # d#k is (d, k), Sunday 0
    last_weekdays: tuple[int, ...] = ()  # dL is d, Sunday 0

    @property
    def in_day_of_month(self) -> bool:
        return bool(self.last_day_offsets or self.nearest_weekdays or self.last_weekday_offsets)

    @property
    def in_day_of_week(self) -> bool:
        return bool(self.nth_weekdays or self.last_weekdays)

    def __bool__(self) -> bool:
        return self.in_day_of_month or self.in_day_of_week


NO_MODIFIERS = DayModifiers()


def _fail(message: str) -> ScheduleError:
    return ScheduleError("schedule", message)


def is_day_of_month_modifier(item: str) -> bool:
    upper = item.upper()
    return "L" in upper or "W" in upper


def is_day_of_week_modifier(item: str) -> bool:
    # No weekday name has an L, so any L is the modifier (or a misuse of it).
    return "#" in item or "L" in item.upper()


def parse_day_of_month_item(item: str) -> tuple[str, int]:
    """``("last", n)``, ``("nearest", n)`` or ``("last_weekday", n)`` for one item, or raise."""
    upper = item.upper()
    if "/" in upper:
        raise _fail(f"{item!r}: L and W in day-of-month take a single day (e.g. L or 15W), not a step")
    match = _LAST_DAY.fullmatch(upper)
    if match:
        offset_text, weekday = match.groups()
        offset = 0
        if offset_text is not None:
            offset = int(offset_text)
            if offset == 0:
                raise _fail(f"{item!r}: L-0 is the last day itself; write L{weekday}")
            if offset > MAX_LAST_DAY_OFFSET:
                raise _fail(
                    f"{item!r}: L-{offset} is before the first day of every month"
                    f" (the offset from the last day is 1-{MAX_LAST_DAY_OFFSET})"
                )
        return ("last_weekday" if weekday else "last", offset)
    match = _NEAREST_WEEKDAY.fullmatch(upper)
    if match:
        day = int(match.group(1))
        if not 1 <= day <= 31:
            raise _fail(f"{item!r}: the day before W must be 1-31, got {day}")
        return ("nearest", day)
    if "W" in upper and "-" in upper and not upper.startswith("L"):
        raise _fail(f"{item!r}: W takes a single day (e.g. 15W), not a range")
    hint = "; dL (the last weekday d) belongs to day-of-week" if upper.endswith("L") else ""
    raise _fail(
        f"{item!r} is not a valid day-of-month value; the modifiers are L, L-n, nW, LW and L-nW"
        f" (e.g. L, L-3, 15W, LW){hint}"
    )


def parse_day_of_week_item(item: str, weekday_of) -> tuple[str, int, int]:
    """``("nth", d, k)`` or ``("last", d, 0)`` for one item, or raise.

    ``weekday_of`` reads a plain day-of-week value (a number 0-7 or a name) and raises with
    the field's own message when it is not one.
    """
    upper = item.upper()
    if upper == "L":
        raise _fail(
            "'L' alone in day-of-week is Quartz's Saturday; write 6 (or sat), or dL for the last"
            " weekday d of the month (e.g. 5L or friL: the last Friday)"
        )
    if "/" in upper or "-" in upper:
        raise _fail(f"{item!r}: # and L in day-of-week take a single weekday (e.g. fri#3, 5L), not a range or a step")
    match = _NTH_WEEKDAY.fullmatch(upper)
    if match:
        weekday_text, nth_text = match.groups()
        nth = int(nth_text) if nth_text.isdigit() else 0
        if not 1 <= nth <= MAX_NTH_WEEKDAY:
            raise _fail(f"{item!r}: the number after # is which weekday of the month, 1-{MAX_NTH_WEEKDAY}")
        return ("nth", weekday_of(weekday_text) % 7, nth)
    match = _LAST_WEEKDAY.fullmatch(upper)
    if match:
        return ("last", weekday_of(match.group(1)) % 7, 0)
    raise _fail(f"{item!r} is not a valid day-of-week value; the modifiers are d#k and dL (e.g. fri#3, 5L)")


def nearest_weekday(day: int, days_in_month: int, first_weekday: int) -> int:
    """The weekday (Monday-Friday) nearest ``day``, without leaving the month (Quartz's W)."""
    weekday = (first_weekday + day - 1) % 7
    if weekday == _SATURDAY:
        return day + 2 if day == 1 else day - 1
    if weekday == _SUNDAY:
        return day - 2 if day == days_in_month else day + 1
    return day


def day_of_month_dates(modifiers: DayModifiers, days_in_month: int, first_weekday: int) -> set[int]:
    """The days of a month with this layout that the day-of-month modifiers allow.

    ``first_weekday`` is the weekday of the 1st, Sunday 0.
    """
    days = {days_in_month - offset for offset in modifiers.last_day_offsets if offset < days_in_month}
    for day in modifiers.nearest_weekdays:
        if day <= days_in_month:
            days.add(nearest_weekday(day, days_in_month, first_weekday))
    for offset in modifiers.last_weekday_offsets:
        if offset < days_in_month:
            days.add(nearest_weekday(days_in_month - offset, days_in_month, first_weekday))
    return days


def day_of_week_dates(modifiers: DayModifiers, days_in_month: int, first_weekday: int) -> set[int]:
    """The days of a month with this layout that the day-of-week modifiers allow."""
    days = set()
    for weekday, nth in modifiers.nth_weekdays:
        day = 1 + (weekday - first_weekday) % 7 + 7 * (nth - 1)
        if day <= days_in_month:
            days.add(day)
    last_weekday = (first_weekday + days_in_month - 1) % 7
    for weekday in modifiers.last_weekdays:
        days.add(days_in_month - (last_weekday - weekday) % 7)
    return days
