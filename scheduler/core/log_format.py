"""Log formats: which commands and fields a node must understand to apply an entry.

A log format is a whole number. Format 1 is every command and field that existed before the
cluster version did (both command version bytes, snapshot formats 1 and 2); each later format
adds commands or fields, listed below with the format that introduced them. A node reads up to
LOG_FORMAT; the replicated `State.cluster_version` is the newest format every voter reads, and
nothing newer is proposed (scheduler/replication/upgrades.py). The version bytes in codec.py
frame the bytes; the log format says what the bytes may hold.

A new command type needs an entry in COMMAND_LOG_FORMATS (tests/unit/core/test_log_format.py fails
without one). A field added to ANY replicated struct (a command, or a struct inside one such as
JobSpec or Completion, or a record of State) is declared `name: T | UnsetType = UNSET` and listed
in FIELD_LOG_FORMATS: msgspec leaves an UNSET field out of the bytes, so every entry and snapshot
that does not use the field encodes exactly as before and an older node decodes it; one that sets
it needs the field's format (docs/design/later-fields-are-unset.md). A plain default would be
encoded in every entry, and an older node would halt on the first one whatever it held.
A change of what an existing command DOES must read `state.cluster_version` in apply, so nodes of
both versions keep computing the same state until the version is raised.
"""

from __future__ import annotations

import typing

import msgspec

from scheduler.core.commands import (
    AddMember,
    AdvanceTime,
    ApplyJobs,
    BackfillRuns,
    CancelRun,
    ClaimLeadership,
    ClaimRuns,
    CompleteRuns,
    Completion,
    ExpireLeases,
    ExtendLeases,
    GrantLeases,
    KillClass,
    MarkAlertsDelivered,
    ReadBarrier,
    RemoveMember,
    ReviveClass,
    SetClusterVersion,
    SetJobPaused,
    TriggerRun,
)
from scheduler.core.model import Alert, Attempt, Job, JobSpec, RetryPolicy, Run
from scheduler.core.results import Result
from scheduler.core.state import State

# The newest log format this code reads and may propose.
LOG_FORMAT = 3
# What a node without a cluster version (an older snapshot, an empty state) runs.
BASE_LOG_FORMAT = 1

COMMAND_LOG_FORMATS: dict[type, int] = {
    ClaimLeadership: 1,
    ApplyJobs: 1,
    SetJobPaused: 1,
    ClaimRuns: 1,
    ReadBarrier: 1,
    GrantLeases: 1,
    ExtendLeases: 1,
    CompleteRuns: 1,
    ExpireLeases: 1,
    TriggerRun: 1,
    BackfillRuns: 1,
    AdvanceTime: 1,
    KillClass: 1,
    ReviveClass: 1,
    MarkAlertsDelivered: 1,
    AddMember: 1,
    RemoveMember: 1,
    SetClusterVersion: 2,
    CancelRun: 3,
}

# Format 3 changes what existing commands do, from the moment the cluster version reaches it:
# consecutive missed or skipped slots of a job coalesce into one alert, and a success after
# failures raises `recovered` (scheduler/core/alerts.py).
STREAK_ALERTS_FORMAT = 3
# From format 3 on, a run of a job whose overlap is `forbid` is not granted while another run of
# the job is leased (before, forbid was checked only when a slot was claimed or triggered, so a
# backfilled run could overlap a scheduled one).
OVERLAP_AT_GRANT_FORMAT = 3
# A job whose cron expression uses the day modifiers L, W or # (an older leader cannot plan it).
# The core stores schedules as text and never parses them, so the proposer checks this one
# (scheduler/replication/upgrades.py `proposal_log_format`).
CRON_MODIFIERS_FORMAT = 3
# The per-attempt output fields of a completion (stdout, stderr, exception type, HTTP status):
# a proposer below this cluster version leaves them out and keeps the combined output tail.
ATTEMPT_OUTPUT_FORMAT = 3
# From format 3 on, a queued scheduled slot of a job with a `deadline:` is checked once replicated
# time passes slot + deadline (scheduler/core/deadlines.py).
DEADLINE_ALERTS_FORMAT = 3

