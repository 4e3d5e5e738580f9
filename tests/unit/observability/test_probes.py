"""/healthz and /readyz: the readiness decision as a pure function, and the WSGI routing that
serves it without a token beside a dashboard that wants one."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from scheduler.dashboard.server import http_app
from scheduler.observability.healthcheck import main as healthcheck_main
from scheduler.observability.probes import MAX_APPLY_LAG, ReadinessFacts, readiness_problem

READY = ReadinessFacts(
    halted="",
    member=True,
    leader_id="n1",
    leader_epoch_applied=True,
    leader_connected=True,
    commit_index=500,
    applied_index=500,
)


def test_a_member_that_knows_its_connected_leader_and_has_applied_is_ready():
    assert readiness_problem(READY) is None
    assert readiness_problem(replace(READY, applied_index=500 - MAX_APPLY_LAG)) is None


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"halted": "this node is older than the log: upgrade it (entry 9: ...)\nmore"}, "halted: this node is older"),
        ({"member": False}, "this node is not a member of the cluster (yet)"),
        ({"leader_id": "", "leader_epoch_applied": False}, "no leader is known"),
        ({"leader_connected": False}, "leader n1 is not reachable from this node"),
        ({"leader_epoch_applied": False}, "leader n1 has not opened an epoch this node has applied"),
        ({"applied_index": 500 - MAX_APPLY_LAG - 1}, "catching up: applied index 399 is 101 entries behind"),
    ],
)
def test_each_reason_to_be_unready_is_one_line(change, reason):
    problem = readiness_problem(replace(READY, **change))
    assert problem is not None and problem.startswith(reason)
    assert "\n" not in problem


class _Dashboard:
    """Stands for the dashboard: it wants a token for every page."""

    def __call__(self, environ, start_response):
        start_response("401 Unauthorized", [("Content-Type", "text/html")])
        return [b"token please"]


def call(app, path: str, method: str = "GET") -> tuple[str, dict, bytes]:
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "wsgi.input": io.BytesIO(), "QUERY_STRING": ""}
    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def test_probes_need_no_token_and_answer_plain_text():
    problem: list[str | None] = [None]
    app = http_app(CollectorRegistry(), _Dashboard(), readiness=lambda: problem[0])
    assert call(app, "/healthz")[0::2] == ("200 OK", b"ok\n")
    status, headers, body = call(app, "/readyz")
    assert (status, body, headers["Content-Type"]) == ("200 OK", b"ready\n", "text/plain; charset=utf-8")
    problem[0] = "no leader is known"
    assert call(app, "/readyz")[0::2] == ("503 Service Unavailable", b"not ready: no leader is known\n")
    assert call(app, "/healthz")[0] == "200 OK"  # the process still answers
    assert call(app, "/readyz", "HEAD")[0::2] == ("503 Service Unavailable", b"")
    assert call(app, "/readyz", "POST")[0] == "405 Method Not Allowed"
    assert call(app, "/")[0] == "401 Unauthorized"
    assert call(app, "/metrics")[0] == "200 OK"


def test_a_failing_readiness_check_answers_503_not_a_traceback():
    def broken():
        raise RuntimeError("boom")

    status, _, body = call(http_app(CollectorRegistry(), _Dashboard(), readiness=broken), "/readyz")
    assert status == "503 Service Unavailable"
    assert body == b"not ready: the readiness check failed; the node's log has the details\n"


def test_without_readiness_the_probe_paths_stay_the_dashboards():
    assert call(http_app(CollectorRegistry(), _Dashboard()), "/readyz")[0] == "401 Unauthorized"


def test_the_health_check_command_explains_its_usage_and_an_unreachable_url(capsys):
    assert healthcheck_main([]) == 2
    assert "usage: python -m scheduler.observability.healthcheck URL" in capsys.readouterr().err
    assert healthcheck_main(["http://127.0.0.1:9/readyz"]) == 1
    assert capsys.readouterr().err.startswith("http://127.0.0.1:9/readyz: ")
