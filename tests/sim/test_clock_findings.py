"""Regressions of two clock bugs the simulation's clock faults found (both fixed since).

1. LeaderClock bounded the wall clock from the anchor taken when the epoch opened, while the
core re-anchors on every unclamped reading: the 1,000 ppm drift allowance accumulated on the
leader's side only, so after an hour of leadership and a forward step of its wall clock the
leader read 3.6 s beyond what the core accepts. Every slot was then due for the leader
before the core agreed, and the trigger loop proposed refused ClaimRuns without sleeping.

2. A leader whose wall clock was behind replicated time (its predecessor's clock was fast)
planned with its own clock, bounded from below by nothing: until its clock caught up, the
reaper expired no lease and the trigger claimed no slot (minutes, with the chaos issue's
+-90 s skew).

The clocks are built the way LeaderLifecycle builds them: following the core's current anchor.
"""

from __future__ import annotations

import threading
import time

from scheduler.core import State, apply
from scheduler.core.clock import bounded_now_us
from scheduler.core.commands import (
    AdvanceTime,
    ApplyJobs,
    ClaimLeadership,
    GrantLeases,
    JobUpsert,
    RunRef,
    TriggerRun,
)
from scheduler.core.model import JobSpec
from scheduler.leader.clock import LeaderClock
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.leader.reaper import overdue
from scheduler.leader.trigger import TriggerLoop
from tests.fakes import ImmediateRaftLog

S = 1_000_000
T0 = 1_780_000_000 * S
HOUR_OF_TICKS = 7200  # AdvanceTime every 0.5 s, wall and monotonic clocks in step


class _Clocks:
    """A wall and a monotonic clock that follow real time from chosen readings, plus a step."""

    def __init__(self, wall_us: int, mono_us: int) -> None:
        self.wall_offset = wall_us - time.time_ns() // 1000
        self.mono_offset = mono_us - time.monotonic_ns() // 1000

    def wall(self) -> int:
        return time.time_ns() // 1000 + self.wall_offset

    def mono(self) -> int:
        return time.monotonic_ns() // 1000 + self.mono_offset


def _an_hour_of_leadership() -> tuple[State, int, int, int]:
    """State after n1 led for an hour with a well-behaved clock: (state, index, wall, mono)."""
    state, wall, mono = State(), T0, 500 * S
    apply(state, ClaimLeadership(wall, "n1", 1, mono), 1)
    index = 1
    for _ in range(HOUR_OF_TICKS):
        wall, mono, index = wall + S // 2, mono + S // 2, index + 1
        apply(state, AdvanceTime(wall, state.epoch, mono), index)
    return state, index, wall, mono


def _anchor_of(state: State):
    return lambda: (state.clock_anchor_now_us, state.clock_anchor_mono_us)


def test_the_leader_clock_never_reads_ahead_of_what_the_core_accepts():
    state, _, wall, mono = _an_hour_of_leadership()
    # NTP steps the wall clock +60 s
    clock = LeaderClock(T0, 500 * S, lambda: wall + 60 * S, lambda: mono, _anchor_of(state))
    issued_us, mono_us = clock.read()
    assert issued_us <= bounded_now_us(state, mono_us), (
        f"the leader reads {(issued_us - bounded_now_us(state, mono_us)) / S:.1f}s beyond the core's bound"
    )


def test_the_trigger_loop_does_not_spin_after_a_forward_clock_step():
    state, index, wall, mono = _an_hour_of_leadership()
    clocks = _Clocks(wall, mono)
    spec = JobSpec(id="every-second", schedule="* * * * * *", target_kind="handler", target="noop", jitter="pinned")
    first_slot = (state.now_us // S + 1) * S
    index += 1
    apply(state, ApplyJobs(state.now_us, "test", "r1", (JobUpsert(spec, 0, first_slot),)), index)
    raftlog = ImmediateRaftLog(state, index)
    clocks.wall_offset += 60 * S  # NTP steps the leader's wall clock a minute forward
    clock = LeaderClock(T0, 500 * S, clocks.wall, clocks.mono, _anchor_of(state))
    term = LeaderTerm(epoch=state.epoch, term=1, clock=clock)
    loop = TriggerLoop(term, raftlog, batch_size=1000, max_sleep_s=1.0, propose_timeout_s=1.0)
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    time.sleep(1.0)
    term.stopping.set()
    thread.join(timeout=5)
    # One slot per second became due: a handful of ClaimRuns entries at most.
    assert raftlog.claim_entries <= 5, f"{raftlog.claim_entries} ClaimRuns entries in one second"


def test_a_slow_clocked_leader_still_expires_an_abandoned_lease_in_time():
    state = State()
    fast_wall, mono_1, mono_2 = T0 + 90 * S, 10 * S, 7_000 * S  # n1 runs 90 s fast; n2 is right
    apply(state, ClaimLeadership(fast_wall, "n1", 1, mono_1), 1)
    spec = JobSpec(id="manual", schedule="0 0 1 1 *", target_kind="handler", target="noop", jitter="pinned")
    apply(state, ApplyJobs(fast_wall, "test", "r1", (JobUpsert(spec, 0, 0),)), 2)
    apply(state, TriggerRun(fast_wall, "manual", "test", "t1"), 3)
    (run,) = state.runs["manual"]
    apply(state, GrantLeases(fast_wall, state.epoch, "w1", 2 * S, (RunRef("manual", run.scheduled_us),), mono_1), 4)
    assert run.status == "leased"  # w1 holds it, then stops heartbeating; n1 dies
    true_now = T0
    apply(state, ClaimLeadership(true_now, "n2", 2, mono_2), 5)
    true_now, mono_2 = true_now + 10 * S, mono_2 + 10 * S  # ten seconds later: five TTLs
    clock = LeaderClock(
        state.clock_anchor_now_us, state.clock_anchor_mono_us, lambda: true_now, lambda: mono_2, _anchor_of(state)
    )
    expiries, _ = overdue(state, clock.read()[0])
    assert expiries, "n2's reaper sees nothing to expire: the lease outlives five TTLs"