# (struct type, field name) -> the format that added the field; each such field defaults to UNSET.
# Fields of state records are listed too (their UNSET default is checked the same way); apply
# sets them only once the cluster version allows.
FIELD_LOG_FORMATS: dict[tuple[type, str], int] = {
    (MarkAlertsDelivered, "counts"): 3,
    (Alert, "count"): 3,
    (Alert, "last_scheduled_us"): 3,
    (Alert, "closed_us"): 3,
    (Alert, "delivered_count"): 3,
    (Alert, "since_us"): 3,
    (State, "alert_streaks"): 3,
    (State, "failure_streaks"): 3,
    (TriggerRun, "payload_json"): 3,
    (TriggerRun, "overlap"): 3,
    (BackfillRuns, "payload_json"): 3,
    (BackfillRuns, "overlap"): 3,
    (Run, "payload_json"): 3,
    (Run, "overlap"): 3,
    (Completion, "final"): 3,
    # Several schedules, intervals, one-shots, windows, run limits (planning/slots.py).
    (JobSpec, "schedules"): 3,
    (JobSpec, "every_us"): 3,
    (JobSpec, "anchor_us"): 3,
    (JobSpec, "at_us"): 3,
    (JobSpec, "active"): 3,
    (JobSpec, "max_runs"): 3,
    (ClaimRuns, "schedule_indexes"): 3,
    (Run, "schedule_index"): 3,
    (Job, "counted_runs"): 3,
    # Calendars (docs/design/calendars.md).
    (ApplyJobs, "calendars"): 3,
    (ApplyJobs, "calendar_removals"): 3,
    (ClaimRuns, "calendar_keys"): 3,
    (JobSpec, "calendar"): 3,
    (JobSpec, "pause_after_failures"): 3,
    (RetryPolicy, "final_exit_codes"): 3,
    # Output per attempt (docs/design/output-per-attempt.md).
    (Completion, "stdout_tail"): 3,
    (Completion, "stderr_tail"): 3,
    (Completion, "exception_type"): 3,
    (Completion, "http_status"): 3,
    (Attempt, "stdout_tail"): 3,
    (Attempt, "stderr_tail"): 3,
    (Attempt, "exception_type"): 3,
    (Attempt, "http_status"): 3,
    # HTTP targets (docs/design/http-target.md).
    (JobSpec, "http"): 3,
    # Job dependencies (docs/design/job-dependencies.md); follow-ups live only in results.
    (JobSpec, "after"): 3,
    (Result, "follow_ups"): 3,
    # Deadline alerts (docs/design/deadline-alerts.md).
    (JobSpec, "deadline_us"): 3,
    (State, "deadline_checks"): 3,
    # Alert routes in replicated state (docs/design/routes-in-replicated-state.md).
    (ApplyJobs, "routes"): 3,
    (ApplyJobs, "route_removals"): 3,
    (State, "routes"): 3,
}

# Snapshot format byte -> the log format a node needs to read it (codec.py writes 3 only once
# the cluster version is above 1: the field it adds is what format 2 introduced).
SNAPSHOT_LOG_FORMATS: dict[int, int] = {1: 1, 2: 1, 3: 2, 4: 3}


def _struct_types_in(annotation, seen: set[type]) -> None:
    """Every msgspec struct type an annotation can hold, collected into `seen`."""
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        if annotation in seen:
            return
        seen.add(annotation)
        for hint in typing.get_type_hints(annotation).values():
            _struct_types_in(hint, seen)
        return
    for arg in typing.get_args(annotation):
        _struct_types_in(arg, seen)


def field_carriers(field_formats: dict[tuple[type, str], int], roots) -> dict[type, tuple[str, ...]]:
    """For each struct type reachable from `roots`, the fields to look into when asking which
    later fields a value sets: the later fields themselves and those that can hold a struct with
    one. Types that can hold none map to (), so most commands cost one dict lookup."""
    later_types = {kind for kind, _ in field_formats}
    reachable: dict[type, set[type]] = {}
    for root in roots:
        _struct_types_in(root, reachable.setdefault(root, set()))
    all_types: set[type] = set().union(*reachable.values()) if reachable else set()
    holds: dict[type, set[type]] = {}
    for kind in all_types:
        below: set[type] = set()
        for hint in typing.get_type_hints(kind).values():
            _struct_types_in(hint, below)
        holds[kind] = below
    carriers: dict[type, tuple[str, ...]] = {}
    for kind in all_types:
        names = []
        for name, hint in typing.get_type_hints(kind).items():
            inside: set[type] = set()
            _struct_types_in(hint, inside)
            if (kind, name) in field_formats or any(t in later_types or holds[t] & later_types for t in inside):
                names.append(name)
        carriers[kind] = tuple(names)
    return carriers


def later_fields_format(value, field_formats: dict[tuple[type, str], int], carriers, needed: int) -> int:
    """`needed`, raised to the format of every later field `value` sets, however deep."""
    names = carriers.get(type(value), ())
    for name in names:
        inner = getattr(value, name)
        if inner is msgspec.UNSET:
            continue
        needed = max(needed, field_formats.get((type(value), name), needed))
        for item in (
            inner.values() if isinstance(inner, dict) else inner if isinstance(inner, (tuple, list)) else (inner,)
        ):
            if isinstance(item, msgspec.Struct):
                needed = later_fields_format(item, field_formats, carriers, needed)
    return needed


_CARRIERS = field_carriers(FIELD_LOG_FORMATS, COMMAND_LOG_FORMATS)


def required_log_format(command) -> int:
    """The oldest log format whose nodes can apply `command` exactly as a node of this version."""
    needed = COMMAND_LOG_FORMATS[type(command)]
    if _CARRIERS.get(type(command)):
        needed = later_fields_format(command, FIELD_LOG_FORMATS, _CARRIERS, needed)
    if isinstance(command, ApplyJobs) and needed < 3 and any(not u.spec.schedule for u in command.upserts):
        # A manual-only job (no way to fire set, an empty schedule): an older planner fails on it.
        needed = 3
    if isinstance(command, SetClusterVersion):
        # A node that does not read format N cannot keep a state whose version says N.
        needed = max(needed, command.version)
    return needed
