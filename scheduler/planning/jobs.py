"""Planning of one job, the same on every node: its schedule, its next slot and its herd spread.

The leader's due passes build on these (scheduler/leader/planner.py), an apply sets each
job's first due slot with them, and the servicers, the dashboard and the forecast show a
job's next fire and spread from them, so every view agrees with what the leader claims.
"""

from __future__ import annotations

from functools import lru_cache

from .durations import parse_duration_us
from .herd import jitter_offset_us, lands_on_round_instant
from .schedule import Schedule, compile_schedule

# Distinct (schedule, instant) questions remembered. A herd asks one question per job, and the
# jobs of a herd share a handful of schedules, so a few thousand answers cover any herd.
NEXT_SLOT_CACHE_SIZE = 8192


def schedule_for(job_spec) -> Schedule:
    """The shared, memoized schedule of a spec (no per-job iterator objects)."""
    return compile_schedule(job_spec.schedule, job_spec.timezone, job_spec.dst_gap or None, job_spec.dst_repeat or None)


def first_due_after(job_spec, after_us: int) -> int:
    """The first slot strictly after `after_us`, or 0 when the schedule never fires again."""
    return next_slot_after(schedule_for(job_spec), after_us)


@lru_cache(maxsize=NEXT_SLOT_CACHE_SIZE)
def next_slot_after(schedule: Schedule, after_us: int) -> int:
    """`schedule`'s first slot strictly after `after_us` (0 if none), memoized.

    Schedules are shared and immutable, so the answer depends on the two arguments alone. The
    20,000 jobs of a midnight herd share a few schedules and one instant: without the memo the
    leader computed the same next slot 20,000 times at the instant, most of a second on a
    2-core machine (docs/design/plan-once-per-schedule.md).
    """
    fire = schedule.next_fire(after_us)
    return fire.at_us if fire else 0


def spread_offset_us(job_spec, schedule: Schedule, herd_window_us: int) -> int:
    """How long after its nominal instant a slot becomes due, to break up round-time herds.

    `auto` spreads schedules that land on minute 0 of an hour over the cluster's herd window;
    `pinned` never spreads; an explicit window spreads any schedule. The offset is a hash of
    the job id, so it is the same on every node, after every restart, for every slot.
    """
    if job_spec.jitter == "pinned":
        return 0
    if job_spec.jitter in ("auto", ""):
        window_us = herd_window_us if lands_on_round_instant(schedule) else 0
    else:
        window_us = parse_duration_us(job_spec.jitter, "jitter")
    return jitter_offset_us(job_spec.id, window_us)
