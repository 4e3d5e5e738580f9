"""Run history retention: per job count and age caps, failures kept apart, pruned keys stay accounted."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import state_digest
from scheduler.core.codec import decode_snapshot, encode_snapshot
from scheduler.core.commands import BackfillRuns, TriggerRun
from scheduler.core.model import (
    CANCELLED,
    DAY_US,
    FAILED,
    FAILURE_STATUSES,
    FINAL_STATUSES,
    MISSED,
    QUEUED,
    SECOND_US,
    SKIPPED,
    SUCCEEDED,
    TIMED_OUT,
    HistoryPolicy,
    Run,
)
from scheduler.core.results import ClaimOutOfPlan, RunClaimed, SlotAlreadyAccounted
from scheduler.core.retention import HISTORY_SWEEP_US, horizon_us, plan_pruning, slack
from tests.fakes import T0_US, Core, claim, spec, upsert

TEN_S = 10 * SECOND_US
SMALL = HistoryPolicy(keep_runs=10, max_age_us=0, keep_failed_runs=5, failed_max_age_us=0)
SLACK = slack(SMALL)


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def _core(policy: HistoryPolicy = SMALL, jobs: tuple[str, ...] = ("a",)) -> Core:
    core = Core()
    core.lead()
    core.apply_jobs(tuple(upsert(spec(job_id, history=policy), next_due_us=slot(1)) for job_id in jobs))
    return core


def _claim(core: Core, statuses: list[str], job_id: str = "a", check=None) -> None:
    """Claim the job's next slots one entry each, with the given statuses."""
    for status in statuses:
        job = core.state.jobs[job_id]
        k = (job.next_due_us - T0_US) // TEN_S
        reason = "" if status == QUEUED else "test"
        result = core.claim_runs(claim(job_id, slot(k), slot(k + 1), job.version, status=status, reason=reason))
        assert isinstance(result.events[0], RunClaimed)
        if check is not None:
            check(core)


def _slots(core: Core, job_id: str = "a", statuses=None) -> list[int]:
    return [
        (run.scheduled_us - T0_US) // TEN_S
        for run in core.state.runs.get(job_id, [])
        if statuses is None or run.status in statuses
    ]


def _ok_final(core: Core) -> list[int]:
    return _slots(core, statuses=FINAL_STATUSES - FAILURE_STATUSES)


def test_a_history_stays_within_its_count_cap_plus_slack_and_keeps_the_newest() -> None:
    core = _core()

    def bounded(core: Core) -> None:
        assert len(_ok_final(core)) <= SMALL.keep_runs + SLACK

    _claim(core, [SKIPPED] * 200, check=bounded)
    kept = _ok_final(core)
    assert kept == list(range(201 - len(kept), 201)), "the newest runs are the ones kept"
    assert len(kept) >= SMALL.keep_runs
    assert core.state.run_count == len(kept)


def test_failures_are_counted_apart_so_successes_never_push_them_out() -> None:
    core = _core()
    _claim(core, [MISSED] * 3 + [SKIPPED] * 300)
    assert _slots(core, statuses={MISSED}) == [1, 2, 3]
    assert len(_ok_final(core)) <= SMALL.keep_runs + SLACK


def test_failures_have_their_own_cap() -> None:
    core = _core()
    _claim(core, [MISSED] * 100)
    missed = _slots(core, statuses={MISSED})
    assert SMALL.keep_failed_runs <= len(missed) <= SMALL.keep_failed_runs + SLACK
    assert missed == list(range(101 - len(missed), 101))


def test_live_runs_are_never_pruned() -> None:
    core = _core()
    _claim(core, [QUEUED] * 60)
    assert len(core.state.runs["a"]) == 60 and core.state.run_count == 60


def test_age_limits_prune_old_runs_and_failures_live_longer() -> None:
    policy = HistoryPolicy(keep_runs=1000, max_age_us=DAY_US, keep_failed_runs=1000, failed_max_age_us=3 * DAY_US)
    core = _core(policy)
    _claim(core, [MISSED, SKIPPED] * 20)
    # Two days later: the skipped runs are past their day, the missed ones are not past three.
    core.clock.tick(2 * DAY_US)
    _claim(core, [SKIPPED])
    assert [k for k in _slots(core, statuses={SKIPPED}) if k <= 40] == []
    assert len(_slots(core, statuses={MISSED})) == 20
    core.clock.tick(2 * DAY_US)
    _claim(core, [SKIPPED])
    assert _slots(core, statuses={MISSED}) == []


def test_a_pruned_key_cannot_be_claimed_backfilled_or_reused_by_a_manual_run() -> None:
    core = _core()
    _claim(core, [SKIPPED] * 100)
    horizon = horizon_us(core.state, "a")
    assert horizon >= slot(1) and core.state.get_run("a", slot(1)) is None
    result = core.claim_runs(claim("a", slot(1), slot(2)), issued_at_us=core.state.now_us)
    assert result.events == (SlotAlreadyAccounted("a", slot(1), core.state.jobs["a"].cursor_us),)
    backfill = core.apply(
        BackfillRuns(
            issued_at_us=core.state.now_us, job_id="a", slots=(slot(1),), author="ops", request_id="", interval_us=0
        )
    )
    assert backfill.events == (ClaimOutOfPlan("a", slot(1), "history_pruned"),)


