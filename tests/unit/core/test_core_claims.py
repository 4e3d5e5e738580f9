"""ClaimRuns: one fire per run key, a cursor that advances exactly, and plans checked against state."""

from __future__ import annotations

import pytest

from scheduler.core.model import MISSED, QUEUED, SECOND_US, SKIPPED
from scheduler.core.results import ClaimOutOfPlan, RunAlreadyClaimed, RunClaimed, SlotAlreadyAccounted
from tests.fakes import T0_US, Core, FakeClock, claim, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    """The k-th slot of an every-10-seconds job."""
    return T0_US + k * TEN_S


@pytest.fixture
def core() -> Core:
    """Epoch 1; job `a` (version 1) added at T0+2s of replicated time, its next slot is slot(1)."""
    core = Core(FakeClock())
    core.lead()
    core.advance(T0_US + 2 * SECOND_US)  # the leader's clock ticks; the job is added at that instant
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    assert core.state.jobs["a"].cursor_us == T0_US + 2 * SECOND_US
    return core


def test_claim_records_the_run_and_advances_cursor_exactly(core: Core) -> None:
    result = core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=slot(1) + 5)
    assert result.accepted
    assert result.events == (RunClaimed("a", slot(1), QUEUED, core.index),)
    run = core.state.get_run("a", slot(1))
    assert run is not None
    assert (run.status, run.reason, run.kind) == (QUEUED, "", "scheduled")
    assert run.claim_index == core.index
    assert run.claimed_us == core.state.now_us == slot(1) + 5
    assert run.effective_us == slot(1)
    assert run.spec_version == 1
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(1), slot(2))
    assert (job.last_status, job.last_scheduled_us) == (QUEUED, slot(1))
    assert core.state.run_count == 1


def test_spread_effective_instant_is_kept_but_key_stays_nominal(core: Core) -> None:
    core.claim_runs(claim("a", slot(1), slot(2), effective_us=slot(1) + 1234))
    run = core.state.get_run("a", slot(1))
    assert (run.scheduled_us, run.effective_us) == (slot(1), slot(1) + 1234)


def test_consecutive_slots_in_one_batch(core: Core) -> None:
    result = core.claim_runs(*(claim("a", slot(k), slot(k + 1)) for k in range(1, 6)))
    assert [e.scheduled_us for e in result.events] == [slot(k) for k in range(1, 6)]
    assert all(type(e) is RunClaimed and e.claim_index == core.index for e in result.events)
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(5), slot(6))
    assert [r.scheduled_us for r in core.state.runs["a"]] == [slot(k) for k in range(1, 6)]


def test_duplicate_key_in_the_same_batch_is_a_noop(core: Core) -> None:
    result = core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(1), slot(2)))
    assert result.events == (RunClaimed("a", slot(1), QUEUED, core.index), RunAlreadyClaimed("a", slot(1)))
    assert len(core.state.runs["a"]) == 1 and core.state.run_count == 1


def test_duplicate_key_across_batches_is_a_noop(core: Core) -> None:
    first = core.claim_runs(claim("a", slot(1), slot(2)))
    first_index = core.index
    # A proposal retried after an unknown outcome, even with a different plan for the next slot.
    again = core.claim_runs(claim("a", slot(1), slot(3)))
    assert first.accepted and again.accepted
    assert again.events == (RunAlreadyClaimed("a", slot(1)),)
    assert core.state.get_run("a", slot(1)).claim_index == first_index
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(1), slot(2))


def test_slot_at_or_before_cursor_is_already_accounted(core: Core) -> None:
    cursor = core.state.jobs["a"].cursor_us
    result = core.claim_runs(claim("a", cursor, slot(1)), claim("a", slot(0), slot(1)))
    assert result.events == (
        SlotAlreadyAccounted("a", cursor, cursor),
        SlotAlreadyAccounted("a", slot(0), cursor),
    )
    core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(2), slot(3)))
    # A slot between claimed ones that never had a run (a schedule that changed since).
    result = core.claim_runs(claim("a", slot(2) - 1, slot(3)))
    assert result.events == (SlotAlreadyAccounted("a", slot(2) - 1, slot(2)),)
    assert core.state.jobs["a"].next_due_us == slot(3)


