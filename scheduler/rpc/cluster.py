"""ClusterService: this node's view of the Raft group (answered locally), and membership changes
(run on the leader; other nodes forward them)."""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from scheduler.config import ConfigError, NodeConfig, Peer
from scheduler.core import Result
from scheduler.core import results as ev
from scheduler.membership import ChangeInFlight, MembershipChanger, Refusal, members_view, peer_by_raft_address
from scheduler.replication import RaftLog, ReplicationError
from scheduler.replication.digest import DigestFailed
from scheduler.replication.raftlog import ROLE_NAMES
from scheduler.rpc.convert import duration, timestamp
from scheduler.rpc.errors import abort_rejected, abort_replication
from scheduler.rpc.forwarding import LeaderForwarder, forward_timeout_s
from scheduler.security.interceptor import audited_author, caller_authorization
from worker.api.v1 import cluster_pb2, cluster_pb2_grpc

_METHODS = cluster_pb2.DESCRIPTOR.services_by_name["ClusterService"].methods_by_name

# pysyncobj reports a connected partner with this value.
_CONNECTED = 2

REFUSAL_CODES = {
    "invalid": grpc.StatusCode.INVALID_ARGUMENT,
    "member_exists": grpc.StatusCode.ALREADY_EXISTS,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "no_majority": grpc.StatusCode.FAILED_PRECONDITION,
}
# How long a leader asked to remove itself waits for another node to take over.
HANDOVER_TIMEOUT_S = 10.0
# How long a forwarded change may take when its caller set no deadline.
MEMBERSHIP_FORWARD_S = 30.0


def node_ready(raftlog: RaftLog, config: NodeConfig) -> bool:
    """A leader is known, and it has opened an epoch this node has applied (never once halted)."""
    if raftlog.halted:
        return False
    leader_address = raftlog.leader_address()
    with raftlog.read() as state:
        leader = peer_by_raft_address(config, state, leader_address) if leader_address else None
        return leader is not None and state.leader_id == leader.node_id


def _member_pb(peer: Peer) -> cluster_pb2.Member:
    return cluster_pb2.Member(node_id=peer.node_id, raft_address=peer.raft_address, grpc_address=peer.grpc_address)


