"""ListJobs' sorted job ids (scheduler/rpc/job_ids.py): always exactly the state's ids, in order."""

from __future__ import annotations

import random

from scheduler.core.commands import ApplyJobs, JobUpsert
from scheduler.core.results import Result, rejected
from scheduler.core.state import State
from scheduler.core.vocabulary import RejectionCode
from scheduler.rpc.job_ids import JobIds
from tests.fakes import spec

ACCEPTED = Result(index=1)


def applied(state: State, index: JobIds, upserts=(), removals=(), result: Result = ACCEPTED) -> None:
    """What the apply path does: change state.jobs, then tell the listener."""
    if result.rejection is None:
        for job_id in upserts:
            state.jobs[job_id] = object()
        for job_id in removals:
            state.jobs.pop(job_id, None)
    command = ApplyJobs(0, "alice", "", tuple(JobUpsert(spec(i), 0, 0) for i in upserts), tuple(removals))
    index.on_apply(command, result, state)


def test_random_adds_updates_and_deletes_keep_the_list_equal_to_the_state():
    rng = random.Random(7)
    state, index = State(), JobIds()
    applied(state, index, upserts=[f"j{n:04d}" for n in range(500)])
    assert index.sorted_ids(state) == sorted(state.jobs)
    for _ in range(300):
        pool = [f"j{rng.randrange(800):04d}" for _ in range(rng.randrange(1, 20))]
        upserts = pool[: len(pool) // 2]
        removals = pool[len(pool) // 2 :]  # an id may be both: upserted, then removed in one command
        applied(state, index, upserts=upserts, removals=removals)
        if rng.random() < 0.3:
            applied(state, index, upserts=removals[:1])  # deleted and added again before the next read
        assert index.sorted_ids(state) == sorted(state.jobs)


def test_a_rejected_apply_changes_nothing_and_a_restored_state_is_listed_afresh():
    state, index = State(), JobIds()
    applied(state, index, upserts=["b", "a"])
    assert index.sorted_ids(state) == ["a", "b"]
    applied(state, index, upserts=["c"], result=rejected(2, RejectionCode.INVALID, "no"))
    assert index.sorted_ids(state) == ["a", "b"]
    restored = State()  # a snapshot installed: a new State the listener never heard of
    restored.jobs.update({"x": object(), "a": object()})
    assert index.sorted_ids(restored) == ["a", "x"]


def test_updates_of_existing_jobs_reuse_the_list():
    state, index = State(), JobIds()
    applied(state, index, upserts=[f"j{n}" for n in range(100)])
    first = index.sorted_ids(state)
    applied(state, index, upserts=["j5", "j7"])  # changed specs, same ids
    assert index.sorted_ids(state) is first
