"""The read index (Raft section 6.4): a leader serves a linearizable read without a log entry.

A leader may answer from its state once (1) it has committed an entry of its own term (before
that, its commit index may lag what an earlier leader committed), (2) a majority, itself
included, has answered an append after the read began (then no newer leader had been elected
when the read began, so no write it could have acknowledged is missing here), all within one
term; then it reads at its commit index once that is applied.

`read_index_step` is that decision on pysyncobj's facts, pure: RaftLog.read_index gathers the
facts (`LeaderFacts`) and polls the step until it confirms, refuses or runs out of time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pysyncobj.syncobj import _RAFT_STATE

CONFIRMED, WAIT, REFUSED = "confirmed", "wait", "refused"

# The pysyncobj release whose private state `leader_facts` reads, and the names it reads there
# (mangled: `__name` inside SyncObj is `_SyncObj__name`). tests/unit/test_read_index.py fails
# when either changes: check the new release's leader code before moving these.
PYSYNCOBJ_VERSION = "0.3.17"
RAFT_STATE = "_SyncObj__raftState"
CURRENT_TERM = "_SyncObj__raftCurrentTerm"
COMMIT_INDEX = "_SyncObj__raftCommitIndex"
# Index of the no-op a new leader appends (its first entry of the term).
NOOP_INDEX = "_SyncObj__noopIDx"
# node -> monotonic time the leader last processed a `next_node_idx` answer from it.
LAST_RESPONSE_TIME = "_SyncObj__lastResponseTime"
OTHER_NODES = "_SyncObj__otherNodes"
PRIVATE_NAMES = (RAFT_STATE, CURRENT_TERM, COMMIT_INDEX, NOOP_INDEX, LAST_RESPONSE_TIME, OTHER_NODES)


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
    leading = getattr(syncobj, RAFT_STATE) == _RAFT_STATE.LEADER
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
