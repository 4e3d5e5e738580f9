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


class _Record:
    """A job record as far as the owner lists read it."""

    def __init__(self, owner: str) -> None:
        self.body = spec("x", owner=owner)


def test_owner_lists_hold_every_job_of_the_owner_under_random_changes_and_owner_moves():
    rng = random.Random(11)
    state, index = State(), JobIds()
    owners = ["alice", "bob", "carol"]

    def change(upserts=(), removals=()):
        for job_id in upserts:
            state.jobs[job_id] = _Record(rng.choice(owners))  # an update may move the job to another owner
        for job_id in removals:
            state.jobs.pop(job_id, None)
        command = ApplyJobs(0, "a", "", tuple(JobUpsert(spec(i), 0, 0) for i in upserts), tuple(removals))
        index.on_apply(command, ACCEPTED, state)

    change(upserts=[f"j{n:04d}" for n in range(300)])
    for step in range(200):
        pool = [f"j{rng.randrange(500):04d}" for _ in range(rng.randrange(1, 12))]
        change(upserts=pool[::2], removals=pool[1::2] if step % 3 else ())
        for owner in owners:
            listed = index.sorted_ids(state, owner)
            assert listed == sorted(listed) and len(set(listed)) == len(listed)
            truth = sorted(i for i, job in state.jobs.items() if job.body.owner == owner)
            # Every job of the owner, each once; the rest are jobs that moved (the caller checks).
            assert [i for i in listed if i in state.jobs and state.jobs[i].body.owner == owner] == truth
            assert all(i in state.jobs for i in listed), "a deleted job is never listed"
        assert index.sorted_ids(state) == sorted(state.jobs)


def test_an_owners_list_holds_only_that_owners_jobs_without_moves():
    state, index = State(), JobIds()
    for n in range(1_000):
        state.jobs[f"j{n:04d}"] = _Record(f"team-{n % 10}")
    assert index.sorted_ids(state, "team-3") == [f"j{n:04d}" for n in range(3, 1_000, 10)]
    assert index.sorted_ids(state, "nobody") == []
