"""The herd forecast for many jobs at once: the same counts as scheduler.forecast, computed per
schedule instead of per job (pure).

scheduler.forecast computes every job's fires: 100,000 jobs took about 30 s on one core, far too
long for a page and for a node whose Raft thread shares the interpreter. Jobs with the same
schedule, zone, DST rules and resources fire at the same nominal instants and differ only by
their spread offset, so their fires are computed once, and each job only adds its offset:

    minute(fire + offset) = a + q + (1 if b + r >= 1 minute else 0)

where fire - start = a minutes + b and offset = q minutes + r. Counting the jobs of a schedule
by (q, carry) turns a job's hundreds of fires into one histogram shift per distinct offset minute
(at most 61 of them in an hour's herd window).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Mapping

from scheduler.core.model import JobSpec
from scheduler.planning.forecast import MAX_FIRES_PER_JOB, MINUTE_US, Forecast, forecast
from scheduler.planning.jobs import schedule_for, spread_offset_us
from scheduler.planning.slots import is_plain


def _schedule_key(spec: JobSpec) -> tuple:
    return (spec.schedule, spec.timezone, spec.dst_gap, spec.dst_repeat, tuple(spec.uses))


def grouped_forecast(
    specs: list[JobSpec], start_us: int, hours: float, herd_window_us: int, calendars: Mapping | None = None
) -> Forecast:
    """forecast(specs, start_us, hours, herd_window_us), computed once per distinct schedule (from
    the clock minute holding `start_us`, as forecast counts); jobs with a calendar (which skips or
    moves their own slots) one by one."""
    start_us -= start_us % MINUTE_US
    minutes = max(1, int(hours * 60))
    end_us = start_us + minutes * MINUTE_US
    result = Forecast(start_us=start_us, minutes=minutes)
    offsets: dict[tuple, list[int]] = defaultdict(list)
    first_spec: dict[tuple, JobSpec] = {}
    others = []  # several schedules, intervals, windows: rare, forecast one by one
    with_calendar = [spec for spec in specs if spec.calendar and not spec.paused]
    if with_calendar:
        _merge(result, forecast(with_calendar, start_us, hours, herd_window_us, calendars))
    for spec in specs:
        if spec.paused or spec.calendar:
            continue
        if not is_plain(spec):
            others.append(spec)
            continue
        key = _schedule_key(spec)
        first_spec.setdefault(key, spec)
        offsets[key].append(spread_offset_us(spec, schedule_for(spec), herd_window_us))
    for key, job_offsets in offsets.items():
        spec = first_spec[key]
        fires = schedule_for(spec).fires_between(start_us - max(job_offsets) - 1, end_us, 2 * MAX_FIRES_PER_JOB)
        if len(fires) == 2 * MAX_FIRES_PER_JOB:
            # A dense schedule over a long window: per job, with forecast's own cap.
            group = [s for s in specs if not s.paused and not s.calendar and is_plain(s) and _schedule_key(s) == key]
            _merge(result, forecast(group, start_us, hours, herd_window_us))
            continue
        counts = _shifted_counts([fire.at_us - start_us for fire in fires], job_offsets, minutes)
        result.total.update(counts)
        for name in spec.uses:
            result.by_resource.setdefault(name, Counter()).update(counts)
    if others:
        _merge(result, forecast(others, start_us, hours, herd_window_us))
    return result


def _shifted_counts(fire_offsets_us: list[int], job_offsets_us: list[int], minutes: int) -> Counter:
    """Fires per minute in [0, minutes) when every job fires at each instant plus its offset."""
    by_remainder: dict[int, Counter] = defaultdict(Counter)  # b -> a -> fires
    for delta_us in fire_offsets_us:
        whole, remainder = divmod(delta_us, MINUTE_US)
        by_remainder[remainder][whole] += 1
    remainders_by_minute: dict[int, list[int]] = defaultdict(list)  # q -> sorted r of the jobs
    for offset_us in job_offsets_us:
        whole, remainder = divmod(offset_us, MINUTE_US)
        remainders_by_minute[whole].append(remainder)
    for remainders in remainders_by_minute.values():
        remainders.sort()
    counts: Counter = Counter()
    for fire_remainder, histogram in by_remainder.items():
        shifts: Counter = Counter()  # minutes added -> jobs
        for whole, remainders in remainders_by_minute.items():
            carried = len(remainders) - bisect.bisect_left(remainders, MINUTE_US - fire_remainder)
            shifts[whole + 1] += carried
            shifts[whole] += len(remainders) - carried
        for shift, jobs in shifts.items():
            if not jobs:
                continue
            for whole, fires in histogram.items():
                minute = whole + shift
                if 0 <= minute < minutes:
                    counts[minute] += fires * jobs
    return counts


def _merge(into: Forecast, part: Forecast) -> None:
    into.total.update(part.total)
    for name, counter in part.by_resource.items():
        into.by_resource.setdefault(name, Counter()).update(counter)
    into.truncated_jobs.extend(part.truncated_jobs)
