"""apply(): log index discipline, the replicated time high-water mark, bounded run retention."""

from __future__ import annotations

import pytest

from scheduler.core import apply, state_digest
from scheduler.core.commands import ClaimLeadership, ReadBarrier
from scheduler.core.model import FINAL_STATUSES, QUEUED, SECOND_US, SKIPPED
from scheduler.core.results import SlotAlreadyAccounted
from scheduler.core.state import RUNS_RETAINED_PER_JOB, State

from tests.fakes import T0_US, Core, FakeClock, claim, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


# -- log indices ---------------------------------------------------------------------


@pytest.mark.parametrize("second_index", [5, 4, 0, -3])
def test_index_must_increase(second_index: int) -> None:
    core = Core()
    core.lead(term=1)
    core.apply(ClaimLeadership(issued_at_us=core.clock.tick(), node_id="n1", term=1), index=5)
    before = state_digest(core.state)
    result = core.apply(ClaimLeadership(issued_at_us=core.clock.tick(100 * SECOND_US), node_id="n2", term=9), index=second_index)
    assert result.rejection is not None and result.rejection.code == "index_not_increasing"
    assert result.index == second_index
    # Nothing moved: not the epoch, not the log position, not the time.
    assert state_digest(core.state) == before
    assert core.state.applied_index == 5


def test_gaps_in_indices_are_fine() -> None:
    # pysyncobj's own no-op and membership entries never reach the core.
    core = Core()
    core.lead()
    assert core.apply(ClaimLeadership(issued_at_us=core.clock.tick(), node_id="n2", term=2), index=10).accepted
    assert core.state.applied_index == 10


def test_read_barrier_changes_nothing_but_position_and_time() -> None:
    core = Core()
    core.lead()
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    before = state_digest(core.state)
    issued = core.clock.tick()
    result = core.apply(ReadBarrier(issued_at_us=issued))
    assert result.accepted and result.events == () and result.index == core.index
    assert (core.state.applied_index, core.state.now_us) == (core.index, issued)
    core.state.applied_index, core.state.now_us = 2, issued - SECOND_US
    assert state_digest(core.state) == before


def test_rejected_commands_still_consume_their_entry() -> None:
    core = Core()
    core.lead(term=3)
    issued = core.clock.tick()
    result = core.apply(ClaimLeadership(issued_at_us=issued, node_id="old", term=1))
    assert result.rejection.code == "stale_term"
    assert (core.state.applied_index, core.state.now_us) == (core.index, issued)


# -- time high-water mark ------------------------------------------------------------


def test_older_issued_at_does_not_move_time_backwards() -> None:
    clock = FakeClock()
    core = Core(clock)
    core.lead()
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    fast = clock.set(slot(1) + 30 * SECOND_US)
    core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=fast)
    assert core.state.now_us == fast
    # A new leader whose clock is two minutes behind.
    slow = clock.back(120 * SECOND_US)
    core.lead("n2", term=2)
    assert core.state.now_us == fast
    core.claim_runs(claim("a", slot(2), slot(3)), issued_at_us=slow)
    assert core.state.now_us == fast
    # Records stamped by the core use the high-water mark, not the proposer's clock.
    assert core.state.get_run("a", slot(2)).claimed_us == fast
    core.apply_jobs((upsert(spec("a", owner="x"), expected_version=1),), issued_at_us=slow)
    assert core.state.jobs["a"].updated_us == fast
    # Time moves on once a clock passes the mark.
    later = clock.set(fast + SECOND_US)
    core.apply(ReadBarrier(issued_at_us=later))
    assert core.state.now_us == later


def test_time_never_decreases_over_an_arbitrary_sequence() -> None:
    clock = FakeClock()
    core = Core(clock)
    seen = []
    for step in [5, -3, 7, -20, 1, 1, -1, 30, -30]:
        issued = clock.tick(step * SECOND_US)
        core.apply(ReadBarrier(issued_at_us=issued))
        seen.append(core.state.now_us)
    assert seen == sorted(seen)
    assert seen[-1] == max(T0_US + s * SECOND_US for s in [5, 2, 9, -11, -10, -9, -10, 20, -10])


