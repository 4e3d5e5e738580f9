"""A follower stands for election as soon as its leader's process has exited.

pysyncobj notices a dead leader only when a follower's election timeout runs out (0.5-1.5 s,
drawn afresh at every append), and that wait was most of a failover: from SIGKILL to a new
leader 0.52-1.26 s with a million jobs in state (bench failover). Yet when the leader's process
exits (killed, crashed, out of memory, stopped for an upgrade) its kernel closes its Raft links
at once, and the followers see it.

A closed link alone proves nothing (a peer replaces its link, a link idles out), so the follower
then dials the leader's Raft port once, off the tick thread. A refusal means nothing listens
there: the process is gone, and the follower stands after `election_delay_s` instead of its
timeout. A connection, a timeout or any other error (a host that lost power, a partition) leaves
the election to the timeout, as before. The surviving voters stand in one order that every one of
them computes alike, `STAND_STEP_S` apart, so two never stand at once and split the vote; the
first whose log is up to date wins and the others vote for it (docs/design/leader-exit-election.md).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable

from scheduler.replication.pysyncobj_compat import CURRENT_TERM, ELECTION_DEADLINE, RAFT_STATE, VOTED_FOR, RaftState
from scheduler.replication.pysyncobj_compat import monotonic as pysyncobj_monotonic

log = logging.getLogger("raftcron.replication")

# Between two voters' turns to stand: a vote's round trip on a loaded 2-core machine is a few
# tens of milliseconds, and a voter whose log is behind is refused within it.
STAND_STEP_S = 0.2
# How long the follower waits for the leader's port to answer the dial; a silence is no proof.
DIAL_TIMEOUT_S = 0.25


def election_delay_s(
    self_address: str, voters: Iterable[str], exited_leader: str, step_s: float = STAND_STEP_S
) -> float:
    """When this voter stands after `exited_leader` exited: its rank among the voters left, by
    address, times `step_s`. Every survivor computes the same order, so none stand together."""
    survivors = sorted({*voters, self_address} - {exited_leader})
    return survivors.index(self_address) * step_s


def port_refuses(address: str, timeout_s: float = DIAL_TIMEOUT_S) -> bool:
    """Whether a TCP connection to `address` ("host:port") is refused: nothing listens there.
    Any other outcome, a connection included, is False."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return False
    except ConnectionRefusedError:
        return True
    except (OSError, ValueError):
        return False


class LeaderExitWatch:
    """Dials a leader whose link closed, one dial at a time, and keeps the verdict for the tick
    thread. `link_closed` and `take_exited` run on the tick thread; the dial on its own thread."""

    def __init__(self, dial: Callable[[str], bool] = port_refuses) -> None:
        self._dial = dial
        self._lock = threading.Lock()
        self._dialing = False
        self._exited: str | None = None

    def link_closed(self, leader_address: str) -> None:
        with self._lock:
            if self._dialing:
                return
            self._dialing = True
        threading.Thread(target=self._check, args=(leader_address,), name="raftcron-leader-dial", daemon=True).start()

    def _check(self, leader_address: str) -> None:
        refused = False
        try:
            refused = self._dial(leader_address)
        finally:
            with self._lock:
                self._dialing = False
                if refused:
                    self._exited = leader_address

    def take_exited(self) -> str | None:
        """The address of a leader found exited since the last call, once."""
        with self._lock:
            exited, self._exited = self._exited, None
        return exited

    @property
    def dialing(self) -> bool:
        with self._lock:
            return self._dialing


class LeaderExitMixin:
    """In front of pysyncobj's SyncObj: a follower whose leader exited stands after its turn
    (`election_delay_s`) instead of its election timeout. `leader_exit_watch` None: off."""

    leader_exit_watch: LeaderExitWatch | None = None
    # The term in which this follower saw its leader's link close (None: not since it last stood).
    _leader_lost_in_term: int | None = None

    def peer_link_closed(self, node) -> None:
        """The transport lost its link to `node` (tick thread)."""
        watch = self.leader_exit_watch
        if watch is None or getattr(self, RAFT_STATE) != RaftState.FOLLOWER:
            return
        leader = self._getLeader()  # type: ignore[attr-defined]
        if leader is None or leader.address != node.address:
            return
        self._leader_lost_in_term = getattr(self, CURRENT_TERM)
        watch.link_closed(node.address)

    def _stand_if_leader_exited(self) -> None:
        """At the start of a tick: bring the election deadline forward if the leader exited and
        nothing has happened since that makes standing wrong: a leader heard from, a vote given
        in a newer term, this node standing already."""
        watch = self.leader_exit_watch
        exited = watch.take_exited() if watch is not None else None
        if exited is None:
            return
        lost_in_term, self._leader_lost_in_term = self._leader_lost_in_term, None
        if getattr(self, RAFT_STATE) != RaftState.FOLLOWER:
            return
        leader = self._getLeader()  # type: ignore[attr-defined]
        if leader is not None and leader.address != exited:
            return
        term, voted_for = getattr(self, CURRENT_TERM), getattr(self, VOTED_FOR)
        # In a newer term this follower either voted (stay put: that candidate is winning) or
        # refused a candidate whose log was behind its own (stand: it may be the one that wins).
        if term != lost_in_term and voted_for is not None:
            return
        self_address = self.selfNode.address  # type: ignore[attr-defined]
        voters = [node.address for node in self.otherNodes]  # type: ignore[attr-defined]
        delay_s = election_delay_s(self_address, voters, exited)
        deadline = pysyncobj_monotonic() + delay_s
        if deadline < getattr(self, ELECTION_DEADLINE):
            setattr(self, ELECTION_DEADLINE, deadline)
            log.warning(
                "raft: the leader at %s exited (its Raft port refuses connections); standing for election in %.2fs",
                exited,
                delay_s,
            )
