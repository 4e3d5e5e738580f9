"""The HTTP executor against in-process servers: headers, status codes, refusals, deadlines."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from tests.unit.worker.test_worker_fakes import fake_cluster, make_grant
from worker import OutcomeKind, Worker
from worker._execution import execute
from worker._http import HttpAllowList, HttpCall, HttpRequest
from worker.api.v1 import common_pb2, worker_pb2
from worker.cli import main as worker_main
from worker.testing import make_context


class Recorded:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []


@contextmanager
def http_server(routes: dict[str, tuple[int, dict[str, str], bytes]]) -> Iterator[tuple[int, Recorded]]:
    """A server on 127.0.0.1 answering each path with (status, headers, body); it records every request."""
    seen = Recorded()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.requests.append((self.command, self.path, dict(self.headers), body))
            status, headers, content = routes.get(self.path.split("?")[0], (404, {}, b"no such path"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_PUT = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """Accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


def call(url: str, allow: str | None = None, payload=None, deadline_s: float | None = 30.0, **request):
    """Send `url`'s request through `execute`, allowing its own host:port unless `allow` is given."""
    ctx = make_context(payload, job_id="hooks.ping", fencing_token=4711, attempt=2, deadline_s=deadline_s)
    allowed = HttpAllowList([allow or urlsplit(url).netloc])
    return ctx, execute(HttpCall(HttpRequest(url=url, **request), allowed), ctx)


def test_a_2xx_answer_succeeds_and_the_server_sees_the_run_key_and_the_token() -> None:
    with http_server({"/ping": (200, {}, b"pong")}) as (port, seen):
        ctx, outcome = call(
            f"http://127.0.0.1:{port}/ping?x=1", method="POST", headers=(("X-Team", "ops"),), body="hello"
        )
    assert outcome.kind == OutcomeKind.SUCCESS
    assert (outcome.http_status, outcome.stdout_tail, outcome.output_tail) == (200, "pong", "HTTP 200 OK\npong")
    [(method, path, headers, body)] = seen.requests
    assert (method, path, body) == ("POST", "/ping?x=1", b"hello")
    assert headers["Idempotency-Key"] == ctx.run_key
    assert headers["X-Raftcron-Fencing-Token"] == "4711"
    assert headers["X-Raftcron-Job"] == "hooks.ping"
    assert headers["X-Raftcron-Attempt"] == "2"
    assert headers["X-Raftcron-Scheduled-At"] == ctx.scheduled_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert headers["X-Team"] == "ops"


def test_a_run_payload_is_sent_as_the_json_body() -> None:
    with http_server({"/hook": (202, {}, b"")}) as (port, seen):
        _, outcome = call(f"http://127.0.0.1:{port}/hook", payload={"day": "tuesday"}, method="POST", body="x")
    assert outcome.kind == OutcomeKind.SUCCESS
    [(_, _, headers, body)] = seen.requests
    assert json.loads(body) == {"day": "tuesday"} and headers["Content-Type"] == "application/json"


def test_a_500_is_a_failure_with_its_status_and_body() -> None:
    with http_server({"/x": (500, {}, b"database down")}) as (port, _):
        _, outcome = call(f"http://127.0.0.1:{port}/x")
    assert outcome.kind == OutcomeKind.FAILURE and not outcome.final  # retried per the job's policy
    assert (outcome.error, outcome.http_status, outcome.stdout_tail) == (
        "HTTP 500 Internal Server Error",
        500,
        "database down",
    )


def test_success_codes_decide_what_succeeds() -> None:
    with http_server({"/gone": (404, {}, b"")}) as (port, _):
        _, listed = call(f"http://127.0.0.1:{port}/gone", success_codes=frozenset({404}))
        _, default = call(f"http://127.0.0.1:{port}/gone")
    assert listed.kind == OutcomeKind.SUCCESS and default.kind == OutcomeKind.FAILURE


def test_connection_refused_is_a_failure_naming_the_host() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens once closed
    _, outcome = call(f"http://127.0.0.1:{port}/")
    assert outcome.kind == OutcomeKind.FAILURE
    assert outcome.error == f"connection refused to 127.0.0.1:{port}"
    assert outcome.exception_type == "ConnectionRefusedError"


def test_a_server_that_never_answers_times_out_at_the_request_timeout() -> None:
    with silent_server() as (port, accepted):
        started = time.monotonic()
        _, outcome = call(f"http://127.0.0.1:{port}/", timeout_s=0.3)
        elapsed = time.monotonic() - started
    assert outcome.kind == OutcomeKind.FAILURE and outcome.error == "timed out after 0.3 s"
    assert accepted and 0.25 < elapsed < 2.0


