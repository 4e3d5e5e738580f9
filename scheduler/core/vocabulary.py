"""The words of raftcron's domain, one StrEnum each: policies, statuses, kinds, reasons, codes.

Each value is the string that replicated state, log entries, metrics labels and messages have
always held. A member is a `str` equal to its value (same hash, same bytes from the codec), so a
member and the string read back from a log or snapshot compare equal: fields of replicated
records stay typed `str`, and decoding never depends on these enums (a value a newer node wrote
still decodes). See docs/design/vocabulary.md.

Most values are part of the log and snapshot formats: renaming one changes what replicas decode
(tests/unit/core/test_vocabulary.py pins them all).
"""

from __future__ import annotations

import enum


class Word(enum.StrEnum):
    """A StrEnum whose repr is its value's: messages that show a value with `!r` read as they did
    when the value was a plain string."""

    def __repr__(self) -> str:
        return repr(self._value_)


# -- what a job declares ---------------------------------------------------------------------------


class Overlap(Word):
    """What a slot does while an earlier run of its job is live (proto OverlapPolicy)."""

    ALLOW = "allow"
    FORBID = "forbid"
    QUEUE = "queue"
    REPLACE = "replace"


class Misfire(Word):
    """What a slot found late, past its grace, becomes (`misfire.policy`)."""

    FIRE_LATE = "fire_late"
    SKIP = "skip"
    CATCH_UP = "catch_up"


class DstGap(Word):
    """A fixed-time slot in a skipped hour (`dst.gap`; "" in a spec: the schedule's default)."""

    RUN_AT_END = "run_at_end"
    SKIP = "skip"


class DstRepeat(Word):
    """A slot in a repeated hour (`dst.repeat`; "" in a spec: the schedule's default)."""

    FIRST = "first"
    SECOND = "second"
    BOTH = "both"


class OnSkip(Word):
    """What a slot on a date of a job's `calendar.skip` calendars does (`calendar.on_skip`)."""

    SKIP = "skip"
    PREVIOUS_BUSINESS_DAY = "previous_business_day"
    NEXT_BUSINESS_DAY = "next_business_day"


class TargetKind(Word):
    """What a job runs; also the name of the proto Target oneof's fields."""

    HANDLER = "handler"
    SHELL = "shell"
    HTTP = "http"  # log format 3: the spec's `http` holds the request


# -- runs and their attempts ---------------------------------------------------------------------


class RunStatus(Word):
    """A run's status (proto RunStatus). A run is born queued, or directly skipped or missed when
    its slot was accounted for without firing."""

    QUEUED = "queued"
    LEASED = "leased"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    MISSED = "missed"
    CANCELLED = "cancelled"


class RunKind(Word):
    """Why a run exists: its job's schedule, a manual trigger, or a backfill of past slots."""

    SCHEDULED = "scheduled"
    MANUAL = "manual"
    BACKFILL = "backfill"
    DEPENDENCY = "dependency"  # claimed for a slot its `after:` parents finished (log format 3)


class CompletionKind(Word):
    """How a worker says an attempt ended (proto CompletionKind; the SDK's OutcomeKind)."""

    SUCCESS = "success"
    FAILURE = "failure"
    RETRY_LATER = "retry_later"


class ExpiryReason(Word):
    """Why the reaper ends a lease; an attempt it ends records this as its outcome."""

    LEASE_EXPIRED = "lease_expired"  # heartbeats stopped
    TIMED_OUT = "timed_out"  # the run passed its deadline (the job's timeout)


class FenceReason(Word):
    """Why a heartbeat, completion or expiry naming a lease was refused (LeaseFenced)."""

    NOT_FOUND = "not_found"
    STALE_TOKEN = "stale_token"
    CANCELLED = "cancelled"
    NOT_LEASED = "not_leased"
    BAD_OUTCOME = "bad_outcome"


class LeaseOutcome(Word):
    """How a heartbeat or completion of one lease was answered (proto LeaseOutcome). The values
    are the SDK's CancelReason for the answers that stop an attempt."""

    OK = "ok"
    FENCED = "fenced"
    NOT_FOUND = "not_found"
    RUN_CANCELLED = "run_cancelled"


