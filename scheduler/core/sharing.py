"""Equal values shared instead of copied: a replica holding 100,000 job specs keeps one copy of
each policy and of each repeated string (zone, owner, class, target...), not one per job.

Every entry decoded from the log or a snapshot arrives as fresh objects; sharing replaces them
with an equal object seen before. No value changes, so replicas stay identical whatever each
one happens to share. The table is bounded: past its size, new values are simply not shared.
"""

from __future__ import annotations

import msgspec

from scheduler.core.model import RUN_STATUSES, JobSpec, Run

# Per field, so a field of many distinct values (targets) cannot crowd out the others.
MAX_SHARED_PER_FIELD = 65_536
_SHARED_FIELDS = (
    "schedule", "target_kind", "target", "timezone", "owner", "job_class", "dst_gap", "dst_repeat", "jitter",
    "overlap", "retry", "misfire", "history", "uses", "timeout_us",
)  # fmt: skip
_STATUSES = {status: status for status in RUN_STATUSES}

_tables: dict[str, dict[object, object]] = {name: {} for name in _SHARED_FIELDS}


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


def share_run(run: Run, job_id: str) -> None:
    """A new run holds its job's id string and the status constant instead of copies of its own."""
    run.job_id = job_id
    run.status = _STATUSES.get(run.status, run.status)
