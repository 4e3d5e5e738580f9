"""The dashboard in a real headless Chromium against a real local cluster and a real worker.

Jobs fire every second (one succeeds, one fails with exit code 3, one Python handler raises, one
whose class is killed, one whose handler no worker runs, one hourly job that uses a resource);
the test waits until their runs are recorded, then clicks from the job list to a job to a run,
and looks at the herd, alerts, kill switch, workers and front pages (problems first; the front
page reloads itself). A screenshot of each page goes to test-artifacts/dashboard/.

Needs Debian's chromium (scripts/e2e-prereqs.sh installs it) and the playwright package
(the `test` extra); without them the test skips, and with CI=true it fails instead.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scheduler.core.model import JobSpec, Resource, RetryPolicy
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, resource_to_pb, spec_to_pb
from tests.integration.conftest import FAST_RAFT
from worker.api.v1 import runs_pb2

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
CHROMIUM = os.environ.get("RAFTCRON_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_S = 40


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (scripts/e2e-prereqs.sh installs it)")
    pytest.skip(f"{reason}; run scripts/e2e-prereqs.sh")


def _port_base() -> int:
    """P such that P+1..3 (Raft), P+101..3 (gRPC) and P+201..3 (HTTP) are free on loopback."""
    import random

    # Below the kernel's ephemeral ports (32768+) and apart from the integration tests' range.
    for _ in range(100):
        base = random.randrange(10_000, 19_700, 300)
        ports = [base + offset + i for offset in (0, 100, 200) for i in (1, 2, 3)]
        free = True
        for port in ports:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    free = False
                    break
        if free:
            return base
    raise RuntimeError("no free port range")


def every_second(job_id: str, job_class: str, command: str, **fields) -> JobSpec:
    return JobSpec(
        id=job_id,
        schedule="* * * * * *",
        target_kind="shell",
        target=command,
        job_class=job_class,
        owner="team-dash",
        jitter="pinned",
        **fields,
    )


HANDLERS = """
def explode(ctx):
    raise KeyError("customer 42")
