"""The replicated member table: AddMember / RemoveMember, seeding, conflicts, retries, snapshots."""

from __future__ import annotations

from scheduler.core import decode_snapshot, encode_snapshot, state_digest
from scheduler.core.commands import AddMember, Member, RemoveMember
from scheduler.core.results import MemberAdded, MemberRemoved, MemberUnchanged
from tests.fakes import Core

N1 = Member("n1", "10.0.0.1:7100", "10.0.0.1:7200")
N2 = Member("n2", "10.0.0.2:7100", "10.0.0.2:7200")
N3 = Member("n3", "10.0.0.3:7100", "10.0.0.3:7200")
N4 = Member("n4", "10.0.0.4:7100", "10.0.0.4:7200")
CONFIGURED = (N1, N2, N3)


def add(core: Core, member: Member, known=CONFIGURED, request_id: str = ""):
    return core.apply(AddMember(core.clock.tick(), member, "alice", request_id, known))


def remove(core: Core, node_id: str, known=CONFIGURED, request_id: str = ""):
    return core.apply(RemoveMember(core.clock.tick(), node_id, "alice", request_id, known))


def test_first_change_seeds_the_table_from_the_proposers_view() -> None:
    core = Core()
    assert core.state.members == {}
    result = add(core, N4)
    assert result.events == (MemberAdded("n4", N4.raft_address, N4.grpc_address),)
    assert core.state.members == {"n1": N1, "n2": N2, "n3": N3, "n4": N4}


def test_once_seeded_the_table_ignores_later_views() -> None:
    core = Core()
    add(core, N4)
    # A proposer whose configuration still lists only n1 cannot shrink the table.
    n5 = Member("n5", "10.0.0.5:7100", "10.0.0.5:7200")
    assert add(core, n5, known=(N1,)).accepted
    assert sorted(core.state.members) == ["n1", "n2", "n3", "n4", "n5"]


def test_repeated_add_with_same_addresses_is_unchanged() -> None:
    core = Core()
    add(core, N4)
    result = add(core, N4)
    assert result.accepted and result.events == (MemberUnchanged("n4"),)
    assert len(core.state.members) == 4


def test_same_id_with_new_addresses_is_refused() -> None:
    core = Core()
    moved = Member("n3", "10.0.0.9:7100", "10.0.0.9:7200")
    result = add(core, moved)
    assert result.rejection.code == "member_exists"
    assert "remove it first" in result.rejection.message
    assert core.state.members == {}  # a rejected first change seeds nothing


def test_address_of_another_member_is_refused() -> None:
    core = Core()
    for clash in (Member("n4", N2.raft_address, "10.0.0.4:7200"), Member("n4", "10.0.0.4:7100", N2.grpc_address)):
        result = add(core, clash)
        assert result.rejection.code == "member_exists"
        assert "n2" in result.rejection.message


def test_malformed_member_and_inconsistent_seed_are_invalid() -> None:
    core = Core()
    assert add(core, Member("", "a:1", "a:2")).rejection.code == "invalid"
    assert add(core, Member("n4", "a:1", "a:1")).rejection.code == "invalid"
    assert add(core, N4, known=(N1, N1)).rejection.code == "invalid"
    assert core.state.members == {}


def test_remove_then_add_a_replacement() -> None:
    core = Core()
    assert remove(core, "n3").events == (MemberRemoved("n3"),)
    assert sorted(core.state.members) == ["n1", "n2"]
    # The dead node's addresses are free again; a replacement may even reuse them.
    replacement = Member("n6", N3.raft_address, "10.0.0.6:7200")
    assert add(core, replacement).accepted
    assert core.state.members["n6"] == replacement


def test_remove_unknown_and_last_member_are_refused() -> None:
    core = Core()
    assert remove(core, "n9").rejection.code == "not_found"
    only = Core()
    assert remove(only, "n1", known=(N1,)).rejection.code == "invalid"


def test_retried_request_returns_the_first_result() -> None:
    core = Core()
    first = remove(core, "n3", request_id="req-1")
    again = remove(core, "n3", request_id="req-1")
    assert again == first and again.accepted
    # A new request for the same removal is a fresh question: n3 is gone.
    assert remove(core, "n3", request_id="req-2").rejection.code == "not_found"


def test_replicas_agree_and_the_table_survives_a_snapshot() -> None:
    a, b = Core(), Core()
    for core in (a, b):
        add(core, N4)
        remove(core, "n2")
    assert state_digest(a.state) == state_digest(b.state)
    restored = decode_snapshot(encode_snapshot(a.state))
    assert restored.members == {"n1": N1, "n3": N3, "n4": N4}
    assert state_digest(restored) == state_digest(a.state)
