"""Compiled schedules and their fires, with the project's DST rule.

The DST rule (defaults follow cronie):

- A schedule is evaluated on the wall clock of its zone. Each matching wall-clock time is a
  *slot*; a slot exists once, twice (a repeated hour when clocks go back) or not at all (a
  skipped hour when clocks go forward).
- *Fixed-time* schedules (neither the minute nor the hour field starts with ``*``) fire once per
  slot. A slot in a gap fires when the gap ends (``dst_gap="run_at_end"``, the default), or not
  at all (``"skip"``); all slots of one gap collapse into that one instant. A slot in a
  repeated hour fires at its first occurrence (``dst_repeat="first"``, the default), its second
  (``"second"``) or both (``"both"``).
- *Wildcard* schedules follow real time: by default ``dst_gap="skip"`` and ``dst_repeat="both"``,
  i.e. every real instant whose wall time matches. Explicit options apply to them as well.
- When a gap-end fire lands on the same instant as an ordinary slot (``0,30 2,3 * * *`` on a
  spring-forward night), there is one fire, reported as the ordinary slot.

Fires carry integer microseconds; all arithmetic is on integers, so every replica computes the
same instants. No clock is read here: callers say "after when".
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import islice
from typing import Iterator, NamedTuple
from zoneinfo import ZoneInfo

from scheduler.core.vocabulary import DstGap, DstRepeat

from .cron_fields import CronFields, parse_cron
from .day_phrases import describe_days
from .errors import ScheduleError
from .timeconv import US_PER_SECOND, from_us
from .wall_clock import (
    LAST_YEAR,
    days_can_match,
    format_slot,
    next_wall_slot,
    search_limit_year,
    slot_to_wall_seconds,
    wall_seconds_to_slot,
)
from .zones import fixed_offset_seconds, gap_end_seconds, load_zone, offset_seconds, slot_offsets

GAP_POLICIES = tuple(DstGap)
REPEAT_POLICIES = tuple(DstRepeat)

ADJUSTMENT_NONE = ""
ADJUSTMENT_GAP_SHIFTED = "dst_gap_shifted"
ADJUSTMENT_REPEAT_FIRST = "dst_repeat_first"
ADJUSTMENT_REPEAT_SECOND = "dst_repeat_second"

COMPILE_CACHE_SIZE = 4096
# Instants outside datetime's range (with a day of slack for zone offsets) have no slots.
_FIRST_SUPPORTED_US = (slot_to_wall_seconds((1, 1, 2, 0, 0, 0))) * US_PER_SECOND
_LAST_SUPPORTED_US = (slot_to_wall_seconds((LAST_YEAR, 12, 30, 0, 0, 0))) * US_PER_SECOND
# No fire is reported after the last instant a datetime can show.
_LAST_FIRE_US = (slot_to_wall_seconds((LAST_YEAR, 12, 31, 23, 59, 59)) + 1) * US_PER_SECOND - 1


class Fire(NamedTuple):
    """One fire of a schedule."""

    at_us: int  # the real instant
    nominal_local: str  # the wall-clock slot it stands for, e.g. "2026-03-08T02:30:00"
    adjustment: str  # "" | "dst_gap_shifted" | "dst_repeat_first" | "dst_repeat_second"
    utc_offset_s: int  # the zone's offset at at_us


@dataclass(frozen=True)
class Schedule:
    """A validated schedule, shared by every job with the same arguments (see compile_schedule).

    Equality and hashing use the four public arguments as resolved (``dst_gap``/``dst_repeat``
    hold the effective policy, never None). Holds no per-job or per-query state.
    """

    expr: str
    timezone: str
    dst_gap: str
    dst_repeat: str
    fields: CronFields = field(compare=False, repr=False)
    zone: ZoneInfo = field(compare=False, repr=False)
    fixed_offset_s: int | None = field(compare=False, repr=False)

    @property
    def has_seconds(self) -> bool:
        return self.fields.has_seconds

    @property
    def is_fixed_time(self) -> bool:
        return self.fields.is_fixed_time

    def next_fire(self, after_us: int) -> Fire | None:
        """The first fire strictly after ``after_us``, or None if there is none before year 9999."""
        return next(self._fires_after(after_us), None)

    def next_fires(self, after_us: int, n: int) -> list[Fire]:
        """The next ``n`` fires strictly after ``after_us``, in increasing instant order."""
        return list(islice(self._fires_after(after_us), max(n, 0)))

    def fires_between(self, start_exclusive_us: int, end_inclusive_us: int, limit: int) -> list[Fire]:
        """Fires in ``(start_exclusive_us, end_inclusive_us]``, the first ``limit`` of them."""
        if limit <= 0 or end_inclusive_us <= start_exclusive_us:
            return []
        # A year of slack on the search bound covers zone offsets; it only prunes the search.
        last_year = min(from_us(min(end_inclusive_us, _LAST_SUPPORTED_US)).year + 1, LAST_YEAR)
        fires = []
        for fire in self._fires_after(start_exclusive_us, last_year):
            if fire.at_us > end_inclusive_us:
                break
            fires.append(fire)
            if len(fires) >= limit:
                break
        return fires

    def describe(self) -> str:
        """A short sentence saying on which days (for L, W and #) and how around DST changes
        the schedule fires."""
        if self.fixed_offset_s is not None:
            dst_text = "no DST in this zone"
        else:
            gap_texts: dict[str, str] = {
                DstGap.RUN_AT_END: "a slot in a skipped hour fires when the gap ends",
                DstGap.SKIP: "a slot in a skipped hour is skipped",
            }
            repeat_texts: dict[str, str] = {
                DstRepeat.FIRST: "a slot in a repeated hour fires at its first occurrence",
                DstRepeat.SECOND: "a slot in a repeated hour fires at its second occurrence",
                DstRepeat.BOTH: "a slot in a repeated hour fires at both occurrences",
            }
            dst_text = f"{gap_texts[self.dst_gap]}; {repeat_texts[self.dst_repeat]}"
        kind = "fixed-time" if self.is_fixed_time else "wildcard"
        # Plain day fields read well as they are; L, W and # deserve words.
        days = describe_days(self.fields) if self.fields.modifiers else ""
        days_text = f"{days}, " if days else ""
        return f"cron '{self.expr}' in {self.timezone}, {days_text}{kind} ({dst_text})"

    # -- fire generation ---------------------------------------------------------------------

    def _fires_after(self, after_us: int, last_year: int = LAST_YEAR) -> Iterator[Fire]:
        if after_us >= _LAST_SUPPORTED_US:
            return iter(())
        after_us = max(after_us, _FIRST_SUPPORTED_US)
        if self.fixed_offset_s is not None:
            return self._fires_at_fixed_offset(after_us, last_year, self.fixed_offset_s)
        return self._fires_in_zone(after_us, last_year)

    def _fires_at_fixed_offset(self, after_us: int, last_year: int, offset_s: int) -> Iterator[Fire]:
        # Fast path: wall time is real time shifted by a constant, so slots map one to one.
        fields = self.fields
        # Slots are whole seconds; the first candidate is the next whole second strictly after.
        cursor_wall_s = (after_us + offset_s * US_PER_SECOND) // US_PER_SECOND + 1
        while True:
            start = wall_seconds_to_slot(cursor_wall_s)
            if start is None:  # past year 9999
                break
            slot = next_wall_slot(fields, start, min(search_limit_year(start[0]), last_year))
            if slot is None:
                break
            slot_wall_s = slot_to_wall_seconds(slot)
            at_us = (slot_wall_s - offset_s) * US_PER_SECOND
            if at_us > _LAST_FIRE_US:
                break
            yield Fire(at_us, format_slot(slot), "", offset_s)
            cursor_wall_s = slot_wall_s + 1

    def _fires_in_zone(self, after_us: int, last_year: int) -> Iterator[Fire]:
        zone, fields = self.zone, self.fields
        gap_policy, repeat_policy = self.dst_gap, self.dst_repeat
        local = from_us(after_us).astimezone(zone)
        cursor_wall_s = slot_to_wall_seconds(
            (local.year, local.month, local.day, local.hour, local.minute, local.second)
        )
        this_offset_s = offset_seconds(local.utcoffset())
        other_offset_s = offset_seconds(local.replace(fold=1 - local.fold).utcoffset())
        if local.fold == 0 and other_offset_s < this_offset_s:
            # We are in the first copy of a repeated hour: second copies of slots earlier on
            # the wall clock are still ahead of us, so start the wall-clock search earlier.
            cursor_wall_s -= this_offset_s - other_offset_s

        # Slots come in wall-clock order. Their instants are in order too, except the second
        # copies under "both", which belong after later first copies: a heap reorders them.
        # A fire is released once no later slot can produce an earlier or equal instant.
        pending: list[tuple[int, int, int, Fire]] = []  # (at_us, priority, sequence, fire)
        sequence = 0
        last_released_us = after_us
        while True:
            start = wall_seconds_to_slot(cursor_wall_s)
            if start is None:  # past year 9999
                break
            slot = next_wall_slot(fields, start, min(search_limit_year(start[0]), last_year))
            if slot is None:
                break
            slot_wall_s = slot_to_wall_seconds(slot)
            first_offset_s, second_offset_s = slot_offsets(zone, datetime(*slot))
            nominal = format_slot(slot)
            in_gap = first_offset_s < second_offset_s
            if first_offset_s == second_offset_s:
                primary_us = (slot_wall_s - first_offset_s) * US_PER_SECOND
                fires = [Fire(primary_us, nominal, ADJUSTMENT_NONE, first_offset_s)]
                cursor_wall_s = slot_wall_s + 1
            elif not in_gap:
                first = Fire(
                    (slot_wall_s - first_offset_s) * US_PER_SECOND,
                    nominal,
                    ADJUSTMENT_REPEAT_FIRST,
                    first_offset_s,
                )
                second = Fire(
                    (slot_wall_s - second_offset_s) * US_PER_SECOND,
                    nominal,
                    ADJUSTMENT_REPEAT_SECOND,
                    second_offset_s,
                )
                if repeat_policy == DstRepeat.FIRST:
                    fires = [first]
                elif repeat_policy == DstRepeat.SECOND:
                    fires = [second]
                else:
                    fires = [first, second]
                primary_us = fires[0].at_us
                cursor_wall_s = slot_wall_s + 1
            else:
                gap_end_s = gap_end_seconds(zone, slot_wall_s - second_offset_s, slot_wall_s - first_offset_s)
                primary_us = gap_end_s * US_PER_SECOND
                fires = []
                if gap_policy == DstGap.RUN_AT_END:
                    fires = [Fire(primary_us, nominal, ADJUSTMENT_GAP_SHIFTED, second_offset_s)]
                # Every later slot before the wall time at the gap's end is in the same gap and
                # would collapse onto the same instant (or be skipped): jump over them.
                cursor_wall_s = gap_end_s + second_offset_s
            for fire in fires:
                if after_us < fire.at_us <= _LAST_FIRE_US:
                    # An ordinary slot sorts before a gap-end fire at the same instant, and wins.
                    priority = 1 if fire.adjustment == ADJUSTMENT_GAP_SHIFTED else 0
                    heapq.heappush(pending, (fire.at_us, priority, sequence, fire))
                    sequence += 1
            # After an ordinary or repeated slot every later fire is strictly later; after a
            # gap an ordinary slot may still land exactly on the gap's end.
            while pending and (pending[0][0] < primary_us or (pending[0][0] == primary_us and not in_gap)):
                at_us, _, _, fire = heapq.heappop(pending)
                if at_us > last_released_us:
                    last_released_us = at_us
                    yield fire
        while pending:
            at_us, _, _, fire = heapq.heappop(pending)
            if at_us > last_released_us:
                last_released_us = at_us
                yield fire


def _resolve_policy(value: str | None, allowed: tuple[str, ...], default: str, name: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        choices = ", ".join(repr(choice) for choice in allowed)
        raise ScheduleError("dst", f"{name} must be one of {choices} (or unset), got {value!r}")
    return value


@lru_cache(maxsize=COMPILE_CACHE_SIZE)
def _compile(expr: str, timezone: str, dst_gap: str | None, dst_repeat: str | None) -> Schedule:
    fields = parse_cron(expr)
    zone = load_zone(timezone)
    if not days_can_match(fields):
        raise ScheduleError(
            "schedule",
            f"{expr.strip()!r} can never fire: no calendar date matches its day-of-month, month and day-of-week fields",
        )
    if fields.is_fixed_time:
        gap_default, repeat_default = DstGap.RUN_AT_END, DstRepeat.FIRST
    else:
        gap_default, repeat_default = DstGap.SKIP, DstRepeat.BOTH
    return Schedule(
        expr=expr.strip(),
        timezone=timezone,
        dst_gap=_resolve_policy(dst_gap, GAP_POLICIES, gap_default, "dst_gap"),
        dst_repeat=_resolve_policy(dst_repeat, REPEAT_POLICIES, repeat_default, "dst_repeat"),
        fields=fields,
        zone=zone,
        fixed_offset_s=fixed_offset_seconds(zone),
    )


def compile_schedule(
    expr: str,
    timezone: str = "UTC",
    dst_gap: str | None = None,
    dst_repeat: str | None = None,
) -> Schedule:
    """Validate a schedule and return its shared, immutable compiled form.

    Memoized on the arguments, so thousands of jobs with one expression cost one parse.
    ``timezone=None`` is UTC; an empty name is refused, since it is more often a variable that
    was never set than a wish for UTC. Raises ScheduleError naming the field ("schedule", "timezone" or "dst") and the reason.
    """
    if not isinstance(expr, str):
        raise ScheduleError("schedule", f"expected a string, got {type(expr).__name__}")
    if timezone is None:
        timezone = "UTC"
    if not isinstance(timezone, str):
        raise ScheduleError("timezone", f"expected a string, got {type(timezone).__name__}")
    for name, value in (("dst_gap", dst_gap), ("dst_repeat", dst_repeat)):
        if value is not None and not isinstance(value, str):
            raise ScheduleError("dst", f"{name} must be a string, got {type(value).__name__}")
    return _compile(expr, timezone, dst_gap, dst_repeat)
