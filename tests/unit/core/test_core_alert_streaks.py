"""Alerts that scale: consecutive missed or skipped slots are one alert, a success after failures
raises `recovered`, and nothing of this happens before the cluster version allows it."""

from __future__ import annotations

import pytest
from msgspec import UNSET

from scheduler.core.alerts import alert_count, last_slot_us, mark_delivered, undelivered_count
from scheduler.core.codec import decode_snapshot, encode_snapshot, state_digest
from scheduler.core.commands import MarkAlertsDelivered, SetClusterVersion
from scheduler.core.log_format import STREAK_ALERTS_FORMAT, required_log_format
from scheduler.core.model import MISSED, SECOND_US, SKIPPED, RetryPolicy
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def _core(cluster_version: int, **job_fields) -> Core:
    core = Core(FakeClock())
    core.lead()
    if cluster_version > 1:
        assert core.apply(SetClusterVersion(core.clock.tick(), cluster_version, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a", **job_fields), next_due_us=slot(1)),))
    return core


def _claim(core: Core, k: int, status: str, reason: str = "") -> None:
    why = reason or ("the scheduler was not firing" if status == MISSED else "overlap forbid: run a@1 still live")
    result = core.claim_runs(claim("a", slot(k), slot(k + 1), status=status, reason=why if status != "queued" else ""))
    assert result.accepted


def _alerts(core: Core, kind: str | None = None) -> list:
    return [a for a in core.state.alerts.values() if kind is None or a.kind == kind]


def test_before_the_format_each_missed_slot_is_an_alert_of_its_own() -> None:
    core = _core(cluster_version=2)
    for k in range(1, 4):
        _claim(core, k, MISSED)
    assert [a.scheduled_us for a in _alerts(core)] == [slot(1), slot(2), slot(3)]
    assert all(a.count is UNSET for a in _alerts(core))
    assert core.state.alert_streaks is UNSET


def test_consecutive_missed_slots_are_one_alert_that_counts_them() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    for k in range(1, 6):
        _claim(core, k, MISSED, reason=f"slot {k} missed")
    (alert,) = _alerts(core)
    assert alert.id == f"missed:a@{slot(1)}"
    assert (alert_count(alert), alert.scheduled_us, last_slot_us(alert)) == (5, slot(1), slot(5))
    assert alert.message == "slot 5 missed"
    assert alert.closed_us is UNSET


def test_a_day_long_outage_of_an_every_second_job_is_one_alert() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    day_slots = 86_400 // 10
    for first in range(1, day_slots + 1, 1000):
        last = min(first + 999, day_slots)
        claims = [claim("a", slot(k), slot(k + 1), status=MISSED, reason="down") for k in range(first, last + 1)]
        assert core.claim_runs(*claims).accepted
    (alert,) = _alerts(core)
    assert alert_count(alert) == day_slots


def test_the_job_firing_again_closes_the_streak_and_the_next_miss_opens_another() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    _claim(core, 1, MISSED)
    _claim(core, 2, MISSED)
    _claim(core, 3, "queued")
    first = core.state.alerts[f"missed:a@{slot(1)}"]
    assert first.closed_us == core.state.now_us and alert_count(first) == 2
    assert "a" not in core.state.alert_streaks
    _claim(core, 4, MISSED)
    second = core.state.alerts[f"missed:a@{slot(4)}"]
    assert alert_count(second) == 1 and second.closed_us is UNSET
    assert alert_count(first) == 2  # a closed streak never grows again


def test_missed_and_skipped_streaks_are_kept_apart() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    _claim(core, 1, MISSED)
    _claim(core, 2, SKIPPED)
    _claim(core, 3, MISSED)
    _claim(core, 4, SKIPPED)
    assert {(a.kind, alert_count(a)) for a in _alerts(core)} == {("missed", 2), ("skipped", 2)}


def test_a_streak_that_grew_after_its_delivery_is_due_once_more_then_not() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    _claim(core, 1, MISSED)
    key = f"missed:a@{slot(1)}"
    assert core.apply(MarkAlertsDelivered(core.clock.tick(), core.state.epoch, (key,), counts=(1,))).accepted
    alert = core.state.alerts[key]
    assert undelivered_count(alert) == 0
    _claim(core, 2, MISSED)
    _claim(core, 3, MISSED)
    assert undelivered_count(alert) == 2
    assert core.apply(MarkAlertsDelivered(core.clock.tick(), core.state.epoch, (key,), counts=(3,))).accepted
    assert (undelivered_count(alert), alert.delivered_count) == (0, 3)


def test_a_delivery_of_fewer_slots_than_counted_leaves_the_rest_due() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    for k in (1, 2, 3):
        _claim(core, k, MISSED)
    alert = core.state.alerts[f"missed:a@{slot(1)}"]
    core.state.now_us += 1
    mark_delivered(core.state, (alert.id,), (2,))  # the dispatcher sent it when it counted 2
    assert undelivered_count(alert) == 1


def test_marking_needs_format_3_only_when_it_carries_counts() -> None:
    assert required_log_format(MarkAlertsDelivered(1, 1, ("x",))) == 1
    assert required_log_format(MarkAlertsDelivered(1, 1, ("x",), counts=(1,))) == STREAK_ALERTS_FORMAT


def _run_once(core: Core, k: int, outcome: str, token_index: list[int]) -> None:
    _claim(core, k, "queued")
    result = core.grant(run_ref("a", slot(k)))
    assert result.accepted
    fencing_token = core.index
    core.complete(completion(lease_ref("a", slot(k), fencing_token), outcome=outcome, error="boom"))
    token_index.append(fencing_token)


@pytest.mark.parametrize("cluster_version", [2, STREAK_ALERTS_FORMAT])
def test_a_success_after_failed_runs_raises_one_recovered_alert(cluster_version: int) -> None:
    core = _core(cluster_version, retry=RetryPolicy(max_attempts=1))
    tokens: list[int] = []
    _run_once(core, 1, "failure", tokens)
    _run_once(core, 2, "failure", tokens)
    _run_once(core, 3, "success", tokens)
    _run_once(core, 4, "success", tokens)
    recovered = _alerts(core, "recovered")
    if cluster_version < STREAK_ALERTS_FORMAT:
        assert recovered == [] and core.state.failure_streaks is UNSET
        return
    (alert,) = recovered
    assert (alert.scheduled_us, alert.since_us, alert_count(alert)) == (slot(3), slot(1), 2)
    assert alert.message == "succeeded after 2 failed runs"
    assert core.state.failure_streaks == {}
    assert len(_alerts(core, "failed")) == 2  # failures still alert one by one


def test_streaks_survive_a_snapshot_and_a_state_before_the_format_encodes_without_them() -> None:
    core = _core(STREAK_ALERTS_FORMAT)
    _claim(core, 1, MISSED)
    _claim(core, 2, MISSED)
    restored = decode_snapshot(encode_snapshot(core.state))
    assert state_digest(restored) == state_digest(core.state)
    assert restored.alert_streaks == {"a": {"missed": f"missed:a@{slot(1)}"}}
    assert alert_count(restored.alerts[f"missed:a@{slot(1)}"]) == 2
    before = _core(cluster_version=2)
    _claim(before, 1, MISSED)
    assert b"alert_streaks" not in encode_snapshot(before.state)
    assert b"\xa5count" not in encode_snapshot(before.state)  # the msgpack key "count"
