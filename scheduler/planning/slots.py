"""A job's slots, whatever way it fires: one cron schedule, several, an interval, one instant.

`slots_for(spec)` gives a job's *slot source*: the instants its schedule produces, each with the
index of the `schedules:` entry that produced it. `next_owed_slot` is the one seam the leader's
planner, an apply's first due slot and every view go through: the next slot after an instant
that the job still owes, after its active window and its run limit. A filter that drops or
moves slots (a holiday calendar) composes here, on the slot `next_owed_slot` returns.

All arithmetic is on integer microseconds, and nothing reads a clock: every node computes the
same slots from the same spec. A spec is a scheduler.core.model.JobSpec (typed `Any` here: the
planning package imports nothing of the core's records).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

from msgspec import UNSET

from .schedule import _LAST_FIRE_US as LAST_SLOT_US
from .schedule import Fire, Schedule, compile_schedule
from .timeconv import from_us

# `schedules:` holds at most this many expressions: each costs a next-fire search per slot.
MAX_SCHEDULES = 16
NO_SOURCE = -1  # a slot not produced by an entry of `schedules:`


class Slot(NamedTuple):
    at_us: int
    # The index into the spec's `schedules:` that produced it (the lowest when several agree),
    # or NO_SOURCE for `schedule:`, `every:` and `at:`.
    source: int = NO_SOURCE


class SlotSource(Protocol):
    def next_slot(self, after_us: int) -> Slot | None:
        """The first slot strictly after `after_us`, or None when there is none."""
        ...

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        """The same slot as a fire (its wall-clock slot and DST adjustment), with its source."""
        ...


@dataclass(frozen=True)
class CronSlots:
    """`schedule:`: the slots of one compiled cron schedule."""

    schedule: Schedule

    def next_slot(self, after_us: int) -> Slot | None:
        fire = self.schedule.next_fire(after_us)
        return Slot(fire.at_us) if fire else None

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        fire = self.schedule.next_fire(after_us)
        return (fire, NO_SOURCE) if fire else None


@dataclass(frozen=True)
class UnionSlots:
    """`schedules:`: every instant of any of them, once; the lowest index that hits it is its source."""

    schedules: tuple[Schedule, ...]

    def next_slot(self, after_us: int) -> Slot | None:
        found = self.next_fire(after_us)
        return Slot(found[0].at_us, found[1]) if found else None

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        best: tuple[Fire, int] | None = None
        for index, schedule in enumerate(self.schedules):
            fire = schedule.next_fire(after_us)
            if fire is not None and (best is None or fire.at_us < best[0].at_us):
                best = (fire, index)
        return best

    def slots_between(self, start_exclusive_us: int, end_inclusive_us: int, limit: int) -> list[Slot]:
        """The slots in `(start, end]`, at most `limit`, merged in order without repeats."""
        per_schedule = [
            [(fire.at_us, index) for fire in schedule.fires_between(start_exclusive_us, end_inclusive_us, limit)]
            for index, schedule in enumerate(self.schedules)
        ]
        slots: list[Slot] = []
        for at_us, index in heapq.merge(*per_schedule):
            if slots and slots[-1].at_us == at_us:
                continue
            slots.append(Slot(at_us, index))
            if len(slots) >= limit:
                break
        return slots


@dataclass(frozen=True)
class IntervalSlots:
    """`every:`: anchor + k * every for k >= 0 (nothing before the anchor)."""

    every_us: int
    anchor_us: int

    def next_slot(self, after_us: int) -> Slot | None:
        if after_us < self.anchor_us:
            at_us = self.anchor_us
        else:
            at_us = self.anchor_us + ((after_us - self.anchor_us) // self.every_us + 1) * self.every_us
        return Slot(at_us) if at_us <= LAST_SLOT_US else None

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        slot = self.next_slot(after_us)
        return (_utc_fire(slot.at_us), NO_SOURCE) if slot else None


def _utc_fire(at_us: int) -> Fire:
    """An interval or one-shot slot as a fire: its wall clock is UTC, nothing is adjusted."""
    return Fire(at_us, from_us(at_us).replace(tzinfo=None).isoformat(), "", 0)


@dataclass(frozen=True)
class OneShotSlots:
    """`at:`: one slot."""

    at_us: int

    def next_slot(self, after_us: int) -> Slot | None:
        return Slot(self.at_us) if after_us < self.at_us else None

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        return (_utc_fire(self.at_us), NO_SOURCE) if after_us < self.at_us else None


class _NoSlots:
    """A manual-only job: no slot ever; it runs only when triggered."""

    def next_slot(self, after_us: int) -> Slot | None:
        return None

    def next_fire(self, after_us: int) -> tuple[Fire, int] | None:
        return None


NO_SLOTS = _NoSlots()


def is_manual_only(spec: Any) -> bool:
    return not spec.schedule and spec.schedules is UNSET and spec.every_us is UNSET and spec.at_us is UNSET


def parents_of(spec: Any) -> tuple[str, ...]:
    """The jobs a spec runs `after:` (its slots are theirs; it has none of its own), or ()."""
    after = getattr(spec, "after", UNSET)
    return () if after is UNSET else tuple(after)


def is_plain(spec: Any) -> bool:
    """One `schedule:` with no window and no run limit: the planner's fast path."""
    return bool(spec.schedule) and spec.active is UNSET and spec.max_runs is UNSET


