"""How late the Raft tick thread runs: the gap between the starts of two ticks.

pysyncobj does all of Raft on one thread that ticks every 5 ms. A tick that starts seconds
late means this node sent no append, vote or answer meanwhile: followers start elections
after 0.5-1.5 s of silence and a leader steps down after its fallback timeout. A stall is the
first thing to look at when leadership changes without a crash, so every node counts them,
keeps the longest, and logs each one (at most one line per WARN_EVERY_S, with the count and
the longest of the ones it folded in).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("raftcron.replication")

# Half the shortest election timeout: a gap this long already costs a follower's patience.
STALL_S = 0.25
WARN_EVERY_S = 10.0


class TickWatch:
    def __init__(self, clock: Callable[[], float] = time.monotonic, stall_s: float = STALL_S) -> None:
        self._clock = clock
        self._stall_s = stall_s
        self._last_start: float | None = None
        self._next_warning = 0.0
        self._unreported = 0
        self._unreported_longest_s = 0.0
        self.stalls = 0
        self.longest_gap_s = 0.0

    def tick_started(self, role: str) -> None:
        now = self._clock()
        last, self._last_start = self._last_start, now
        if last is None:
            return
        gap_s = now - last
        self.longest_gap_s = max(self.longest_gap_s, gap_s)
        if gap_s < self._stall_s:
            return
        self.stalls += 1
        if now < self._next_warning:
            self._unreported += 1
            self._unreported_longest_s = max(self._unreported_longest_s, gap_s)
            return
        folded = ""
        if self._unreported:
            folded = f" ({self._unreported} more since the last warning, the longest {self._unreported_longest_s:.2f}s)"
        log.warning("raft tick stalled %.2fs as %s: no Raft message was sent or read meanwhile%s", gap_s, role, folded)
        self._next_warning, self._unreported, self._unreported_longest_s = now + WARN_EVERY_S, 0, 0.0
