"""Log formats: which commands and fields a node must understand to apply an entry.

A log format is a whole number. Format 1 is every command and field that existed before the
cluster version did (both command version bytes, snapshot formats 1 and 2); each later format
adds commands or fields, listed below with the format that introduced them. A node reads up to
LOG_FORMAT; the replicated `State.cluster_version` is the newest format every voter reads, and
nothing newer is proposed (scheduler/replication/upgrades.py). The version bytes in codec.py
frame the bytes; the log format says what the bytes may hold.

A new command type needs an entry in COMMAND_LOG_FORMATS (tests/unit/core/test_log_format.py fails
without one); a field added to an existing command needs one in FIELD_LOG_FORMATS, and counts
only when it differs from its default (an old node decodes the default by leaving it out: give
the field the default `msgspec.UNSET`, which the encoder leaves out; any other default is encoded).
A field added inside a nested struct (JobSpec, Completion, ...) is not covered by this table:
give the command carrying it a new format explicitly in `required_log_format`.
"""

from __future__ import annotations

import msgspec

from scheduler.core.commands import (
    AddMember,
    AdvanceTime,
    ApplyJobs,
    BackfillRuns,
    ClaimLeadership,
    ClaimRuns,
    CompleteRuns,
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
}

# (command type, field name) -> the format that added the field.
FIELD_LOG_FORMATS: dict[tuple[type, str], int] = {
    # Calendars (docs/design/calendars.md).
    (ApplyJobs, "calendars"): 3,
    (ApplyJobs, "calendar_removals"): 3,
    (ClaimRuns, "calendar_keys"): 3,
}

# Snapshot format byte -> the log format a node needs to read it (codec.py writes 3 only once
# the cluster version is above 1: the field it adds is what format 2 introduced).
SNAPSHOT_LOG_FORMATS: dict[int, int] = {1: 1, 2: 1, 3: 2, 4: 3}


def _field_default(kind: type, name: str):
    field = next(f for f in msgspec.structs.fields(kind) if f.name == name)
    return field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default


_FIELD_DEFAULTS = {key: _field_default(*key) for key in FIELD_LOG_FORMATS}


def required_log_format(command) -> int:
    """The oldest log format whose nodes can apply `command` exactly as a node of this version."""
    needed = COMMAND_LOG_FORMATS[type(command)]
    for (kind, name), version in FIELD_LOG_FORMATS.items():
        if version > needed and isinstance(command, kind) and getattr(command, name) != _FIELD_DEFAULTS[(kind, name)]:
            needed = version
    if isinstance(command, ApplyJobs) and needed < 3 and any(u.spec.calendar for u in command.upserts):
        needed = 3  # JobSpec.calendar, a nested field (calendars.md)
    if isinstance(command, SetClusterVersion):
        # A node that does not read format N cannot keep a state whose version says N.
        needed = max(needed, command.version)
    return needed
