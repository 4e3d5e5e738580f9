"""The HTTP probes for orchestrators: /healthz (the process answers) and /readyz (the node can
serve), on the metrics port, without a token.

    problem = readiness_problem(readiness_facts(node.raftlog, node.config))   # None: ready

/readyz answers 200 only when all of these hold, else 503 with the first that does not, in one
line (`not ready: no leader is known`):

- the node has not halted (it met an entry it cannot decode);
- it is a member of the cluster (the replicated member table, or its configured peers before
  any change): a node started with `join: true` is not ready until `raftcron cluster add`;
- a leader is known, and that leader's epoch is applied here (what the gRPC health service and
  Status's `ready` say), and, on a follower, its link to that leader is up: pysyncobj starts no
  election on a node connected to no one, so a follower cut off from every peer keeps naming
  the leader it last heard of, for as long as it stays cut off;
- its applied index is within MAX_APPLY_LAG entries of the commit index it knows: a node that
  restarted or was cut off replays first, and a load balancer should not send it reads meanwhile.

The decision is the pure `readiness_problem`; `readiness_facts` reads the node. The container
health check that calls these is `python -m scheduler.observability.healthcheck URL`.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.membership import members_view, peer_by_raft_address

__all__ = ["MAX_APPLY_LAG", "ReadinessFacts", "readiness_facts", "readiness_problem"]

# Entries committed but not yet applied: a healthy node applies within a tick or two (tens of
# entries at a burst); thousands mean a replay or a stalled apply.
MAX_APPLY_LAG = 100


@dataclass(frozen=True)
class ReadinessFacts:
    halted: str  # why the node halted; "" if it did not
    member: bool
    leader_id: str  # "" when no leader is known
    leader_epoch_applied: bool  # the known leader's ClaimLeadership is applied on this node
    leader_connected: bool  # this node is the leader, or its Raft link to the leader is up
    commit_index: int
    applied_index: int


def readiness_problem(facts: ReadinessFacts, max_apply_lag: int = MAX_APPLY_LAG) -> str | None:
    """Why the node is not ready, in a few words; None when it is."""
    if facts.halted:
        return "halted: " + facts.halted.splitlines()[0][:200]
    if not facts.member:
        return "this node is not a member of the cluster (yet)"
    if not facts.leader_id:
        return "no leader is known"
    if not facts.leader_connected:
        return f"leader {facts.leader_id} is not reachable from this node"
    if not facts.leader_epoch_applied:
        return f"leader {facts.leader_id} has not opened an epoch this node has applied"
    lag = facts.commit_index - facts.applied_index
    if lag > max_apply_lag:
        return f"catching up: applied index {facts.applied_index} is {lag} entries behind the commit index"
    return None


# pysyncobj's value for a connected partner in getStatus().
_CONNECTED = 2


def readiness_facts(raftlog, config) -> ReadinessFacts:
    leader_address = raftlog.leader_address()
    connected = raftlog.is_leader() or (
        bool(leader_address) and raftlog.raft_status().get(f"partner_node_status_server_{leader_address}") == _CONNECTED
    )
    commit_index, applied_index = raftlog.commit_index, raftlog.applied_index
    with raftlog.read() as state:
        member = any(peer.node_id == config.node_id for peer in members_view(config, state))
        leader = peer_by_raft_address(config, state, leader_address) if leader_address else None
        leader_id = leader.node_id if leader is not None else ""
        epoch_applied = bool(leader_id) and state.leader_id == leader_id
    return ReadinessFacts(raftlog.halted, member, leader_id, epoch_applied, connected, commit_index, applied_index)
