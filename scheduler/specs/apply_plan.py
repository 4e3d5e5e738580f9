"""What applying a set of specs means against the jobs a replica holds now: whether the set may
be applied at all, the ApplyJobs command that makes it so, whether the caller may propose that
command, and what a dry run reports.

Pure: the caller reads the replicated state and passes it in, with the authenticated principal
as data (None when the node runs without authentication); nothing here reads a clock, a context
or the network, so tests call it directly and the ApplyJobs servicer only translates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from msgspec import UNSET

from scheduler.core.commands import ApplyJobs, JobUpsert
from scheduler.core.jobs import restarted_cursor
from scheduler.core.model import AlertRoute, Calendar, JobSpec, Resource
from scheduler.core.state import State
from scheduler.planning.jobs import first_due_after
from scheduler.security.policy import (
    apply_denial,
    calendars_change_denial,
    jobs_target_denial,
    prunes,
    routes_change_denial,
)
from scheduler.security.principals import ADMIN, Principal
from scheduler.specs.calendars import calendar_problems
from scheduler.specs.rules import name_problem, validate_resource, validate_spec


@dataclass(frozen=True)
class PlannedChange:
    """One line of a dry run's answer: a job, what the apply would do to it, its version after."""

    job_id: str
    change: str  # "added", "changed", "unchanged" or "removed"
    version: int


def apply_problems(
    specs: Sequence[JobSpec], resources: Sequence[Resource], calendars: Sequence[Calendar] = ()
) -> list[str]:
    """Every reason the set may not be applied at all, one per line; empty when it may."""
    problems = [str(problem) for spec in specs for problem in validate_spec(spec)]
    problems += [str(problem) for resource in resources for problem in validate_resource(resource)]
    problems += [str(problem) for calendar in calendars for problem in calendar_problems(calendar, name_problem)]
    names: set[str] = set()
    problems += [f"calendar {c.name!r}: listed twice" for c in calendars if c.name in names or names.add(c.name)]
    seen: set[str] = set()
    problems += [f"job {s.id!r}: listed twice" for s in specs if s.id in seen or seen.add(s.id)]
    return problems


def plan_apply(
    state: State,
    specs: Sequence[JobSpec],
    resources: Sequence[Resource],
    *,
    prune: bool,
    caller: Principal | None,
    author: str,
    request_id: str,
    calendars: Sequence[Calendar] = (),
    routes: Sequence[AlertRoute] | None = None,
) -> ApplyJobs:
    """The command that makes `state` hold `specs` and `resources`.

    Each spec is upserted at the version it has now, due at its first slot when its schedule
    starts afresh. With `prune`, the jobs left out are removed, but only those of owners
    `caller` may change; resources left out are dropped only by an admin (or without
    authentication).
    """
    wanted = {spec.id for spec in specs}
    upserts = []
    # Slots are owed from replicated time (this replica's view of it), never a node's wall clock.
    issued_at_us = state.now_us
    for spec in specs:
        current = state.jobs.get(spec.id)
        upsert = JobUpsert(spec=spec, expected_version=current.version if current else 0, next_due_us=0)
        after_us = restarted_cursor(state, current, upsert, issued_at_us)
        if after_us is None:
            assert current is not None  # a new job's slots always start afresh
            next_due_us = current.next_due_us
        else:
            counted = current.counted_runs if current is not None and current.counted_runs is not UNSET else 0
            next_due_us = first_due_after(spec, after_us, counted)
        upserts.append(JobUpsert(spec, upsert.expected_version, next_due_us))
    removals = (
        tuple(sorted(i for i, job in state.jobs.items() if i not in wanted and prunes(caller, job.spec.owner)))
        if prune
        else ()
    )
    declared = {r.name for r in resources}
    # Budgets are shared: a submitter's file declares the ones it uses, never drops others'.
    may_drop = caller is None or caller.role == ADMIN
    dropped = tuple(sorted(n for n in state.resources if n not in declared)) if prune and may_drop else ()
    changed = tuple(r for r in resources if state.resources.get(r.name) != r)
    command = ApplyJobs(issued_at_us, author, request_id, tuple(upserts), removals, changed, dropped)
    command = _with_calendars(state, command, calendars, prune and may_drop)
    return _with_routes(state, command, routes, prune and may_drop)


