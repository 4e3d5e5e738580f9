"""Raft's AppendEntries receiver rules 3 and 4, which pysyncobj 0.3.17 does not follow.

pysyncobj's follower deletes every entry after `prevLogIdx` whenever it holds more, then appends
what the message carries. A duplicate or reordered append (a leader that re-sends a range after
two 'reset' answers, a heartbeat sent with a lagging next index) therefore truncates entries the
follower already acknowledged, committed and applied: it logs CRITICAL "truncating already-applied
log entries", and until they are sent again a majority may no longer hold a committed entry.
Raft (section 5.3) deletes from the first entry that *conflicts* (same index, other term) and
appends only entries not already in the log; hashicorp/raft made the same fix for the same reason.

`plan_append` is the pure decision; `FollowerAppendMixin` applies it in front of pysyncobj's own
message handler, rewriting the message so pysyncobj only ever truncates real conflicts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scheduler.replication.pysyncobj_compat import (
    CURRENT_TERM,
    ON_MESSAGE_RECEIVED,
    RAFT_LOG,
    SEND_NEXT_NODE_IDX,
    overrides,
)

Entry = tuple  # pysyncobj's (command bytes, index, term)


@dataclass(frozen=True)
class PassOn:
    """Hand pysyncobj this (possibly trimmed) append: anything it truncates is a true conflict."""

    prev_index: int
    prev_term: int
    entries: Sequence[Entry]


@dataclass(frozen=True)
class AlreadyHeld:
    """Every entry of the message is already in the log: change nothing, acknowledge up to here."""

    verified_index: int


def plan_append(
    term_at: Callable[[int], int | None], prev_index: int, prev_term: int, entries: Sequence[Entry]
) -> PassOn | AlreadyHeld | None:
    """Decide what a follower does with an append. `term_at(i)` is the local term of entry i, or
    None when the log does not hold i. None means: leave the message alone (its previous entry is
    missing or conflicts, which pysyncobj answers with a reset)."""
    if term_at(prev_index) != prev_term:
        return None
    held = 0
    for entry in entries:
        if term_at(entry[1]) != entry[2]:
            break
        held += 1
    if held == len(entries):
        return AlreadyHeld(verified_index=prev_index + len(entries))
    if held == 0:
        return PassOn(prev_index, prev_term, entries)
    last_held = entries[held - 1]
    return PassOn(last_held[1], last_held[2], entries[held:])


class FollowerAppendMixin:
    """Mix into a pysyncobj SyncObj subclass (before SyncObj in the bases).

    pysyncobj's private names are mangled, and looked up on the instance, so a subclass can stand
    in front of them; the transport callback is bound at construction as the instance's
    `__onMessageReceived` (ON_MESSAGE_RECEIVED in pysyncobj_compat.py), which resolves to the
    method below.
    """

    @overrides(ON_MESSAGE_RECEIVED)
    def _append_conflicts_only(self, node, message):
        handle = getattr(super(), ON_MESSAGE_RECEIVED)
        if not self._is_plain_append(message):
            return handle(node, message)
        plan = plan_append(
            self._local_term_at, message["prevLogIdx"], message["prevLogTerm"], message.get("entries", [])
        )
        if plan is None:
            return handle(node, message)
        if isinstance(plan, PassOn):
            return handle(
                node,
                {
                    **message,
                    "prevLogIdx": plan.prev_index,
                    "prevLogTerm": plan.prev_term,
                    "entries": list(plan.entries),
                },
            )
        # The header alone makes pysyncobj follow the leader, reset its election timer and advance
        # the commit index, which must not pass what this message verified (copycat #265).
        header = {k: v for k, v in message.items() if k not in ("prevLogIdx", "prevLogTerm", "entries")}
        header["commit_index"] = min(message["commit_index"], plan.verified_index)
        handle(node, header)
        getattr(self, SEND_NEXT_NODE_IDX)(node, nextNodeIdx=plan.verified_index + 1, success=True)
        return None

    def _is_plain_append(self, message) -> bool:
        return (
            message.get("type") == "append_entries"
            and "prevLogIdx" in message
            and "transmission" not in message
            and message["term"] >= getattr(self, CURRENT_TERM)
        )

    def _local_term_at(self, index: int) -> int | None:
        journal = getattr(self, RAFT_LOG)
        offset = index - journal[0][1]
        if offset < 0 or offset >= len(journal):
            return None
        return journal[offset][2]
