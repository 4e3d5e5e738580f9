"""Herd forecast: fires per minute over a coming window, overall and per resource (pure).

Uses the same planning code the leader uses: schedules in their zones with DST rules,
and each job's spread offset, so the forecast shows what the dispatcher will release.
Minutes are clock minutes (a window starting at 10:17:42 counts from 10:17:00), so a peak
names the minute a person reads on a clock, whenever the forecast was asked for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from .calendars import SKIPPED, plan_calendar_slot
from .jobs import schedule_for, spread_offset_us
from .schedule import Schedule
from .slots import is_plain, owed_fires_between
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


@dataclass(frozen=True)
class Peak:
    """One of the busiest minutes, with the jobs that make it busy."""

    at_us: int  # the minute's start
    fires: int
    jobs: tuple[tuple[str, int], ...]  # (job id, its fires in that minute), most first, at most a few
    more_jobs: int  # the other jobs firing in that minute


def _offset_us(spec, schedule, herd_window_us: int, spreads: dict[str, int] | None) -> int:
    if spreads is not None and spec.id in spreads:
        return spreads[spec.id]
    return spread_offset_us(spec, schedule, herd_window_us)


def forecast(
    specs: list,
    start_us: int,
    hours: float,
    herd_window_us: int,
    calendars: Mapping | None = None,
    spreads: dict[str, int] | None = None,
) -> Forecast:
    """Fires per minute of `specs` (JobSpecs) over `hours` from the clock minute holding
    `start_us`, as the dispatcher spreads them. A job's calendar (from `calendars`, name ->
    record) drops the slots it skips and moves the ones it moves; `spreads` (job id -> offset)
    overrides the offsets computed from `herd_window_us`: the ones a node reported, say."""
    start_us -= start_us % MINUTE_US
    minutes = max(1, int(hours * 60))
    end_us = start_us + minutes * MINUTE_US
    result = Forecast(start_us=start_us, minutes=minutes)
    for spec in specs:
        if spec.paused:
            continue
        if spec.calendar:  # a calendar goes with one plain `schedule:`
            schedule = schedule_for(spec)
            offset_us = _offset_us(spec, schedule, herd_window_us, spreads)
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
            offset_us = _offset_us(spec, None, herd_window_us, spreads)
            # Slots whose spread lands in the window may be nominally before it.
            instants = _owed_instants(spec, start_us - offset_us - 1, end_us - offset_us)
            if len(instants) == MAX_FIRES_PER_JOB:
                result.truncated_jobs.append(spec.id)
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


def _owed_instants(spec, start_exclusive_us: int, end_inclusive_us: int) -> list[int]:
    """The instants a job owes in the range, by every way it fires (a plain schedule directly)."""
    if is_plain(spec):
        fires = schedule_for(spec).fires_between(start_exclusive_us, end_inclusive_us, MAX_FIRES_PER_JOB)
        return [fire.at_us for fire in fires]
    return [fire.at_us for fire, _ in owed_fires_between(spec, start_exclusive_us, end_inclusive_us, MAX_FIRES_PER_JOB)]


PEAKS_SHOWN = 5
JOBS_NAMED_PER_PEAK = 3


def name_peaks(
    specs: list,
    result: Forecast,
    herd_window_us: int,
    spreads: dict[str, int] | None = None,
    top: int = PEAKS_SHOWN,
    named: int = JOBS_NAMED_PER_PEAK,
) -> list[Peak]:
    """The `top` busiest minutes of `result` (from `forecast(specs, ...)` with the same
    spreads), each naming its `named` busiest jobs. A second pass over the peak minutes only,
    so a forecast never keeps a count per job and minute."""
    peaks = result.peaks(top)
    per_minute: dict[int, Counter] = {at: Counter() for at, _ in peaks}
    for spec in specs:
        if spec.paused or not peaks:
            continue
        offset_us = _offset_us(spec, None, herd_window_us, spreads)
        for at_us in per_minute:
            # Fires due in [at_us, at_us + 1 min): nominal instants one offset earlier (a calendar's
            # moves are not followed here: peaks name jobs by their schedules).
            due = _owed_instants(spec, at_us - offset_us - 1, at_us + MINUTE_US - offset_us - 1)
            if due:
                per_minute[at_us][spec.id] = len(due)
    named_peaks = []
    for at_us, fires in peaks:
        ranked = sorted(per_minute[at_us].items(), key=lambda item: (-item[1], item[0]))
        named_peaks.append(Peak(at_us, fires, tuple(ranked[:named]), max(0, len(ranked) - named)))
    return named_peaks


def peak_text(peak: Peak) -> str:
    """`a (60), b (1), +12 more`: the jobs of a peak, for people."""
    names = [f"{job_id} ({fires})" for job_id, fires in peak.jobs]
    if peak.more_jobs:
        names.append(f"+{peak.more_jobs} more")
    return ", ".join(names)


def to_json(result: Forecast, peaks: list[Peak] | None = None) -> dict:
    if peaks is None:
        shown = [{"minute": format_us(at), "fires": n} for at, n in result.peaks()]
    else:
        shown = [
            {
                "minute": format_us(peak.at_us),
                "fires": peak.fires,
                "jobs": [{"job_id": job_id, "fires": n} for job_id, n in peak.jobs],
                "more_jobs": peak.more_jobs,
            }
            for peak in peaks
        ]
    return {
        "start": format_us(result.start_us),
        "minutes": result.minutes,
        "fires_per_minute": result.series(),
        "by_resource": {name: result.series(counter) for name, counter in sorted(result.by_resource.items())},
        "peaks": shown,
        "truncated_jobs": result.truncated_jobs,
    }
