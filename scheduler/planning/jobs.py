"""Planning of one job, the same on every node: its schedule, its next slot and its herd spread.

The leader's due passes build on these (scheduler/leader/planner.py), an apply sets each
job's first due slot with them, and the servicers, the dashboard and the forecast show a
job's next fire and spread from them, so every view agrees with what the leader claims.
"""

from __future__ import annotations

from .durations import parse_duration_us
from .herd import jitter_offset_us, lands_on_round_instant
from .schedule import Schedule, compile_schedule


def schedule_for(job_spec) -> Schedule:
    """The shared, memoized schedule of a spec (no per-job iterator objects)."""
    return compile_schedule(job_spec.schedule, job_spec.timezone, job_spec.dst_gap or None, job_spec.dst_repeat or None)


def first_due_after(job_spec, after_us: int) -> int:
    """The first slot strictly after `after_us`, or 0 when the schedule never fires again."""
    fire = schedule_for(job_spec).next_fire(after_us)
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
