"""Every state transition as one frozen command type.

Whatever could differ between replicas travels inside the command: the
proposer's clock (`issued_at_us`), the leadership epoch it acted under, the
next due instant it computed. Commands clients may retry carry a `request_id`.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from scheduler.core.model import AlertRoute, Calendar, JobSpec, Resource
from scheduler.core.vocabulary import RunStatus


class _Command(msgspec.Struct, frozen=True, tag=True, forbid_unknown_fields=True):
    issued_at_us: int


class ClaimLeadership(_Command, frozen=True):
    """A node that just won a Raft election opens a new epoch."""

    node_id: str
    term: int
    # The proposer's monotonic clock: bounds how fast its wall clock may move replicated time.
    monotonic_us: int = 0


class JobUpsert(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    spec: JobSpec
    # The version the proposer saw (0 for a new job): a compare-and-set.
    expected_version: int
    # The first slot strictly after max(old cursor, issued_at), 0 if none.
    next_due_us: int


class ApplyJobs(_Command, frozen=True):
    """Add, change and remove jobs atomically: all or nothing."""

    author: str
    request_id: str
    upserts: tuple[JobUpsert, ...] = ()
    removals: tuple[str, ...] = ()
    resources: tuple[Resource, ...] = ()
    resource_removals: tuple[str, ...] = ()
    # Log format 3: calendars to declare or change (explicit dates), and names to drop. UNSET
    # (here and in ClaimRuns) is left out of the encoding: an older node decodes what is left.
    calendars: tuple[Calendar, ...] | msgspec.UnsetType = msgspec.UNSET
    calendar_removals: tuple[str, ...] | msgspec.UnsetType = msgspec.UNSET
    # Log format 3: alert routes to declare or change, and names to drop (admin only).
    routes: tuple[AlertRoute, ...] | UnsetType = UNSET
    route_removals: tuple[str, ...] | UnsetType = UNSET


class SetJobPaused(_Command, frozen=True):
    job_id: str
    paused: bool
    author: str
    reason: str
    request_id: str


class SlotClaim(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """One run key, and how its slot is accounted for (encoded as an array: herds are large)."""

    job_id: str
    scheduled_us: int
    # The job's next slot after this one, computed by the proposer (0: none).
    next_due_us: int
    spec_version: int
    status: str = RunStatus.QUEUED  # or skipped, missed
    reason: str = ""
    effective_us: int = 0  # when it becomes due after spreading; 0 = scheduled_us


class ClaimRuns(_Command, frozen=True):
    """Account for many slots in one entry; a key already claimed is a no-op."""

    epoch: int
    claims: tuple[SlotClaim, ...]
    monotonic_us: int = 0
    # Log format 3: one per claim, the index into its job's `schedules:` that produced the slot
    # (NO_SCHEDULE_INDEX for other jobs); UNSET (left out of the encoding) when no claim has one.
    schedule_indexes: tuple[int, ...] | UnsetType = UNSET
    # Log format 3: the claims whose accounting a job's calendar decided. Such a claim keeps its
    # reason when queued (where it was moved), is due at min(scheduled, effective) (a slot moved
    # to an earlier day is claimed before its nominal instant) and raises no skipped alert.
    calendar_keys: tuple[RunRef, ...] | UnsetType = UNSET


NO_SCHEDULE_INDEX = -1


class RunRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    job_id: str
    scheduled_us: int


class LeaseRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    job_id: str
    scheduled_us: int
    fencing_token: int


class GrantLeases(_Command, frozen=True):
    """The leader hands queued runs to a worker; the entry's index is each lease's fencing token."""

    epoch: int
    worker_id: str
    lease_ttl_us: int
    grants: tuple[RunRef, ...]
    monotonic_us: int = 0


class ExtendLeases(_Command, frozen=True):
    """Many heartbeats, from any workers, coalesced into one entry; the token is the authority."""

    leases: tuple[LeaseRef, ...]


class Completion(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    lease: LeaseRef
    worker_id: str
    outcome: str  # a CompletionKind
    exit_code: int = 0
    error: str = ""
    output_tail: str = ""
    retry_after_us: int = 0
    # Drawn by the proposer in [0, 1_000_000): the deterministic part of the retry backoff jitter.
    jitter_ppm: int = 0
    # Log format 3: a failure the handler declared final (not retried, whatever the policy).
    final: bool | UnsetType = UNSET
    # Log format 3: the attempt's own output and how it ended in detail, kept per attempt
    # (docs/design/output-per-attempt.md); UNSET when empty, so a quiet completion keeps its bytes.
    stdout_tail: str | UnsetType = UNSET
    stderr_tail: str | UnsetType = UNSET
    exception_type: str | UnsetType = UNSET
    http_status: int | UnsetType = UNSET


class CompleteRuns(_Command, frozen=True):
    completions: tuple[Completion, ...]


class Expiry(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    lease: LeaseRef
    reason: str  # an ExpiryReason
    jitter_ppm: int = 0


class ExpireLeases(_Command, frozen=True):
    """The leader's reaper ends leases whose heartbeats stopped or whose run passed its deadline."""

    epoch: int
    expiries: tuple[Expiry, ...]
    monotonic_us: int = 0


