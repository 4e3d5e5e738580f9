"""The leader's clock for one epoch: replicated time carried forward by its monotonic clock,
pulled toward its wall clock only as fast as the core accepts.

Mirrors the core's bound (scheduler/core/clock.py) from the same anchor the core re-anchors
to, so the loops plan with exactly the time the core will accept; the core stays the judge.
A wall clock that is behind (a predecessor's clock was fast) does not stall time: the reading
never falls below anchor + monotonic time elapsed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.core.clock import MAX_DRIFT_PPM, SLACK_US


def monotonic_us() -> int:
    return time.monotonic_ns() // 1000


@dataclass(frozen=True)
class LeaderClock:
    anchor_now_us: int
    anchor_mono_us: int
    wall_us: Callable[[], int]
    mono_us: Callable[[], int] = monotonic_us
    # The core's current anchor (replicated), when available; else the fixed one above.
    anchor: Callable[[], tuple[int, int]] | None = None

    def read(self) -> tuple[int, int]:
        """(issued_at_us, monotonic_us) to stamp on an epoch command."""
        anchor_now_us, anchor_mono_us = self.anchor() if self.anchor else (self.anchor_now_us, self.anchor_mono_us)
        mono = self.mono_us()
        elapsed_us = max(0, mono - anchor_mono_us)
        floor_us = anchor_now_us + elapsed_us
        bound_us = floor_us + elapsed_us * MAX_DRIFT_PPM // 1_000_000 + SLACK_US
        return min(max(self.wall_us(), floor_us), bound_us), mono

    def now_us(self) -> int:
        return self.read()[0]