class ClusterServicer(cluster_pb2_grpc.ClusterServiceServicer):
    def __init__(
        self,
        raftlog: RaftLog,
        config: NodeConfig,
        changer: MembershipChanger | None,
        forwarder: LeaderForwarder,
    ) -> None:
        self._raftlog = raftlog
        self._config = config
        self._changer = changer
        # Towards other nodes: a change forwarded to the leader, the new node's status.
        self._forwarder = forwarder

    def Status(self, request, context):
        raft = self._raftlog.raft_status()
        with self._raftlog.read() as state:
            members = members_view(self._config, state)
            leader_peer = peer_by_raft_address(self._config, state, self._raftlog.leader_address())
        peers = [
            cluster_pb2.PeerStatus(
                node_id=peer.node_id,
                raft_address=peer.raft_address,
                grpc_address=peer.grpc_address,
                connected=peer.node_id == self._config.node_id
                or raft.get(f"partner_node_status_server_{peer.raft_address}") == _CONNECTED,
                match_index=raft.get(f"match_idx_server_{peer.raft_address}") or 0,
                next_index=raft.get(f"next_node_idx_server_{peer.raft_address}") or 0,
            )
            for peer in members
        ]
        with self._raftlog.read() as state:
            epoch, now_us = state.epoch, state.now_us
            job_count, run_count = len(state.jobs), state.run_count
            cluster_version = state.cluster_version
            names = {p.raft_address: p.node_id for p in members_view(self._config, state)}
        advertised = self._raftlog.log_formats()
        voter_formats = [
            cluster_pb2.VoterLogFormat(
                node_id=names.get(address, ""), raft_address=address, log_format=advertised.get(address, 0)
            )
            for address in sorted(self._raftlog.raft_members())
        ]
        digest_index, digest = self._digest(context) if request.include_digest else (0, "")
        return cluster_pb2.StatusResponse(
            node_id=self._config.node_id,
            role=ROLE_NAMES.get(raft.get("state"), "unknown"),
            leader=leader_peer.node_id if leader_peer else "",
            leader_grpc_address=leader_peer.grpc_address if leader_peer else "",
            term=self._raftlog.term,
            commit_index=self._raftlog.commit_index,
            applied_index=self._raftlog.applied_index,
            epoch=epoch,
            peers=peers,
            ready=node_ready(self._raftlog, self._config),
            raft_voters=sorted(self._raftlog.raft_members()),
            replicated_time=timestamp(now_us),
            job_count=job_count,
            run_count=run_count,
            state_digest=digest,
            digest_index=digest_index,
            cluster_version=cluster_version,
            log_format=self._raftlog.log_format,
            voter_log_formats=voter_formats,
            halted=self._raftlog.halted,
            herd_window=duration(int(self._config.herd_window_s * 1e6)),  # as node.py hands it to the trigger loop
        )

    def _digest(self, context) -> tuple[int, str]:
        try:
            return self._raftlog.digest_at()
        except (DigestFailed, OSError) as exc:  # OSError: no fork (memory, process limit)
            context.abort(grpc.StatusCode.UNAVAILABLE, f"state digest not computed: {exc}")

    # -- membership ---------------------------------------------------------------
    def AddMember(self, request, context):
        member = request.member
        try:
            new = Peer.parse(f"{member.node_id}={member.raft_address}/{member.grpc_address}")
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if not self._raftlog.is_leader():
            return self._forward("AddMember", request, context)
        if self._changer is not None:
            refusal = self._changer.add_refusal(new)
            if refusal is not None:
                context.abort(REFUSAL_CODES.get(refusal.code, grpc.StatusCode.FAILED_PRECONDITION), refusal.message)
            if not self._changer.is_voter(new.raft_address):
                self._check_running(new, context)
        return self._change(context, lambda: self._changer.add(new, audited_author(request.author), request.request_id))

    def RemoveMember(self, request, context):
        if not request.node_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "name the node id to remove")
        if not self._raftlog.is_leader():
            return self._forward("RemoveMember", request, context)
        with self._raftlog.read() as state:
            target = next((p for p in members_view(self._config, state) if p.node_id == request.node_id), None)
        if target is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{request.node_id!r} is not a member")
        if target.raft_address == self._config.me.raft_address:
            # pysyncobj cannot remove its own leader: hand leadership over, then ask the new leader.
            self._hand_over(context)
            return self._forward("RemoveMember", request, context)
        return self._change(
            context, lambda: self._changer.remove(target, audited_author(request.author), request.request_id)
        )

    def _change(self, context, run: Callable[[], Result | Refusal]) -> cluster_pb2.MembershipResponse:
        if self._changer is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node cannot change membership")
        try:
            outcome = run()
        except ChangeInFlight as exc:
            context.abort(grpc.StatusCode.ABORTED, str(exc))
        except ReplicationError as exc:
            abort_replication(context, exc)
        if isinstance(outcome, Refusal):
            context.abort(REFUSAL_CODES.get(outcome.code, grpc.StatusCode.FAILED_PRECONDITION), outcome.message)
        if not outcome.accepted:
            abort_rejected(context, outcome.rejection)
        with self._raftlog.read() as state:
            members = members_view(self._config, state)
        changed = any(isinstance(event, (ev.MemberAdded, ev.MemberRemoved)) for event in outcome.events)
        return cluster_pb2.MembershipResponse(
            members=[_member_pb(p) for p in members], index=outcome.index, changed=changed
        )

    def _check_running(self, new: Peer, context) -> None:
        """A node is made a voter only once it runs and says it is that node: a voter that
        never comes up would count against every quorum from then on."""
        try:
            with self._forwarder.channel_to_newcomer(new.grpc_address) as channel:
                status = cluster_pb2_grpc.ClusterServiceStub(channel).Status(
                    cluster_pb2.StatusRequest(), timeout=3.0, metadata=caller_authorization(context)
                )
        except grpc.RpcError as exc:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{new.node_id} does not answer on {new.grpc_address} ({exc.code().name}): start it first with "
                "`raftcron serve --join`, its peers being the current members and itself",
            )
        if status.node_id != new.node_id:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"the node on {new.grpc_address} is {status.node_id!r}, not {new.node_id!r}",
            )
        with self._raftlog.read() as state:
            cluster_version = state.cluster_version
        if max(status.log_format, 1) < cluster_version:  # 0: a node that predates the field reads 1
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{new.node_id} reads log format {max(status.log_format, 1)} and the cluster runs "
                f"{cluster_version}: upgrade {new.node_id} before adding it",
            )
        own = next((p for p in status.peers if p.node_id == new.node_id), None)
        if own is not None and (own.raft_address, own.grpc_address) != (new.raft_address, new.grpc_address):
            # A mistyped Raft port would add a voter that never answers.
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{new.node_id} is configured with Raft {own.raft_address} and gRPC {own.grpc_address}, "
                f"not {new.raft_address} and {new.grpc_address}",
            )

    def _hand_over(self, context) -> None:
        if not self._raftlog.transfer_leadership():
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "this node leads and no other voter is caught up to take over; retry shortly",
            )
        deadline = time.monotonic() + HANDOVER_TIMEOUT_S
        while time.monotonic() < deadline:
            leader = self._raftlog.leader_address()
            if leader and leader != self._config.me.raft_address:
                return
            time.sleep(0.05)
        context.abort(grpc.StatusCode.UNAVAILABLE, "leadership was not handed over in time; retry")

    def _forward(self, method: str, request, context):
        """Ask the leader; a change never runs on a follower. Right after a hand-over no leader
        may be known yet: wait for one."""
        address = self._forwarder.leader(context, wait_s=HANDOVER_TIMEOUT_S)
        timeout_s = forward_timeout_s(context, MEMBERSHIP_FORWARD_S, floor_s=1.0)
        return self._forwarder.call(context, address, _METHODS[method], request, timeout_s)