"""

JOBS = [
    every_second("e2e.tick", "reports", 'echo "hello from $RAFTCRON_RUN_KEY"'),
    JobSpec(
        id="e2e.python",
        schedule="* * * * * *",
        target_kind="handler",
        target="e2e.explode",
        owner="team-dash",
        jitter="pinned",
        retry=RetryPolicy(max_attempts=1),
    ),
    JobSpec(
        id="e2e.orphan",
        schedule="*/5 * * * * *",
        target_kind="handler",
        target="nobody.runs.this",
        owner="team-dash",
        jitter="pinned",
    ),
    every_second("e2e.fail", "reports", "echo boom; echo 'disk full' >&2; exit 3", retry=RetryPolicy(max_attempts=1)),
    every_second("e2e.killed", "batch", "echo never"),
    JobSpec(
        id="e2e.hourly",
        schedule="0 * * * *",
        target_kind="shell",
        target="echo hourly",
        job_class="reports",
        owner="team-dash",
        uses=("db-main",),
    ),
]


def runs_of(cluster: LocalCluster, job_id: str) -> list:
    with cluster.client() as client:
        request = runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=True)
        return list(client.list_runs(request).runs)


def count(cluster: LocalCluster, job_id: str, status: str, reason_prefix: str = "") -> int:
    return sum(
        1
        for run in runs_of(cluster, job_id)
        if STATUS_FROM_PB.get(run.status) == status and run.reason.startswith(reason_prefix)
    )


@pytest.fixture
def browser_context():
    if not Path(CHROMIUM).exists():
        _missing(f"no Chromium at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed")
    with tempfile.TemporaryDirectory(prefix="raftcron-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(10_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def cluster(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", nodes=3, port_base=_port_base(), metrics=True, overrides=FAST_RAFT)
    worker = None
    try:
        cluster.start()
        cluster.wait_for_leader(30)
        log = open(tmp_path / "worker.log", "ab")
        (tmp_path / "e2e_handlers.py").write_text(HANDLERS)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "worker",
                "--cluster",
                cluster.cluster_arg,
                "--shell",
                "--handlers",
                "e2e.explode=e2e_handlers:explode",
                "--worker-id",
                "e2e-worker",
                "--concurrency",
                "8",
                "--lease-wait",
                "1",
            ],
            env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        yield cluster
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        cluster.stop()


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_dashboard_in_a_real_browser(cluster, browser_context):
    with cluster.client() as client:
        client.apply_jobs(
            jobs=[spec_to_pb(spec) for spec in JOBS],
            author="e2e",
            resources=[resource_to_pb(Resource("db-main", max_concurrent=5))],
        )
        client.kill_class(job_class="batch", reason="bad upstream data", author="carol")
    wait_until(lambda: count(cluster, "e2e.tick", "succeeded") >= 3, WAIT_S, "three successful runs of e2e.tick")
    wait_until(lambda: count(cluster, "e2e.fail", "failed") >= 1, WAIT_S, "a failed run of e2e.fail")
    wait_until(lambda: count(cluster, "e2e.killed", "skipped", "killed:") >= 2, WAIT_S, "killed slots of e2e.killed")

    wait_until(lambda: count(cluster, "e2e.python", "failed") >= 1, WAIT_S, "a failed run of e2e.python")
    wait_until(lambda: count(cluster, "e2e.orphan", "queued") >= 1, WAIT_S, "a queued run of e2e.orphan")

    base = f"http://{cluster.members[0].metrics_address}"
    page = browser_context.new_page()
    refused_by_csp: list[str] = []
    page.on(
        "console", lambda message: refused_by_csp.append(message.text) if "Content Security" in message.text else None
    )

    # Job list, then a search.
    page.goto(f"{base}/jobs")
    links = page.locator("a.job-link")
    assert sorted(links.all_inner_texts()) == [
        "e2e.fail",
        "e2e.hourly",
        "e2e.killed",
        "e2e.orphan",
        "e2e.python",
        "e2e.tick",
    ]
    killed_row = page.locator("tr", has=page.locator("a.job-link", has_text="e2e.killed"))
    assert killed_row.locator(".badge.killed").count() == 1
    shot(page, "jobs")
    page.fill("input[name=q]", "tick")
    page.press("input[name=q]", "Enter")
    page.wait_for_url("**/jobs?q=tick")
    assert page.locator("a.job-link").all_inner_texts() == ["e2e.tick"]
    assert "1 job match" in page.inner_text("main")

    # Job page: its timeline shows fired slots, each linking to its run.
    page.click("a.job-link")
    page.wait_for_url("**/jobs/e2e.tick")
    assert page.inner_text("h1") == "Job e2e.tick"
    fired = page.locator("svg.timeline rect.fate-on_time, svg.timeline rect.fate-late")
    assert fired.count() >= 3
    assert page.locator(".legend-item[data-fate=upcoming]").count() == 1
    assert page.locator("h2", has_text="Next fires").count() == 1
    shot(page, "job")

    # Run page: attempt, worker, token, exit code and output tail.
    page.locator("tr", has=page.locator(".fate[data-fate=on_time], .fate[data-fate=late]")).first.locator(
        "a.run-link"
    ).click()
    page.wait_for_url("**/runs/e2e.tick/*")
    text = page.inner_text("main")
    assert "e2e-worker" in text and "succeeded" in text
    assert int(page.inner_text(".token")) > 0
    assert page.inner_text(".exit-code") == "0"
    assert "hello from e2e.tick@" in page.inner_text("pre.output-tail")
    assert page.locator("table.attempts tr").count() == 2  # a header and one attempt
    shot(page, "run")

    # The failing job: a failed slot on its timeline, exit code 3 and the output on its run page.
    page.goto(f"{base}/jobs/e2e.fail")
    assert page.locator("svg.timeline rect.fate-failed").count() >= 1
    page.locator("tr", has=page.locator(".fate[data-fate=failed]")).first.locator("a.run-link").click()
    page.wait_for_url("**/runs/e2e.fail/*")
    assert page.inner_text(".exit-code") == "3"
    assert "boom" in page.inner_text("pre.output-tail")
    shot(page, "run-failed")

    # A Python handler that raised: no exit code, its error instead.
    page.goto(f"{base}/jobs/e2e.python")
    page.locator("tr", has=page.locator(".fate[data-fate=failed]")).first.locator("a.run-link").click()
    page.wait_for_url("**/runs/e2e.python/*")
    assert page.inner_text(".exit-code") == "none"
    assert "KeyError: 'customer 42'" in page.inner_text("main")
    shot(page, "run-python-failed")

    # The killed class: its slots are skipped, and say why.
    page.goto(f"{base}/jobs/e2e.killed")
    assert page.locator("svg.timeline rect.fate-skipped").count() >= 2
    assert "skipped: killed: bad upstream data (by carol)" in page.inner_text("main")
    shot(page, "job-killed")

    page.goto(f"{base}/herd")
    assert page.locator("svg.forecast polyline[data-series='all jobs']").count() == 1
    assert page.locator("svg.forecast polyline[data-series='uses db-main']").count() == 1
    assert "db-main" in page.inner_text("main")
    shot(page, "herd")

    page.goto(f"{base}/alerts")
    alerts = page.inner_text("main")
    assert "e2e.fail" in alerts and "e2e.killed" in alerts and "class batch killed by carol" in alerts
    shot(page, "alerts")

    page.goto(f"{base}/kills")
    active = page.locator("table.kills").inner_text()
    assert "batch" in active and "bad upstream data" in active and "carol" in active and "until revived" in active
    shot(page, "kills")

    page.click("header nav a:text('Overview')")
    page.wait_for_url(f"{base}/")
    text = page.inner_text("main")
    leader = cluster.leader()
    assert leader is not None and f"leader\n{leader}" in text.replace("\t", "\n")
    assert page.locator("table.peers tr").count() == 4  # a header and three peers
    # Problems first, then the Raft health.
    assert text.index("Problems") < text.index("Raft health")
    assert page.locator("table.failing a", has_text="e2e.fail").count() == 1
    assert page.locator("table.failing a", has_text="e2e.python").count() == 1
    # The leader knows no worker polls the orphan's target: it lists it at once (a follower only
    # after its due runs waited 30 s, since it cannot know who polls).
    leader_base = f"http://{next(m.metrics_address for m in cluster.members if m.node_id == leader)}"
    if leader_base != base:
        page.goto(f"{leader_base}/")
    assert "nobody.runs.this" in page.inner_text("section.unserved-targets")
    assert "none" in page.locator("table.waiting tr", has_text="nobody.runs.this").inner_text()
    assert "batch" in page.inner_text("table.active-kills")
    assert "e2e.tick" not in page.inner_text("section.failing-jobs")
    assert page.locator("section.undelivered-alerts").count() == 1
    assert all("." not in shown for shown in page.locator("time").all_inner_texts())  # to the second
    shot(page, "overview")
    # It reloads itself (a <meta> refresh: the CSP allows no script, and none was refused).
    assert page.locator('meta[http-equiv="refresh"]').count() == 1
    with page.expect_navigation(timeout=20_000):
        pass
    assert page.inner_text("h1") == "Overview"

    # The workers page: on the leader, the worker it hears and the leases it holds.
    page.goto(f"{leader_base}/workers")
    row = page.locator("table.workers tr", has=page.locator(".worker", has_text="e2e-worker"))
    assert row.count() == 1
    assert "e2e.explode" in row.inner_text() and "shell" in row.inner_text()
    assert page.locator('meta[http-equiv="refresh"]').count() == 1
    shot(page, "workers")
    follower = next(m for m in cluster.members if m.node_id != leader)
    page.goto(f"http://{follower.metrics_address}/workers")
    assert "This node is not the leader" in page.inner_text("main")
    assert not refused_by_csp, refused_by_csp

    # /metrics on the same port is unchanged.
    response = page.request.get(f"{base}/metrics")
    assert response.ok and "raftcron_raft_term" in response.text()


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="e2e-prereqs.sh"):
        _missing("no Chromium at /nowhere")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="e2e-prereqs.sh"):
        _missing("no Chromium at /nowhere")
