"""Replicated time: the leader assigns it, bounded by its own monotonic clock.

Only commands stamped with the current epoch (and ClaimLeadership, which opens one)
move time forward; a follower's or a client's clock never does. Within an epoch
the leader's wall clock may advance replicated time no faster than its monotonic
clock (plus a little for NTP slewing): a wall-clock jump of minutes cannot fire
future slots early or expire healthy leases. What was ignored is recorded.
"""

from __future__ import annotations

from scheduler.core.state import State

# NTP slews a clock by at most 500 ppm; allow twice that before calling it a jump.
MAX_DRIFT_PPM = 1_000
SLACK_US = 50_000
# 9999-12-31T23:59:59.999999Z, the last instant a schedule can name. Any u64 decodes as a
# command's time: a clock read past this is taken as this, so every instant derived from
# replicated time (lease expiries, deadlines) still fits the snapshot's 64-bit integers.
MAX_TIME_US = 253_402_300_799_999_999


def open_epoch_clock(state: State, issued_at_us: int, monotonic_us: int) -> None:
    """A new leader's wall clock is accepted as is (never backwards) and anchors the epoch."""
    state.now_us = max(state.now_us, min(issued_at_us, MAX_TIME_US))
    state.clock_anchor_now_us = state.now_us
    state.clock_anchor_mono_us = monotonic_us
    state.clock_ignored_us = 0


def clock_reading(state: State) -> tuple[int, int, int, int]:
    return state.now_us, state.clock_anchor_now_us, state.clock_anchor_mono_us, state.clock_ignored_us


def restore_clock(state: State, reading: tuple[int, int, int, int]) -> None:
    """Undo a time advance: a rejected command changes nothing but its log position."""
    state.now_us, state.clock_anchor_now_us, state.clock_anchor_mono_us, state.clock_ignored_us = reading


def bounded_now_us(state: State, monotonic_us: int) -> int:
    """The latest replicated time the epoch's leader may claim at this monotonic reading."""
    elapsed_us = max(0, monotonic_us - state.clock_anchor_mono_us)
    return state.clock_anchor_now_us + elapsed_us + elapsed_us * MAX_DRIFT_PPM // 1_000_000 + SLACK_US


def advance_epoch_clock(state: State, issued_at_us: int, monotonic_us: int) -> None:
    bound_us = min(bounded_now_us(state, monotonic_us), MAX_TIME_US)
    accepted_us = min(issued_at_us, bound_us)
    state.now_us = max(state.now_us, accepted_us)
    if issued_at_us > bound_us:
        state.clock_ignored_us = issued_at_us - bound_us
    else:
        # Re-anchor only on an unclamped reading, so the slack never accumulates.
        state.clock_ignored_us = 0
        state.clock_anchor_now_us = state.now_us
        state.clock_anchor_mono_us = max(state.clock_anchor_mono_us, monotonic_us)
