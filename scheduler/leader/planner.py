"""Pure planning for the trigger loop: which slots of a job are due now, and how each is accounted.

Called with replicated job records and the leader's clock reading; tests call it
directly. A job's schedule and spread come from scheduler/planning/jobs.py, shared with
every node. The decisions it makes travel inside ClaimRuns, so followers and the
next leader never recompute them.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import UNSET

from scheduler.core.commands import SlotClaim
from scheduler.core.model import MISSED, QUEUED, SECOND_US, SKIPPED, Calendar, Job
from scheduler.core.vocabulary import Misfire
from scheduler.planning import Schedule, format_us
from scheduler.planning.calendars import SlotPlan, plan_calendar_slot
from scheduler.planning.jobs import next_slot_after, schedule_for, spread_offset_us
from scheduler.planning.slots import NO_SOURCE, Slot, is_plain, next_owed_slot, runs_left, slots_for


def _seconds(us: int) -> str:
    return f"{us / SECOND_US:g}s"


def slot_outcome(job: Job, schedule: Schedule | None, scheduled_us: int, now_us: int) -> tuple[str, str]:
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
        if schedule is not None:
            later = len(schedule.fires_between(scheduled_us, now_us - misfire.grace_us - 1, misfire.max_catch_up))
        else:
            later = _owed_between(job, scheduled_us, now_us - misfire.grace_us - 1, misfire.max_catch_up)
        if later < misfire.max_catch_up:
            return QUEUED, ""
        return MISSED, f"{late}; older than the {misfire.max_catch_up} most recent late slots caught up"
    outage = f"between {format_us(job.cursor_us)} and {format_us(now_us)}"
    return MISSED, f"{late}; the scheduler was not firing {outage}"


def plan_due_slots(job: Job, now_us: int, max_slots: int, herd_window_us: int = 0) -> list[SlotClaim]:
    """Every slot of `job` due at or before `now_us`, in order, at most `max_slots`.

    Each claim names the slot after it, so consecutive claims chain exactly from
    the job's replicated `next_due_us`: nothing skipped, nothing repeated. The run key
    keeps the nominal instant; `effective_us` carries the spread. A job with one plain
    `schedule:` takes the loop below as it always did; every other shape goes through
    `next_owed_slot` (scheduler/planning/slots.py).
    """
    if not is_plain(job.body):
        return [claim for claim, _ in plan_owed_slots(job, now_us, max_slots, herd_window_us)]
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


def _owed_between(job: Job, start_exclusive_us: int, end_inclusive_us: int, limit: int) -> int:
    """How many slots the job owes in `(start, end]`, counting up to `limit`."""
    source, count, after_us = slots_for(job.body), 0, start_exclusive_us
    while count < limit:
        slot = next_owed_slot(job.body, after_us, source=source)
        if slot is None or slot.at_us > end_inclusive_us:
            break
        count, after_us = count + 1, slot.at_us
    return count


def _source_of(job: Job, due_us: int, source) -> int:
    """Which `schedules:` entry produced the replicated next due slot (the lowest that hits it)."""
    if job.body.schedules is UNSET:
        return NO_SOURCE
    slot = source.next_slot(due_us - 1)
    return slot.source if slot is not None and slot.at_us == due_us else NO_SOURCE


def plan_owed_slots(job: Job, now_us: int, max_slots: int, herd_window_us: int = 0) -> list[tuple[SlotClaim, int]]:
    """`plan_due_slots` for every shape but a plain schedule: each claim with its `schedules:`
    index (NO_SOURCE for other shapes).

    A claim never says "no next slot" because of `max_runs`: whether a slot counts is decided
    when it is applied (a paused job's slot is skipped, and does not count), so the core ends
    the job's slots once the count is reached. The planner only stops at the runs left.
    """
    body = job.body
    source = slots_for(body)
    offset_us = spread_offset_us(job.spec, None, herd_window_us)
    counted = 0 if job.counted_runs is UNSET else job.counted_runs
    left = runs_left(body, counted)
    limit = max_slots if left is None else min(max_slots, left)
    planned: list[tuple[SlotClaim, int]] = []
    due_us = job.next_due_us
    slot: Slot | None = Slot(due_us, _source_of(job, due_us, source)) if due_us else None
    while slot is not None and slot.at_us <= now_us and len(planned) < limit:
        due_us = slot.at_us
        following = next_owed_slot(body, due_us, source=source)  # the limit is the core's to apply
        next_us = following.at_us if following else 0
        status, reason = slot_outcome(job, None, due_us, now_us)
        claim = SlotClaim(job.id, due_us, next_us, job.version, status, reason, due_us + offset_us)
        planned.append((claim, slot.source))
        slot = following
    return planned


def plan_job_slots(
    job: Job, now_us: int, max_slots: int, herd_window_us: int = 0
) -> tuple[list[SlotClaim], list[int] | None]:
    """The trigger loop's entry: the due claims, and for a `schedules:` job each claim's source
    index (None for every other job, so a plain schedule costs nothing more)."""
    if job.body.schedules is UNSET:
        return plan_due_slots(job, now_us, max_slots, herd_window_us), None
    planned = plan_owed_slots(job, now_us, max_slots, herd_window_us)
    return [claim for claim, _ in planned], [source for _, source in planned]


# -- jobs with a calendar (docs/design/calendars.md) ---------------------------------------------


def _calendar_slot(
    job: Job, schedule: Schedule, calendars: Mapping[str, Calendar], due_us: int, previous_us: int
) -> tuple[SlotPlan, int]:
    next_us = next_slot_after(schedule, due_us)
    assert job.body.calendar  # callers plan only jobs that have one
    return plan_calendar_slot(job.body.calendar, calendars, schedule.zone, due_us, previous_us, next_us), next_us


def claim_instant_us(job: Job, calendars: Mapping[str, Calendar], herd_window_us: int = 0) -> int:
    """When the leader claims the job's next due slot: its nominal instant, or, for a slot its
    calendar moved, the instant it moved to plus its spread (before the nominal one when it moved
    to an earlier day). 0 when the job has no next slot."""
    if not job.body.calendar or not job.next_due_us:
        return job.next_due_us
    schedule = schedule_for(job.body)
    plan, _ = _calendar_slot(job, schedule, calendars, job.next_due_us, job.cursor_us)
    if not plan.moved:
        return job.next_due_us
    return plan.due_us + spread_offset_us(job.spec, schedule, herd_window_us)


def plan_calendar_due_slots(
    job: Job, calendars: Mapping[str, Calendar], now_us: int, max_slots: int, herd_window_us: int = 0
) -> tuple[list[SlotClaim], list[SlotClaim]]:
    """`plan_due_slots` for a job with a calendar: every slot claimable at `now_us`, and which of
    them the calendar decided (skipped, or moved: the claim's effective instant is where it runs).

    A moved slot is claimable from its moved instant (plus its spread), and a late one is judged
    by the misfire policy from there; slots stay in order because a move never reaches another slot.
    """
    schedule = schedule_for(job.body)
    offset_us = spread_offset_us(job.spec, schedule, herd_window_us)
    claims: list[SlotClaim] = []
    decided: list[SlotClaim] = []
    due_us, previous_us = job.next_due_us, job.cursor_us
    while due_us and len(claims) < max_slots:
        plan, next_us = _calendar_slot(job, schedule, calendars, due_us, previous_us)
        claim_at_us = plan.due_us + offset_us if plan.moved else due_us
        if claim_at_us > now_us:
            break
        if plan.status == SKIPPED:
            claim = SlotClaim(job.id, due_us, next_us, job.version, SKIPPED, plan.reason, due_us + offset_us)
            decided.append(claim)
        elif plan.moved:
            status, late = slot_outcome(job, schedule, claim_at_us, now_us)
            reason = f"{plan.reason}; {late}" if late else plan.reason
            claim = SlotClaim(job.id, due_us, next_us, job.version, status, reason, claim_at_us)
            decided.append(claim)
        else:
            status, reason = slot_outcome(job, schedule, due_us, now_us)
            claim = SlotClaim(job.id, due_us, next_us, job.version, status, reason, due_us + offset_us)
        claims.append(claim)
        previous_us, due_us = due_us, next_us
    return claims, decided
