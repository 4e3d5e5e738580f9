"""Equal values shared instead of copied: a replica holding 100,000 job specs keeps one copy of
each policy and of each repeated string (zone, owner, class, target...), not one per job, and
one copy of each spec body (a spec without its id): jobs made from one template share it.

Every entry decoded from the log or a snapshot arrives as fresh objects; sharing replaces them
with an equal object seen before. No value changes, so replicas stay identical whatever each
one happens to share. Every table is bounded and starts over when full (see `_share`).
"""

from __future__ import annotations

import msgspec

from scheduler.core.model import PAUSED_BY_SPEC, RUN_STATUSES, Change, Job, JobSpec, LastRun, Run

# Per field, so a field of many distinct values (targets) cannot crowd out the others.
MAX_SHARED_PER_FIELD = 65_536
_SHARED_FIELDS = (
    "schedule", "target_kind", "target", "timezone", "owner", "job_class", "dst_gap", "dst_repeat", "jitter",
    "overlap", "retry", "misfire", "history", "uses", "timeout_us",
)  # fmt: skip
_STATUSES: dict[str, str] = {status: status for status in RUN_STATUSES}

_tables: dict[str, dict[object, object]] = {name: {} for name in _SHARED_FIELDS}
MAX_SHARED_RECENT = 65_536
_bodies: dict[JobSpec, JobSpec] = {}
_instants: dict[int, int] = {}
_last_runs: dict[LastRun, LastRun] = {}
_changes: dict[Change, Change] = {}


def _share(table: dict, value, limit: int):
    """An equal value seen since the table last started over, or `value` itself.

    A full table starts over rather than refusing new values: refusing would keep old values
    alive and stop sharing the new ones on a node that lives long.
    """
    found = table.get(value)
    if found is not None:
        return found
    if len(table) >= limit:
        table.clear()
    table[value] = value
    return value


def share_spec(spec: JobSpec) -> JobSpec:
    return msgspec.structs.replace(
        spec, **{name: _share(_tables[name], getattr(spec, name), MAX_SHARED_PER_FIELD) for name in _SHARED_FIELDS}
    )


def share_body(spec: JobSpec) -> JobSpec:
    """The spec's body (its fields but the id): one object per distinct body, its values shared."""
    body = spec if spec.id == "" else msgspec.structs.replace(spec, id="")
    found = _bodies.get(body)
    if found is not None:
        return found
    return _share(_bodies, share_spec(body), MAX_SHARED_RECENT)


def share_instant(instant_us: int) -> int:
    """One int per instant: the jobs due at one instant (a midnight herd) hold the same one."""
    return _share(_instants, instant_us, MAX_SHARED_RECENT)


def share_last(status: str, scheduled_us: int) -> LastRun:
    """One record per (status, slot): the jobs of one herd hold the same one."""
    return _share(_last_runs, LastRun(_STATUSES.get(status, status), scheduled_us), MAX_SHARED_RECENT)


def share_change(author: str, at_us: int) -> Change:
    return _share(_changes, Change(author, at_us), MAX_SHARED_RECENT)


def share_decoded_job(job: Job, job_id: str) -> None:
    """A job decoded from a snapshot, sharing what applying its log would have shared."""
    job.id = job_id
    job.body = share_body(job.body)
    job.change = share_change(job.change.author, job.change.at_us)
    job.cursor_us = share_instant(job.cursor_us)
    job.next_due_us = share_instant(job.next_due_us)
    job.last = share_last(job.last.status, job.last.scheduled_us)
    if job.pause == PAUSED_BY_SPEC:
        job.pause = PAUSED_BY_SPEC


def share_run(run: Run, job_id: str) -> None:
    """A new run holds its job's id string and the status constant instead of copies of its own."""
    run.job_id = job_id
    run.status = _STATUSES.get(run.status, run.status)
