"""HTTP targets on a real cluster: `raftcron worker --http` calls a local server with the run key
and the fencing token, a 2xx ends the run succeeded, a 500 is retried and then fails, and a
submitter whose targets hold no `http:` pattern cannot create such a job. One cluster, one worker."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduler.core.model import SECOND_US, HttpTarget, JobSpec, RetryPolicy
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from scheduler.security.principals import ADMIN, SUBMITTER, WORKER, Principal
from tests.security.principals_cluster import refused, secured_cluster, start_worker

pytestmark = pytest.mark.integration

PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("hooks-ci", SUBMITTER, owners=("ops",), targets=("http:ops",)),
    Principal("star-ci", SUBMITTER, owners=("*",), targets=("*",)),  # every handler, no HTTP
    Principal("http-worker", WORKER, targets=("http",)),
]


class Server:
    """A local server: /ok answers 200, /fail 500; it records each request's path and headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                seen.append((self.path, dict(self.headers)))
                status = 200 if self.path == "/ok" else 500
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def seen(self, path: str) -> list[dict[str, str]]:
        return [headers for p, headers in self.requests if p == path]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    server = Server()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, server):
    cluster = secured_cluster(tmp_path_factory.mktemp("http"), PRINCIPALS)
    worker = None
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        worker = start_worker(cluster, "http-worker", "--http", "--http-allow", f"127.0.0.1:{server.port}")
        yield cluster
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        cluster.stop()


def http_job(job_id: str, url: str, attempts: int = 1) -> JobSpec:
    # Fires only when triggered (a yearly slot); retries 0.5 s apart.
    return JobSpec(
        id=job_id,
        schedule="0 0 1 1 *",
        target_kind="http",
        target=url,
        owner="ops",
        jitter="pinned",
        timeout_us=10 * SECOND_US,
        retry=RetryPolicy(max_attempts=attempts, backoff_initial_us=SECOND_US // 2, backoff_max_us=SECOND_US),
        http=HttpTarget(url=url, method="POST", timeout_us=5 * SECOND_US),
    )


def final_run(cluster, run_key: str, timeout_s: float = 30):
    def done():
        with cluster.client(timeout_s=10) as root:
            run = root.get_run(run_key=run_key, linearizable=True).run
        return run if STATUS_FROM_PB[run.status] in ("succeeded", "failed", "timed_out") else None

    return wait_until(done, timeout_s, f"{run_key} to end")


def test_an_http_job_arrives_with_the_run_key_and_token_and_succeeds(cluster, server):
    with cluster.client(role="hooks-ci", timeout_s=10) as hooks:
        hooks.apply_jobs(jobs=[spec_to_pb(http_job("hooks.ok", f"http://127.0.0.1:{server.port}/ok"))])
        run_key = hooks.trigger_job(job_id="hooks.ok").run.run_key
    run = final_run(cluster, run_key)
    assert STATUS_FROM_PB[run.status] == "succeeded", run.error
    [headers] = server.seen("/ok")
    assert headers["Idempotency-Key"] == run_key
    assert headers["X-Raftcron-Fencing-Token"] == str(run.fencing_token)
    assert headers["X-Raftcron-Job"] == "hooks.ok" and headers["X-Raftcron-Attempt"] == "1"


def test_a_500_is_retried_then_fails(cluster, server):
    with cluster.client(role="hooks-ci", timeout_s=10) as hooks:
        hooks.apply_jobs(jobs=[spec_to_pb(http_job("hooks.fail", f"http://127.0.0.1:{server.port}/fail", 2))])
        run_key = hooks.trigger_job(job_id="hooks.fail").run.run_key
    run = final_run(cluster, run_key)
    assert STATUS_FROM_PB[run.status] == "failed"
    assert [a.error for a in run.attempts] == ["HTTP 500 Internal Server Error"] * 2
    tokens = [h["X-Raftcron-Fencing-Token"] for h in server.seen("/fail")]
    assert len(tokens) == 2 and tokens[0] != tokens[1]  # each attempt its own lease


def test_a_submitter_without_an_http_pattern_cannot_create_an_http_job(cluster, server):
    with cluster.client(role="star-ci", timeout_s=10) as star:
        details = refused(lambda: star.apply_jobs(jobs=[spec_to_pb(http_job("hooks.x", "http://127.0.0.1:1/"))]))
    assert "star-ci" in details and "'http:ops'" in details
