"""Alert retention keeps the newest delivered alerts and every undelivered one. The pruning after
each new alert resumes where the undelivered prefix ends instead of scanning every alert kept: a
herd of alerts past the limit costs each a step. Its result must be the plain scan's, alert for
alert and in the same order, or replicas of two versions would hold different alerts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core import alerts as alerting
from scheduler.core.alerts import mark_delivered, raise_alert, record_alert
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind

RETAINED = 6


def _plain_scan_prune(state: State) -> None:
    """Retention as it was first written: the first `excess` delivered alerts of the order go."""
    excess = len(state.alert_order) - RETAINED
    if excess <= 0:
        return
    doomed = [key for key in state.alert_order if state.alerts[key].delivered_us][:excess]
    for key in doomed:
        alert = state.alerts.pop(key)
        if alerting.is_open_streak(alert) and isinstance(state.alert_streaks, dict):
            open_kinds = state.alert_streaks.get(alert.job_id, {})
            if open_kinds.get(alert.kind) == key:
                del open_kinds[alert.kind]
                if not open_kinds:
                    del state.alert_streaks[alert.job_id]
    gone = set(doomed)
    state.alert_order = [key for key in state.alert_order if key not in gone]


# An operation: raise an alert for (kind, job, instant), or deliver some of the alerts kept.
raises = st.tuples(
    st.just("raise"), st.sampled_from([AlertKind.FAILED, AlertKind.MISSED]), st.integers(0, 3), st.integers(0, 40)
)
deliveries = st.tuples(st.just("deliver"), st.lists(st.integers(0, 30), max_size=8))


def _replay(ops, prune, monkeypatch) -> State:
    state = State(cluster_version=3)
    state.now_us = 1
    for op in ops:
        state.now_us += 1
        if op[0] == "raise":
            _, kind, job, instant = op
            with monkeypatch.context() as patch:
                patch.setattr(alerting, "_prune", prune)
                raise_alert(state, kind, f"job-{job}", instant, "why")
        else:
            keys = tuple(state.alert_order[i] for i in op[1] if i < len(state.alert_order))
            with monkeypatch.context() as patch:
                patch.setattr(alerting, "_prune", prune)
                mark_delivered(state, keys)
    return state


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(raises, deliveries), max_size=60))
def test_pruning_from_the_undelivered_prefix_keeps_what_the_plain_scan_keeps(ops):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(alerting, "ALERTS_RETAINED", RETAINED)
        fast = _replay(ops, alerting._prune, monkeypatch)
        plain = _replay(ops, _plain_scan_prune, monkeypatch)
    assert fast.alert_order == plain.alert_order
    assert fast.alerts == plain.alerts
    assert fast.alert_streaks == plain.alert_streaks


class _CountingOrder(list):
    """alert_order that counts the positions pruning reads."""

    reads = 0

    def __getitem__(self, index):
        _CountingOrder.reads += 1
        return super().__getitem__(index)

    def __iter__(self):
        for key in super().__iter__():
            _CountingOrder.reads += 1
            yield key


def test_a_herd_of_alerts_past_the_limit_reads_each_kept_alert_once_not_once_per_new_alert(monkeypatch):
    monkeypatch.setattr(alerting, "ALERTS_RETAINED", 100)
    state = State(cluster_version=3)
    state.alert_order = _CountingOrder()
    for job in range(100):  # the limit, all undelivered
        record_alert(state, AlertKind.FAILED, f"job-{job}", 1, "why")
    _CountingOrder.reads = 0
    for job in range(100, 1100):  # a herd of 1,000 more, nothing delivered yet
        record_alert(state, AlertKind.FAILED, f"job-{job}", 1, "why")
    assert len(state.alert_order) == 1100  # undelivered alerts are never dropped
    # One read per new alert and one per alert already kept; the plain scan read ~1,000 x 1,100.
    assert _CountingOrder.reads <= 2 * 1100
