"""One table from core rejections and replication failures to gRPC status codes."""

from __future__ import annotations

import grpc

from scheduler.core.results import Rejection
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

REJECTION_CODES: dict[str, grpc.StatusCode] = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "version_conflict": grpc.StatusCode.ABORTED,
    "stale_plan": grpc.StatusCode.ABORTED,
    "stale_epoch": grpc.StatusCode.FAILED_PRECONDITION,
    "overlap_forbid": grpc.StatusCode.FAILED_PRECONDITION,
    "class_killed": grpc.StatusCode.FAILED_PRECONDITION,
    "stale_term": grpc.StatusCode.FAILED_PRECONDITION,
    "internal_error": grpc.StatusCode.INTERNAL,
    "bad_command": grpc.StatusCode.INTERNAL,
}

# Most specific first: ReplicationTimeout is an OutcomeUnknown.
REPLICATION_CODES: tuple[tuple[type[ReplicationError], grpc.StatusCode, str], ...] = (
    (NotLeader, grpc.StatusCode.UNAVAILABLE, "no leader reachable; safe to retry"),
    (LogFormatNotEnabled, grpc.StatusCode.FAILED_PRECONDITION, "not every node reads this yet"),
    (NodeHalted, grpc.StatusCode.UNAVAILABLE, "this node stopped applying the log; ask another node"),
    (EntryTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED, "request too large for one log entry; send fewer or smaller items"),
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
    code = REJECTION_CODES.get(rejection.code, grpc.StatusCode.FAILED_PRECONDITION)
    context.abort(code, f"{rejection.code}: {rejection.message}")


def abort_replication(context: grpc.ServicerContext, error: ReplicationError) -> None:
    if isinstance(error, OutcomeUnknown):
        context.set_trailing_metadata((OUTCOME_UNKNOWN,))  # a client may resend it with the same request id
    for error_type, code, advice in REPLICATION_CODES:
        if isinstance(error, error_type):
            hint = f" (leader: {error.leader_hint})" if error.leader_hint else ""
            context.abort(code, f"{advice}: {error}{hint}")
