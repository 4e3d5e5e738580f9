"""Apply committed entries a time budget per tick, so that applying never stalls Raft.

pysyncobj applies every committed entry in the tick that learns of them, and a tick that applies
does nothing else: it neither reads nor sends. A 100,000-run herd is about a hundred claim entries
of 1,000 claims, 10-15 ms of apply each on this project's reference machine, committed together:
the leader's tick stalled 0.7 s and the followers' 0.9-1.2 s, above the 0.5 s election timeout,
and the herd cost three elections (docs/design/apply-budget.md). `ApplyBudgetMixin` applies
entries in chunks sized by what the last one cost until `APPLY_BUDGET_S` is spent, and leaves
the rest to the next tick, which then does not wait in its poll. Commit and replication go on
meanwhile; only the applied index trails, which every reader already waits on.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.replication.pysyncobj_compat import APPLY_LOG_ENTRIES, COMMIT_INDEX, overrides

# Applying stops once a tick has spent this long on it.
APPLY_BUDGET_S = 0.05
# Most entries applied between two looks at the clock (small entries cost microseconds each).
APPLY_CHUNK_MAX = 64


class ApplyBudgetMixin:
    """In front of pysyncobj's SyncObj: `__applyLogEntries` applies at most a budget per tick."""

    # The clock the budget is kept on (a test replaces it with one that its apply advances).
    apply_clock: Callable[[], float] = staticmethod(time.monotonic)
    # The commit index as it was before an apply lowered it: other threads (Status, metrics) read
    # the commit index while a chunk applies, and must not see it go back. Never reset: a commit
    # index only grows, so the larger of the two is the true one at any moment.
    commit_index_held: int = 0

    @property
    def apply_backlog(self) -> int:
        """Committed entries not applied yet."""
        return getattr(self, COMMIT_INDEX) - self.raftLastApplied  # type: ignore[attr-defined]

    @overrides(APPLY_LOG_ENTRIES)
    def _apply_within_budget(self) -> bool:
        apply_some = getattr(super(), APPLY_LOG_ENTRIES)
        commit_index = getattr(self, COMMIT_INDEX)
        self.commit_index_held = commit_index
        clock = self.apply_clock
        deadline = clock() + APPLY_BUDGET_S
        chunk, send_appends = 1, False  # one entry first: its cost sizes the next chunk
        try:
            while (applied := self.raftLastApplied) < commit_index:  # type: ignore[attr-defined]
                # pysyncobj's apply reads only the commit index and the applied index: lowered
                # for the call, it applies this chunk and nothing past it.
                setattr(self, COMMIT_INDEX, min(commit_index, applied + chunk))
                started = clock()
                send_appends = apply_some() or send_appends
                now, done = clock(), self.raftLastApplied - applied  # type: ignore[attr-defined]
                if done == 0 or now >= deadline:
                    break  # an entry it could not apply (retried next tick), or the budget is spent
                per_entry_s = (now - started) / done
                fits = int((deadline - now) / per_entry_s) if per_entry_s > 0 else APPLY_CHUNK_MAX
                chunk = max(1, min(APPLY_CHUNK_MAX, fits))
        finally:
            setattr(self, COMMIT_INDEX, commit_index)
        return send_appends
