"""A replica's records stay out of the garbage collector's sight: a full collection walks every
tracked object holding the GIL, and a replica holds millions of records (a stalled Raft tick)."""

from __future__ import annotations

import gc

from msgspec.structs import replace as msgspec_replace

from scheduler.core import State, apply, decode_command, decode_snapshot, encode_command, encode_snapshot
from scheduler.core.commands import (
    ApplyJobs,
    ClaimLeadership,
    ClaimRuns,
    CompleteRuns,
    Completion,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    RunRef,
    SlotClaim,
)
from scheduler.core.model import SECOND_US, SUCCEEDED, JobSpec

T0_US = 1_800_000_000 * SECOND_US


def replica_with_a_finished_run() -> State:
    state = State()
    commands = [
        ClaimLeadership(issued_at_us=T0_US, node_id="n1", term=1, monotonic_us=T0_US),
        ApplyJobs(
            issued_at_us=T0_US,
            author="t",
            request_id="req-1",
            upserts=(
                JobUpsert(
                    JobSpec(id="a", schedule="* * * * * *", target_kind="handler", target="t.a"), 0, T0_US + SECOND_US
                ),
            ),
        ),
        ClaimRuns(
            issued_at_us=T0_US + SECOND_US,
            epoch=1,
            claims=(SlotClaim("a", T0_US + SECOND_US, T0_US + 2 * SECOND_US, 1),),
            monotonic_us=T0_US + SECOND_US,
        ),
        GrantLeases(
            issued_at_us=T0_US + SECOND_US + 1,
            epoch=1,
            grants=(RunRef("a", T0_US + SECOND_US),),
            worker_id="w1",
            lease_ttl_us=10 * SECOND_US,
            monotonic_us=T0_US + SECOND_US + 1,
        ),
    ]
    for index, command in enumerate(commands, start=1):  # decoded, as a follower gets them
        assert apply(state, decode_command(encode_command(command)), index).accepted
    done = CompleteRuns(
        issued_at_us=T0_US + SECOND_US + 2,
        completions=(Completion(LeaseRef("a", T0_US + SECOND_US, 4), worker_id="w1", outcome="success"),),
    )
    assert apply(state, decode_command(encode_command(done)), 5).accepted
    return state


def records(state: State) -> list[object]:
    job = state.jobs["a"]
    run = state.get_run("a", T0_US + SECOND_US)
    assert run is not None and run.status == SUCCEEDED and len(run.attempts) == 1
    remembered = state.request_results["req-1"]
    return [
        job,
        job.spec,
        job.spec.retry,
        job.spec.misfire,
        job.spec.history,
        run,
        run.attempts[0],
        remembered,
        *remembered.events,
        *state.history.values(),
    ]


def test_jobs_runs_attempts_and_remembered_results_are_not_tracked() -> None:
    for state in (replica_with_a_finished_run(), decode_snapshot(encode_snapshot(replica_with_a_finished_run()))):
        tracked = [type(record).__name__ for record in records(state) if gc.is_tracked(record)]
        assert tracked == []


def test_a_run_keeps_its_attempts_in_a_tuple() -> None:
    # A list is tracked whatever it holds; a tuple of untracked records is untracked after its
    # first collection, and every queued run shares the one empty tuple.
    state = replica_with_a_finished_run()
    run = state.get_run("a", T0_US + SECOND_US)
    gc.collect()
    assert isinstance(run.attempts, tuple) and not gc.is_tracked(run.attempts)


def test_the_leaders_queue_entries_are_not_tracked() -> None:
    from scheduler.leader.dispatch import _Entry

    entry = _Entry(ready_us=1, priority=0, arrival=7, target="handler:t.a", job_id="a", scheduled_us=2)
    queued = (entry.ready_us, entry.arrival, entry)  # as the queue's heaps hold it
    gc.collect()
    assert not gc.is_tracked(entry) and not gc.is_tracked(queued)


def test_runs_of_one_grant_share_equal_instants() -> None:
    # A replica holds a million finished runs: an equal instant held as one int object, not one
    # per run, is 32 bytes a run. Decoded commands bring fresh ints for every field.
    state = State()
    slot_us, spread_us = T0_US + SECOND_US, T0_US + SECOND_US + 7
    spec = JobSpec(id="a", schedule="* * * * * *", target_kind="handler", target="t.a")
    commands = [
        ClaimLeadership(issued_at_us=T0_US, node_id="n1", term=1, monotonic_us=T0_US),
        ApplyJobs(
            issued_at_us=T0_US,
            author="t",
            request_id="",
            upserts=(JobUpsert(spec, 0, slot_us), JobUpsert(msgspec_replace(spec, id="b"), 0, slot_us)),
        ),
        ClaimRuns(
            issued_at_us=slot_us,
            epoch=1,
            monotonic_us=slot_us,
            claims=(
                SlotClaim("a", slot_us, slot_us + SECOND_US, 1, effective_us=slot_us),
                SlotClaim("b", slot_us, slot_us + SECOND_US, 1, effective_us=spread_us),
            ),
        ),
        GrantLeases(
            issued_at_us=slot_us + 10,
            epoch=1,
            worker_id="w1",
            lease_ttl_us=10 * SECOND_US,
            monotonic_us=slot_us + 10,
            grants=(RunRef("a", slot_us), RunRef("b", slot_us)),
        ),
    ]
    for index, command in enumerate(commands, start=1):
        assert apply(state, decode_command(encode_command(command)), index).accepted
    a, b = state.get_run("a", slot_us), state.get_run("b", slot_us)
    assert a.effective_us is a.scheduled_us and b.effective_us == spread_us
    assert a.deadline_us is b.deadline_us and a.deadline_us == slot_us + 10 + spec.timeout_us