@pytest.mark.parametrize(
    "bad, reason",
    [
        (claim("a", slot(2), slot(3)), "not_next_slot"),
        (claim("a", slot(1), slot(2), spec_version=2), "stale_spec"),
        (claim("a", slot(1), slot(2), spec_version=0), "stale_spec"),
        (claim("ghost", slot(1), slot(2)), "unknown_job"),
        (claim("a", slot(1), slot(2), status="leased"), "bad_status"),
        (claim("a", slot(1), slot(1)), "next_due_not_after_slot"),
        (claim("a", slot(1), slot(1) - 1), "next_due_not_after_slot"),
    ],
)
def test_claim_out_of_plan_changes_nothing(core: Core, bad, reason: str) -> None:
    job_before = core.state.jobs["a"]
    cursor, due = job_before.cursor_us, job_before.next_due_us
    result = core.claim_runs(bad)
    assert result.accepted  # per-claim answers; the entry itself is fine
    assert result.events == (ClaimOutOfPlan(bad.job_id, bad.scheduled_us, reason),)
    assert core.state.runs == {} and core.state.run_count == 0
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us, job.last_status) == (cursor, due, "")


def test_a_slot_after_replicated_now_cannot_be_claimed(core: Core) -> None:
    # The leader's clock reads one microsecond before the slot.
    result = core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=slot(1) - 1)
    assert result.accepted and core.state.now_us == slot(1) - 1
    assert result.events == (ClaimOutOfPlan("a", slot(1), "not_due_yet"),)
    assert core.state.runs == {} and core.state.run_count == 0
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (T0_US + 2 * SECOND_US, slot(1))
    # At its instant it is due.
    result = core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=slot(1))
    assert result.events == (RunClaimed("a", slot(1), QUEUED, core.index),)


def test_a_batch_is_claimed_up_to_replicated_now_and_the_rest_waits(core: Core) -> None:
    result = core.claim_runs(*(claim("a", slot(k), slot(k + 1)) for k in (1, 2, 3)), issued_at_us=slot(2) + 5)
    assert result.events == (
        RunClaimed("a", slot(1), QUEUED, core.index),
        RunClaimed("a", slot(2), QUEUED, core.index),
        ClaimOutOfPlan("a", slot(3), "not_due_yet"),
    )
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(2), slot(3))


def test_a_spread_slot_is_claimed_at_its_nominal_instant(core: Core) -> None:
    # The run key is nominal; spreading only delays when the claimed run becomes due.
    result = core.claim_runs(claim("a", slot(1), slot(2), effective_us=slot(1) + 1234), issued_at_us=slot(1))
    assert result.events == (RunClaimed("a", slot(1), QUEUED, core.index),)
    assert core.state.get_run("a", slot(1)).effective_us == slot(1) + 1234


def test_stale_spec_after_a_change(core: Core) -> None:
    core.apply_jobs((upsert(spec("a", owner="x"), expected_version=1),))
    result = core.claim_runs(claim("a", slot(1), slot(2), spec_version=1))
    assert result.events == (ClaimOutOfPlan("a", slot(1), "stale_spec"),)
    result = core.claim_runs(claim("a", slot(1), slot(2), spec_version=2))
    assert result.events == (RunClaimed("a", slot(1), QUEUED, core.index),)
    assert core.state.get_run("a", slot(1)).spec_version == 2


def test_removed_job_is_unknown(core: Core) -> None:
    core.apply_jobs(removals=("a",))
    result = core.claim_runs(claim("a", slot(1), slot(2)))
    assert result.events == (ClaimOutOfPlan("a", slot(1), "unknown_job"),)


def test_good_and_bad_claims_in_one_batch_are_answered_one_by_one(core: Core) -> None:
    core.apply_jobs((upsert(spec("b"), next_due_us=slot(1)),))
    result = core.claim_runs(
        claim("ghost", slot(1), slot(2)),
        claim("a", slot(1), slot(2)),
        claim("b", slot(5), slot(6)),
        claim("b", slot(1), slot(2)),
        claim("a", slot(1), slot(2)),
    )
    assert result.events == (
        ClaimOutOfPlan("ghost", slot(1), "unknown_job"),
        RunClaimed("a", slot(1), QUEUED, core.index),
        ClaimOutOfPlan("b", slot(5), "not_next_slot"),
        RunClaimed("b", slot(1), QUEUED, core.index),
        RunAlreadyClaimed("a", slot(1)),
    )
    assert core.state.run_count == 2


