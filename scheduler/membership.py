"""Cluster membership on the node side: who the members are, and how one change is made.

Two records of membership exist and both must move: pysyncobj's voter set (Raft addresses;
it decides quorums) and the replicated member table in the core (ids and gRPC addresses;
it lets any node forward to a leader that joined later, and `status` list every member).
A change runs on the leader, one at a time: the policy below checks it against both
records, then pysyncobj's entry commits, then the core's. A change interrupted between the
two steps is finished by running the same command again (each step is skipped when it is
already in place).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from scheduler.config import NodeConfig, Peer
from scheduler.core import Result, State
from scheduler.core.commands import AddMember, Member, RemoveMember
from scheduler.replication import RaftLog


def members_view(config: NodeConfig, state: State) -> tuple[Peer, ...]:
    """The members: the replicated table once any change was made, else the configured peers."""
    if state.members:
        return tuple(Peer(m.node_id, m.raft_address, m.grpc_address) for _, m in sorted(state.members.items()))
    return config.peers


def peer_by_raft_address(config: NodeConfig, state: State, raft_address: str) -> Peer | None:
    """The member listening on `raft_address`: the replicated table first, then configuration."""
    for member in state.members.values():
        if member.raft_address == raft_address:
            return Peer(member.node_id, member.raft_address, member.grpc_address)
    return config.peer_by_raft_address(raft_address)


def majority(voters: int) -> int:
    return voters // 2 + 1


@dataclass(frozen=True)
class Refusal:
    """Why a change is not made; `code` picks the gRPC status (see rpc/cluster.py)."""

    code: str  # invalid | member_exists | not_found | no_majority | in_flight
    message: str


def add_refusal(
    members: Iterable[Peer], voters: frozenset[str], connected: frozenset[str], new: Peer
) -> Refusal | None:
    """Whether `new` may join. The voters that are up now must already be a majority of the
    grown cluster: the newcomer starts with an empty log, and commits must not wait for it."""
    for member in members:
        if member.node_id == new.node_id:
            if member != new:
                return Refusal(
                    "member_exists",
                    f"{member.node_id} is already a member at {member.raft_address}/{member.grpc_address}; "
                    "remove it first to give it new addresses",
                )
            continue
        taken = {member.raft_address, member.grpc_address}
        if new.raft_address in taken or new.grpc_address in taken:
            return Refusal("member_exists", f"an address of {new.node_id} is already used by member {member.node_id}")
    if new.raft_address in voters:
        return None  # pysyncobj already counts it: only the table is left to record
    live = len(voters & connected)
    needed = majority(len(voters) + 1)
    if live < needed:
        down = sorted(voters - connected)
        return Refusal(
            "no_majority",
            f"only {live} of {len(voters)} voters are connected (down: {', '.join(down)}); with {new.node_id} "
            f"the cluster would need {needed} to commit before {new.node_id} has caught up. "
            "Remove the dead members first, then add.",
        )
    return None


def remove_refusal(voters: frozenset[str], connected: frozenset[str], target: Peer) -> Refusal | None:
    """Whether `target` may leave: the voters left, that are up now, must be a majority of what is left."""
    if target.raft_address not in voters:
        return None  # pysyncobj no longer counts it: only the table is left to update
    if len(voters) == 1:
        return Refusal("invalid", f"{target.node_id} is the last voter; a cluster cannot be emptied")
    remaining = voters - {target.raft_address}
    live = len(remaining & connected)
    needed = majority(len(remaining))
    if live < needed:
        return Refusal(
            "no_majority",
            f"without {target.node_id}, {live} of {len(remaining)} voters would be connected and "
            f"{needed} are needed to commit; bring members back before removing this one",
        )
    return None


class ChangeInFlight(Exception):
    """Another membership change is running on this leader."""


class MembershipChanger:
    """Runs one change at a time on the leader: checks, pysyncobj's entry, then the table's."""

    def __init__(self, raftlog: RaftLog, config: NodeConfig, clock_us: Callable[[], int], timeout_s: float) -> None:
        self._raftlog = raftlog
        self._config = config
        self._clock_us = clock_us
        self._timeout_s = timeout_s
        self._busy = threading.Lock()

    def _snapshot(self) -> tuple[tuple[Peer, ...], frozenset[str], frozenset[str]]:
        with self._raftlog.read() as state:
            members = members_view(self._config, state)
        return members, self._raftlog.raft_members(), self._raftlog.connected_members()

    @staticmethod
    def _known(members: tuple[Peer, ...], voters: frozenset[str]) -> tuple[Member, ...]:
        """The seed for an empty table: members pysyncobj counts as voters, with their addresses."""
        return tuple(Member(p.node_id, p.raft_address, p.grpc_address) for p in members if p.raft_address in voters)

    def add_refusal(self, new: Peer) -> Refusal | None:
        """The policy alone, for a caller that checks more before asking (the new node runs)."""
        members, voters, connected = self._snapshot()
        return add_refusal(members, voters, connected, new)

    def is_voter(self, raft_address: str) -> bool:
        return raft_address in self._raftlog.raft_members()

    def add(self, new: Peer, author: str, request_id: str) -> Result | Refusal:
        if not self._busy.acquire(blocking=False):
            raise ChangeInFlight("another membership change is in progress on this leader; retry when it ends")
        try:
            members, voters, connected = self._snapshot()
            refusal = add_refusal(members, voters, connected, new)
            if refusal is not None:
                return refusal
            known = self._known(members, voters)
            if new.raft_address not in voters:
                self._raftlog.change_membership(True, new.raft_address, self._timeout_s)
            member = Member(new.node_id, new.raft_address, new.grpc_address)
            command = AddMember(self._clock_us(), member, author, request_id, known)
            return self._raftlog.submit(command, self._timeout_s)
        finally:
            self._busy.release()

    def remove(self, target: Peer, author: str, request_id: str) -> Result | Refusal:
        if not self._busy.acquire(blocking=False):
            raise ChangeInFlight("another membership change is in progress on this leader; retry when it ends")
        try:
            members, voters, connected = self._snapshot()
            refusal = remove_refusal(voters, connected, target)
            if refusal is not None:
                return refusal
            known = self._known(members, voters)
            if target.raft_address in voters:
                self._raftlog.change_membership(False, target.raft_address, self._timeout_s)
            command = RemoveMember(self._clock_us(), target.node_id, author, request_id, known)
            return self._raftlog.submit(command, self._timeout_s)
        finally:
            self._busy.release()