class LeaseRefusal(Word):
    """Why a queued run was not leased (LeaseNotGranted). A resource refusal names the resource
    after a colon: `resource_busy:NAME`."""

    NOT_QUEUED = "not_queued"
    BACKING_OFF = "backing_off"
    JOB_DELETED = "job_deleted"
    CLASS_KILLED = "class_killed"
    OVERLAP_QUEUE = "overlap_queue"
    OVERLAP_FORBID = "overlap_forbid"  # log format 3: another run of the job is leased
    RESOURCE_BUSY = "resource_busy"  # at its max_concurrent
    RESOURCE_RATE = "resource_rate"  # at its max_starts_per_s


class OutOfPlan(Word):
    """Why a claim or a backfilled slot disagrees with replicated state (ClaimOutOfPlan)."""

    UNKNOWN_JOB = "unknown_job"
    STALE_SPEC = "stale_spec"
    BAD_STATUS = "bad_status"
    NOT_NEXT_SLOT = "not_next_slot"
    NOT_DUE_YET = "not_due_yet"  # a claimed slot after replicated time
    NEXT_DUE_NOT_AFTER_SLOT = "next_due_not_after_slot"
    BACKFILL_NOT_DUE = "not_yet_due"  # a backfilled slot after the job's cursor
    HISTORY_PRUNED = "history_pruned"


class SkipReason(Word):
    """How the reason of a slot the core skipped starts (the rest is free text: who, why)."""

    PAUSED = "paused"
    KILLED = "killed"  # "killed: REASON (by AUTHOR)"
    OVERLAP_FORBID = "overlap forbid"  # "overlap forbid: run KEY still live"
    CALENDAR = "calendar"  # "calendar NAME: DATE is listed" (decided by the leader's planner)
    PARENT = "parent"  # "parent JOB@US failed": an `after:` parent's run of the slot did not succeed


# -- operators and owners ----------------------------------------------------------------------------


class AlertKind(Word):
    """What an alert is about; the first part of its id (`kind:job@instant`)."""

    MISSED = "missed"
    SKIPPED = "skipped"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LATE = "late"
    FENCED = "fenced"
    KILLED = "killed"
    RECOVERED = "recovered"  # a job succeeded after failed runs (log format 3)
    PAUSED = "paused"  # a job paused itself after failed runs (pause_after_failures, log format 3)
    DEADLINE_MISSED = "deadline_missed"  # a slot's run had not succeeded by slot + deadline (log format 3)


class AlertTemplate(Word):
    """The body an alert route sends (scheduler/leader/alert_delivery.py `render`)."""

    JSON = "json"
    SLACK = "slack"


class KillAction(Word):
    """An entry of the kill switches' audit trail."""

    KILL = "kill"
    REVIVE = "revive"


class RejectionCode(Word):
    """Why a command was rejected (Rejection.code); scheduler/rpc/errors.py gives each a gRPC status."""

    INVALID = "invalid"
    NOT_FOUND = "not_found"
    VERSION_CONFLICT = "version_conflict"
    STALE_PLAN = "stale_plan"
    STALE_EPOCH = "stale_epoch"
    STALE_TERM = "stale_term"
    OVERLAP_FORBID = "overlap_forbid"
    CLASS_KILLED = "class_killed"
    MEMBER_EXISTS = "member_exists"
    RUN_NOT_LIVE = "run_not_live"
    STALE_CLUSTER_VERSION = "stale_cluster_version"
    UNSUPPORTED_CLUSTER_VERSION = "unsupported_cluster_version"
    INDEX_NOT_INCREASING = "index_not_increasing"
    UNKNOWN_COMMAND = "unknown_command"
    # Recorded by the Raft adapter, not the core, when applying an entry raised.
    INTERNAL_ERROR = "internal_error"
    # No longer produced (an undecodable entry now halts the node): kept so that a result an
    # older node recorded still has a status.
    BAD_COMMAND = "bad_command"
