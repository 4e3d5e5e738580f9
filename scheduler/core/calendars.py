"""Calendars in replicated state: the checks an apply passes before it declares or drops one.

A calendar is a named, sorted set of explicit local dates (`model.Calendar`); jobs name
calendars in `calendar.skip` and `calendar.only`. The core holds and checks them; what a date
in a calendar does to a slot is decided by the leader's planner (scheduler/planning/calendars.py)
and arrives inside ClaimRuns.
"""

from __future__ import annotations

from scheduler.core.commands import ApplyJobs
from scheduler.core.declarations import check_declarations
from scheduler.core.model import Calendar
from scheduler.core.results import Result, rejected
from scheduler.core.state import State
from scheduler.core.vocabulary import OnSkip, RejectionCode

# Bounds that keep a calendar's planning and its share of a snapshot small: ten years of
# daily dates per calendar, and a hundred calendars per cluster.
MAX_CALENDAR_DATES = 3660
MAX_CALENDARS = 100
# How many calendars one job may name in `skip` and `only` together.
MAX_JOB_CALENDARS = 16


def calendar_problem(calendar: Calendar) -> str:
    """What makes a calendar record unfit for replicated state, or '' (cheap: no date parsing)."""
    if not calendar.name:
        return "a calendar name is empty"
    if len(calendar.dates) > MAX_CALENDAR_DATES:
        return f"calendar {calendar.name!r} has {len(calendar.dates)} dates, more than {MAX_CALENDAR_DATES}"
    dates = calendar.dates
    if any(len(d) != 10 or d[4] != "-" or d[7] != "-" for d in dates):
        return f"calendar {calendar.name!r}: dates must be YYYY-MM-DD"
    if any(a >= b for a, b in zip(dates, dates[1:], strict=False)):
        return f"calendar {calendar.name!r}: dates must be sorted and unique"
    return ""


def check_calendars(state: State, cmd: ApplyJobs, index: int) -> Result | None:
    """After the apply, every calendar a job names must exist, and the cluster's count stay bounded.

    Dropping a calendar a job still names is refused (not pruned from the job): the job's owner
    decides what the job does without it.
    """
    calendars, removals = cmd.calendars or (), cmd.calendar_removals or ()
    refusal = check_declarations(
        index, calendars, removals, state.calendars, calendar_problem, "calendar", MAX_CALENDARS
    )
    if refusal is not None:
        return refusal
    declared = (set(state.calendars) | {c.name for c in calendars}) - set(removals)
    for upsert in cmd.upserts:
        rule = upsert.spec.calendar
        if rule and rule.on_skip not in tuple(OnSkip):
            return rejected(index, RejectionCode.INVALID, f"job {upsert.spec.id!r}: unknown on_skip {rule.on_skip!r}")
    # Only upserts can name a missing calendar unless one is dropped; the full pass picks, in id
    # order of the merged view, the same failing job on every replica.
    if not removals and all(_names_declared(u.spec.calendar, declared) for u in cmd.upserts):
        return None
    upserted = {u.spec.id: u.spec for u in cmd.upserts}
    remaining = {job_id: job.body for job_id, job in state.jobs.items() if job_id not in cmd.removals}
    merged = {**remaining, **upserted}
    for job_id in sorted(merged):
        rule = merged[job_id].calendar
        if rule and not _names_declared(rule, declared):
            missing = sorted(set(rule.names()) - declared)
            dropped = [name for name in missing if name in removals]
            if dropped:
                why = f"job {job_id!r} names calendars {dropped} that this apply drops (keep them, or the job without them)"
                return rejected(index, RejectionCode.INVALID, why)
            return rejected(index, RejectionCode.INVALID, f"job {job_id!r} names undeclared calendars {missing}")
    return None


def _names_declared(rule, declared: set[str]) -> bool:
    return not rule or declared.issuperset(rule.names())


def apply_calendar_changes(state: State, cmd: ApplyJobs) -> None:
    for calendar in cmd.calendars or ():
        state.calendars[calendar.name] = calendar
    for name in cmd.calendar_removals or ():
        state.calendars.pop(name, None)
