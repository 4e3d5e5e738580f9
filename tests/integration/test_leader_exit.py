"""A follower whose leader's process exited stands for election at once (leader_exit.py), on a real
3-node pysyncobj cluster on loopback in one process.

The election timeout here is 4-5 s, so a follower that waited it out could not elect a new leader
in less than 4 s after the leader went: a new leader sooner than that was elected because the
followers saw the leader exit. The same test with the feature off is the control: no new leader
before the timeout. Waits poll a condition against a deadline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from scheduler.core.commands import ReadBarrier
from scheduler.replication import RaftLog
from scheduler.replication.pysyncobj_compat import TRANSPORT
from tests.fakes import T0_US
from tests.integration.test_raftlog import (
    Records,
    _term,
    free_ports,
    no_critical_logs,  # noqa: F401 (autouse fixture, requested by name below)
    settings_for,
    submit,
    wait_until,
)

pytestmark = pytest.mark.integration

TIMEOUT_MIN_S, TIMEOUT_MAX_S = 4.0, 5.0
# What a follower that waits out its timeout cannot beat (it restarts at every append it reads).
BEFORE_ANY_TIMEOUT_S = TIMEOUT_MIN_S - 0.5


STANDING = "standing for election"


def _agreed_leader(nodes: list[RaftLog]) -> RaftLog | None:
    leaders = [node for node in nodes if node.is_leader()]
    if len(leaders) == 1 and all(node.leader_address() == leaders[0].settings.self_address for node in nodes):
        return leaders[0]
    return None


def _first_leader(nodes: list[RaftLog]) -> RaftLog:
    # A first election that splits the vote takes another timeout.
    return wait_until(lambda: _agreed_leader(nodes), "a first leader", timeout_s=4 * TIMEOUT_MAX_S)


def _cluster(tmp_path: Path, elect_when_leader_exits: bool) -> list[RaftLog]:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    tuning = {
        "election_timeout_min_s": TIMEOUT_MIN_S,
        "election_timeout_max_s": TIMEOUT_MAX_S,
        "elect_when_leader_exits": elect_when_leader_exits,
    }
    nodes = [RaftLog(settings_for(a, addresses, tmp_path / f"node{i}", **tuning)) for i, a in enumerate(addresses)]
    for node in nodes:
        node.start()
    return nodes


@pytest.mark.parametrize("elect_when_leader_exits", [True, False], ids=["on", "off-control"])
def test_a_leader_that_exits_is_replaced_before_any_election_timeout(
    tmp_path: Path,
    elect_when_leader_exits: bool,
    no_critical_logs: Records,  # noqa: F811 (the fixture)
) -> None:
    nodes = _cluster(tmp_path, elect_when_leader_exits)
    try:
        leader = _first_leader(nodes)
        submit(nodes, ReadBarrier(issued_at_us=T0_US))  # the followers have heard the leader
        term = _term(leader)
        survivors = [node for node in nodes if node is not leader]
        leader.close()  # its process's Raft port closes, as when the process exits
        gone_at = time.monotonic()
        deadline = gone_at + BEFORE_ANY_TIMEOUT_S
        new_leader = None
        while new_leader is None and time.monotonic() < deadline:
            new_leader = next((node for node in survivors if node.is_leader()), None)
            time.sleep(0.01)
        if not elect_when_leader_exits:
            assert new_leader is None, "a follower elected before its timeout with the feature off"
            return
        assert new_leader is not None, f"no new leader within {BEFORE_ANY_TIMEOUT_S}s of the leader's exit"
        # One election: the survivors stood in turn and did not split the vote.
        assert _term(new_leader) == term + 1
        assert any(STANDING in record.getMessage() for record in no_critical_logs.records)
        submit(survivors, ReadBarrier(issued_at_us=T0_US))
    finally:
        for node in nodes:
            node.close()


def test_a_closed_link_to_a_live_leader_deposes_nobody(
    tmp_path: Path,
    no_critical_logs: Records,  # noqa: F811 (the fixture)
) -> None:
    """A follower's link to the leader closes while the leader runs: the dial connects, which is no
    proof of an exit, and the follower keeps its timeout and its leader."""
    nodes = _cluster(tmp_path, elect_when_leader_exits=True)
    try:
        leader = _first_leader(nodes)
        term = _term(leader)
        follower = next(node for node in nodes if node is not leader)
        syncobj = follower._syncobj
        transport = getattr(syncobj, TRANSPORT)
        watch = syncobj.leader_exit_watch
        dials = []
        real_link_closed = watch.link_closed
        watch.link_closed = lambda address: (dials.append(address), real_link_closed(address))
        poller = syncobj._poller
        real_poll = poller.poll
        armed = [True]

        def poll_then_cut(timeout):
            real_poll(timeout)
            if armed:  # on the tick thread, as pysyncobj closes links
                armed.clear()
                leader_node = syncobj._getLeader()
                transport._connections[leader_node].disconnect()

        poller.poll = poll_then_cut
        try:
            wait_until(lambda: dials, "the follower to dial its leader")
            wait_until(lambda: not watch.dialing, "the dial to end")
            # Proposed after the dial's verdict: once the follower applied it, it has ticked since.
            index = submit(nodes, ReadBarrier(issued_at_us=T0_US)).index
            wait_until(lambda: follower.applied_index >= index, "the follower to apply")
        finally:
            poller.poll = real_poll
        assert dials == [leader.settings.self_address]
        # A follower told to stand early would be reset by the next append if not first in turn:
        # its log line is the proof either way.
        assert not [r.getMessage() for r in no_critical_logs.records if STANDING in r.getMessage()]
        assert [_term(node) for node in nodes] == [term] * 3
        assert leader.is_leader()
    finally:
        for node in nodes:
            node.close()
