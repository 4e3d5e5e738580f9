"""Replication failures as gRPC statuses: a write of unknown outcome says so in trailing metadata."""

from __future__ import annotations

import grpc
import pytest

from scheduler.replication import NotLeader, OutcomeUnknown, Overloaded, ReplicationTimeout
from scheduler.rpc.errors import abort_replication
from worker.api.v1.metadata import OUTCOME_UNKNOWN


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self) -> None:
        self.trailing: tuple = ()

    def set_trailing_metadata(self, metadata) -> None:
        self.trailing = tuple(metadata)

    def abort(self, code, details):
        raise Aborted(code, details)


@pytest.mark.parametrize(
    ("error", "code", "unknown"),
    [
        (OutcomeUnknown("leader changed", "n2:7100"), grpc.StatusCode.ABORTED, True),
        (ReplicationTimeout("no answer within 5s"), grpc.StatusCode.DEADLINE_EXCEEDED, True),
        (NotLeader("no leader"), grpc.StatusCode.UNAVAILABLE, False),
        (Overloaded("queue full"), grpc.StatusCode.RESOURCE_EXHAUSTED, False),
    ],
)
def test_only_a_write_that_may_still_commit_is_marked_outcome_unknown(error, code, unknown):
    context = FakeContext()
    with pytest.raises(Aborted) as aborted:
        abort_replication(context, error)
    assert aborted.value.args[0] == code
    assert (OUTCOME_UNKNOWN in context.trailing) is unknown