def slots_for(spec: Any) -> SlotSource:
    """The slot source of a spec (shared: compiled schedules are memoized by their arguments).

    Raises ScheduleError for an expression that does not compile; validated specs never do.
    """
    gap, repeat = spec.dst_gap or None, spec.dst_repeat or None
    if spec.schedule:
        return CronSlots(compile_schedule(spec.schedule, spec.timezone, gap, repeat))
    if spec.schedules is not UNSET:
        return _union(spec.schedules, spec.timezone, gap, repeat)
    if spec.every_us is not UNSET:
        return IntervalSlots(spec.every_us, 0 if spec.anchor_us is UNSET else spec.anchor_us)
    if spec.at_us is not UNSET:
        return OneShotSlots(spec.at_us)
    return NO_SLOTS


@lru_cache(maxsize=1024)
def _union(exprs: tuple[str, ...], timezone: str, gap: str | None, repeat: str | None) -> UnionSlots:
    return UnionSlots(tuple(compile_schedule(expr, timezone, gap, repeat) for expr in exprs))


class NotOwed(NamedTuple):
    """Why a job owes no further slot (what `raftcron next` and the dashboard say)."""

    code: str  # one of the WHY_* below
    message: str


WHY_MANUAL = "manual_only"
WHY_AFTER = "after_parents"
WHY_DONE = "done"
WHY_AFTER_WINDOW = "after_window"
WHY_LIMIT = "limit_reached"
WHY_NO_MORE = "no_more_slots"


def runs_left(spec: Any, counted_runs: int) -> int | None:
    """How many scheduled runs `max_runs` still allows (None: no limit)."""
    if spec.max_runs is UNSET:
        return None
    return max(spec.max_runs - counted_runs, 0)


def next_owed_slot(spec: Any, after_us: int, counted_runs: int = 0, source: SlotSource | None = None) -> Slot | None:
    """The first slot strictly after `after_us` that the job owes, or None.

    A slot before the active window's start is not owed (the search starts at the window), one
    at or after its end is not owed and nor is any later one, and a job whose counted runs reached
    `max_runs` owes nothing more. `source` saves the lookup when the caller has it already.
    """
    if spec.max_runs is not UNSET and counted_runs >= spec.max_runs:
        return None
    source = source if source is not None else slots_for(spec)
    window = spec.active
    if window is not UNSET and window.from_us:
        after_us = max(after_us, window.from_us - 1)
    slot = source.next_slot(after_us)
    if slot is not None and window is not UNSET and window.until_us and slot.at_us >= window.until_us:
        return None
    return slot


def first_owed_after(spec: Any, after_us: int, counted_runs: int = 0) -> int:
    """The instant of the first owed slot strictly after `after_us`, 0 when there is none."""
    slot = next_owed_slot(spec, after_us, counted_runs)
    return slot.at_us if slot else 0


