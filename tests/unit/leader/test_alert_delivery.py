"""Alert delivery: routes, templates, when a streak is sent again, and one sender per route so a
receiver that hangs delays nobody else's alerts."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from scheduler.core.commands import SetClusterVersion
from scheduler.core.log_format import STREAK_ALERTS_FORMAT
from scheduler.core.model import MISSED, SECOND_US
from scheduler.leader import alerting
from scheduler.leader.alert_delivery import (
    STREAK_REMINDER_US,
    Route,
    delivery_key,
    due_for_delivery,
    parse_route,
    render,
)
from scheduler.leader.alerting import AlertDispatcher
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.local import wait_until
from tests.fakes import T0_US, Core, FakeClock, ImmediateRaftLog, claim, spec, upsert

TEN_S = 10 * SECOND_US


def slot(k: int) -> int:
    return T0_US + k * TEN_S


def _core_with_streak(slots: int, owner: str = "team-a", cluster_version: int = STREAK_ALERTS_FORMAT) -> Core:
    core = Core(FakeClock())
    core.lead()
    assert core.apply(SetClusterVersion(core.clock.tick(), cluster_version, core.state.epoch)).accepted
    core.advance(T0_US + 2 * SECOND_US)
    core.apply_jobs((upsert(spec("a", owner=owner), next_due_us=slot(1)),))
    for k in range(1, slots + 1):
        assert core.claim_runs(claim("a", slot(k), slot(k + 1), status=MISSED, reason=f"miss {k}")).accepted
    return core


# -- routes ------------------------------------------------------------------------------------


def test_a_route_has_one_destination_and_optional_template_and_timeout() -> None:
    assert parse_route("o", {"webhook": "https://chat.example/hook", "template": "slack", "timeout_s": 2}) == Route(
        "webhook", "https://chat.example/hook", "slack", 2.0
    )
    assert parse_route("o", {"log": True}) == Route("log", "")


@pytest.mark.parametrize(
    ("raw", "complaint"),
    [
        ({"webhook": "x", "file": "/tmp/a"}, "exactly one of"),
        ({"email": "a@b"}, "exactly one of"),
        ({"webhook": "ftp://host/x"}, "http:// or https://"),
        ({"file": ""}, "non-empty"),
        ({"log": True, "template": "html"}, "template must be one of json, slack"),
        ({"log": True, "timeout_s": 0}, "timeout_s must be a number"),
        ({"log": True, "timeout_s": True}, "timeout_s must be a number"),
        ("https://x", "must be a mapping"),
    ],
)
def test_a_bad_route_is_refused_with_the_owner_and_the_reason(raw, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint) as refused:
        parse_route("payroll", raw)
    assert "'payroll'" in str(refused.value)


# -- when a streak is sent ---------------------------------------------------------------------


def test_a_streak_is_sent_when_it_opens_once_an_hour_while_it_grows_and_once_when_it_ends() -> None:
    core = _core_with_streak(1)
    alert = next(iter(core.state.alerts.values()))
    now = core.state.now_us
    assert due_for_delivery(alert, now) and delivery_key(alert) == alert.id
    alert.delivered_us, alert.delivered_count = now, 1
    assert not due_for_delivery(alert, now + STREAK_REMINDER_US)  # nothing new to say
    alert.count = 50
    assert not due_for_delivery(alert, now + STREAK_REMINDER_US - 1)
    assert due_for_delivery(alert, now + STREAK_REMINDER_US)
    assert delivery_key(alert) == f"{alert.id}#50"  # an update is not dropped as a repeat
    alert.closed_us = now + 5
    assert due_for_delivery(alert, now + 10)  # the streak ended after growing: a final update


def test_the_json_document_and_the_slack_message_say_how_many_slots_and_since_when() -> None:
    core = _core_with_streak(3)
    alert = next(iter(core.state.alerts.values()))
    document = json.loads(render(alert, "json"))
    assert (document["count"], document["open"]) == (3, True)
    assert document["last_scheduled_at"] and document["scheduled_at"] < document["last_scheduled_at"]
    assert "3 consecutive slots missed" in document["summary"] and "still going" in document["summary"]
    slack = json.loads(render(alert, "slack"))
    assert slack["text"].startswith(":rotating_light: raftcron missed a (owner team-a): 3 consecutive slots")
    assert slack["blocks"][0]["text"]["type"] == "mrkdwn"


# -- the dispatcher: one sender per route ------------------------------------------------------


def _dispatcher(core: Core, routes: dict) -> tuple[AlertDispatcher, LeaderTerm, ImmediateRaftLog]:
    raftlog = ImmediateRaftLog(core.state, core.index)
    raftlog.submit = lambda command, timeout_s: raftlog.apply(command)
    clock = SimpleNamespace(
        read=lambda: (core.state.now_us + 1, core.state.now_us + 1), now_us=lambda: core.state.now_us + 1
    )
    term = LeaderTerm(epoch=core.state.epoch, term=1, clock=clock)
    return AlertDispatcher(term, raftlog, routes, 5.0), term, raftlog


def test_a_hanging_receiver_delays_only_its_own_alerts(monkeypatch) -> None:
    monkeypatch.setattr(alerting, "POLL_S", 0.01)
    core = _core_with_streak(1, owner="slow-team")
    core.apply_jobs((upsert(spec("b", owner="fast-team"), next_due_us=slot(1) + 5),))
    assert core.claim_runs(claim("b", slot(1) + 5, slot(2) + 5, status=MISSED, reason="down")).accepted
    release = threading.Event()
    sent: list[str] = []

    def fake_deliver(alert, route):
        if route.target == "/slow":
            release.wait(30)  # a receiver that hangs until the test lets it go
        sent.append(alert.job_id)

    monkeypatch.setattr(alerting, "deliver", fake_deliver)
    dispatcher, term, raftlog = _dispatcher(core, {"slow-team": {"file": "/slow"}, "fast-team": {"file": "/fast"}})
    loop = threading.Thread(target=dispatcher)
    loop.start()
    try:
        wait_until(lambda: core.state.alerts[f"missed:b@{slot(1) + 5}"].delivered_us, 30, "the fast route's alert")
        assert sent == ["b"] and not core.state.alerts[f"missed:a@{slot(1)}"].delivered_us
        release.set()
        wait_until(lambda: core.state.alerts[f"missed:a@{slot(1)}"].delivered_us, 30, "the slow route's alert")
    finally:
        release.set()
        term.depose("test over")
        loop.join(30)
    assert sorted(sent) == ["a", "b"]


def test_a_failing_route_backs_off_and_its_alert_stays_pending(monkeypatch) -> None:
    monkeypatch.setattr(alerting, "POLL_S", 0.01)
    core = _core_with_streak(1)
    attempts: list[int] = []

    def failing_deliver(alert, route):
        attempts.append(1)
        raise OSError("receiver down")

    monkeypatch.setattr(alerting, "deliver", failing_deliver)
    dispatcher, term, _ = _dispatcher(core, {"default": {"file": "/down"}})
    loop = threading.Thread(target=dispatcher)
    loop.start()
    try:
        wait_until(lambda: attempts, 30, "a first attempt")
        # The clock stands still, so the route's backoff (2 s and up) never passes: one attempt only.
        sender = next(iter(dispatcher._senders.values()))
        wait_until(lambda: sender.retry_at_us > core.state.now_us, 30, "the route to back off")
        assert len(attempts) == 1
    finally:
        term.depose("test over")
        loop.join(30)
    assert not core.state.alerts[f"missed:a@{slot(1)}"].delivered_us


def test_a_delivery_records_the_count_it_told_about() -> None:
    core = _core_with_streak(4)
    dispatcher, term, _ = _dispatcher(core, {})
    key = f"missed:a@{slot(1)}"
    dispatcher._done.put((key, 4))
    assert dispatcher._mark_finished(core.state.cluster_version)
    alert = core.state.alerts[key]
    assert (alert.delivered_count, bool(alert.delivered_us)) == (4, True)


def test_replicated_routes_decide_and_node_routes_are_the_fallback() -> None:
    from scheduler.core.model import AlertRoute

    core = _core_with_streak(1, owner="team-a")
    dispatcher, _, _ = _dispatcher(core, {"team-a": {"file": "/node-config"}})
    alert = core.state.alerts[f"missed:a@{slot(1)}"]
    assert dispatcher.route_for(alert, {}).target == "/node-config"  # no replicated routes
    replicated = {"team": AlertRoute("team", "https://hooks.example/secret", match="team-*", template="slack")}
    chosen = dispatcher.route_for(alert, replicated)
    assert (chosen.destination, chosen.target, chosen.template) == ("webhook", "https://hooks.example/secret", "slack")
    assert "secret" not in chosen.shown
    # Routes exist but none matches this owner: logged, never the node's config.
    other = {"ops": AlertRoute("ops", "https://o.example", match="ops")}
    assert dispatcher.route_for(alert, other).destination == "log"
