"""deadline: a queued scheduled slot whose run has not succeeded by slot + deadline raises one
`deadline_missed` alert once replicated time passes it; the run goes on. Checked in apply from a
replicated heap, so it needs no proposer and costs one comparison while nothing is due."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from scheduler.core.codec import decode_snapshot, encode_snapshot
from scheduler.core.commands import ApplyJobs, CancelRun, SetClusterVersion
from scheduler.core.log_format import required_log_format
from scheduler.core.model import SECOND_US, RetryPolicy
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

MINUTE_US = 60 * SECOND_US
DEADLINE_US = 5 * MINUTE_US


def slot(k: int) -> int:
    return T0_US + k * 3600 * SECOND_US


def _core(cluster_version: int = 3, **fields) -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), cluster_version, core.state.epoch)).accepted
    core.advance(slot(1) - SECOND_US)
    job = spec("a", retry=RetryPolicy(max_attempts=1), deadline_us=DEADLINE_US, **fields)
    assert core.apply_jobs((upsert(job, next_due_us=slot(1)),)).accepted
    core.advance(slot(1))
    assert core.claim_runs(claim("a", slot(1), slot(2))).accepted
    return core


def _deadline_alerts(core: Core) -> list:
    return [a for a in core.state.alerts.values() if a.kind == "deadline_missed"]


def test_a_queued_run_past_its_deadline_raises_one_alert_and_stays_queued() -> None:
    core = _core()
    core.advance(slot(1) + DEADLINE_US - 1)
    assert _deadline_alerts(core) == []
    core.advance(slot(1) + DEADLINE_US)
    (alert,) = _deadline_alerts(core)
    assert (alert.job_id, alert.scheduled_us) == ("a", slot(1))
    assert "had not succeeded 5m after it was due (status queued)" in alert.message
    assert core.state.get_run("a", slot(1)).status == "queued"
    core.advance(slot(1) + 2 * DEADLINE_US)
    assert len(_deadline_alerts(core)) == 1  # once per slot
    assert core.state.deadline_checks == []


def test_a_run_that_succeeded_in_time_raises_nothing() -> None:
    core = _core()
    assert core.grant(run_ref("a", slot(1))).accepted
    core.complete(completion(lease_ref("a", slot(1), core.index), outcome="success"))
    core.advance(slot(1) + 2 * DEADLINE_US)
    assert _deadline_alerts(core) == []


def test_a_leased_run_alerts_and_may_still_succeed_later() -> None:
    core = _core()
    assert core.grant(run_ref("a", slot(1))).accepted
    token = core.index
    core.advance(slot(1) + DEADLINE_US + SECOND_US)
    assert len(_deadline_alerts(core)) == 1
    core.complete(completion(lease_ref("a", slot(1), token), outcome="success"))
    assert core.state.get_run("a", slot(1)).status == "succeeded"


def test_a_failed_run_alerts_a_cancelled_one_does_not() -> None:
    core = _core()
    assert core.grant(run_ref("a", slot(1))).accepted
    core.complete(completion(lease_ref("a", slot(1), core.index), outcome="failure", error="boom"))
    core.advance(slot(1) + DEADLINE_US)
    assert len(_deadline_alerts(core)) == 1
    core.advance(slot(2))
    assert core.claim_runs(claim("a", slot(2), slot(3))).accepted
    assert core.apply(CancelRun(core.clock.tick(), "a", slot(2), "alice", "not today", "r1")).accepted
    core.advance(slot(2) + DEADLINE_US)
    assert [a.scheduled_us for a in _deadline_alerts(core)] == [slot(1)]


def test_before_the_format_no_deadline_is_watched() -> None:
    core = _core(cluster_version=2)
    core.advance(slot(1) + 2 * DEADLINE_US)
    assert _deadline_alerts(core) == []
    assert core.state.deadline_checks is UNSET


def test_a_snapshot_carries_the_pending_checks() -> None:
    core = _core()
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.deadline_checks == [(slot(1) + DEADLINE_US, "a", slot(1))]
    assert encode_snapshot(restored) == encode_snapshot(core.state)


@pytest.mark.parametrize(("fields", "needed"), [({}, 1), ({"deadline_us": DEADLINE_US}, 3)])
def test_only_a_spec_with_a_deadline_needs_log_format_3(fields, needed: int) -> None:
    command = ApplyJobs(1, "alice", "r", (upsert(spec("a", **fields), next_due_us=slot(1)),))
    assert required_log_format(command) == needed


def test_a_spread_slot_counts_its_deadline_from_when_it_was_due() -> None:
    core = _core()
    spread_us = 20 * MINUTE_US
    core.advance(slot(2) + spread_us)
    assert core.claim_runs(claim("a", slot(2), slot(3), effective_us=slot(2) + spread_us)).accepted
    core.advance(slot(2) + spread_us + DEADLINE_US - 1)
    assert [a.scheduled_us for a in _deadline_alerts(core)] == [slot(1)]
    core.advance(slot(2) + spread_us + DEADLINE_US)
    assert [a.scheduled_us for a in _deadline_alerts(core)] == [slot(1), slot(2)]
