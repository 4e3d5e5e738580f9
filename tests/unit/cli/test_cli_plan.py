"""`raftcron plan`: field-level diffs, and due instants the leader's planner agrees with."""

from __future__ import annotations

import contextlib
import json

import pytest

from scheduler import cli
from scheduler.cli import connection, plan
from scheduler.core.model import SECOND_US, Job, RetryPolicy
from scheduler.leader.planner import plan_due_slots
from scheduler.planning import format_us, parse_iso_to_us
from scheduler.rpc.convert import duration, spec_to_pb
from scheduler.specs import spec_to_document
from tests.fakes import spec
from worker.api.v1 import cluster_pb2, common_pb2, jobs_pb2

HOUR_US = 3600 * SECOND_US
AFTER_US = parse_iso_to_us("2026-12-01T18:59:00Z")


def test_nested_fields_are_dotted_and_lists_stay_whole():
    flat = plan.flatten({"retry": {"backoff": {"initial": "1m"}, "max_attempts": 3}, "uses": ["db"], "payload": {}})
    assert flat == {"retry.backoff.initial": "1m", "retry.max_attempts": 3, "uses": ["db"], "payload": {}}


def test_one_change_per_differing_field():
    old = spec("job-x", "0 1 * * *")
    new = spec("job-x", "0 2 * * *", retry=RetryPolicy(max_attempts=5), uses=("db",))
    changes = plan.field_changes(spec_to_document(old, full=True), spec_to_document(new, full=True))
    assert [(c.field, c.old, c.new) for c in changes] == [
        ("schedule", "0 1 * * *", "0 2 * * *"),
        ("retry.max_attempts", 3, 5),
        ("uses", [], ["db"]),
    ]


def test_a_field_that_appears_or_disappears():
    changes = plan.field_changes({"id": "a"}, {"id": "a", "payload": {"company": "acme"}})
    assert [(c.field, c.old, c.new) for c in changes] == [("payload.company", None, "acme")]
    assert plan.shown_value(None) == "(unset)"


def test_long_values_are_shortened_in_the_middle():
    shown = plan.shown_value("x" * 500)
    assert len(shown) <= plan.VALUE_CHARS and "…" in shown and shown.startswith('"x') and shown.endswith('x"')
    assert plan.shown_value("0 2 * * *") == '"0 2 * * *"'


@pytest.mark.parametrize(
    ("schedule", "jitter"),
    [("0 * * * *", "auto"), ("0 3 * * *", ""), ("17 * * * *", "auto"), ("0 * * * *", "pinned"), ("*/5 * * * *", "15m")],
)
def test_due_instant_is_the_one_the_leader_claims(schedule, jitter):
    job_spec = spec("nightly-report", schedule, jitter=jitter)
    due = plan.next_due(job_spec, AFTER_US, HOUR_US)
    job = Job.of(job_spec, version=1, author="t", updated_us=0, cursor_us=AFTER_US, next_due_us=due.slot_us)
    (claim,) = plan_due_slots(job, due.slot_us, 1, HOUR_US)
    assert (claim.scheduled_us, claim.effective_us) == (due.slot_us, due.due_us)


def test_an_unknown_herd_window_says_nominal():
    due = plan.next_due(spec("a", "0 * * * *"), AFTER_US, None)
    assert due.due_us is None and "nominal" in plan.due_text(due)


def test_a_spread_slot_shows_both_instants():
    due = plan.next_due(spec("a", "0 * * * *"), AFTER_US, HOUR_US)
    assert due.spread_us, "the id hashes to a non-zero offset"
    text = plan.due_text(due)
    assert format_us(due.slot_us + due.spread_us) in text and f"slot {format_us(due.slot_us)}" in text


class PlanCluster:
    def __init__(self, stored, herd_window_s: float | None = 3600.0, role: str = "leader") -> None:
        self.stored, self.herd_window_s, self.role = stored, herd_window_s, role

    def apply_jobs(self, request):
        assert request.dry_run
        changes = [common_pb2.JobChange(job_id="job-x", change="changed", version=4)]
        changes.append(common_pb2.JobChange(job_id="job-new", change="added", version=1))
        changes.append(common_pb2.JobChange(job_id="job-old", change="removed", version=2))
        return jobs_pb2.ApplyJobsResponse(changes=changes)

    def get_job(self, job_id):
        return jobs_pb2.GetJobResponse(job=common_pb2.Job(spec=spec_to_pb(self.stored[job_id]), version=3))

    def status(self, address=None):
        status = cluster_pb2.StatusResponse(node_id="n1", role=self.role)
        if self.herd_window_s is not None:
            status.herd_window.CopyFrom(duration(int(self.herd_window_s * 1e6)))
        return status


JOBS = """\
jobs:
  - id: job-x
    schedule: "17 2 * * *"
    target: {handler: jobs.job-x}
  - id: job-new
    schedule: "0 * * * *"
    target: {handler: jobs.new}
"""


def test_plan_prints_field_diffs_and_due_instants(monkeypatch, capsys, tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    cluster = PlanCluster({"job-x": spec("job-x", "17 1 * * *")})
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(cluster))
    assert cli.main(["plan", "-f", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "~ job-x  (changed, v4)"
    assert out[1] == '    schedule: "17 1 * * *" -> "17 2 * * *"'
    assert out[2].startswith("    next due ") and "no herd spread" in out[2]  # minute 17: not a round-time herd
    assert "+ job-new  (added, v1)" in out
    assert any("herd spread, window 1h" in line for line in out)
    assert "- job-old  (removed, v2)" in out
    assert out[-1].startswith("1 added, 1 changed, 1 removed, 0 unchanged")


def test_plan_from_a_node_without_a_herd_window_is_nominal(monkeypatch, capsys, tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOBS)
    cluster = PlanCluster({"job-x": spec("job-x", "17 1 * * *")}, herd_window_s=None)
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(cluster))
    assert cli.main(["plan", "-f", str(path), "--json"]) == 0
    entries = {e["job_id"]: e for e in json.loads(capsys.readouterr().out)}
    assert entries["job-new"]["next_due"] is None and entries["job-new"]["herd_window_s"] is None
    assert entries["job-x"]["fields"] == [{"field": "schedule", "from": "17 1 * * *", "to": "17 2 * * *"}]


@pytest.mark.parametrize(
    ("spread_us", "text"),
    [(0, "0s"), (2_018_221_610, "33m38.22161s"), (2_018_000_000, "33m38s"), (60_500_000, "1m0.5s"), (5, "0.000005s")],
)
def test_spreads_read_as_durations_with_decimal_seconds(spread_us, text):
    assert plan.spread_text(spread_us) == text


def test_the_herd_window_is_the_leaders_when_a_follower_answers():
    class Follower:
        asked: list = []

        def status(self, address=None):
            self.asked.append(address)
            if address is None:
                status = cluster_pb2.StatusResponse(role="follower", leader_grpc_address="10.0.0.1:7200")
                status.herd_window.CopyFrom(duration(60 * SECOND_US))
                return status
            status = cluster_pb2.StatusResponse(role="leader")
            status.herd_window.CopyFrom(duration(HOUR_US))
            return status

    follower = Follower()
    assert plan.cluster_herd_window_us(follower) == HOUR_US
    assert follower.asked == [None, "10.0.0.1:7200"]
