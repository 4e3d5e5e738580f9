"""Equal values shared instead of copied: a replica holding 100,000 job specs keeps one copy of
each policy and of each repeated string (zone, owner, class, target...), not one per job, and
one copy of each spec body (a spec without its id): jobs made from one template share it.

Every entry decoded from the log or a snapshot arrives as fresh objects; sharing replaces them
with an equal object seen before. No value changes, so replicas stay identical whatever each
one happens to share. The table is bounded: past its size, new values are simply not shared.
"""

from __future__ import annotations

import msgspec

from scheduler.core.model import RUN_STATUSES, Job, JobSpec, Run

# Per field, so a field of many distinct values (targets) cannot crowd out the others.
MAX_SHARED_PER_FIELD = 65_536
_SHARED_FIELDS = (
    "schedule", "target_kind", "target", "timezone", "owner", "job_class", "dst_gap", "dst_repeat", "jitter",
    "overlap", "retry", "misfire", "history", "uses", "timeout_us",
)  # fmt: skip
_STATUSES = {status: status for status in RUN_STATUSES}

_tables: dict[str, dict[object, object]] = {name: {} for name in _SHARED_FIELDS}
_bodies: dict[object, object] = {}
MAX_SHARED_INSTANTS = 65_536
_instants: dict[int, int] = {}


def _share(table: dict[object, object], value):
    """An equal value seen before, or `value` itself (remembered while the table has room)."""
    found = table.get(value)
    if found is not None:
        return found
    if len(table) < MAX_SHARED_PER_FIELD:
        table[value] = value
    return value


def share_spec(spec: JobSpec) -> JobSpec:
    return msgspec.structs.replace(spec, **{name: _share(_tables[name], getattr(spec, name)) for name in _SHARED_FIELDS})


def share_body(spec: JobSpec) -> JobSpec:
    """The spec's body (its fields but the id): one object per distinct body, its values shared."""
    body = spec if spec.id == "" else msgspec.structs.replace(spec, id="")
    found = _bodies.get(body)
    if found is not None:
        return found
    return _share(_bodies, share_spec(body))


def share_instant(instant_us: int) -> int:
    """An equal instant seen recently: the jobs due at one instant (a midnight herd) hold one int."""
    found = _instants.get(instant_us)
    if found is not None:
        return found
    if len(_instants) >= MAX_SHARED_INSTANTS:
        _instants.clear()  # instants move on: start afresh rather than stop sharing
    _instants[instant_us] = instant_us
    return instant_us


def share_job_instants(job: Job) -> None:
    """A decoded job's instants, shared as applying shares them."""
    job.cursor_us = share_instant(job.cursor_us)
    job.next_due_us = share_instant(job.next_due_us)
    job.updated_us = share_instant(job.updated_us)
    job.last_scheduled_us = share_instant(job.last_scheduled_us)


def share_run(run: Run, job_id: str) -> None:
    """A new run holds its job's id string and the status constant instead of copies of its own."""
    run.job_id = job_id
    run.status = _STATUSES.get(run.status, run.status)
