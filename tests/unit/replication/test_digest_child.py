"""Digests of large states come from a forked child, and the state lock is free meanwhile."""

from __future__ import annotations

import contextlib
import os
import select
import threading

import pytest

from scheduler.core import State, state_digest
from scheduler.core.model import JobSpec
from scheduler.replication.digest import DigestFailed, digest_at

WAIT_S = 10.0


def state_with_jobs(n: int) -> State:
    from scheduler.core.model import Job

    state = State(applied_index=41)
    for i in range(n):
        spec = JobSpec(id=f"j{i}", schedule="0 0 * * *", target_kind="handler", target="t")
        state.jobs[spec.id] = Job.of(spec, version=1, author="t", updated_us=0, cursor_us=0, next_due_us=0)
    return state


class Guarded:
    """A state behind a lock, read as RaftLog.read gives it."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.lock = threading.RLock()

    @contextlib.contextmanager
    def read(self):
        with self.lock:
            yield self.state


def test_a_large_state_is_digested_in_a_child_with_the_same_result() -> None:
    guarded = Guarded(state_with_jobs(30))
    parent = os.getpid()
    pids: list[int] = []

    def digest_recording_pid(state: State) -> str:
        pids.append(os.getpid())  # appended in the child: invisible here unless run in place
        return state_digest(state)

    index, digest = digest_at(guarded.read, digest_recording_pid, fork_min_records=10)
    assert (index, digest) == (41, state_digest(guarded.state))
    assert pids == []  # computed by another process
    in_place = digest_at(guarded.read, digest_recording_pid, fork_min_records=1_000)
    assert in_place == (41, digest) and pids == [parent]


def test_the_state_lock_is_free_while_the_child_computes() -> None:
    guarded = Guarded(state_with_jobs(30))
    started_read, started_write = os.pipe()  # the child says it runs
    go_read, go_write = os.pipe()  # the child waits on it until this process took the lock

    def digest_after_the_signal(state: State) -> str:
        os.write(started_write, b"s")
        os.read(go_read, 1)
        return state_digest(state)

    result: list[tuple[int, str]] = []
    digester = threading.Thread(target=lambda: result.append(digest_at(guarded.read, digest_after_the_signal, 10)))
    digester.start()
    try:
        assert select.select([started_read], [], [], WAIT_S)[0], "the child did not start"
        # The child cannot finish before the write below: if digest_at held the lock until the
        # child's answer, this acquire would time out.
        assert guarded.lock.acquire(timeout=WAIT_S)
        guarded.lock.release()
    finally:
        os.write(go_write, b"x")
        digester.join(WAIT_S)
    assert result == [(41, state_digest(guarded.state))]


def test_a_failing_child_raises_digest_failed() -> None:
    def broken(state: State) -> str:
        raise ValueError("boom")

    with pytest.raises(DigestFailed, match="exited with 1"):
        digest_at(Guarded(state_with_jobs(30)).read, broken, fork_min_records=10)
