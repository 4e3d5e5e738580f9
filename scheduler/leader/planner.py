"""Pure planning for the trigger loop: which slots of a job are due now, and how each is accounted.

Called with replicated job records and the leader's clock reading; tests call it
directly. A job's schedule and spread come from scheduler/planning/jobs.py, shared with
every node. The decisions it makes travel inside ClaimRuns, so followers and the
next leader never recompute them.
"""

from __future__ import annotations

from scheduler.core.commands import SlotClaim
from scheduler.core.model import MISSED, QUEUED, SECOND_US, SKIPPED, Job
from scheduler.core.vocabulary import Misfire
from scheduler.planning import Schedule, format_us
from scheduler.planning.jobs import next_slot_after, schedule_for, spread_offset_us


def _seconds(us: int) -> str:
    return f"{us / SECOND_US:g}s"


def slot_outcome(job: Job, schedule: Schedule, scheduled_us: int, now_us: int) -> tuple[str, str]:
    """Fire, skip or record as missed one slot found at `now_us`, by the job's misfire policy.

    catch_up fires the most recent `max_catch_up` late slots: whether a slot is among them
    depends only on the slots after it, so the cap holds however many passes an outage takes.
    """
    misfire = job.body.misfire
    lateness_us = now_us - scheduled_us
    if lateness_us <= misfire.grace_us:
        return QUEUED, ""
    late = f"found {_seconds(lateness_us)} late, beyond the {_seconds(misfire.grace_us)} grace"
    if misfire.policy == Misfire.SKIP:
        return SKIPPED, f"{late}; policy skip"
    if misfire.policy == Misfire.CATCH_UP:
        later_late = schedule.fires_between(scheduled_us, now_us - misfire.grace_us - 1, misfire.max_catch_up)
        if len(later_late) < misfire.max_catch_up:
            return QUEUED, ""
        return MISSED, f"{late}; older than the {misfire.max_catch_up} most recent late slots caught up"
    outage = f"between {format_us(job.cursor_us)} and {format_us(now_us)}"
    return MISSED, f"{late}; the scheduler was not firing {outage}"


def plan_due_slots(job: Job, now_us: int, max_slots: int, herd_window_us: int = 0) -> list[SlotClaim]:
    """Every slot of `job` due at or before `now_us`, in order, at most `max_slots`.

    Each claim names the slot after it, so consecutive claims chain exactly from
    the job's replicated `next_due_us`: nothing skipped, nothing repeated. The run key
    keeps the nominal instant; `effective_us` carries the spread.
    """
    schedule = schedule_for(job.body)
    offset_us = spread_offset_us(job.spec, schedule, herd_window_us)  # a hash of the id
    claims: list[SlotClaim] = []
    due_us = job.next_due_us
    while due_us and due_us <= now_us and len(claims) < max_slots:
        next_us = next_slot_after(schedule, due_us)
        status, reason = slot_outcome(job, schedule, due_us, now_us)
        claims.append(SlotClaim(job.id, due_us, next_us, job.version, status, reason, due_us + offset_us))
        due_us = next_us
    return claims
