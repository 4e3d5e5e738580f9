"""The leader raises the cluster version once every voter reads the newer log format.

Each node advertises the newest format it reads in its keepalives (replication/upgrades.py).
Once every current voter (pysyncobj's voter set, this node included) has advertised at least N
within the last few seconds, the leader proposes SetClusterVersion(N); from then on commands of
format N may be proposed. The version never falls: a node of an older version that joins later
is refused by `raftcron cluster add`, and one restarted on an older binary halts on the first
entry it cannot decode.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from scheduler.core.commands import SetClusterVersion
from scheduler.core.vocabulary import RejectionCode
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.upgrades")

CHECK_INTERVAL_S = 1.0


def next_cluster_version(current: int, voters: Iterable[str], advertised: dict[str, int]) -> int | None:
    """The version to raise to, or None: the oldest format any voter advertised, when that is above
    `current` and every voter has been heard (pure: tests call it directly)."""
    voters = list(voters)
    if not voters or any(voter not in advertised for voter in voters):
        return None
    target = min(advertised[voter] for voter in voters)
    return target if target > current else None


class ClusterVersionLoop:
    def __init__(
        self, term: LeaderTerm, raftlog: RaftLog, timeout_s: float, interval_s: float = CHECK_INTERVAL_S
    ) -> None:
        self._term = term
        self._raftlog = raftlog
        self._timeout_s = timeout_s
        self._interval_s = interval_s

    def __call__(self) -> None:
        while not self._term.stopping.is_set():
            self.step()
            self._term.stopping.wait(self._interval_s)

    def step(self) -> None:
        with self._raftlog.read() as state:
            current = state.cluster_version
        target = next_cluster_version(current, self._raftlog.raft_members(), self._raftlog.log_formats())
        if target is None:
            return
        now_us, mono_us = self._term.clock.read()
        try:
            result = self._raftlog.submit(SetClusterVersion(now_us, target, self._term.epoch, mono_us), self._timeout_s)
        except ReplicationError as exc:  # a voter went quiet or leadership moved: the next step retries
            log.info("cluster version not raised to %d: %s", target, exc)
            return
        if result.accepted:
            log.info("cluster version %d -> %d: every voter reads log format %d", current, target, target)
        elif result.rejection.code == RejectionCode.STALE_EPOCH:
            self._term.depose("a newer epoch fenced SetClusterVersion")
        else:
            log.warning("cluster version not raised to %d: %s", target, result.rejection.message)
