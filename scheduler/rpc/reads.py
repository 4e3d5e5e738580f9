"""Reads from local state, with a freshness note and an optional leader-confirmed barrier."""

from __future__ import annotations

import grpc

from scheduler.core import model
from scheduler.core.commands import ReadBarrier
from scheduler.replication import RaftLog, ReplicationError
from scheduler.rpc.convert import job_to_pb
from scheduler.rpc.errors import abort_replication
from scheduler.security.interceptor import current_principal
from scheduler.security.policy import sees_details
from worker.api.v1 import common_pb2 as pb


def scoped_job_pb(job: model.Job) -> pb.Job:
    """A job as the caller may read it: its payload only for a caller that sees its owner's
    details (see policy.sees_details); everything else as stored."""
    found = job_to_pb(job)
    if found.spec.payload_json and not sees_details(current_principal(), job.body.owner):
        found.spec.payload_json = ""
    return found


class Reader:
    def __init__(self, raftlog: RaftLog, node_id: str, leader_id_of, clock_us, timeout_s: float) -> None:
        self._raftlog = raftlog
        self._node_id = node_id
        self._leader_id_of = leader_id_of
        self._clock_us = clock_us
        self._timeout_s = timeout_s

    def barrier(self, context: grpc.ServicerContext, linearizable: bool) -> None:
        """A linearizable read first commits a no-op: once applied here, every earlier write is too."""
        if not linearizable:
            return
        try:
            self._raftlog.submit(ReadBarrier(issued_at_us=self._clock_us()), self._timeout_s)
        except ReplicationError as exc:
            abort_replication(context, exc)

    def read_info(self, linearizable: bool) -> pb.ReadInfo:
        return pb.ReadInfo(
            node_id=self._node_id,
            applied_index=self._raftlog.applied_index,
            commit_index=self._raftlog.commit_index,
            from_leader=linearizable or self._raftlog.is_leader(),
            leader=self._leader_id_of(self._raftlog.leader_address()),
        )
