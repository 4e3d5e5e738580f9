"""Job transitions: apply a set of specs atomically, pause and resume."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import forget_failures
from scheduler.core.calendars import apply_calendar_changes, check_calendars
from scheduler.core.commands import ApplyJobs, JobUpsert, SetJobPaused
from scheduler.core.dependencies import check_dependencies, update_dependents
from scheduler.core.execution import cancel_live_runs
from scheduler.core.model import NEVER_RUN, PAUSED_BY_SPEC, Change, Job, JobSpec, Pause
from scheduler.core.results import Result, rejected
from scheduler.core.retention import adopt_job, forget_job, horizon_us
from scheduler.core.routes import apply_route_changes, check_routes
from scheduler.core.sharing import share_body, share_instant
from scheduler.core.state import State
from scheduler.core.vocabulary import RejectionCode

# How far a proposer's view of replicated time may be from the applying replica's when it
# (re)starts a schedule: a follower lags by milliseconds; a wall clock by anything.
MAX_PLAN_SKEW_US = 60_000_000
# Spec fields whose change alters which instants are slots (or which of them are owed).
_SCHEDULE_FIELDS = (
    "schedule", "timezone", "dst_gap", "dst_repeat", "schedules", "every_us", "anchor_us", "at_us", "active", "max_runs",
)  # fmt: skip


def restarted_cursor(state: State, current: Job | None, upsert: JobUpsert, issued_at_us: int) -> int | None:
    """The new cursor when the job's slots start afresh (new job or new schedule), else None.

    Slots of a schedule are owed from the moment it is applied in replicated time, not
    before, and never at or before a run key still retained under this id (a deleted
    job's history), so a re-added job cannot owe a slot that is already claimed. The
    proposer stamps its view of replicated time; a view ahead of it is cut back to it.
    """
    start_us = min(issued_at_us, state.now_us)
    if current is None:
        retained = state.runs.get(upsert.spec.id)
        return max(start_us, retained[-1].scheduled_us if retained else 0, horizon_us(state, upsert.spec.id))
    if any(getattr(current.body, name) != getattr(upsert.spec, name) for name in _SCHEDULE_FIELDS):
        return max(current.cursor_us, start_us)
    return None


def _check_apply(state: State, cmd: ApplyJobs, index: int) -> Result | None:
    seen: set[str] = set()
    for upsert in cmd.upserts:
        job_id = upsert.spec.id
        if not job_id or job_id in seen:
            return rejected(index, RejectionCode.INVALID, f"job id {job_id!r} is empty or repeated")
        seen.add(job_id)
        current = state.jobs.get(job_id)
        current_version = current.version if current else 0
        if upsert.expected_version != current_version:
            return rejected(
                index,
                RejectionCode.VERSION_CONFLICT,
                f"job {job_id!r} is at version {current_version}, not {upsert.expected_version}",
                retryable=True,
            )
        if upsert.next_due_us < 0:
            return rejected(index, RejectionCode.INVALID, f"job {job_id!r}: negative next due instant")
    for job_id in cmd.removals:
        if job_id in seen:
            return rejected(index, RejectionCode.INVALID, f"job {job_id!r} is both applied and removed")
        if job_id not in state.jobs:
            return rejected(index, RejectionCode.NOT_FOUND, f"job {job_id!r} does not exist")
        seen.add(job_id)
    return (
        _check_resources(state, cmd, index)
        or check_calendars(state, cmd, index)
        or check_dependencies(state, cmd, index)
        or check_routes(state, cmd, index)
    )


def _check_resources(state: State, cmd: ApplyJobs, index: int) -> Result | None:
    """After the apply, every job's `uses` must name a declared resource."""
    declared = (set(state.resources) | {r.name for r in cmd.resources}) - set(cmd.resource_removals)
    if any(r.max_concurrent < 0 or r.max_starts_per_s < 0 or not r.name for r in cmd.resources):
        return rejected(index, RejectionCode.INVALID, "resource limits must not be negative, names not empty")
    # Every job in state uses only declared resources (each apply checked it), so when none is
    # removed only the upserted specs can fail. The full pass below is O(jobs) per apply, and
    # it alone picks which failing job a rejection names, so every replica names the same one.
    if not cmd.resource_removals and all(declared.issuperset(u.spec.uses) for u in cmd.upserts):
        return None
    upserted = {u.spec.id: u.spec for u in cmd.upserts}
    remaining = {job_id: job.spec for job_id, job in state.jobs.items() if job_id not in cmd.removals}
    for job_id, spec in {**remaining, **upserted}.items():
        missing = sorted(set(spec.uses) - declared)
        if missing:
            return rejected(index, RejectionCode.INVALID, f"job {job_id!r} uses undeclared resources {missing}")
    return None


def _pause_after(current: Job | None, spec: JobSpec) -> Pause | None:
    """An operator's pause or resume stands until the spec's own `paused` flag changes."""
    if current is not None and current.body.paused == spec.paused:
        return current.pause
    if not spec.paused:
        return None
    return current.pause if current is not None and current.pause is not None else PAUSED_BY_SPEC


def _counted_runs_after(current: Job | None, spec: JobSpec):
    """max_runs counts from the apply that set it; a spec without it keeps no count."""
    if spec.max_runs is UNSET:
        return UNSET
    if current is None or current.counted_runs is UNSET:
        return 0
    return current.counted_runs


def _upsert(state: State, cmd: ApplyJobs, upsert: JobUpsert, change: Change) -> ev.AnyEvent:
    spec = upsert.spec
    current = state.jobs.get(spec.id)
    if current is not None and current.spec == spec:
        return ev.JobUnchanged(spec.id, current.version)
    restarted_cursor_us = restarted_cursor(state, current, upsert, cmd.issued_at_us)
    if restarted_cursor_us is not None:
        cursor_us, next_due_us = restarted_cursor_us, share_instant(upsert.next_due_us)
    else:
        assert current is not None  # restarted_cursor always starts a new job's slots afresh
        cursor_us, next_due_us = current.cursor_us, current.next_due_us
    # A re-added id continues its deleted predecessor's versions: a claim planned against the old
    # job (same id, same version number) would otherwise pass as current and skip the new slots.
    version = current.version + 1 if current else state.retired_versions.pop(spec.id, 0) + 1
    counted_runs = _counted_runs_after(current, spec)
    if counted_runs is not UNSET and spec.max_runs is not UNSET and counted_runs >= spec.max_runs:
        next_due_us = 0  # the limit is reached: whatever the proposer planned, nothing more is owed
    job = Job(
        body=share_body(spec),
        id=spec.id,
        version=version,
        change=change,
        cursor_us=cursor_us,
        next_due_us=next_due_us,
        pause=_pause_after(current, spec),
        last=current.last if current else NEVER_RUN,
        counted_runs=counted_runs,
    )
    state.jobs[spec.id] = job
    update_dependents(state, current.body if current else None, spec, spec.id)
    adopt_job(state, spec.id)
    return ev.JobChanged(spec.id, version) if current else ev.JobAdded(spec.id, version)


def apply_jobs(state: State, cmd: ApplyJobs, index: int) -> Result:
    problem = _check_apply(state, cmd, index)
    if problem is not None:
        return problem
    # Plan freshness is checked before anything changes, so the apply stays all-or-nothing.
    for upsert in cmd.upserts:
        cursor_us = restarted_cursor(state, state.jobs.get(upsert.spec.id), upsert, cmd.issued_at_us)
        if cursor_us is None:
            continue
        if not state.now_us - MAX_PLAN_SKEW_US <= cmd.issued_at_us <= state.now_us:
            # Planned from a clock ahead of replicated time (its next due would skip the slots in
            # between) or far behind it (slots owed from long ago): refused, to be re-planned.
            return rejected(
                index,
                RejectionCode.STALE_PLAN,
                f"planned at {cmd.issued_at_us}, replicated time is {state.now_us}",
                True,
            )
        if upsert.next_due_us and upsert.next_due_us <= cursor_us:
            return rejected(
                index, RejectionCode.STALE_PLAN, f"job {upsert.spec.id!r}: next due is not after the cursor", True
            )
    change = Change(cmd.author, state.now_us)  # one for every job of this apply
    events: list[ev.AnyEvent] = [_upsert(state, cmd, upsert, change) for upsert in cmd.upserts]
    for job_id in cmd.removals:
        events.extend(cancel_live_runs(state, job_id, "job deleted"))
        removed = state.jobs.pop(job_id)
        update_dependents(state, removed.body, None, job_id)
        state.retired_versions[job_id] = removed.version
        forget_job(state, job_id, removed.body.history)
        events.append(ev.JobRemoved(job_id, removed.version))
    for resource in cmd.resources:
        state.resources[resource.name] = resource
    for name in cmd.resource_removals:
        state.resources.pop(name, None)
    apply_calendar_changes(state, cmd)
    apply_route_changes(state, cmd)
    return Result(index=index, events=tuple(events))


def set_job_paused(state: State, cmd: SetJobPaused, index: int) -> Result:
    job = state.jobs.get(cmd.job_id)
    if job is None:
        return rejected(index, RejectionCode.NOT_FOUND, f"job {cmd.job_id!r} does not exist")
    job.pause = Pause(cmd.author, cmd.reason) if cmd.paused else None
    if not cmd.paused:
        forget_failures(state, cmd.job_id)
    event = ev.JobPaused if cmd.paused else ev.JobResumed
    return Result(index=index, events=(event(cmd.job_id, job.version),))
