"""`routes:` in job files: read and checked, planned like calendars (admin only, dropped only by a
pruning admin's file that has a `routes:` section), held in replicated state, picked per owner."""

from __future__ import annotations

import msgspec
import pytest
import yaml

from scheduler.core.codec import decode_snapshot, encode_snapshot
from scheduler.core.commands import ApplyJobs
from scheduler.core.log_format import required_log_format
from scheduler.core.model import SECOND_US, AlertRoute
from scheduler.core.routes import redacted_url
from scheduler.leader.alert_delivery import pick_route, route_of
from scheduler.rpc.convert import route_from_pb, route_to_pb
from scheduler.security.principals import ADMIN, SUBMITTER, Principal
from scheduler.specs import SpecError
from scheduler.specs.apply_plan import apply_refusal, plan_apply
from scheduler.specs.reader import parse_job_document
from tests.fakes import Core

ROOT = Principal("root", ADMIN)
FINANCE_CI = Principal("fin-ci", SUBMITTER, owners=("finance",), targets=("handler:jobs.*",))
SLACK = AlertRoute("pay", "https://hooks.slack.com/services/T0/B0/secret", match="payments", template="slack")
EVERYONE = AlertRoute("all", "http://alerts.example.com/in")


def read(routes: object):
    text = yaml.safe_dump({"jobs": [], "routes": routes}, sort_keys=False)
    return parse_job_document(text, "jobs.yaml")


def test_routes_read_with_their_defaults() -> None:
    document = read({"pay": {"match": "payments", "url": SLACK.url, "template": "slack"}, "all": {"url": EVERYONE.url}})
    assert document.routes == [SLACK, EVERYONE] and document.declares_routes
    assert parse_job_document("jobs: []\n", "jobs.yaml").declares_routes is False
    timed = read({"x": {"url": "https://a.example", "timeout": "2s", "backoff": "1m"}}).routes[0]
    assert (timed.timeout_us, timed.backoff_max_us) == (2 * SECOND_US, 60 * SECOND_US)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"url": "ftp://x.example/secret"}, "url must be an http:// or https:// URL"),
        ({"url": "https://x.example", "template": "teams"}, "template must be one of json, slack"),
        ({"url": "https://x.example", "timeout": "2m"}, "timeout must be more than 0s and at most 60s"),
        ({"match": "a"}, "is required"),
        ({"url": "https://x.example", "color": "red"}, "unknown key 'color'"),
    ],
)
def test_a_bad_route_is_one_problem_that_never_quotes_the_url(body: dict, words: str) -> None:
    with pytest.raises(SpecError) as caught:
        read({"r": body})
    (problem,) = caught.value.problems
    assert problem.field.startswith("routes.r") and words in problem.message
    assert "secret" not in str(caught.value)


def plan(core: Core, routes, prune: bool = False, caller: Principal | None = None):
    return plan_apply(core.state, [], [], prune=prune, caller=caller, author="a", request_id="", routes=routes)


def test_routes_are_planned_like_calendars_and_held_in_state() -> None:
    core = Core()
    core.lead()
    command = plan(core, [SLACK, EVERYONE])
    assert command.routes == (SLACK, EVERYONE) and required_log_format(command) == 3
    assert core.apply(command).accepted
    assert core.state.routes == {"pay": SLACK, "all": EVERYONE}
    assert plan(core, [SLACK, EVERYONE]).routes is msgspec.UNSET  # unchanged: nothing sent
    assert plan(core, None, prune=True).route_removals is msgspec.UNSET  # a file without routes:
    pruned = plan(core, [SLACK], prune=True)
    assert pruned.route_removals == ("all",)
    assert core.apply(pruned).accepted and core.state.routes == {"pay": SLACK}
    restored = decode_snapshot(encode_snapshot(core.state))
    assert restored.routes == {"pay": SLACK}


def test_a_jobs_only_apply_needs_no_newer_format() -> None:
    assert required_log_format(plan(Core(), None)) == 1
    assert required_log_format(ApplyJobs(1, "a", "r")) == 1


def test_only_an_admin_changes_routes() -> None:
    core = Core()
    core.lead()
    command = plan(core, [SLACK], caller=FINANCE_CI)
    assert apply_refusal(core.state, command, FINANCE_CI) == "fin-ci may not change alert routes ['pay']: needs admin"
    assert apply_refusal(core.state, command, ROOT) is None
    assert core.apply(plan(core, [SLACK])).accepted
    # The same routes again (a shared file) change nothing, so a submitter may apply it.
    assert apply_refusal(core.state, plan(core, [SLACK], caller=FINANCE_CI), FINANCE_CI) is None
    assert plan(core, [], prune=True, caller=FINANCE_CI).route_removals is msgspec.UNSET


def test_the_core_refuses_a_route_the_reader_would_have_refused() -> None:
    core = Core()
    core.lead()
    bad = AlertRoute("x", "file:///etc/passwd")
    result = core.apply(ApplyJobs(core.clock.tick(), "a", "r1", routes=(bad,)))
    assert result.rejection is not None and "http:// or https://" in result.rejection.message


def test_the_most_specific_matching_route_wins() -> None:
    team = AlertRoute("team", "https://t.example", match="pay*")
    routes = {"all": EVERYONE, "pay": SLACK, "team": team}
    assert pick_route("payments", routes) == SLACK  # the owner itself
    assert pick_route("payroll", routes) == team  # `pay*` before `*`
    assert pick_route("infra", routes) == EVERYONE
    assert pick_route("infra", {"pay": SLACK}) is None
    delivered = route_of(SLACK)
    assert (delivered.template, delivered.timeout_s, delivered.backoff_max_s) == ("slack", 5.0, 300.0)
    assert "secret" not in delivered.shown and delivered.shown == "route pay"


def test_urls_are_redacted_for_non_admins() -> None:
    assert redacted_url(SLACK.url) == "https://hooks.slack.com/…"
    assert redacted_url("https://user:pw@h.example:8443/x?token=1") == "https://h.example:8443/…"
    assert route_to_pb(SLACK, redact=True).url == "https://hooks.slack.com/…"
    assert route_from_pb(route_to_pb(SLACK, redact=False)) == SLACK
