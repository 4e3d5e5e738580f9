"""What a job's calendar does to one slot (pure; docs/design/calendars.md).

`calendar_decision` judges a local date: owed, skipped (with the calendar that skipped it) or
moved to the previous or next business day (Monday to Friday, in none of the job's `skip`
calendars). `plan_calendar_slot` turns that into an instant: a moved slot runs at the same local
wall time on its new date, and is skipped instead when the move would reach or cross another
slot of the job, so slots are still accounted strictly in order. The leader's planner, `raftcron
next` and explain all call these, so every view agrees with what is claimed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Protocol

from scheduler.core.vocabulary import OnSkip, RunStatus, SkipReason

from .timeconv import format_us, from_us
from .zones import gap_end_seconds, slot_offsets

QUEUED, SKIPPED = RunStatus.QUEUED, RunStatus.SKIPPED


# The replicated records these read (model.Calendar, model.CalendarRule), by the fields they read:
# planning stays free of the core's record module.
class Calendar(Protocol):
    @property
    def dates(self) -> tuple[str, ...]: ...


class CalendarRule(Protocol):
    @property
    def skip(self) -> tuple[str, ...]: ...
    @property
    def only(self) -> tuple[str, ...]: ...
    @property
    def on_skip(self) -> str: ...


# How far a move looks for a business day before it gives up and skips the slot.
MAX_BUSINESS_DAY_SEARCH_DAYS = 31
_SECOND_US = 1_000_000


@dataclass(frozen=True)
class Owe:
    """The slot is owed as scheduled."""


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Move:
    to_date: date
    reason: str


OWE = Owe()
Decision = Owe | Skip | Move

# id(calendar) -> (calendar, its dates as a set): records are frozen and replaced whole, and the
# entry holds the record so its id is not reused while it is cached.
_DATE_SETS: dict[int, tuple[Calendar, frozenset[str]]] = {}


def dates_of(calendar: Calendar) -> frozenset[str]:
    cached = _DATE_SETS.get(id(calendar))
    if cached is not None and cached[0] is calendar:
        return cached[1]
    if len(_DATE_SETS) > 1024:
        _DATE_SETS.clear()
    dates = frozenset(calendar.dates)
    _DATE_SETS[id(calendar)] = (calendar, dates)
    return dates


def _listing(names: tuple[str, ...], calendars: Mapping[str, Calendar], day: str) -> str | None:
    """The first of `names` whose calendar holds `day` (a missing calendar holds nothing)."""
    for name in names:
        calendar = calendars.get(name)
        if calendar is not None and day in dates_of(calendar):
            return name
    return None


def is_business_day(day: date, rule: CalendarRule, calendars: Mapping[str, Calendar]) -> bool:
    return day.weekday() < 5 and _listing(rule.skip, calendars, day.isoformat()) is None


def calendar_decision(local_date: date, rule: CalendarRule, calendars: Mapping[str, Calendar]) -> Decision:
    """Owe, Skip(reason) or Move(to_date, reason) for a slot on `local_date` in the job's zone.

    `only` first: a date in none of its calendars is skipped (never moved). Then `skip`: a date
    in one of its calendars is skipped, or moved to the nearest business day before or after
    it by `on_skip`; a move that finds none within 31 days skips.
    """
    day = local_date.isoformat()
    if rule.only and _listing(rule.only, calendars, day) is None:
        return Skip(f"{SkipReason.CALENDAR}: {day} is in none of {', '.join(rule.only)} (only)")
    name = _listing(rule.skip, calendars, day)
    if name is None:
        return OWE
    listed = f"{SkipReason.CALENDAR} {name}: {day} is listed"
    if rule.on_skip not in (OnSkip.PREVIOUS_BUSINESS_DAY, OnSkip.NEXT_BUSINESS_DAY):
        return Skip(listed)
    step = timedelta(days=-1 if rule.on_skip == OnSkip.PREVIOUS_BUSINESS_DAY else 1)
    candidate = local_date
    for _ in range(MAX_BUSINESS_DAY_SEARCH_DAYS):
        candidate += step
        if is_business_day(candidate, rule, calendars):
            return Move(candidate, f"{listed}; moved to {candidate.isoformat()} ({rule.on_skip})")
    return Skip(f"{listed}; no {rule.on_skip} within {MAX_BUSINESS_DAY_SEARCH_DAYS} days")


def wall_time_on(day: date, wall: time, zone) -> int:
    """The instant (µs) of wall time `wall` on `day` in `zone`: the first of a repeated hour, and
    for a time in a gap, the instant the gap ends (what a fixed-time slot does by default)."""
    naive = datetime.combine(day, wall)
    first_s, second_s = slot_offsets(zone, naive)
    wall_s = int((naive - datetime(1970, 1, 1)).total_seconds())
    if first_s >= second_s:  # exists once, or twice (first occurrence: the larger offset)
        return (wall_s - first_s) * _SECOND_US + naive.microsecond
    return gap_end_seconds(zone, wall_s - second_s, wall_s - first_s) * _SECOND_US


@dataclass(frozen=True)
class SlotPlan:
    """How the leader accounts for one slot of a job with a calendar."""

    status: str  # queued or skipped
    due_us: int  # when it is claimed: the nominal instant, or where it moved
    reason: str = ""
    moved: bool = False


def plan_calendar_slot(
    rule: CalendarRule,
    calendars: Mapping[str, Calendar],
    zone,
    nominal_us: int,
    previous_us: int,
    next_nominal_us: int,
) -> SlotPlan:
    """The slot at `nominal_us`, between the job's cursor `previous_us` (its last accounted slot,
    or where its schedule started) and its next nominal slot (0: none).

    A move that lands at or before `previous_us`, or at or after the next nominal slot, would
    claim slots out of order or twice on one instant: that slot is skipped, saying why.
    """
    local = from_us(nominal_us).astimezone(zone)
    decision = calendar_decision(local.date(), rule, calendars)
    if isinstance(decision, Owe):
        return SlotPlan(QUEUED, nominal_us)
    if isinstance(decision, Skip):
        return SlotPlan(SKIPPED, nominal_us, decision.reason)
    wall = time(local.hour, local.minute, local.second, local.microsecond)
    moved_us = wall_time_on(decision.to_date, wall, zone)
    if moved_us <= previous_us:
        why = f"{decision.reason}, but {format_us(moved_us)} is not after the previous slot; skipped"
        return SlotPlan(SKIPPED, nominal_us, why)
    if next_nominal_us and moved_us >= next_nominal_us:
        why = f"{decision.reason}, but {format_us(moved_us)} is not before the next slot; skipped"
        return SlotPlan(SKIPPED, nominal_us, why)
    return SlotPlan(QUEUED, moved_us, f"{decision.reason}: runs at {format_us(moved_us)}", moved=True)