def _with_routes(state: State, command: ApplyJobs, routes: Sequence[AlertRoute] | None, drop: bool) -> ApplyJobs:
    """Routes are shared like calendars: declared or changed when they differ; dropped by a pruning
    admin, and only by a file that has a `routes:` section (None: the file says nothing of routes,
    so an admin's jobs-only file never drops the cluster's routes)."""
    held = state.routes if state.routes is not UNSET else {}
    changed = tuple(r for r in routes or () if held.get(r.name) != r)
    declared = {r.name for r in routes or ()}
    dropped = tuple(sorted(n for n in held if n not in declared)) if drop and routes is not None else ()
    if not changed and not dropped:
        return command
    return msgspec.structs.replace(command, routes=changed or UNSET, route_removals=dropped or UNSET)


def _with_calendars(state: State, command: ApplyJobs, calendars: Sequence[Calendar], drop: bool) -> ApplyJobs:
    """Calendars are shared like resources: declared or changed when they differ, dropped by a
    pruning admin. Expanded already (holiday_expansion.py); dates sorted and unique here."""
    declared = {c.name for c in calendars}
    tidy = [msgspec.structs.replace(c, dates=tuple(sorted(set(c.dates)))) for c in calendars]
    changed = tuple(c for c in tidy if state.calendars.get(c.name) != c)
    dropped = tuple(sorted(n for n in state.calendars if n not in declared)) if drop else ()
    if not changed and not dropped:
        return command  # UNSET fields: the command stays readable by nodes without calendars
    return msgspec.structs.replace(
        command, calendars=changed or msgspec.UNSET, calendar_removals=dropped or msgspec.UNSET
    )


def apply_refusal(state: State, command: ApplyJobs, caller: Principal | None) -> str | None:
    """Why `caller` may not propose `command`, or None when it may (always without authentication).

    Every job it touches must be of an owner the caller may change, before and after the change,
    and changing or dropping a resource needs an admin.
    """
    if caller is None:
        return None
    touched = [(u.spec.id, u.spec.owner) for u in command.upserts]
    touched += [
        (job_id, state.jobs[job_id].spec.owner)
        for job_id in [u.spec.id for u in command.upserts] + list(command.removals)
        if job_id in state.jobs
    ]
    # Targets are authority: a job added or changed must run a target its submitter may
    # use. A spec applied again unchanged grants nothing new (and files keep applying
    # after targets were introduced, while the operator migrates the principals).
    targeted = [
        (u.spec.id, u.spec.owner, u.spec.target_kind, u.spec.target)
        for u in command.upserts
        if u.spec.id not in state.jobs or state.jobs[u.spec.id].spec != u.spec
    ]
    resources = [r.name for r in command.resources] + list(command.resource_removals)
    calendars = [c.name for c in command.calendars or ()] + list(command.calendar_removals or ())
    routes = [r.name for r in command.routes or ()] + list(command.route_removals or ())
    return (
        apply_denial(caller, touched, resources)
        or calendars_change_denial(caller, calendars)
        or routes_change_denial(caller, routes)
        or jobs_target_denial(caller, targeted)
    )


def preview_changes(state: State, command: ApplyJobs) -> list[PlannedChange]:
    """What a dry run of `command` reports, upserts first, then removals."""
    changes = []
    for upsert in command.upserts:
        current = state.jobs.get(upsert.spec.id)
        if current is None:
            changes.append(PlannedChange(upsert.spec.id, "added", 1))
        elif current.spec == upsert.spec:
            changes.append(PlannedChange(upsert.spec.id, "unchanged", current.version))
        else:
            changes.append(PlannedChange(upsert.spec.id, "changed", current.version + 1))
    for job_id in command.removals:
        changes.append(PlannedChange(job_id, "removed", state.jobs[job_id].version))
    return changes
