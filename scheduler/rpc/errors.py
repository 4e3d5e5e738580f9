"""One table from core rejections and replication failures to gRPC status codes."""

from __future__ import annotations

import grpc

from scheduler.core.results import Rejection
from scheduler.core.vocabulary import RejectionCode
from scheduler.replication import (
    EntryTooLarge,
    LogFormatNotEnabled,
    NodeHalted,
    NotLeader,
    OutcomeUnknown,
    Overloaded,
    ReplicationError,
    ReplicationTimeout,
)
from worker.api.v1.metadata import OUTCOME_UNKNOWN

# Total over RejectionCode, with no fallback (tests/unit/core/test_vocabulary.py checks it): every
# code reaches callers under a status someone chose for it.
REJECTION_CODES: dict[RejectionCode, grpc.StatusCode] = {
    RejectionCode.INVALID: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    RejectionCode.VERSION_CONFLICT: grpc.StatusCode.ABORTED,
    RejectionCode.STALE_PLAN: grpc.StatusCode.ABORTED,
    RejectionCode.STALE_EPOCH: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.STALE_TERM: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.OVERLAP_FORBID: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.CLASS_KILLED: grpc.StatusCode.FAILED_PRECONDITION,
    # The statuses the five below had from a fallback, before the table was total.
    RejectionCode.MEMBER_EXISTS: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.RUN_NOT_LIVE: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.STALE_CLUSTER_VERSION: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.UNSUPPORTED_CLUSTER_VERSION: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.INDEX_NOT_INCREASING: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.UNKNOWN_COMMAND: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionCode.INTERNAL_ERROR: grpc.StatusCode.INTERNAL,
    RejectionCode.BAD_COMMAND: grpc.StatusCode.INTERNAL,
}

# Most specific first: ReplicationTimeout is an OutcomeUnknown.
REPLICATION_CODES: tuple[tuple[type[ReplicationError], grpc.StatusCode, str], ...] = (
    (NotLeader, grpc.StatusCode.UNAVAILABLE, "no leader reachable; safe to retry"),
    (LogFormatNotEnabled, grpc.StatusCode.FAILED_PRECONDITION, "not every node reads this yet"),
    (NodeHalted, grpc.StatusCode.UNAVAILABLE, "this node stopped applying the log; ask another node"),
    (
        EntryTooLarge,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "request too large for one log entry; send fewer or smaller items",
    ),
    (Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED, "node overloaded; safe to retry later"),
    (ReplicationTimeout, grpc.StatusCode.DEADLINE_EXCEEDED, "outcome unknown; retry with the same request id"),
    (OutcomeUnknown, grpc.StatusCode.ABORTED, "leadership changed; retry with the same request id"),
    (ReplicationError, grpc.StatusCode.UNAVAILABLE, "replication failed"),
)


def submit_or_abort(raftlog, command, timeout_s: float, context: grpc.ServicerContext):
    """Propose, wait, and turn a replication failure or a rejection into the matching status."""
    try:
        result = raftlog.submit(command, timeout_s)
    except ReplicationError as exc:
        abort_replication(context, exc)
    if not result.accepted:
        abort_rejected(context, result.rejection)
    return result


def abort_rejected(context: grpc.ServicerContext, rejection: Rejection) -> None:
    code = REJECTION_CODES[rejection.code]
    context.abort(code, f"{rejection.code}: {rejection.message}")


def abort_replication(context: grpc.ServicerContext, error: ReplicationError) -> None:
    if isinstance(error, OutcomeUnknown):
        context.set_trailing_metadata((OUTCOME_UNKNOWN,))  # a client may resend it with the same request id
    for error_type, code, advice in REPLICATION_CODES:
        if isinstance(error, error_type):
            hint = f" (leader: {error.leader_hint})" if error.leader_hint else ""
            context.abort(code, f"{advice}: {error}{hint}")