def test_a_manual_run_never_takes_a_pruned_key() -> None:
    core = _core()
    _claim(core, [SKIPPED] * 100)
    core.state.history["a"].horizon_us = core.state.now_us + 5  # as if the newest key had been pruned
    result = core.apply(TriggerRun(issued_at_us=core.state.now_us, job_id="a", author="ops", request_id=""))
    assert result.events[0].scheduled_us > core.state.history["a"].horizon_us


def test_a_deleted_jobs_history_ages_out_with_its_own_policy_and_its_keys_stay_accounted() -> None:
    policy = HistoryPolicy(keep_runs=1000, max_age_us=DAY_US, keep_failed_runs=1000, failed_max_age_us=DAY_US)
    core = _core(policy, jobs=("a", "b"))
    _claim(core, [SKIPPED] * 30)
    core.apply_jobs(removals=("a",))
    assert len(core.state.runs["a"]) == 30, "history outlives the job"
    core.clock.tick(2 * DAY_US)
    core.advance_time()
    assert "a" not in core.state.runs and "a" not in core.state.orphaned_histories
    last_pruned = slot(30)
    assert horizon_us(core.state, "a") == last_pruned
    # Re-added under the same id: its cursor starts after every pruned key.
    core.apply_jobs((upsert(spec("a", history=policy), next_due_us=core.state.now_us + TEN_S),))
    assert core.state.jobs["a"].cursor_us >= last_pruned


def test_history_sweeps_are_rate_limited_by_replicated_time() -> None:
    policy = HistoryPolicy(keep_runs=1000, max_age_us=DAY_US, keep_failed_runs=1000, failed_max_age_us=DAY_US)
    core = _core(policy, jobs=("a", "b"))
    _claim(core, [SKIPPED] * 3)
    core.apply_jobs(removals=("a",))
    core.advance_time()
    next_sweep = core.state.history_sweep_us
    assert next_sweep >= core.state.now_us + HISTORY_SWEEP_US - SECOND_US
    core.clock.set(core.state.now_us + 2 * DAY_US)
    core.advance_time()
    assert "a" not in core.state.runs


def test_a_readded_job_adopts_the_history_under_its_new_policy() -> None:
    core = _core(HistoryPolicy(keep_runs=1000, max_age_us=0, keep_failed_runs=1000, failed_max_age_us=0))
    _claim(core, [SKIPPED] * 50)
    core.apply_jobs(removals=("a",))
    core.apply_jobs((upsert(spec("a", history=SMALL), next_due_us=core.state.now_us + TEN_S),))
    assert "a" not in core.state.orphaned_histories
    _claim(core, [SKIPPED])
    assert len(_ok_final(core)) <= SMALL.keep_runs + SLACK


def test_retention_bookkeeping_survives_a_snapshot() -> None:
    core = _core()
    _claim(core, [SKIPPED] * 40)
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.history == core.state.history
    assert state_digest(restored) == state_digest(core.state)


@settings(max_examples=200, deadline=None)
@given(
    statuses=st.lists(st.sampled_from([SUCCEEDED, FAILED, TIMED_OUT, SKIPPED, MISSED, CANCELLED, QUEUED]), max_size=80),
    keep_runs=st.integers(0, 20),
    keep_failed_runs=st.integers(0, 20),
    max_age_s=st.integers(0, 400),
    failed_max_age_s=st.integers(0, 800),
)
def test_plan_pruning_keeps_live_runs_the_newest_of_each_class_and_nothing_too_old(
    statuses, keep_runs, keep_failed_runs, max_age_s, failed_max_age_s
) -> None:
    policy = HistoryPolicy(keep_runs, max_age_s * SECOND_US, keep_failed_runs, failed_max_age_s * SECOND_US)
    runs = [Run(job_id="a", scheduled_us=k * TEN_S, status=status) for k, status in enumerate(statuses)]
    now_us = len(runs) * TEN_S
    kept, pruned = plan_pruning(policy, runs, now_us)
    assert sorted(kept + pruned, key=lambda r: r.scheduled_us) == runs
    assert all(run.status in FINAL_STATUSES for run in pruned)
    for failed, keep, age in (
        (False, keep_runs, policy.max_age_us),
        (True, keep_failed_runs, policy.failed_max_age_us),
    ):
        cls = [r for r in runs if r.status in FINAL_STATUSES and (r.status in FAILURE_STATUSES) == failed]
        kept_cls = [r for r in kept if r.status in FINAL_STATUSES and (r.status in FAILURE_STATUSES) == failed]
        assert len(kept_cls) <= keep
        assert all(age == 0 or now_us - r.scheduled_us <= age for r in kept_cls)
        young = [r for r in cls if age == 0 or now_us - r.scheduled_us <= age]
        assert kept_cls == (young[-keep:] if keep else [])


@pytest.mark.parametrize("field", ["keep_runs", "keep_failed_runs"])
def test_slack_grows_with_the_caps(field: str) -> None:
    assert slack(HistoryPolicy(**{field: 32_000})) == (32_000 + 1000) // 32


def test_a_job_that_stopped_firing_still_ages_out() -> None:
    policy = HistoryPolicy(keep_runs=1000, max_age_us=DAY_US, keep_failed_runs=1000, failed_max_age_us=DAY_US)
    core = _core(policy, jobs=("a", "b"))
    _claim(core, [SKIPPED] * 40)  # past the first pass: the job has a mark with an age deadline
    assert core.state.history["a"].recheck_us
    core.clock.set(core.state.now_us + 2 * DAY_US)
    core.advance_time()  # no run recorded since: only the sweep can prune it
    assert "a" not in core.state.runs and core.state.run_count == 0
    assert horizon_us(core.state, "a") == slot(40)