class AdvanceTime(_Command, frozen=True):
    """The leader's clock tick while nothing else is proposed, so replicated time stays fresh."""

    epoch: int
    monotonic_us: int = 0


class TriggerRun(_Command, frozen=True):
    """A manual run now, outside the schedule, keyed by the trigger instant."""

    job_id: str
    author: str
    request_id: str
    # Log format 3: this run's payload (canonical JSON) and overlap policy instead of the job's.
    payload_json: str | UnsetType = UNSET
    overlap: str | UnsetType = UNSET


class CancelRun(_Command, frozen=True):
    """End one queued or leased run `cancelled` (log format 3); a lease is fenced, so its worker
    stops the attempt at its next heartbeat."""

    job_id: str
    scheduled_us: int
    author: str
    reason: str
    request_id: str


class BackfillRuns(_Command, frozen=True):
    """Fire past slots that never ran; the proposer lists them from the job's schedule."""

    job_id: str
    author: str
    request_id: str
    slots: tuple[int, ...]
    # Backfilled runs become due one after another, this far apart.
    interval_us: int
    # Log format 3: the backfilled runs' payload and overlap policy (at grant) instead of the job's.
    payload_json: str | UnsetType = UNSET
    overlap: str | UnsetType = UNSET


class KillClass(_Command, frozen=True):
    """Stop every job of a class from firing; queued runs are cancelled, running ones optionally."""

    job_class: str
    reason: str
    author: str
    request_id: str
    until_us: int = 0
    cancel_running: bool = False


class ReviveClass(_Command, frozen=True):
    job_class: str
    author: str
    request_id: str


class MarkAlertsDelivered(_Command, frozen=True):
    """The leader's alert dispatcher delivered these (at least once); stop retrying them."""

    epoch: int
    alert_ids: tuple[str, ...]
    monotonic_us: int = 0
    # Log format 3: the `count` of each alert as delivered, in the order of alert_ids, so a streak
    # that grew while it was being sent is sent again (UNSET: as raised before format 3).
    counts: tuple[int, ...] | UnsetType = UNSET


class Member(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A node of the cluster: its id, where its Raft listens, where its gRPC listens."""

    node_id: str
    raft_address: str
    grpc_address: str


class AddMember(_Command, frozen=True):
    """Record a node that pysyncobj has made a voter (its own membership entry committed first)."""

    member: Member
    author: str
    request_id: str
    # The proposer's view of the membership before this change. It seeds an empty table: until
    # the first change, a cluster's members come from each node's configuration only.
    known_members: tuple[Member, ...] = ()


class RemoveMember(_Command, frozen=True):
    """Forget a node that pysyncobj no longer counts as a voter."""

    node_id: str
    author: str
    request_id: str
    known_members: tuple[Member, ...] = ()


class SetClusterVersion(_Command, frozen=True):
    """Allow commands and fields of log format `version` from now on (see log_format.py).

    Proposed by the leader once every voter advertises that it reads the format; carries the
    epoch so a deposed leader cannot raise it."""

    version: int
    epoch: int
    monotonic_us: int = 0


class ReadBarrier(_Command, frozen=True):
    """Changes nothing: once applied locally, a read reflects every write committed before it."""


Command = (
    ClaimLeadership
    | ApplyJobs
    | SetJobPaused
    | ClaimRuns
    | ReadBarrier
    | GrantLeases
    | ExtendLeases
    | CompleteRuns
    | ExpireLeases
    | TriggerRun
    | BackfillRuns
    | AdvanceTime
    | KillClass
    | ReviveClass
    | MarkAlertsDelivered
    | AddMember
    | RemoveMember
    | SetClusterVersion
    | CancelRun
)

# Commands stamped with the leader's epoch: the only ones that move replicated time.
EPOCH_COMMANDS = (ClaimRuns, GrantLeases, ExpireLeases, AdvanceTime, MarkAlertsDelivered, SetClusterVersion)
