"""The read index (Raft section 6.4): a leader serves a linearizable read without a log entry.

A leader may answer from its state once (1) it has committed an entry of its own term (before
that, its commit index may lag what an earlier leader committed), (2) a majority, itself
included, has answered an append after the read began (then no newer leader had been elected
when the read began, so no write it could have acknowledged is missing here), all within one
term; then it reads at its commit index once that is applied.

`read_index_step` is that decision on pysyncobj's facts (`LeaderFacts`), pure; `ReadConfirmer`
takes it on the Raft tick thread for every waiting read (RaftLog.read_index waits on it).

What is left: an answer counts when the leader handles it after the read began, whenever the
follower sent it. A follower's answer held up on its way (in the network, or unread while the
leader's tick thread stalled) past the moment that follower voted for a newer leader, while that
newer leader's own message to this node is held up longer still, would confirm a deposed leader.
Raft's read index has the same window unless answers name the request they answer, which
pysyncobj's do not.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.replication.pysyncobj_compat import (
    COMMIT_INDEX,
    CURRENT_TERM,
    LAST_RESPONSE_TIME,
    NOOP_INDEX,
    OTHER_NODES,
    RAFT_STATE,
    SEND_APPEND_ENTRIES,
    RaftState,
)
from scheduler.replication.pysyncobj_compat import monotonic as pysyncobj_monotonic

CONFIRMED, WAIT, REFUSED = "confirmed", "wait", "refused"

# `leader_facts` reads pysyncobj's private state, named in pysyncobj_compat.py. Before moving its
# version pin, check the new release's leader code (next_node_idx answers, the no-op of a new
# term, the commit rule) against this module.


@dataclass(frozen=True)
class LeaderFacts:
    leading: bool
    term: int
    commit_index: int
    # pysyncobj's no-op entry of this term (appended when the node became leader); None: none yet.
    term_first_index: int | None
    # Other voters -> the leader's monotonic time of their last answer to an append.
    answered_s: Mapping[str, float]


@dataclass(frozen=True)
class ReadIndexStep:
    outcome: str
    reason: str = ""


def read_index_step(facts: LeaderFacts, start_term: int, started_s: float) -> ReadIndexStep:
    if not facts.leading:
        return ReadIndexStep(REFUSED, "this node is not the leader")
    if facts.term != start_term:
        # A new term began during the read: answers counted since may belong to the old one.
        return ReadIndexStep(REFUSED, f"leadership changed during the read (term {start_term} -> {facts.term})")
    if facts.term_first_index is None or facts.commit_index < facts.term_first_index:
        return ReadIndexStep(WAIT, "the leader has not committed an entry of its term yet")
    voters = len(facts.answered_s) + 1
    answered = 1 + sum(1 for at_s in facts.answered_s.values() if at_s > started_s)
    if answered * 2 > voters:
        return ReadIndexStep(CONFIRMED)
    return ReadIndexStep(WAIT, f"{answered} of {voters} voters confirmed this leader since the read began")


def leader_facts(syncobj) -> LeaderFacts:
    """Read the facts off a running SyncObj from any thread: each read is one attribute or a
    copy of a small collection the tick thread may change meanwhile (copied again then)."""
    term = getattr(syncobj, CURRENT_TERM)
    leading = getattr(syncobj, RAFT_STATE) == RaftState.LEADER
    commit_index = getattr(syncobj, COMMIT_INDEX)
    for attempt in range(10):
        try:
            others = set(getattr(syncobj, OTHER_NODES))
            responses = dict(getattr(syncobj, LAST_RESPONSE_TIME))
            break
        except RuntimeError:  # changed size while copied
            if attempt == 9:
                raise
    answered_s = {node.id: responses.get(node, float("-inf")) for node in others}
    return LeaderFacts(leading, term, commit_index, getattr(syncobj, NOOP_INDEX), answered_s)


@dataclass
class _PendingRead:
    started_s: float
    start_term: int
    done: threading.Event = field(default_factory=threading.Event)
    step: ReadIndexStep = ReadIndexStep(WAIT, "no tick of the Raft thread since the read began")
    commit_index: int = 0


class ReadConfirmer:
    """Decides waiting reads on pysyncobj's tick thread, as a tick callback: there the facts are
    read between two passes over the sockets, never while a batch of messages is half handled
    (answers from followers counted, the newer leader's append in the same batch not yet seen).
    While reads wait it sends appends at once, instead of at the next append period (10 ms):
    at most one extra round per tick, however many reads wait."""

    def __init__(self, syncobj) -> None:
        self._syncobj = syncobj
        self._lock = threading.Lock()
        self._waiting: list[_PendingRead] = []

    def confirm(self, timeout_s: float) -> tuple[ReadIndexStep, int]:
        """From a read's thread: the step that ended the wait (WAIT: out of time), and the
        commit index to read at when it is CONFIRMED."""
        pending = _PendingRead(pysyncobj_monotonic(), getattr(self._syncobj, CURRENT_TERM))
        with self._lock:
            self._waiting.append(pending)
        if not pending.done.wait(timeout_s):
            with self._lock:
                if pending in self._waiting:
                    self._waiting.remove(pending)
        return pending.step, pending.commit_index

    def __call__(self) -> None:  # on pysyncobj's tick thread
        with self._lock:
            if not self._waiting:
                return
            waiting = list(self._waiting)
        facts = leader_facts(self._syncobj)
        decided = []
        for pending in waiting:
            pending.step = read_index_step(facts, pending.start_term, pending.started_s)
            if pending.step.outcome != WAIT:
                pending.commit_index = facts.commit_index
                decided.append(pending)
        with self._lock:
            self._waiting = [pending for pending in self._waiting if pending not in decided]
            still_waiting = bool(self._waiting)
        for pending in decided:
            pending.done.set()
        if still_waiting and facts.leading:
            getattr(self._syncobj, SEND_APPEND_ENTRIES)()
