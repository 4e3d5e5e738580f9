"""Herd forecast: fires per minute over a coming window, overall and per resource (pure).

Uses the same planning code the leader uses: schedules in their zones with DST rules,
and each job's spread offset, so the forecast shows what the dispatcher will release.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from .calendars import SKIPPED, plan_calendar_slot
from .jobs import schedule_for, spread_offset_us
from .schedule import Schedule
from .slots import owed_fires_between
from .timeconv import format_us

MINUTE_US = 60_000_000
# Per job, so one every-second job cannot make the forecast unbounded.
MAX_FIRES_PER_JOB = 100_000


@dataclass
class Forecast:
    start_us: int
    minutes: int
    total: Counter = field(default_factory=Counter)  # minute index -> fires
    by_resource: dict[str, Counter] = field(default_factory=dict)
    truncated_jobs: list[str] = field(default_factory=list)

    def peaks(self, top: int = 5) -> list[tuple[int, int]]:
        """The busiest minutes as (minute start in us, fires), busiest first."""
        return [(self.start_us + m * MINUTE_US, n) for m, n in self.total.most_common(top)]

    def series(self, counter: Counter | None = None) -> list[int]:
        counter = self.total if counter is None else counter
        return [counter.get(m, 0) for m in range(self.minutes)]


def forecast(
    specs: list, start_us: int, hours: float, herd_window_us: int, calendars: Mapping | None = None
) -> Forecast:
    """Fires per minute of `specs` (JobSpecs) over `hours` from `start_us`, as the dispatcher spreads them;
    a job's calendar (from `calendars`, name -> record) drops the slots it skips and moves the ones it moves."""
    minutes = max(1, int(hours * 60))
    end_us = start_us + minutes * MINUTE_US
    result = Forecast(start_us=start_us, minutes=minutes)
    for spec in specs:
        if spec.paused:
            continue
        if spec.calendar:  # a calendar goes with one plain `schedule:`
            schedule = schedule_for(spec)
            offset_us = spread_offset_us(spec, schedule, herd_window_us)
            # Slots whose spread lands in the window may be nominally before it (or, moved to an
            # earlier business day by a calendar, nominally after it).
            fires = schedule.fires_between(
                start_us - offset_us - 1, end_us - offset_us + _CALENDAR_LOOKAHEAD_US, MAX_FIRES_PER_JOB
            )
            if len(fires) == MAX_FIRES_PER_JOB and fires[-1].at_us < end_us - offset_us:
                result.truncated_jobs.append(spec.id)
            nominal = [f.at_us for f in fires]
            instants = _calendar_instants(spec, schedule, nominal, calendars or {}, start_us - offset_us - 1)
        else:
            offset_us = spread_offset_us(spec, None, herd_window_us)
            # Slots whose spread lands in the window may be nominally before it.
            owed = owed_fires_between(spec, start_us - offset_us - 1, end_us - offset_us, MAX_FIRES_PER_JOB)
            if len(owed) == MAX_FIRES_PER_JOB:
                result.truncated_jobs.append(spec.id)
            instants = [fire.at_us for fire, _ in owed]
        for instant_us in instants:
            minute = (instant_us + offset_us - start_us) // MINUTE_US
            if 0 <= minute < minutes:
                result.total[minute] += 1
                for name in spec.uses:
                    result.by_resource.setdefault(name, Counter())[minute] += 1
    return result


# How far after the window a slot may lie that a calendar moves into it (a move looks 31 days).
_CALENDAR_LOOKAHEAD_US = 32 * 86_400_000_000


def _calendar_instants(spec, schedule: Schedule, nominal: list[int], calendars: Mapping, after_us: int) -> list[int]:
    """Where each slot is claimed once the job's calendar decided it; skipped slots are left out."""
    instants, previous_us = [], after_us
    for position, nominal_us in enumerate(nominal):
        next_us = nominal[position + 1] if position + 1 < len(nominal) else 0
        plan = plan_calendar_slot(spec.calendar, calendars, schedule.zone, nominal_us, previous_us, next_us)
        if plan.status != SKIPPED:
            instants.append(plan.due_us)
        previous_us = nominal_us
    return instants


def to_json(result: Forecast) -> dict:
    return {
        "start": format_us(result.start_us),
        "minutes": result.minutes,
        "fires_per_minute": result.series(),
        "by_resource": {name: result.series(counter) for name, counter in sorted(result.by_resource.items())},
        "peaks": [{"minute": format_us(at), "fires": n} for at, n in result.peaks()],
        "truncated_jobs": result.truncated_jobs,
    }