# -- retention -----------------------------------------------------------------------


def _claim_many(core: Core, statuses: list[str], job_id: str = "a") -> None:
    """Claim consecutive slots starting at the job's next due one, 500 per entry."""
    for start in range(0, len(statuses), 500):
        job = core.state.jobs[job_id]
        first = (job.next_due_us - T0_US) // TEN_S
        batch = statuses[start : start + 500]
        claims = [
            claim(job_id, slot(first + i), slot(first + i + 1), status=status, reason="test" if status != QUEUED else "")
            for i, status in enumerate(batch)
        ]
        result = core.claim_runs(*claims)
        assert result.accepted and all(e.__class__.__name__ == "RunClaimed" for e in result.events)


def _retained(state: State, job_id: str = "a") -> list[int]:
    return [(run.scheduled_us - T0_US) // TEN_S for run in state.runs[job_id]]


@pytest.fixture
def core() -> Core:
    core = Core()
    core.lead()
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)), upsert(spec("b"), next_due_us=slot(1))))
    return core


def test_oldest_final_runs_are_pruned_beyond_the_limit(core: Core) -> None:
    extra = 7
    _claim_many(core, [SKIPPED] * (RUNS_RETAINED_PER_JOB + extra))
    kept = _retained(core.state)
    assert len(kept) == RUNS_RETAINED_PER_JOB
    assert kept == list(range(1 + extra, RUNS_RETAINED_PER_JOB + extra + 1))
    assert core.state.run_count == RUNS_RETAINED_PER_JOB


def test_no_pruning_up_to_the_limit(core: Core) -> None:
    _claim_many(core, [SKIPPED] * RUNS_RETAINED_PER_JOB)
    assert len(core.state.runs["a"]) == RUNS_RETAINED_PER_JOB


def test_live_runs_are_never_pruned(core: Core) -> None:
    _claim_many(core, [QUEUED] * (RUNS_RETAINED_PER_JOB + 20))
    assert len(core.state.runs["a"]) == RUNS_RETAINED_PER_JOB + 20
    assert core.state.run_count == RUNS_RETAINED_PER_JOB + 20


def test_pruning_skips_live_runs_and_removes_the_oldest_final_ones(core: Core) -> None:
    statuses = [QUEUED, SKIPPED, QUEUED] + [SKIPPED] * (RUNS_RETAINED_PER_JOB + 2)
    _claim_many(core, statuses)
    kept = _retained(core.state)
    assert len(kept) == RUNS_RETAINED_PER_JOB
    assert kept[:2] == [1, 3]  # both live runs stay
    # The five pruned runs are the oldest final ones: slots 2, 4, 5, 6, 7.
    assert set(range(1, len(statuses) + 1)) - set(kept) == {2, 4, 5, 6, 7}
    assert all(run.status in FINAL_STATUSES for run in core.state.runs["a"][2:])
    assert core.state.run_count == RUNS_RETAINED_PER_JOB


def test_pruning_is_per_job(core: Core) -> None:
    _claim_many(core, [SKIPPED] * (RUNS_RETAINED_PER_JOB + 3), job_id="a")
    _claim_many(core, [SKIPPED] * 10, job_id="b")
    assert len(core.state.runs["a"]) == RUNS_RETAINED_PER_JOB
    assert len(core.state.runs["b"]) == 10
    assert core.state.run_count == RUNS_RETAINED_PER_JOB + 10


def test_a_pruned_slot_cannot_be_claimed_again(core: Core) -> None:
    _claim_many(core, [SKIPPED] * (RUNS_RETAINED_PER_JOB + 1))
    assert core.state.get_run("a", slot(1)) is None
    result = core.claim_runs(claim("a", slot(1), slot(2)))
    assert result.events == (SlotAlreadyAccounted("a", slot(1), slot(RUNS_RETAINED_PER_JOB + 1)),)


def test_apply_on_a_plain_state_object() -> None:
    # The public entry point, without the test harness.
    state = State()
    result = apply(state, ClaimLeadership(issued_at_us=1, node_id="n", term=1), 3)
    assert result.index == 3 and state.applied_index == 3 and state.epoch == 1
