"""ClusterService: this node's view of the Raft group, answered locally."""

from __future__ import annotations

from scheduler.config import NodeConfig
from scheduler.core import state_digest
from scheduler.replication import RaftLog
from scheduler.replication.raftlog import ROLE_NAMES
from scheduler.rpc.convert import timestamp
from worker.api.v1 import cluster_pb2, cluster_pb2_grpc

# pysyncobj reports a connected partner with this value.
_CONNECTED = 2


def node_ready(raftlog: RaftLog, config: NodeConfig) -> bool:
    """A leader is known, and it has opened an epoch this node has applied."""
    leader = config.peer_by_raft_address(raftlog.leader_address())
    if leader is None:
        return False
    with raftlog.read() as state:
        return state.leader_id == leader.node_id


class ClusterServicer(cluster_pb2_grpc.ClusterServiceServicer):
    def __init__(self, raftlog: RaftLog, config: NodeConfig) -> None:
        self._raftlog = raftlog
        self._config = config

    def Status(self, request, context):
        raft = self._raftlog.raft_status()
        leader_peer = self._config.peer_by_raft_address(self._raftlog.leader_address())
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
            for peer in self._config.peers
        ]
        with self._raftlog.read() as state:
            epoch, now_us = state.epoch, state.now_us
            job_count, run_count = len(state.jobs), state.run_count
            digest = state_digest(state) if request.include_digest else ""
            digest_index = state.applied_index
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
            replicated_time=timestamp(now_us),
            job_count=job_count,
            run_count=run_count,
            state_digest=digest,
            digest_index=digest_index if digest else 0,
        )
