"""Member table transitions: who belongs to the cluster, by node id, with both addresses.

pysyncobj keeps its own voter set (Raft addresses only). The table here follows it, one
committed entry per change, so every replica knows every member's gRPC address: followers
forward writes to a leader that joined after them, and `status` lists members that no
configuration file names. Until the first change the table is empty and nodes use their
configured peers; the first change seeds it from the proposer's view (`known_members`).
"""

from __future__ import annotations

from scheduler.core import results as ev
from scheduler.core.commands import AddMember, Member, RemoveMember
from scheduler.core.results import Result, rejected
from scheduler.core.state import State
from scheduler.core.vocabulary import RejectionCode


def _conflict(members: dict[str, Member], candidate: Member) -> str | None:
    """Why `candidate` cannot join `members` (another member holds one of its addresses), or None."""
    for other in members.values():
        if other.node_id == candidate.node_id:
            continue
        if candidate.raft_address in (other.raft_address, other.grpc_address):
            return f"raft address {candidate.raft_address} is already used by member {other.node_id}"
        if candidate.grpc_address in (other.raft_address, other.grpc_address):
            return f"grpc address {candidate.grpc_address} is already used by member {other.node_id}"
    return None


def _malformed(member: Member) -> str | None:
    if not (member.node_id and member.raft_address and member.grpc_address):
        return "a member needs a node id, a raft address and a grpc address"
    if member.raft_address == member.grpc_address:
        return f"member {member.node_id}: raft and grpc addresses must differ"
    return None


def _seeded(state: State, known: tuple[Member, ...]) -> dict[str, Member] | str:
    """The table to check a change against: the replicated one, or the seed if it is still empty."""
    if state.members:
        return dict(state.members)
    table: dict[str, Member] = {}
    for member in known:
        problem = _malformed(member) or _conflict(table, member)
        if problem or member.node_id in table:
            return f"inconsistent known members: {problem or 'duplicate id ' + member.node_id}"
        table[member.node_id] = member
    return table


def add_member(state: State, cmd: AddMember, index: int) -> Result:
    problem = _malformed(cmd.member)
    if problem:
        return rejected(index, RejectionCode.INVALID, problem)
    table = _seeded(state, cmd.known_members)
    if isinstance(table, str):
        return rejected(index, RejectionCode.INVALID, table)
    current = table.get(cmd.member.node_id)
    if current is not None and current != cmd.member:
        return rejected(
            index,
            RejectionCode.MEMBER_EXISTS,
            f"{current.node_id} is already a member at {current.raft_address}/{current.grpc_address}; "
            "remove it first to give it new addresses",
        )
    problem = _conflict(table, cmd.member)
    if problem:
        return rejected(index, RejectionCode.MEMBER_EXISTS, problem)
    table[cmd.member.node_id] = cmd.member
    state.members = table
    if current is not None:
        return Result(index=index, events=(ev.MemberUnchanged(cmd.member.node_id),))
    member = cmd.member
    return Result(index=index, events=(ev.MemberAdded(member.node_id, member.raft_address, member.grpc_address),))


def remove_member(state: State, cmd: RemoveMember, index: int) -> Result:
    table = _seeded(state, cmd.known_members)
    if isinstance(table, str):
        return rejected(index, RejectionCode.INVALID, table)
    if cmd.node_id not in table:
        return rejected(index, RejectionCode.NOT_FOUND, f"{cmd.node_id!r} is not a member")
    if len(table) == 1:
        return rejected(index, RejectionCode.INVALID, f"{cmd.node_id} is the last member; a cluster cannot be emptied")
    del table[cmd.node_id]
    state.members = table
    return Result(index=index, events=(ev.MemberRemoved(cmd.node_id),))