def upcoming_slots(spec: Any, after_us: int, count: int, counted_runs: int = 0) -> list[Slot]:
    """The next `count` owed slots, assuming each of them runs (so `max_runs` cuts the list)."""
    source = slots_for(spec)
    slots: list[Slot] = []
    while len(slots) < count:
        slot = next_owed_slot(spec, after_us, counted_runs + len(slots), source)
        if slot is None:
            break
        slots.append(slot)
        after_us = slot.at_us
    return slots


def why_not_owed(spec: Any, after_us: int, counted_runs: int, last_scheduled_us: int = 0) -> NotOwed | None:
    """Why no slot is owed after `after_us` (None when one is): for people, not for planning."""
    if parents := parents_of(spec):
        return NotOwed(WHY_AFTER, f"runs after {', '.join(parents)}: a slot of theirs once their runs of it succeed")
    if is_manual_only(spec):
        return NotOwed(WHY_MANUAL, "manual-only: it has no schedule and runs only when triggered")
    if spec.max_runs is not UNSET and counted_runs >= spec.max_runs:
        return NotOwed(WHY_LIMIT, f"limit reached: {counted_runs} of max_runs {spec.max_runs} scheduled runs done")
    if next_owed_slot(spec, after_us, counted_runs) is not None:
        return None
    if spec.at_us is not UNSET:
        if last_scheduled_us == spec.at_us:
            return NotOwed(WHY_DONE, "done: its one-shot slot has been claimed")
        return NotOwed(WHY_DONE, "done: its one-shot instant passed before it was owed")
    window = spec.active
    if window is not UNSET and window.until_us:
        return NotOwed(WHY_AFTER_WINDOW, "after its active window: no slot is owed from its end on")
    return NotOwed(WHY_NO_MORE, "its schedule has no further slot")


def window_state(spec: Any, now_us: int) -> str:
    """'' (no window), 'before', 'inside' or 'after' the active window at `now_us`."""
    window = spec.active
    if window is UNSET:
        return ""
    if window.from_us and now_us < window.from_us:
        return "before"
    if window.until_us and now_us >= window.until_us:
        return "after"
    return "inside"


# -- views: what the dashboard, the CLI and the forecast show ---------------------------------


class OwedFire(NamedTuple):
    fire: Fire
    source: int  # as Slot.source


def next_owed_fire(
    spec: Any, after_us: int, counted_runs: int = 0, source: SlotSource | None = None
) -> OwedFire | None:
    """`next_owed_slot` with the fire's details (wall-clock slot, DST adjustment) for views."""
    slot = next_owed_slot(spec, after_us, counted_runs, source)
    if slot is None:
        return None
    source = source if source is not None else slots_for(spec)
    found = source.next_fire(slot.at_us - 1)
    assert found is not None and found[0].at_us == slot.at_us
    return OwedFire(found[0], slot.source)


def owed_fires_between(spec: Any, start_exclusive_us: int, end_inclusive_us: int, limit: int) -> list[OwedFire]:
    """The slots the job owes (or owed) in `(start, end]`, the first `limit`: the window applies,
    the run limit does not (for past slots it was applied when they were claimed)."""
    if is_plain(spec):
        schedule = compile_schedule(spec.schedule, spec.timezone, spec.dst_gap or None, spec.dst_repeat or None)
        return [OwedFire(f, NO_SOURCE) for f in schedule.fires_between(start_exclusive_us, end_inclusive_us, limit)]
    source = slots_for(spec)
    fires: list[OwedFire] = []
    after_us = start_exclusive_us
    while len(fires) < limit:
        owed = next_owed_fire(spec, after_us, source=source)
        if owed is None or owed.fire.at_us > end_inclusive_us:
            break
        fires.append(owed)
        after_us = owed.fire.at_us
    return fires


def upcoming_fires(spec: Any, after_us: int, count: int, counted_runs: int = 0) -> list[OwedFire]:
    """The next `count` owed slots as fires, assuming each runs (so `max_runs` cuts the list)."""
    source = slots_for(spec)
    fires: list[OwedFire] = []
    while len(fires) < count:
        owed = next_owed_fire(spec, after_us, counted_runs + len(fires), source)
        if owed is None:
            break
        fires.append(owed)
        after_us = owed.fire.at_us
    return fires
