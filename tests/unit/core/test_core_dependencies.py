"""Job dependencies: a child's slot is decided in the entry that ends its parents' runs of it."""

from __future__ import annotations

import pytest

from scheduler.core import decode_snapshot, encode_snapshot, state_digest
from scheduler.core.commands import ApplyJobs, CancelRun, SetClusterVersion, TriggerRun
from scheduler.core.dependencies import parent_decision
from scheduler.core.log_format import required_log_format
from scheduler.core.model import FAILED, MISSED, QUEUED, SECOND_US, SKIPPED, SUCCEEDED, RetryPolicy, Run
from scheduler.core.results import CompletionRepeated, RunClaimed, RunSucceeded
from scheduler.core.vocabulary import RejectionCode, RunKind
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US
SLOT = T0_US + TEN_S
ONCE = RetryPolicy(max_attempts=1)


def child(job_id: str, *parents: str, **fields):
    return spec(job_id, schedule="", after=parents, **fields)


def _core(*specs) -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    scheduled = tuple(upsert(s, next_due_us=SLOT if s.schedule else 0) for s in specs)
    result = core.apply_jobs(scheduled)
    assert result.accepted, result.rejection
    return core


def _run_parent(core: Core, job_id: str, outcome: str = "success", slot_us: int = SLOT, version: int = 1):
    """Claim, lease and complete one slot of a scheduled parent; the completion's result."""
    assert core.claim_runs(claim(job_id, slot_us, slot_us + TEN_S, spec_version=version)).accepted
    assert core.grant(run_ref(job_id, slot_us)).accepted
    return core.complete(completion(lease_ref(job_id, slot_us, core.index), outcome=outcome))


def test_a_parent_success_queues_the_child_in_the_same_entry() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"))
    result = _run_parent(core, "p")
    assert result.events == (RunSucceeded("p", SLOT, 1),)  # one answer per completion, as before
    assert result.follow_ups == (RunClaimed("c", SLOT, QUEUED, core.index),)
    run = core.state.get_run("c", SLOT)
    assert (run.status, run.kind, run.claim_index) == (QUEUED, RunKind.DEPENDENCY, core.index)


def test_a_failed_parent_skips_the_child_and_its_children_naming_the_parent() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"), child("g", "c"))
    result = _run_parent(core, "p", outcome="failure")
    child_run, grandchild_run = core.state.get_run("c", SLOT), core.state.get_run("g", SLOT)
    assert (child_run.status, child_run.reason) == (SKIPPED, f"parent p@{SLOT} failed")
    assert (grandchild_run.status, grandchild_run.reason) == (SKIPPED, f"parent c@{SLOT} skipped")
    assert [e.job_id for e in result.follow_ups] == ["c", "g"]


def test_a_chain_runs_level_by_level() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"), child("g", "c"))
    _run_parent(core, "p")
    assert core.state.get_run("g", SLOT) is None  # its parent's run is queued, not ended
    assert core.grant(run_ref("c", SLOT)).accepted
    result = core.complete(completion(lease_ref("c", SLOT, core.index)))
    assert result.follow_ups == (RunClaimed("g", SLOT, QUEUED, core.index),)


@pytest.mark.parametrize(("status", "reason"), [(SKIPPED, "paused"), (MISSED, "past its grace")])
def test_a_parent_slot_claimed_skipped_or_missed_skips_the_child(status: str, reason: str) -> None:
    core = _core(spec("p"), child("c", "p"))
    assert core.claim_runs(claim("p", SLOT, SLOT + TEN_S, status=status, reason=reason)).accepted
    run = core.state.get_run("c", SLOT)
    assert (run.status, run.reason) == (SKIPPED, f"parent p@{SLOT} {status}")


def test_fan_in_waits_for_every_parent_and_a_failure_decides_at_once() -> None:
    core = _core(spec("a", retry=ONCE), spec("b", retry=ONCE), child("c", "a", "b"))
    _run_parent(core, "a")
    assert core.state.get_run("c", SLOT) is None  # b's run of the slot has not ended
    _run_parent(core, "b")
    assert core.state.get_run("c", SLOT).status == QUEUED
    later = SLOT + TEN_S
    _run_parent(core, "b", outcome="failure", slot_us=later)
    run = core.state.get_run("c", later)
    assert (run.status, run.reason) == (SKIPPED, f"parent b@{later} failed")  # a still to run
    _run_parent(core, "a", slot_us=later)
    assert core.state.get_run("c", later).reason == f"parent b@{later} failed"  # decided once


def test_fan_out_claims_every_child() -> None:
    core = _core(spec("p", retry=ONCE), child("c1", "p"), child("c2", "p"))
    result = _run_parent(core, "p")
    assert [e.job_id for e in result.follow_ups] == ["c1", "c2"]


