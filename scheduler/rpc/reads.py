"""Reads from local state, with a freshness note; linearizable reads through the leader.

A linearizable read costs no log entry: the leader confirms it still leads with the appends it
sends anyway and waits until its commit index is applied (`RaftLog.read_index`), then answers
from its state. A follower forwards the whole read to the leader, on the caller's behalf (the
leader authorizes the same token), and returns the leader's answer, whose ReadInfo names the
leader. A node that cannot confirm it leads answers UNAVAILABLE, so a client moves on to
another node instead of reading stale data.
"""

from __future__ import annotations

import grpc
from google.protobuf.descriptor import MethodDescriptor

from scheduler.core import model
from scheduler.planning.jobs import spread_offset_us
from scheduler.replication import RaftLog, ReplicationError
from scheduler.rpc.convert import job_to_pb
from scheduler.rpc.errors import abort_replication
from scheduler.rpc.forwarding import LeaderForwarder, forward_timeout_s
from scheduler.security.interceptor import current_principal
from scheduler.security.policy import sees_details
from worker.api.v1 import common_pb2 as pb

# Set on a read a follower forwards: the node receiving it serves it or refuses, never forwards
# it again (two nodes that each believe the other leads would pass it back and forth).
FORWARDED = ("raftcron-read-forwarded", "1")


# The node config's default herd_window_s, for a Reader built without one.
DEFAULT_HERD_WINDOW_US = 3600 * 1_000_000


def scoped_job_pb(
    job: model.Job, herd_window_us: int = DEFAULT_HERD_WINDOW_US, children: tuple[str, ...] = ()
) -> pb.Job:
    """A job as the caller may read it: its payload only for a caller that sees its owner's
    details (see policy.sees_details); everything else as stored, with the herd spread the
    leader gives its slots (so a client shows the instant a slot will run, not only its key)."""
    found = job_to_pb(job, spread_offset_us(job.spec, None, herd_window_us), children)
    if found.spec.payload_json and not sees_details(current_principal(), job.body.owner):
        found.spec.payload_json = ""
    return found


def hide_attempt_output(runs, owner_of) -> None:
    """Clear what each attempt wrote in `runs` (pb.Run) for a caller that does not see the owner's
    details (policy.sees_details); `owner_of(job_id)` is the job's owner, None once deleted."""
    principal = current_principal()
    if principal is None:
        return
    for run in runs:
        if any(a.stdout_tail or a.stderr_tail for a in run.attempts) and not sees_details(
            principal, owner_of(run.job_id) or ""
        ):
            for attempt in run.attempts:
                attempt.stdout_tail = attempt.stderr_tail = ""


class Reader:
    def __init__(
        self,
        raftlog: RaftLog,
        node_id: str,
        leader_id_of,
        clock_us,
        timeout_s: float,
        forwarder: LeaderForwarder,
        herd_window_us: int = DEFAULT_HERD_WINDOW_US,
    ) -> None:
        self._raftlog = raftlog
        self.herd_window_us = herd_window_us
        self._node_id = node_id
        self._leader_id_of = leader_id_of
        self._clock_us = clock_us
        self._timeout_s = timeout_s
        self._forwarder = forwarder

    def linearizable(self, context: grpc.ServicerContext, request, method: MethodDescriptor):
        """None: serve `request` from this replica (after the read index when it asks for a
        linearizable read). Otherwise the leader's answer to it, to return as is."""
        if not request.linearizable:
            return None
        forwarded = FORWARDED in tuple(context.invocation_metadata() or ())
        if forwarded or self._raftlog.is_leader():
            try:
                self._raftlog.read_index(self._timeout_s)
            except ReplicationError as exc:
                abort_replication(context, exc)
            return None
        return self._forward(context, request, method)

    def _forward(self, context: grpc.ServicerContext, request, method: MethodDescriptor):
        address = self._forwarder.leader(context, unknown="no leader known to serve a linearizable read; retry shortly")
        budget_s = self._timeout_s * 2
        return self._forwarder.call(
            context,
            address,
            method,
            request,
            forward_timeout_s(context, budget_s, cap_s=budget_s),
            metadata=(FORWARDED,),
            via="linearizable read via leader",
        )

    def read_info(self, linearizable: bool) -> pb.ReadInfo:
        return pb.ReadInfo(
            node_id=self._node_id,
            applied_index=self._raftlog.applied_index,
            commit_index=self._raftlog.commit_index,
            from_leader=linearizable or self._raftlog.is_leader(),
            leader=self._leader_id_of(self._raftlog.leader_address()),
        )
