"""The tick watch counts Raft ticks that start late, keeps the longest gap and logs stalls
without flooding the log."""

from __future__ import annotations

import logging

import pytest

from scheduler.replication.tickwatch import STALL_S, WARN_EVERY_S, TickWatch


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ticks(watch: TickWatch, clock: Clock, gaps_s: list[float], role: str = "leader") -> None:
    for gap_s in gaps_s:
        clock.now += gap_s
        watch.tick_started(role)


def test_on_time_ticks_are_not_stalls():
    clock = Clock()
    watch = TickWatch(clock)
    ticks(watch, clock, [0.0, 0.005, 0.006, 0.2])
    assert (watch.stalls, watch.longest_gap_s) == (0, pytest.approx(0.2))


def test_a_stall_is_counted_logged_and_kept_as_the_longest(caplog):
    clock = Clock()
    watch = TickWatch(clock)
    with caplog.at_level(logging.WARNING, logger="raftcron.replication"):
        ticks(watch, clock, [0.0, 0.005, 1.75, 0.005], role="follower")
    assert watch.stalls == 1
    assert watch.longest_gap_s == pytest.approx(1.75)
    (record,) = caplog.records
    assert "raft tick stalled 1.75s as follower" in record.getMessage()


def test_stalls_in_a_burst_are_folded_into_the_next_warning(caplog):
    clock = Clock()
    watch = TickWatch(clock)
    with caplog.at_level(logging.WARNING, logger="raftcron.replication"):
        ticks(watch, clock, [0.0, STALL_S + 0.1, STALL_S + 0.3, STALL_S + 0.2, STALL_S + 0.1])  # within WARN_EVERY_S
        assert len(caplog.records) == 1
        ticks(watch, clock, [WARN_EVERY_S])  # the next warning is due: it tells of the 3 folded
    assert watch.stalls == 5
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert f"(3 more since the last warning, the longest {STALL_S + 0.3:.2f}s)" in messages[1]
