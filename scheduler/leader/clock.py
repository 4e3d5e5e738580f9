"""The leader's clock for one epoch: its wall clock, never ahead of what its monotonic clock allows.

Mirrors the core's bound (scheduler/core/clock.py) so the loops plan with the time
the core will accept; the core stays the judge.
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

    def read(self) -> tuple[int, int]:
        """(issued_at_us, monotonic_us) to stamp on an epoch command."""
        mono = self.mono_us()
        elapsed_us = max(0, mono - self.anchor_mono_us)
        bound_us = self.anchor_now_us + elapsed_us + elapsed_us * MAX_DRIFT_PPM // 1_000_000 + SLACK_US
        return min(self.wall_us(), bound_us), mono

    def now_us(self) -> int:
        return self.read()[0]
