"""HTTP targets are authority like shell ones: named `http:OWNER`, granted only by `http:` patterns,
leased only by workers that ask for them."""

from __future__ import annotations

import pytest

from scheduler.core.model import HttpTarget, JobSpec
from scheduler.leader.dispatch import leased_queues, target_key
from scheduler.security.policy import canonical_target, lease_denial, run_denial, target_denial
from scheduler.security.principals import ADMIN, SUBMITTER, WORKER, Principal

URL = "https://hooks.example.com/ping"


def http_job(owner: str) -> JobSpec:
    return JobSpec(
        id="ping", schedule="* * * * *", target_kind="http", target=URL, owner=owner, http=HttpTarget(url=URL)
    )


def test_an_http_job_is_named_by_its_owner_not_its_url() -> None:
    assert canonical_target("http", URL, "ops") == "http:ops"
    assert target_key(http_job("ops")) == "http:ops"


@pytest.mark.parametrize(
    ("principal", "owner", "allowed"),
    [
        (Principal("old-ci", SUBMITTER, owners=("*",)), "ops", False),  # no targets: handlers only
        (Principal("star-ci", SUBMITTER, owners=("*",), targets=("*",)), "ops", False),  # * is handlers only
        (Principal("sh-ci", SUBMITTER, owners=("*",), targets=("shell:*",)), "ops", False),  # shell is not http
        (Principal("ops-ci", SUBMITTER, owners=("*",), targets=("http:ops",)), "ops", True),
        (Principal("ops-ci", SUBMITTER, owners=("*",), targets=("http:ops",)), "finance", False),
        (Principal("all-ci", SUBMITTER, owners=("*",), targets=("handler:*", "http:*")), "finance", True),
        (Principal("root", ADMIN), "ops", True),
    ],
)
def test_a_submitter_needs_an_http_pattern_for_http_jobs(principal: Principal, owner: str, allowed: bool) -> None:
    denial = target_denial(principal, "ping", owner, "http", URL)
    assert (denial is None) == allowed
    if denial:
        assert f"'http:{owner}'" in denial and "http targets need a pattern starting with 'http:'" in denial


def test_leases_name_http_queues_explicitly() -> None:
    queued = ["reports.build", "shell:ops", "http:ops", "http:finance"]
    assert leased_queues(["http"], queued) == ["http:ops", "http:finance"]
    assert leased_queues(["http:ops"], queued) == ["http:ops"]
    assert leased_queues(["shell"], queued) == ["shell:ops"]  # an older shell worker gets no request
    # A client that names no targets was written before HTTP targets: it gets none of them.
    assert leased_queues([], queued) == ["reports.build", "shell:ops"]


def test_a_worker_token_serves_http_jobs_only_when_its_targets_say_so() -> None:
    every = Principal("all-w", WORKER, targets=("*",))
    http_any = Principal("http-w", WORKER, targets=("http",))
    ops = Principal("ops-w", WORKER, targets=("http:ops",))
    handlers = Principal("h-w", WORKER, targets=("reports.*", "shell"))
    assert lease_denial(every, ["http"]) is None and lease_denial(http_any, ["http"]) is None
    assert run_denial(http_any, "j@t", "http:finance") is None
    assert lease_denial(ops, ["http:ops"]) is None and lease_denial(ops, ["http"]) is not None
    assert run_denial(ops, "j@t", "http:finance") is not None
    assert lease_denial(handlers, ["http"]) is not None and run_denial(handlers, "j@t", "http:ops") is not None


def test_the_example_principals_file_grants_http_as_it_says() -> None:
    from pathlib import Path

    from scheduler.security.principals import Authenticator

    path = Path(__file__).resolve().parents[3] / "examples" / "principals.yaml"
    found = {p.name: p for p in Authenticator.from_file(path).principals}
    assert target_denial(found["ops-ci"], "j", "ops", "http", URL) is None
    assert target_denial(found["finance-ci"], "j", "finance", "http", URL) is not None
    assert lease_denial(found["ops-http-workers"], ["http:ops"]) is None
    assert lease_denial(found["ops-http-workers"], ["http"]) is not None
