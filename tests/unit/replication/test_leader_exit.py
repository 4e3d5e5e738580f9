"""A follower whose leader's process exited stands at its turn (scheduler/replication/leader_exit.py):
the order of the survivors, the dial's verdict, and when the election deadline is brought forward.

The SyncObj here is a stand-in that holds pysyncobj's fields under their mangled names; the real
thing is in tests/integration/test_leader_exit.py."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import pytest

from scheduler.replication import leader_exit
from scheduler.replication.leader_exit import (
    STAND_STEP_S,
    LeaderExitMixin,
    LeaderExitWatch,
    election_delay_s,
    port_refuses,
)
from scheduler.replication.pysyncobj_compat import CURRENT_TERM, ELECTION_DEADLINE, RAFT_STATE, VOTED_FOR, RaftState

A, B, C, D, E = (f"10.0.0.{n}:7100" for n in range(1, 6))


# -- the order of the survivors ------------------------------------------------------------


@pytest.mark.parametrize("voters", [(A, B, C), (A, B, C, D, E)])
def test_every_survivor_has_its_own_turn_and_all_compute_the_same_order(voters: tuple[str, ...]) -> None:
    for exited in voters:
        survivors = [v for v in voters if v != exited]
        # Each survivor knows the others (the exited leader among them), not itself, in any order.
        delays = {me: election_delay_s(me, reversed([v for v in voters if v != me]), exited) for me in survivors}
        assert sorted(delays.values()) == [rank * STAND_STEP_S for rank in range(len(survivors))]
        assert delays[min(survivors)] == 0.0


def test_the_first_turn_is_the_lowest_address_that_is_left() -> None:
    assert election_delay_s(B, [A, C], exited_leader=A) == 0.0
    assert election_delay_s(C, [A, B], exited_leader=A) == STAND_STEP_S
    assert election_delay_s(A, [B, C], exited_leader=B) == 0.0


# -- the dial ------------------------------------------------------------------------------


def test_a_port_nobody_listens_on_refuses() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    assert port_refuses(f"127.0.0.1:{port}")


def test_a_listening_port_does_not_refuse() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        assert not port_refuses(f"127.0.0.1:{server.getsockname()[1]}")


def test_an_address_that_does_not_parse_is_no_proof() -> None:
    assert not port_refuses("no-port-here")
    assert not port_refuses("127.0.0.1:notaport")


def test_one_dial_at_a_time_and_each_verdict_is_taken_once() -> None:
    release, dialed = threading.Event(), []

    def dial(address: str) -> bool:
        dialed.append(address)
        release.wait(5)
        return address == A

    watch = LeaderExitWatch(dial)
    watch.link_closed(A)
    watch.link_closed(A)  # the link closes again while the first dial waits: no second dial
    release.set()
    _wait(lambda: not watch.dialing)
    assert dialed == [A]
    assert watch.take_exited() == A
    assert watch.take_exited() is None
    watch.link_closed(B)  # answered: not exited
    _wait(lambda: not watch.dialing)
    assert watch.take_exited() is None


def test_a_dial_that_raises_is_no_verdict_and_frees_the_watch() -> None:
    def dial(address: str) -> bool:
        raise RuntimeError("resolver broke")

    watch = LeaderExitWatch(dial)
    with pytest.raises(RuntimeError):
        watch._check(A)  # what the dial thread runs
    assert not watch.dialing
    assert watch.take_exited() is None


def _wait(condition, timeout_s: float = 5.0) -> None:
    """Poll `condition` (the dial thread finishing) against a deadline."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the dial thread did not finish"
        time.sleep(0.005)


# -- bringing the deadline forward ---------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    address: str


class _Follower(LeaderExitMixin):
    """pysyncobj's fields as LeaderExitMixin reads them; this node is B in a cluster A, B, C."""

    def __init__(self, leader: str | None, dial_result: bool = True) -> None:
        self.selfNode = _Node(B)
        self.otherNodes = {_Node(A), _Node(C)}
        self._leader = _Node(leader) if leader else None
        self.leader_exit_watch = LeaderExitWatch(lambda address: dial_result)
        setattr(self, RAFT_STATE, RaftState.FOLLOWER)
        setattr(self, CURRENT_TERM, 4)
        setattr(self, VOTED_FOR, leader)  # it voted for the leader of term 4
        setattr(self, ELECTION_DEADLINE, _now() + 1.2)

    def _getLeader(self):  # noqa: N802 (pysyncobj's name)
        return self._leader

    def lose_link_to(self, address: str) -> None:
        self.peer_link_closed(_Node(address))
        _wait(lambda: not self.leader_exit_watch.dialing)


def _now() -> float:
    return leader_exit.pysyncobj_monotonic()


def _deadline_in_s(node: _Follower) -> float:
    return getattr(node, ELECTION_DEADLINE) - _now()


def test_a_follower_whose_leader_exited_stands_at_its_turn() -> None:
    node = _Follower(leader=A)
    node.lose_link_to(A)
    node._stand_if_leader_exited()
    # B is first of the survivors B and C.
    assert _deadline_in_s(node) <= 0.0


def test_the_second_survivor_stands_a_step_later() -> None:
    node = _Follower(leader=C)
    node.lose_link_to(C)
    node._stand_if_leader_exited()
    # A is first of the survivors A and B; B's turn is a step later, well before its timeout.
    assert 0.0 < _deadline_in_s(node) <= STAND_STEP_S


def test_a_leader_that_still_listens_is_left_to_the_timeout() -> None:
    node = _Follower(leader=A, dial_result=False)
    node.lose_link_to(A)
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) > 1.0


def test_a_link_to_another_follower_closing_dials_nobody() -> None:
    node = _Follower(leader=A)
    node.lose_link_to(C)
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) > 1.0


@pytest.mark.parametrize(
    ("voted_for", "stands"),
    [
        (C, False),  # C stood first and this node voted for it before the dial's verdict came
        (None, True),  # a candidate of term 5 whose log was behind was refused: no vote in term 5
    ],
    ids=["voted-stays-put", "refused-stands"],
)
def test_in_a_newer_term_a_follower_stands_only_if_it_gave_no_vote(voted_for: str | None, stands: bool) -> None:
    node = _Follower(leader=A)
    node.lose_link_to(A)
    setattr(node, CURRENT_TERM, 5)
    setattr(node, VOTED_FOR, voted_for)
    node._leader = None
    node._stand_if_leader_exited()
    assert (_deadline_in_s(node) <= 0.0) is stands


def test_a_follower_that_heard_from_a_new_leader_stays_put() -> None:
    node = _Follower(leader=A)
    node.lose_link_to(A)
    node._leader = _Node(C)
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) > 1.0


@pytest.mark.parametrize("state", [RaftState.CANDIDATE, RaftState.LEADER])
def test_only_a_follower_stands_early(state: int) -> None:
    node = _Follower(leader=A)
    node.lose_link_to(A)
    setattr(node, RAFT_STATE, state)
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) > 1.0


def test_a_deadline_already_nearer_is_kept() -> None:
    node = _Follower(leader=C)
    node.lose_link_to(C)
    setattr(node, ELECTION_DEADLINE, _now() - 0.01)
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) < 0.0


def test_off_when_the_watch_is_none() -> None:
    node = _Follower(leader=A)
    node.leader_exit_watch = None
    node.peer_link_closed(_Node(A))
    node._stand_if_leader_exited()
    assert _deadline_in_s(node) > 1.0
