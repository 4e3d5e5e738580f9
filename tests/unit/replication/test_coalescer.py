"""The coalescer: callers' items share log entries, each caller waits once for its own events."""

from __future__ import annotations

import threading

import pytest

from scheduler.core.commands import CompleteRuns
from scheduler.core.results import Result, rejected
from scheduler.replication import NotLeader
from scheduler.replication.coalescer import Coalescer, RejectedBatch

WAIT_S = 10.0


class ScriptedLog:
    """Stands in for the Raft log: answers each entry with one event per item, (entry, item),
    or with what `answers` holds for that entry (an exception to raise, or a Result)."""

    def __init__(self, answers: dict[int, object] | None = None, hold: threading.Event | None = None) -> None:
        self.entries: list[tuple] = []
        self.answers = answers or {}
        self.hold = hold

    def submit(self, command: CompleteRuns, timeout_s: float) -> Result:
        if self.hold is not None:
            assert self.hold.wait(WAIT_S)
        number = len(self.entries)
        self.entries.append(command.completions)
        answer = self.answers.get(number)
        if isinstance(answer, BaseException):
            raise answer
        if answer is not None:
            return answer
        return Result(index=number + 1, events=tuple((number, item) for item in command.completions))


def coalescer(log: ScriptedLog, **kwargs) -> Coalescer:
    return Coalescer("test", log, lambda items: CompleteRuns(0, tuple(items)), timeout_s=5.0, **kwargs)


def test_each_caller_gets_the_events_of_its_own_items_in_order() -> None:
    hold = threading.Event()  # keeps the first entry open, so later callers pile up behind it
    log = ScriptedLog(hold=hold)
    batcher = coalescer(log)
    try:
        first = batcher.submit(["a0"])
        later = [batcher.submit([f"{caller}-{i}" for i in range(3)]) for caller in "bcd"]
        hold.set()
        assert first.result(WAIT_S) == [(0, "a0")]
        for caller, submission in zip("bcd", later):
            assert [item for _, item in submission.result(WAIT_S)] == [f"{caller}-{i}" for i in range(3)]
    finally:
        batcher.close()
    assert sum(len(entry) for entry in log.entries) == 10
    assert len(log.entries) < 10  # the waiting callers shared entries


def test_items_split_over_several_entries_are_all_answered() -> None:
    log = ScriptedLog()
    batcher = coalescer(log, max_items=4)
    try:
        events = batcher.submit([f"i{n}" for n in range(10)]).result(WAIT_S)
    finally:
        batcher.close()
    assert [item for _, item in events] == [f"i{n}" for n in range(10)]
    assert [len(entry) for entry in log.entries] == [4, 4, 2]
    assert [entry for entry, _ in events] == [0] * 4 + [1] * 4 + [2] * 2


def test_a_failed_entry_fails_every_submission_with_items_in_it() -> None:
    log = ScriptedLog(answers={1: NotLeader("n2")})
    batcher = coalescer(log, max_items=4)
    try:
        split = batcher.submit([f"i{n}" for n in range(6)])  # entries 0 (4 items) and 1 (2 items)
        with pytest.raises(NotLeader):
            split.result(WAIT_S)
        assert [item for _, item in batcher.submit(["next"]).result(WAIT_S)] == ["next"]  # the flusher goes on
    finally:
        batcher.close()


def test_a_rejected_entry_raises_rejected_batch() -> None:
    log = ScriptedLog(answers={0: rejected(1, "too_many", "no room")})
    batcher = coalescer(log)
    try:
        with pytest.raises(RejectedBatch, match="too_many: no room"):
            batcher.submit(["x"]).result(WAIT_S)
    finally:
        batcher.close()


def test_nothing_submitted_is_answered_at_once_and_an_undecided_entry_times_out() -> None:
    hold = threading.Event()
    batcher = coalescer(ScriptedLog(hold=hold))
    try:
        assert batcher.submit([]).result(0) == []
        waiting = batcher.submit(["x"])
        with pytest.raises(TimeoutError):
            waiting.result(0.05)
        hold.set()
        assert waiting.result(WAIT_S) == [(0, "x")]
    finally:
        hold.set()
        batcher.close()


def test_an_entry_answering_the_wrong_number_of_events_fails_its_callers_not_the_flusher() -> None:
    log = ScriptedLog(answers={0: Result(index=1, events=("only one",))})
    batcher = coalescer(log)
    try:
        with pytest.raises(RuntimeError, match="1 events for 2 items"):
            batcher.submit(["a", "b"]).result(WAIT_S)
        assert [item for _, item in batcher.submit(["next"]).result(WAIT_S)] == ["next"]
    finally:
        batcher.close()
