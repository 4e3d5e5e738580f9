"""What applying a command returns: an acceptance with past-tense events, or a rejection.

Rejections are domain answers (returned values, identical on every replica);
replication failures are exceptions raised by the adapter, never results.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from scheduler.core.vocabulary import RejectionCode


class Rejection(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    code: str  # a RejectionCode
    message: str
    # Whether the caller may retry the same command after refreshing its view.
    retryable: bool = False


class Event(msgspec.Struct, frozen=True, tag=True, forbid_unknown_fields=True, gc=False):
    pass


class LeadershipClaimed(Event, frozen=True):
    node_id: str
    epoch: int
    term: int


class JobAdded(Event, frozen=True):
    job_id: str
    version: int


class JobChanged(Event, frozen=True):
    job_id: str
    version: int


class JobUnchanged(Event, frozen=True):
    job_id: str
    version: int


class JobRemoved(Event, frozen=True):
    job_id: str
    version: int


class JobPaused(Event, frozen=True):
    job_id: str
    version: int


class JobResumed(Event, frozen=True):
    job_id: str
    version: int


class RunClaimed(Event, frozen=True):
    job_id: str
    scheduled_us: int
    status: str  # a RunStatus
    claim_index: int


class RunAlreadyClaimed(Event, frozen=True):
    job_id: str
    scheduled_us: int


class SlotAlreadyAccounted(Event, frozen=True):
    """The slot lies at or before the job's cursor: some earlier entry accounted for it."""

    job_id: str
    scheduled_us: int
    cursor_us: int


class ClaimOutOfPlan(Event, frozen=True):
    """The proposer's plan disagrees with replicated state (stale spec or wrong next slot)."""

    job_id: str
    scheduled_us: int
    reason: str  # an OutOfPlan


class LeaseGranted(Event, frozen=True):
    job_id: str
    scheduled_us: int
    fencing_token: int
    attempt: int
    lease_expires_us: int
    deadline_us: int


class LeaseNotGranted(Event, frozen=True):
    job_id: str
    scheduled_us: int
    reason: str  # a LeaseRefusal


class LeaseExtended(Event, frozen=True):
    job_id: str
    scheduled_us: int
    fencing_token: int
    lease_expires_us: int


class LeaseFenced(Event, frozen=True):
    """A heartbeat, completion or expiry named a token that is no longer current."""

    job_id: str
    scheduled_us: int
    fencing_token: int
    reason: str  # a FenceReason


class LeaseStillLive(Event, frozen=True):
    """An expiry arrived before the lease (or deadline) had passed in replicated time."""

    job_id: str
    scheduled_us: int
    fencing_token: int


class RunSucceeded(Event, frozen=True):
    job_id: str
    scheduled_us: int
    attempt: int


class RunRetryScheduled(Event, frozen=True):
    job_id: str
    scheduled_us: int
    attempt: int
    outcome: str
    not_before_us: int


class RunEnded(Event, frozen=True):
    """The run is final and not succeeded: failed, timed_out or cancelled, with why."""

    job_id: str
    scheduled_us: int
    status: str  # a RunStatus
    reason: str


class CompletionRepeated(Event, frozen=True):
    """The same lease already reported this outcome: a retried Complete, answered as before."""

    job_id: str
    scheduled_us: int
    fencing_token: int


class MemberAdded(Event, frozen=True):
    node_id: str
    raft_address: str
    grpc_address: str


class MemberRemoved(Event, frozen=True):
    node_id: str


class ClusterVersionRaised(Event, frozen=True):
    version: int
    previous: int


class MemberUnchanged(Event, frozen=True):
    """The node is already a member with these addresses: a repeated add, answered as before."""

    node_id: str


AnyEvent = (
    LeadershipClaimed
    | JobAdded
    | JobChanged
    | JobUnchanged
    | JobRemoved
    | JobPaused
    | JobResumed
    | RunClaimed
    | RunAlreadyClaimed
    | SlotAlreadyAccounted
    | ClaimOutOfPlan
    | LeaseGranted
    | LeaseNotGranted
    | LeaseExtended
    | LeaseFenced
    | LeaseStillLive
    | RunSucceeded
    | RunRetryScheduled
    | RunEnded
    | CompletionRepeated
    | MemberAdded
    | MemberRemoved
    | MemberUnchanged
    | ClusterVersionRaised
)


class Result(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    index: int
    events: tuple[AnyEvent, ...] = ()
    rejection: Rejection | None = None
    # Log format 3: what the entry caused beyond its answers, one event each: runs of `after:`
    # children claimed because a parent's run ended (`events` stays one answer per item).
    follow_ups: tuple[AnyEvent, ...] | UnsetType = UNSET

    @property
    def accepted(self) -> bool:
        return self.rejection is None

    def all_events(self) -> tuple[AnyEvent, ...]:
        """The answers, then the follow-ups: what a listener that follows run changes reads."""
        return self.events if self.follow_ups is UNSET else self.events + self.follow_ups


def rejected(index: int, code: RejectionCode, message: str, retryable: bool = False) -> Result:
    return Result(index=index, rejection=Rejection(code=code, message=message, retryable=retryable))