def test_a_server_that_never_answers_ends_at_the_runs_deadline() -> None:
    with silent_server() as (port, _):
        started = time.monotonic()
        _, outcome = call(f"http://127.0.0.1:{port}/", deadline_s=0.4, timeout_s=60.0)
        elapsed = time.monotonic() - started
    assert outcome.kind == OutcomeKind.FAILURE and elapsed < 2.0


def test_redirects_are_not_followed_by_default() -> None:
    routes = {"/old": (302, {"Location": "/new"}, b""), "/new": (200, {}, b"here")}
    with http_server(routes) as (port, seen):
        _, outcome = call(f"http://127.0.0.1:{port}/old")
    assert outcome.kind == OutcomeKind.FAILURE and outcome.http_status == 302
    assert "follow_redirects: true" in outcome.error
    assert [path for _, path, _, _ in seen.requests] == ["/old"]


def test_redirects_are_followed_when_the_job_says_so_and_stay_within_the_allow_list() -> None:
    with http_server({"/new": (200, {}, b"here")}) as (port, _):
        routes = {
            "/old": (307, {"Location": f"http://127.0.0.1:{port}/new"}, b""),
            "/away": (302, {"Location": "http://elsewhere.invalid/"}, b""),
        }
        with http_server(routes) as (first, _):
            allow = HttpAllowList([f"127.0.0.1:{first}", f"127.0.0.1:{port}"])
            followed = execute(
                HttpCall(HttpRequest(f"http://127.0.0.1:{first}/old", follow_redirects=True), allow), make_context()
            )
            away = execute(
                HttpCall(HttpRequest(f"http://127.0.0.1:{first}/away", follow_redirects=True), allow), make_context()
            )
    assert followed.kind == OutcomeKind.SUCCESS and followed.stdout_tail == "here"
    assert away.kind == OutcomeKind.FAILURE and "elsewhere.invalid:80 is not allowed" in away.error


def test_a_host_outside_the_allow_list_is_refused_without_connecting() -> None:
    with silent_server() as (port, accepted):
        _, outcome = call(f"http://127.0.0.1:{port}/", allow="api.internal")
    assert outcome.kind == OutcomeKind.FAILURE
    assert (
        outcome.error
        == f"host 127.0.0.1:{port} is not allowed on this worker: start it with --http-allow 127.0.0.1:{port}"
    )
    assert accepted == []


def test_the_allow_list_reads_hosts_and_ports() -> None:
    allow = HttpAllowList(["API.internal", "hooks.example.com:8443", "[::1]:9000"])
    assert allow.allows("api.internal", 80, "http") and allow.allows("api.internal", 443, "https")
    assert not allow.allows("api.internal", 8080, "http") and not allow.allows("api.internal", 443, "http")
    assert allow.allows("hooks.example.com", 8443, "https") and not allow.allows("hooks.example.com", 443, "https")
    assert allow.allows("::1", 9000, "http")
    for bad in ("http://x", "x/path", "*.example.com", "x:99999", "u@x", ""):
        with pytest.raises(ValueError, match="--http-allow"):
            HttpAllowList([bad])


def test_the_worker_needs_an_allow_list_with_http(capsys) -> None:
    with pytest.raises(ValueError, match="http_allow"):
        Worker(["127.0.0.1:1"], http=True)
    with pytest.raises(ValueError, match="http=True"):
        Worker(["127.0.0.1:1"], http_allow=["x"])
    assert worker_main(["--cluster", "127.0.0.1:1", "--http"]) == 2
    assert "--http needs --http-allow" in capsys.readouterr().err
    assert worker_main(["--cluster", "127.0.0.1:1", "--http", "--http-allow", "http://x"]) == 2
    assert "expected HOST or HOST:PORT" in capsys.readouterr().err


def test_an_http_grant_runs_through_the_worker_and_reports_its_status() -> None:
    with http_server({"/ok": (200, {}, b"fine"), "/bad": (503, {}, b"busy")}) as (port, seen):
        with fake_cluster() as (service, address):
            for token, path in ((1, "/ok"), (2, "/bad")):
                grant = make_grant(f"job{token}", token)
                grant.target.CopyFrom(
                    common_pb2.Target(http=common_pb2.HttpTarget(url=f"http://127.0.0.1:{port}{path}"))
                )
                service.add(grant)
            worker = Worker([address], http=True, http_allow=[f"127.0.0.1:{port}"], lease_wait_s=0.5)
            assert worker.targets == ["http"]
            worker.start()
            try:
                assert service.wait_for(lambda: len(service.completions) == 2)
            finally:
                worker.stop()
    ok, bad = service.completion(1), service.completion(2)
    assert ok.kind == worker_pb2.SUCCESS and ok.output_tail == "HTTP 200 OK\nfine"
    assert bad.kind == worker_pb2.FAILURE and bad.error == "HTTP 503 Service Unavailable"
    assert sorted(headers["X-Raftcron-Fencing-Token"] for _, _, headers, _ in seen.requests) == ["1", "2"]