def test_a_repeated_completion_claims_nothing_twice() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"))
    assert core.claim_runs(claim("p", SLOT, SLOT + TEN_S)).accepted
    assert core.grant(run_ref("p", SLOT)).accepted
    lease = lease_ref("p", SLOT, core.index)
    assert core.complete(completion(lease)).follow_ups
    again = core.complete(completion(lease))
    assert isinstance(again.events[0], CompletionRepeated)
    assert again.all_events() == again.events
    assert len(core.state.runs["c"]) == 1


def test_a_paused_child_records_its_slot_skipped() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"))
    core.pause("c")
    _run_parent(core, "p")
    run = core.state.get_run("c", SLOT)
    assert (run.status, run.reason) == (SKIPPED, "paused")


def test_a_cancelled_parent_skips_the_child() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"))
    assert core.claim_runs(claim("p", SLOT, SLOT + TEN_S)).accepted
    assert core.apply(CancelRun(core.clock.tick(), "p", SLOT, "bob", "no", "r1")).accepted
    assert core.state.get_run("c", SLOT).reason == f"parent p@{SLOT} cancelled"


def test_a_manual_run_of_the_parent_is_no_slot_of_the_chain() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"))
    assert core.apply(TriggerRun(core.clock.tick(), "p", "bob", "t1")).accepted
    (manual,) = core.state.runs["p"]
    assert core.grant(run_ref("p", manual.scheduled_us)).accepted
    core.complete(completion(lease_ref("p", manual.scheduled_us, core.index)))
    assert "c" not in core.state.runs


def test_parent_decision_is_the_shared_rule() -> None:
    ok = Run("a", 5, SUCCEEDED)
    assert parent_decision([("a", ok), ("b", Run("b", 5, SUCCEEDED))]) == (QUEUED, "")
    assert parent_decision([("a", ok), ("b", None)]) is None
    assert parent_decision([("a", ok), ("b", Run("b", 5, QUEUED))]) is None
    assert parent_decision([("a", None), ("b", Run("b", 5, FAILED))]) == (SKIPPED, "parent b@5 failed")
    assert parent_decision([("a", Run("a", 5, SUCCEEDED, kind=RunKind.MANUAL))]) is None


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ((child("c", "nope"),), "after: names 'nope', which does not exist"),
        ((child("c", "c"),), "cannot run after itself"),
        ((spec("p"), child("a", "p", "b"), child("b", "a")), "makes a cycle"),
        ((spec("p"), spec("q", schedule="*/5 * * * * *"), child("c", "p", "q")), "different schedules"),
        ((spec("p"), spec("q", timezone="Europe/Paris"), child("c", "p", "q")), "different schedules"),
        ((spec("p"), spec("c", after=("p",))), "a schedule of its own"),
        ((spec("m", schedule=""), child("c", "m")), "which has no schedule"),
        ((spec("p"), child("c", "p", "p")), "1 to 16 different jobs"),
    ],
)
def test_what_cannot_be_scheduled_is_refused_at_apply(specs, message: str) -> None:
    core = Core(FakeClock())
    core.lead()
    result = core.apply_jobs(tuple(upsert(s, next_due_us=SLOT if s.schedule else 0) for s in specs))
    assert result.rejection is not None and result.rejection.code == RejectionCode.INVALID
    assert message in result.rejection.message


def test_a_parent_is_removed_only_with_its_children_and_its_schedule_kept_in_step() -> None:
    core = _core(spec("p"), spec("q"), child("c", "p", "q"))
    refused = core.apply_jobs(removals=("p",))
    assert "'p' cannot be removed: 'c' runs after it" in refused.rejection.message
    changed = core.apply_jobs((upsert(spec("q", schedule="*/5 * * * * *"), 1, SLOT),))
    assert "different schedules" in changed.rejection.message
    assert core.apply_jobs(removals=("p", "c")).accepted
    assert core.state.dependents == {}


def test_the_children_index_is_derived_and_out_of_the_snapshot() -> None:
    core = _core(spec("p", retry=ONCE), child("c", "p"), child("d", "p"))
    assert core.state.dependents == {"p": ("c", "d")}
    digest = state_digest(core.state)
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.dependents == {"p": ("c", "d")}
    core.state.dependents = {}
    assert state_digest(core.state) == digest


def test_jobs_without_children_never_settle() -> None:
    core = _core(spec("p", retry=ONCE))
    result = _run_parent(core, "p")
    assert (core.state.dependents, core.state.settling) == ({}, [])
    assert result.follow_ups is not None and result.all_events() == result.events


def test_after_needs_log_format_3() -> None:
    assert required_log_format(ApplyJobs(1, "a", "r", (upsert(spec("p")),))) == 1
    assert required_log_format(ApplyJobs(1, "a", "r", (upsert(spec("p")), upsert(child("c", "p"))))) == 3