def test_paused_job_turns_queued_into_skipped(core: Core) -> None:
    core.pause("a", True)
    result = core.claim_runs(
        claim("a", slot(1), slot(2)),
        claim("a", slot(2), slot(3), status=MISSED, reason="scheduler_down"),
    )
    assert result.events == (
        RunClaimed("a", slot(1), SKIPPED, core.index),
        RunClaimed("a", slot(2), MISSED, core.index),
    )
    first, second = core.state.runs["a"]
    assert (first.status, first.reason) == (SKIPPED, "paused")
    assert (second.status, second.reason) == (MISSED, "scheduler_down")
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us, job.last_status) == (slot(2), slot(3), MISSED)
    core.pause("a", False)
    result = core.claim_runs(claim("a", slot(3), slot(4)))
    assert result.events == (RunClaimed("a", slot(3), QUEUED, core.index),)


def test_skipped_and_missed_claims_keep_their_reason(core: Core) -> None:
    result = core.claim_runs(
        claim("a", slot(1), slot(2), status=SKIPPED, reason="misfire_skip"),
        claim("a", slot(2), slot(3), status=MISSED, reason="class_killed"),
    )
    assert [e.status for e in result.events] == [SKIPPED, MISSED]
    assert [(r.status, r.reason) for r in core.state.runs["a"]] == [
        (SKIPPED, "misfire_skip"),
        (MISSED, "class_killed"),
    ]


def test_last_slot_leaves_no_next_due(core: Core) -> None:
    core.claim_runs(claim("a", slot(1), 0))
    job = core.state.jobs["a"]
    assert (job.cursor_us, job.next_due_us) == (slot(1), 0)
    result = core.claim_runs(claim("a", slot(2), slot(3)))
    assert result.events == (ClaimOutOfPlan("a", slot(2), "not_next_slot"),)


@pytest.mark.parametrize("epoch", [0, 2, -1])
def test_stale_or_future_epoch_rejects_the_whole_batch(core: Core, epoch: int) -> None:
    result = core.claim_runs(claim("a", slot(1), slot(2)), claim("a", slot(2), slot(3)), epoch=epoch)
    assert result.rejection is not None and result.rejection.code == "stale_epoch"
    assert result.events == ()
    assert core.state.runs == {}
    assert core.state.jobs["a"].next_due_us == slot(1)


def test_readded_job_does_not_get_stuck_on_a_run_key_of_its_previous_incarnation() -> None:
    clock = FakeClock()
    core = Core(clock)
    core.lead("fast", term=1)
    core.apply_jobs((upsert(spec("a"), next_due_us=slot(1)),))
    core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=slot(1) + 1)
    core.claim_runs(claim("a", slot(2), slot(3)), issued_at_us=slot(2) + 1)
    core.apply_jobs(removals=("a",), issued_at_us=slot(2) + 2)
    old_claim_index = core.state.get_run("a", slot(1)).claim_index

    # A new leader whose clock is behind (replicated time stays at its mark); the job is re-added
    # through a replica whose view lags 30 s (within the tolerated skew), planning from that view.
    core.lead("slow", term=2)
    assert core.state.now_us == slot(2) + 1
    slow = core.state.now_us - 30 * SECOND_US
    result = core.apply_jobs((upsert(spec("a"), next_due_us=slot(0)),), issued_at_us=slow)
    # Refused: slot(0) is at or before slot(2), a key the previous incarnation still retains.
    assert result.rejection.code == "stale_plan" and result.rejection.retryable
    # Planned again after that key, as the API servicer re-plans from replicated state.
    assert core.apply_jobs((upsert(spec("a"), next_due_us=slot(3)),), issued_at_us=slow).accepted
    assert (core.state.jobs["a"].cursor_us, core.state.jobs["a"].next_due_us) == (slot(2), slot(3))

    # The trigger loop always claims the job's replicated next slot: every claim must account for it.
    for _ in range(4):
        job = core.state.jobs["a"]
        due = job.next_due_us
        # The slow leader claims each slot once its own clock reaches it.
        core.claim_runs(claim("a", due, due + TEN_S, spec_version=job.version), issued_at_us=max(slow + 1, due))
        job = core.state.jobs["a"]
        assert job.cursor_us >= due, f"slot {due} still owed after its claim: the job is stuck"
        assert job.next_due_us > due
    # One fire, not two: the old incarnation's run key was not claimed again.
    assert core.state.get_run("a", slot(1)).claim_index == old_claim_index
