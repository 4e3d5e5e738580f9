"""The dashboard without a cluster: slot fates, paging, escaping, charts, routing, auth and /metrics."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
import urllib.error
import urllib.request
from types import SimpleNamespace

import msgspec
import pytest
from prometheus_client import CollectorRegistry, Counter

from scheduler.core import model
from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs, ClaimLeadership, Member
from scheduler.core.model import SECOND_US, Alert, Attempt, Job, JobSpec, KillRecord, KillSwitch, Run
from scheduler.core.state import State
from scheduler.dashboard import data, fates, svg, views
from scheduler.dashboard.server import (
    BadRequest,
    Dashboard,
    NotFound,
    bearer_from_basic,
    parse_window,
    request_headers,
    serve_http,
)
from scheduler.planning import parse_iso_to_us

NOW_US = parse_iso_to_us("2026-03-08T12:00:00Z")
MINUTE_US = 60 * SECOND_US


def spec(job_id: str = "report", **fields) -> JobSpec:
    defaults = dict(
        schedule="* * * * *", target_kind="handler", target="reports.build", owner="finance", jitter="pinned"
    )
    return JobSpec(id=job_id, **{**defaults, **fields})


def job(job_spec: JobSpec, cursor_us: int = 0, next_due_us: int = 0, **fields) -> Job:
    return Job.of(job_spec, 1, "alice", NOW_US - 3600 * SECOND_US, cursor_us, next_due_us, **fields)


def run(job_id: str, scheduled_us: int, status: str, **fields) -> Run:
    return Run(job_id=job_id, scheduled_us=scheduled_us, status=status, claimed_us=scheduled_us, **fields)


def attempt(number: int, started_us: int, outcome: str = "success", exit_code: int = 0, error: str = "") -> Attempt:
    return Attempt(number, "w1", 100 + number, started_us, started_us + SECOND_US, outcome, error, exit_code)


def sample_state() -> State:
    """`report` runs every minute: the last six slots met six different fates; the next one is due."""
    state = State(now_us=NOW_US, epoch=3, leader_id="n2", leader_term=7, applied_index=500)
    slots = [NOW_US - (6 - i) * MINUTE_US for i in range(6)]
    state.jobs["report"] = job(
        spec(), cursor_us=slots[-1], next_due_us=NOW_US, last_status="failed", last_scheduled_us=slots[-1]
    )
    state.jobs["cleanup"] = job(spec("cleanup", job_class="batch", owner="ops"), next_due_us=NOW_US)
    state.add_run(run("report", slots[0], model.SUCCEEDED, attempts=[attempt(1, slots[0] + 200_000)], attempt=1))
    state.add_run(run("report", slots[1], model.SUCCEEDED, attempts=[attempt(1, slots[1] + 42 * SECOND_US)], attempt=1))
    state.add_run(
        run(
            "report",
            slots[2],
            model.SUCCEEDED,
            attempt=2,
            attempts=[attempt(1, slots[2], "failure", 1, "boom"), attempt(2, slots[2] + 9 * SECOND_US)],
        )
    )
    state.add_run(run("report", slots[3], model.SKIPPED, reason="killed: bad data (by bob)"))
    state.add_run(run("report", slots[4], model.MISSED, reason="the scheduler was not firing between A and B"))
    state.add_run(
        run(
            "report",
            slots[5],
            model.FAILED,
            attempt=1,
            exit_code=3,
            error="exit status 3",
            fencing_token=101,
            worker_id="w1",
            output_tail="<script>alert(1)</script>\nlast line",
            attempts=[attempt(1, slots[5], "failure", 3, "exit status 3")],
        )
    )
    state.kills["batch"] = KillSwitch("batch", "bad data", "bob", NOW_US - MINUTE_US)
    state.kill_log.append(KillRecord("kill", "batch", "bob", NOW_US - MINUTE_US, "bad data"))
    for i, kind in enumerate(("failed", "missed", "killed")):
        key = f"{kind}:report@{slots[i]}"
        state.alerts[key] = Alert(
            key,
            kind,
            "report",
            "finance",
            "default",
            slots[i],
            f"{kind} <b>!</b>",
            NOW_US,
            delivered_us=NOW_US if kind == "failed" else 0,
        )
        state.alert_order.append(key)
    return state


def reader(state: State):
    return FakeRaftLog(state).read


class FakeRaftLog:
    def __init__(self, state: State) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.listeners: list = []
        self.term, self.commit_index, self.applied_index = 7, 510, 505
        self.stalls = (0, 0.01)

    def tick_stalls(self) -> tuple[int, float]:
        return self.stalls

    @contextlib.contextmanager
    def read(self):
        with self.lock:
            yield self.state

    def add_apply_listener(self, listener) -> None:
        self.listeners.append(listener)

    def remove_apply_listener(self, listener) -> None:
        self.listeners.remove(listener)

    def raft_status(self) -> dict:
        return {"state": 2, "partner_node_status_server_127.0.0.1:7102": 2, "match_idx_server_127.0.0.1:7102": 509}

    def leader_address(self) -> str:
        return "127.0.0.1:7101"


def fake_config():
    peers = tuple(
        SimpleNamespace(node_id=f"n{i}", raft_address=f"127.0.0.1:710{i}", grpc_address=f"127.0.0.1:720{i}")
        for i in (1, 2, 3)
    )
    return SimpleNamespace(
        node_id="n1",
        peers=peers,
        herd_window_s=3600.0,
        peer_by_raft_address=lambda address: next((p for p in peers if p.raft_address == address), None),
    )


@pytest.fixture
def dashboard():
    board = Dashboard(FakeRaftLog(sample_state()), fake_config())
    yield board
    board.close()


# -- fates and timelines -----------------------------------------------------------------------


def test_each_run_gets_its_fate_at_a_glance():
    state = sample_state()
    seen = [fates.fate_of(r) for r in state.runs["report"]]
    assert [f.fate for f in seen] == ["on_time", "late", "retried", "skipped", "missed", "failed"]
    assert seen[1].label == "late by 42.0s"
    assert seen[2].label == "succeeded on attempt 2"
    assert seen[3].label == "skipped: killed: bad data (by bob)"
    assert "not firing between A and B" in seen[4].detail
    assert seen[5].label == "failed (exit code 3)"


def test_fates_of_runs_still_live_or_ended_early():
    timed_out = run("r", NOW_US, model.TIMED_OUT, reason="ran past its 1m timeout", attempts=[attempt(1, NOW_US)])
    assert fates.fate_of(timed_out).fate == "timed_out" and "past its 1m timeout" in fates.fate_of(timed_out).detail
    assert fates.fate_of(run("r", NOW_US, model.CANCELLED, reason="replaced")).detail == "cancelled: replaced"
    running = run("r", NOW_US, model.LEASED, attempt=1, worker_id="w9", attempts=[attempt(1, NOW_US)])
    assert fates.fate_of(running).fate == "running" and "on w9" in fates.fate_of(running).detail
    retrying = run("r", NOW_US, model.QUEUED, reason="retry in 10s", attempts=[attempt(1, NOW_US, "failure")])
    assert fates.fate_of(retrying).label == "waiting to retry"
    assert fates.fate_of(run("r", NOW_US, model.QUEUED)).label == "queued"


def test_timeline_draws_runs_then_the_next_few_slots():
    state = sample_state()
    detail = data.job_detail(state, "report", NOW_US - 10 * MINUTE_US, NOW_US + 3 * MINUTE_US, 0)
    slots, cut = fates.timeline(detail, NOW_US - 10 * MINUTE_US, NOW_US + 3 * MINUTE_US)
    assert not cut
    assert [s.fate for s in slots] == ["on_time", "late", "retried", "skipped", "missed", "failed"] + ["upcoming"] * 3
    assert [s.has_run for s in slots] == [True] * 6 + [False] * 3
    wide = data.job_detail(state, "report", NOW_US - 10 * MINUTE_US, NOW_US + 60 * MINUTE_US, 0)
    slots, _ = fates.timeline(wide, NOW_US - 10 * MINUTE_US, NOW_US + 60 * MINUTE_US)
    assert [s.fate for s in slots].count("upcoming") == fates.UPCOMING_SHOWN


def test_timeline_marks_accounted_slots_without_a_record():
    state = sample_state()
    del state.runs["report"][2]
    detail = data.job_detail(state, "report", NOW_US - 10 * MINUTE_US, NOW_US, 0)
    slots, _ = fates.timeline(detail, NOW_US - 10 * MINUTE_US, NOW_US)
    assert [s.fate for s in slots] == ["on_time", "late", "unrecorded", "skipped", "missed", "failed"]


def test_timeline_keeps_the_most_recent_slots_of_a_long_window():
    state = sample_state()
    state.jobs["tick"] = job(spec("tick", schedule="* * * * * *"), cursor_us=NOW_US - SECOND_US, next_due_us=NOW_US)
    for i in range(700):
        state.add_run(run("tick", NOW_US - (700 - i) * SECOND_US, model.SUCCEEDED))
    detail = data.job_detail(state, "tick", NOW_US - 86_400 * SECOND_US, NOW_US, 0)
    slots, cut = fates.timeline(detail, NOW_US - 86_400 * SECOND_US, NOW_US)
    assert cut and len(slots) == fates.MAX_TIMELINE_SLOTS
    assert slots[-1].scheduled_us == NOW_US - SECOND_US
    assert slots[0].scheduled_us == NOW_US - fates.MAX_TIMELINE_SLOTS * SECOND_US


def test_a_job_page_opens_on_a_window_that_fits_its_schedule(dashboard):
    windows = views.WINDOWS
    assert fates.default_window(spec(schedule="* * * * * *"), NOW_US, windows) == "5m"
    assert fates.default_window(spec(schedule="*/5 * * * *"), NOW_US, windows) == "6h"
    assert fates.default_window(spec(schedule="0 * * * *"), NOW_US, windows) == "24h"
    assert fates.default_window(spec(schedule="0 2 * * *"), NOW_US, windows) == "7d"
    assert "class=active>last 1h" in dashboard.render("/jobs/report", {})  # every minute: 20 slots need 1h


def test_latest_fires_narrows_from_the_start():
    fires, cut = fates.latest_fires(spec(schedule="* * * * * *"), NOW_US - 3600 * SECOND_US, NOW_US, limit=10)
    assert cut and fires == [NOW_US - (10 - i) * SECOND_US for i in range(10)]
    assert fates.latest_fires(spec(), NOW_US - 3 * MINUTE_US, NOW_US, limit=10) == (
        [NOW_US - 3 * MINUTE_US, NOW_US - 2 * MINUTE_US, NOW_US - MINUTE_US],
        False,
    )


def test_next_fires_mark_dst_and_jitter():
    ny = spec("ny", schedule="30 2 * * *", timezone="America/New_York", jitter="15m")
    fires = data.next_fires(ny, parse_iso_to_us("2026-03-07T12:00:00Z"), spread_us=7 * MINUTE_US, count=2)
    assert fires[0].adjustment == "dst_gap_shifted" and fires[1].adjustment == ""
    assert fires[0].due_us - fires[0].scheduled_us == 7 * MINUTE_US
    html = views._next_fires_table(fires, ny, NOW_US)
    assert "dst gap shifted" in html and "jitter +7m00s" in html


# -- the job index -----------------------------------------------------------------------------


def test_job_index_pages_and_searches_without_the_state():
    state = State()
    for i in range(120):
        state.jobs[f"job{i:03d}"] = job(spec(f"job{i:03d}", owner="finance" if i % 2 else "ops"))
    index = data.JobIndex()
    index.refresh(reader(state))
    assert index.page("", 1, 50) == ([f"job{i:03d}" for i in range(50, 100)], 120)
    ids, total = index.page("OPS", 0, 10)
    assert total == 60 and ids[:2] == ["job000", "job002"]


def test_job_index_rebuilds_after_an_apply_or_a_restored_snapshot():
    state = State()
    state.jobs["a"] = job(spec("a"))
    index = data.JobIndex()
    watcher = data.NodeWatcher(index)
    index.refresh(reader(state))
    state.jobs["a"] = job(spec("a", owner="renamed"))
    index.refresh(reader(state))
    assert index.page("renamed", 0, 10) == ([], 0)  # not stale yet: nothing was applied
    watcher(ApplyJobs(NOW_US, "alice", "r1"), ev.Result(index=9), state)
    index.refresh(reader(state))
    assert index.page("renamed", 0, 10) == (["a"], 1)
    restored = State()
    restored.jobs["b"] = job(spec("b"))
    index.refresh(reader(restored))
    assert index.page("", 0, 10) == (["b"], 1)


def test_watcher_records_leadership_changes():
    watcher = data.NodeWatcher(data.JobIndex())
    command = ClaimLeadership(NOW_US, "n2", 7)
    watcher(command, ev.Result(index=3, events=(ev.LeadershipClaimed("n2", 4, 7),)), State())
    assert list(watcher.leaderships) == [(4, "n2", 7, NOW_US)]


# -- pages ---------------------------------------------------------------------------------------


def test_cluster_page_shows_roles_indices_lag_and_epoch(dashboard):
    html = dashboard.render("/", {})
    assert "applied index" in html and "505" in html and "(lag 5)" in html
    assert "epoch" in html and "opened by n2" in html
    assert "127.0.0.1:7202" in html and "509" in html


def test_cluster_page_shows_late_raft_ticks(dashboard):
    assert "<dt>late Raft ticks</dt><dd>none " in dashboard.render("/", {})
    dashboard._raftlog.stalls = (12, 1.625)
    html = dashboard.render("/", {})
    assert '<span class="badge bad">12</span>' in html and "longest 1.62 s" in html


def test_cluster_page_lists_the_replicated_members_once_membership_changed(dashboard):
    with dashboard._raftlog.read() as state:
        for i in (1, 2, 3, 4):
            state.members[f"n{i}"] = Member(f"n{i}", f"127.0.0.1:710{i}", f"127.0.0.1:720{i}")
    html = dashboard.render("/", {})
    assert "127.0.0.1:7204" in html and html.count("<td><code>127.0.0.1:710") == 4


def test_jobs_page_lists_and_searches(dashboard):
    html = dashboard.render("/jobs", {})
    assert 'href="/jobs/report"' in html and 'href="/jobs/cleanup"' in html and "2 jobs" in html
    assert "killed" in html  # cleanup's class is killed
    html = dashboard.render("/jobs", {"q": ["ops"]})
    assert 'href="/jobs/cleanup"' in html and 'href="/jobs/report"' not in html and "1 job match" in html


def test_job_page_has_timeline_legend_and_next_fires(dashboard):
    html = dashboard.render("/jobs/report", {"window": ["1h"]})
    for fate in ("on_time", "late", "retried", "skipped", "missed", "failed", "upcoming"):
        assert f'data-fate="{fate}"' in html
    assert f'href="/runs/report/{NOW_US - MINUTE_US}"' in html
    assert "Next fires" in html and "class=active>last 1h" in html


def test_run_page_shows_attempts_token_worker_exit_code_and_escaped_output(dashboard):
    html = dashboard.render(f"/runs/report/{NOW_US - MINUTE_US}", {})
    assert '<span class="token">101</span>' in html and '<span class="exit-code">3</span>' in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>" not in html
    assert "previous run" in html


def test_alerts_and_kills_pages(dashboard):
    html = dashboard.render("/alerts", {})
    assert '<span class="pending-count">2</span>' in html and "&lt;b&gt;!&lt;/b&gt;" in html
    slots = sorted(r.scheduled_us for r in sample_state().runs["report"])
    assert f'href="/runs/report/{slots[0]}"' in html  # the failed alert's run is retained
    with dashboard._raftlog.read() as state:
        del state.runs["report"][0]
    assert f'href="/runs/report/{slots[0]}"' not in dashboard.render("/alerts", {})
    assert "killed" in dashboard.render("/alerts", {"pending": ["1"]})
    assert "failed &lt;b&gt;" not in dashboard.render("/alerts", {"pending": ["1"]})
    html = dashboard.render("/kills", {})
    assert "bad data" in html and "bob" in html and "until revived" in html


def test_herd_page_draws_the_forecast(dashboard):
    html = dashboard.render("/herd", {})
    assert '<svg class="forecast"' in html and 'data-series="all jobs"' in html
    assert "for 2 jobs" in html


def test_bad_requests_and_missing_pages(dashboard):
    with pytest.raises(NotFound):
        dashboard.render("/jobs/nope", {})
    with pytest.raises(NotFound):
        dashboard.render("/runs/report/1", {})
    with pytest.raises(NotFound):
        dashboard.render("/nope", {})
    with pytest.raises(BadRequest):
        dashboard.render("/runs/report/abc", {})
    with pytest.raises(BadRequest):
        dashboard.render("/jobs", {"page": ["-1"]})


def test_windows():
    end_us = NOW_US + SECOND_US  # replicated now, rounded up to a whole second
    assert parse_window({}, NOW_US + 1) == (end_us - 3600 * SECOND_US, end_us + 300 * SECOND_US, "1h")
    assert parse_window({"from": ["2026-03-08T11:00:00Z"], "to": ["2026-03-08T11:30:00Z"]}, NOW_US) == (
        NOW_US - 3600 * SECOND_US,
        NOW_US - 1800 * SECOND_US,
        "",
    )
    for bad in ({"window": ["2y"]}, {"from": ["yesterday"]}, {"from": ["2026-03-08T13:00:00Z"]}):
        with pytest.raises(BadRequest):
            parse_window(bad, NOW_US)


# -- escaping and charts -----------------------------------------------------------------------


def test_every_user_value_is_escaped():
    hostile = '"><img src=x onerror=alert(1)>'
    row = data.JobRow(spec("x", owner=hostile, job_class=hostile, schedule=hostile), 0, "", 0, False, hostile)
    html = views.jobs_page([row], hostile, 0, 1, 50, NOW_US)
    assert "<img" not in html and "&lt;img" in html


def test_timeline_svg_links_runs_and_escapes_tooltips():
    slots = [fates.Slot(NOW_US, "failed", "failed", "<oops>"), fates.Slot(NOW_US + 1, "upcoming", "", "", "", False)]
    chart = svg.timeline_svg("a:b", slots)
    assert chart.count("<a ") == 1 and f'href="/runs/a%3Ab/{NOW_US}"' in chart
    assert "&lt;oops&gt;" in chart and "<oops>" not in chart


def test_forecast_axis_rounds_up():
    assert [svg._nice_ceiling(v) for v in (1, 3, 7, 11, 250)] == [1, 5, 10, 20, 500]


def test_human_durations():
    assert [fates.human_duration_us(us) for us in (850_000, 12_300_000, 245 * SECOND_US, 7380 * SECOND_US)] == [
        "850ms",
        "12.3s",
        "4m05s",
        "2h03m",
    ]


# -- over HTTP: auth, /metrics, methods ----------------------------------------------------------


def _get(url: str, headers: dict | None = None, method: str = "GET"):
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def test_http_serves_metrics_unchanged_and_pages_behind_the_auth_hook():
    registry = CollectorRegistry()
    Counter("raftcron_example", "an example counter", registry=registry).inc()
    seen: list[dict] = []

    def authorize(headers) -> bool:
        seen.append(headers)
        return headers.get("authorization") == "Bearer s3cret"

    board = Dashboard(FakeRaftLog(sample_state()), fake_config(), authorize=authorize)
    server, thread = serve_http("127.0.0.1", 0, registry, board)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        status, headers, body = _get(base + "/metrics")
        assert (
            status == 200 and "raftcron_example_total 1.0" in body and headers["Content-Type"].startswith("text/plain")
        )
        assert not seen  # scrapers are not asked for credentials
        status, headers, _ = _get(base + "/jobs")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        status, headers, body = _get(base + "/jobs", {"Authorization": "Bearer s3cret"})
        assert status == 200 and 'href="/jobs/report"' in body
        basic = "Basic " + base64.b64encode(b"anyone:s3cret").decode()
        assert _get(base + "/jobs", {"Authorization": basic})[0] == 200  # what a browser sends when asked
        assert _get(base + "/jobs", {"Authorization": "Basic bm90LWJhc2U2NA=="})[0] == 401
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert _get(base + "/nope", {"Authorization": "Bearer s3cret"})[0] == 404
        assert _get(base + "/jobs", {"Authorization": "Bearer s3cret"}, method="POST")[0] == 405
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        board.close()


def test_basic_credentials_carry_the_token_as_password():
    assert bearer_from_basic({"authorization": "Basic " + base64.b64encode(b"me:tok:en").decode()}) == {
        "authorization": "Bearer tok:en"
    }
    assert bearer_from_basic({"authorization": "Basic !!!"}) == {"authorization": ""}
    assert bearer_from_basic({"authorization": "Bearer x"}) == {"authorization": "Bearer x"}


def test_request_headers_are_lowercase():
    environ = {"HTTP_AUTHORIZATION": "Bearer x", "HTTP_X_FORWARDED_FOR": "1.2.3.4", "CONTENT_TYPE": "text/plain"}
    assert request_headers(environ) == {
        "authorization": "Bearer x",
        "x-forwarded-for": "1.2.3.4",
        "content-type": "text/plain",
    }


def test_start_observability_serves_the_dashboard_beside_metrics():
    from scheduler.observability import dashboard_url, start_observability

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = fake_config()
    config.metrics_address = f"127.0.0.1:{port}"
    raftlog = FakeRaftLog(sample_state())
    node = SimpleNamespace(
        raftlog=raftlog, config=config, current_dispatcher=lambda: None, lifecycle=SimpleNamespace(current=None)
    )
    observability = start_observability(node, authorize=lambda headers: headers.get("authorization") == "Bearer t")
    try:
        assert observability.dashboard_url == dashboard_url(config.metrics_address) == f"http://127.0.0.1:{port}/"
        assert _get(observability.dashboard_url)[0] == 401
        status, _, body = _get(observability.dashboard_url + "kills", {"Authorization": "Bearer t"})
        assert status == 200 and "bad data" in body
        assert len(raftlog.listeners) == 2  # the metrics observer and the dashboard's watcher
    finally:
        observability.close()
    assert raftlog.listeners == []


def test_a_large_job_list_renders_one_page():
    state = State(now_us=NOW_US)
    for i in range(20_000):
        state.jobs[f"job-{i:05d}"] = job(spec(f"job-{i:05d}", owner=f"team{i % 40}"))
    board = Dashboard(FakeRaftLog(state), fake_config())
    html = board.render("/jobs", {"page": ["200"]})
    assert "20,000 jobs" in html and "page 200 of 400" in html and html.count('class="job-link"') == 50
    assert 'href="/jobs/job-09950"' in html and 'href="/jobs/job-09999"' in html
    html = board.render("/jobs", {"q": ["TEAM7"], "page": ["2"]})  # one owner of 40, case-insensitively
    assert "500 jobs match" in html and html.count('class="job-link"') == 50


def test_output_tails_and_payloads_are_shown_to_their_owners_principals_only():
    from scheduler.security.principals import ADMIN, READER, SUBMITTER, Principal

    state = sample_state()
    state.jobs["report"] = job(
        msgspec.structs.replace(spec(), payload_json='{"api_key":"pay-secret"}'), next_due_us=NOW_US
    )
    board = Dashboard(FakeRaftLog(state), fake_config())
    run_path, job_path = f"/runs/report/{NOW_US - MINUTE_US}", "/jobs/report"
    finance = Principal("fin", SUBMITTER, owners=("finance",))
    for principal in (None, Principal("root", ADMIN), finance, Principal("grafana", READER, owners=("*",))):
        assert "last line" in board.render(run_path, {}, principal)
        assert "pay-secret" in board.render(job_path, {}, principal)
    for principal in (Principal("ops", SUBMITTER, owners=("ops",)), Principal("grafana", READER)):
        run_html, job_html = board.render(run_path, {}, principal), board.render(job_path, {}, principal)
        assert "last line" not in run_html and "pay-secret" not in job_html
        assert "hidden: shown to the admin" in run_html and "hidden: shown to the admin" in job_html
        assert "exit-code" in run_html  # the rest of the run stays visible
    board.close()
