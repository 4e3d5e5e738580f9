"""`raftcron explain` on a dependency chain: a child's slot with its parents' runs, and a parent's
children, answered from a real core state."""

from __future__ import annotations

import json

import grpc

from scheduler.cli.runs import explain
from scheduler.core.commands import SetClusterVersion
from scheduler.core.model import SECOND_US, RetryPolicy
from scheduler.planning import format_us
from scheduler.rpc.convert import run_to_pb, timestamp_us
from scheduler.rpc.reads import scoped_job_pb
from tests.fakes import T0_US, Core, FakeClock, claim, completion, lease_ref, run_ref, spec, upsert
from worker.api.v1 import jobs_pb2, runs_pb2

SLOT = T0_US + 10 * SECOND_US
ONCE = RetryPolicy(max_attempts=1)


class _NotFound(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.NOT_FOUND


class StateClient:
    """The reads explain makes, served from a core State as the servicers serve them."""

    def __init__(self, state) -> None:
        self.state = state

    def get_job(self, job_id: str):
        job = self.state.jobs[job_id]
        return jobs_pb2.GetJobResponse(job=scoped_job_pb(job, children=self.state.dependents.get(job_id, ())))

    def list_runs(self, request):
        since, until = timestamp_us(request.since), timestamp_us(request.until)
        runs = [r for r in self.state.runs.get(request.job_id, []) if since <= r.scheduled_us < until]
        return runs_pb2.ListRunsResponse(runs=[run_to_pb(r) for r in runs])

    def get_run(self, job_id: str, scheduled_at):
        run = self.state.get_run(job_id, timestamp_us(scheduled_at))
        if run is None:
            raise _NotFound()
        return runs_pb2.GetRunResponse(run=run_to_pb(run))


def _chain(outcome: str) -> Core:
    core = Core(FakeClock())
    core.lead()
    core.apply(SetClusterVersion(core.clock.tick(), 3, core.state.epoch))
    core.advance(T0_US + 2 * SECOND_US)
    jobs = (
        upsert(spec("extract", retry=ONCE), next_due_us=SLOT),
        upsert(spec("load", schedule="", after=("extract",))),
    )
    assert core.apply_jobs(jobs).accepted
    assert core.claim_runs(claim("extract", SLOT, SLOT + 10 * SECOND_US)).accepted
    assert core.grant(run_ref("extract", SLOT)).accepted
    core.complete(completion(lease_ref("extract", SLOT, core.index), outcome=outcome))
    return core


def test_explain_child_names_the_parent_that_failed() -> None:
    client = StateClient(_chain("failure").state)
    text = explain(client, "load", format_us(SLOT), as_json=False)
    assert f"skipped because parent extract@{format_us(SLOT)} failed" in text
    assert f"parents' runs of the slot: extract@{format_us(SLOT)} failed" in text
    assert "runs after: extract" in text
    assert [line.split(":")[0] for line in text.splitlines()[1:]] == ["parents' runs of the slot", "runs after"]


def test_explain_child_json_has_the_chain_and_the_dependency_run() -> None:
    client = StateClient(_chain("success").state)
    answer = json.loads(explain(client, "load", format_us(SLOT), as_json=True))
    assert answer["run"]["kind"] == "dependency" and answer["run"]["status"] == "queued"
    assert answer["parents"] == [{"job_id": "extract", "run_key": f"extract@{format_us(SLOT)}", "status": "succeeded"}]
    assert answer["after"] == ["extract"]


def test_explain_parent_lists_its_children() -> None:
    client = StateClient(_chain("success").state)
    assert explain(client, "extract", format_us(SLOT), as_json=False).splitlines()[-1] == "runs before: load"
    assert json.loads(explain(client, "extract", format_us(SLOT), as_json=True))["children"] == ["load"]


def test_explain_child_before_any_run_says_what_it_waits_for() -> None:
    core = _chain("success")
    del core.state.runs["load"]
    core.state.get_run("extract", SLOT).status = "leased"
    text = explain(StateClient(core.state), "load", format_us(SLOT), as_json=False)
    assert "is not decided yet" in text and f"extract@{format_us(SLOT)} leased" in text
