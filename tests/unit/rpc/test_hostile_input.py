"""Hostile input is refused with the offending field named: job files, gRPC specs, every RPC
argument; and the core, where it is the last line, rejects instead of raising."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import threading

import grpc
import msgspec
import pytest
import yaml
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduler.core import State, apply, decode_command, encode_command, state_digest
from scheduler.core.codec import CodecError, encode_snapshot
from scheduler.core.commands import (
    ApplyJobs,
    BackfillRuns,
    ClaimRuns,
    CompleteRuns,
    ExpireLeases,
    ExtendLeases,
    GrantLeases,
    KillClass,
    ReviveClass,
    SetJobPaused,
    TriggerRun,
)
from scheduler.core.model import Resource, Run
from scheduler.core.results import Result
from scheduler.replication import EntryTooLarge
from scheduler.replication.coalescer import Coalescer
from scheduler.replication.raftlog import MAX_ENTRY_BYTES
from scheduler.rpc.convert import spec_from_pb
from scheduler.rpc.limits import DEFAULT_LIMITS
from scheduler.rpc.limits_interceptor import LimitsInterceptor
from scheduler.rpc.request_checks import describe, payload_depth, request_problems, status_code
from scheduler.rpc.runs import RunQuery, select_runs
from scheduler.specs import SpecError, parse_jobs_document, validate_spec
from tests.fakes import T0_US, Core, FakeClock, claim, completion, expiry, lease_ref, run_ref, spec, upsert
from worker import ClusterClient
from worker.api.v1 import cluster_pb2, jobs_pb2, ops_pb2, runs_pb2, worker_pb2
from worker.api.v1 import common_pb2 as pb

GOOD_JOB = {"id": "ok", "schedule": "*/5 * * * *", "target": "jobs.ok"}


def deep(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


# (case, job fields overriding GOOD_JOB, the field the problem must name)
JOB_FILE_CASES = [
    ("cron out of range", {"schedule": "61 * * * *"}, "schedule"),
    ("cron of four fields", {"schedule": "* * * *"}, "schedule"),
    ("cron as a number", {"schedule": 5}, "schedule"),
    ("cron far too long", {"schedule": "* " * 300}, "schedule"),
    ("unknown time zone", {"timezone": "Mars/Olympus_Mons"}, "timezone"),
    ("time zone as a path", {"timezone": "../../etc/passwd"}, "timezone"),
    ("time zone with NUL", {"timezone": "UTC\0"}, "timezone"),
    ("negative timeout", {"timeout": -5}, "timeout"),
    ("absurd timeout", {"timeout": "400d"}, "timeout"),
    ("fractional timeout", {"timeout": 1.5}, "timeout"),
    ("boolean timeout", {"timeout": True}, "timeout"),
    ("huge timeout", {"timeout": 10**30}, "timeout"),
    ("negative attempts", {"retry": {"max_attempts": -1}}, "retry.max_attempts"),
    ("absurd attempts", {"retry": {"max_attempts": 10**30}}, "retry.max_attempts"),
    ("boolean attempts", {"retry": {"max_attempts": True}}, "retry.max_attempts"),
    ("fractional attempts", {"retry": {"max_attempts": 2.5}}, "retry.max_attempts"),
    ("NaN multiplier", {"retry": {"backoff": {"multiplier": float("nan")}}}, "retry.backoff.multiplier"),
    ("infinite multiplier", {"retry": {"backoff": {"multiplier": float("inf")}}}, "retry.backoff.multiplier"),
    ("negative backoff", {"retry": {"backoff": {"initial": -1}}}, "retry.backoff.initial"),
    ("absurd retry budget", {"retry": {"within": "9999d"}}, "retry.within"),
    ("infinite priority", {"priority": float("inf")}, "priority"),
    ("boolean priority", {"priority": True}, "priority"),
    ("absurd priority", {"priority": 2**63}, "priority"),
    ("negative catch-up", {"misfire": {"policy": "catch_up", "max_catch_up": -1}}, "misfire.max_catch_up"),
    ("absurd catch-up", {"misfire": {"policy": "catch_up", "max_catch_up": 10**9}}, "misfire.max_catch_up"),
    ("negative grace", {"misfire": {"grace": -1}}, "misfire.grace"),
    ("unknown misfire policy", {"misfire": {"policy": "later"}}, "misfire.policy"),
    ("paused given as a number", {"paused": 1}, "paused"),
    ("paused given as text", {"paused": "yes"}, "paused"),
    ("id with a tab", {"id": "a\tb"}, "id"),
    ("id with an escape sequence", {"id": "a\x1b[31m"}, "id"),
    ("id with NUL", {"id": "a\0"}, "id"),
    ("id with a right-to-left override", {"id": "ab\u202ecd"}, "id"),
    ("id too long", {"id": "a" * 200}, "id"),
    ("id as a path", {"id": "../x"}, "id"),
    ("id as a number", {"id": 7}, "id"),
    ("owner with a newline", {"owner": "a\nb"}, "owner"),
    ("owner too long", {"owner": "o" * 300}, "owner"),
    ("class with a space", {"class": "a b"}, "class"),
    ("handler with a control character", {"target": "jobs.\x07"}, "target"),
    ("shell with NUL", {"target": {"shell": "echo \0"}}, "target"),
    ("shell too long", {"target": {"shell": "x" * 9000}}, "target"),
    ("payload too large", {"payload": {"blob": "x" * 70_000}}, "payload"),
    ("payload nested too deeply", {"payload": deep(40)}, "payload"),
    ("payload with NaN", {"payload": {"x": float("nan")}}, "payload.x"),
    ("too many resources used", {"uses": [f"r{i}" for i in range(20)]}, "uses"),
    ("resource with a control character", {"uses": ["db\x7f"]}, "uses"),
    ("negative jitter", {"jitter": "-5m"}, "jitter"),
    ("absurd jitter", {"jitter": "400d"}, "jitter"),
    ("overlap as a number", {"overlap": 3}, "overlap"),
    ("unknown DST rule", {"dst": {"gap": "maybe"}}, "dst.gap"),
]


@pytest.mark.parametrize(("fields", "field"), [case[1:] for case in JOB_FILE_CASES], ids=[c[0] for c in JOB_FILE_CASES])
def test_a_hostile_job_file_names_the_field(fields, field):
    document = yaml.safe_dump({"jobs": [GOOD_JOB, {**GOOD_JOB, "id": "bad", **fields}]})
    with pytest.raises(SpecError) as raised:
        parse_jobs_document(document)
    named = {problem.field for problem in raised.value.problems}
    assert any(name == field or name.startswith((field + ".", field + "[")) for name in named), raised.value
    assert all(problem.job_id != "ok" for problem in raised.value.problems)


def good_pb_spec(**fields) -> pb.JobSpec:
    message = pb.JobSpec(id="ok", schedule="*/5 * * * *", target=pb.Target(handler="jobs.ok"))
    for name, value in fields.items():
        target = message
        *path, last = name.split(".")
        for part in path:
            target = getattr(target, part)
        field = getattr(target, last)
        if isinstance(value, (Duration, pb.Target)):
            field.CopyFrom(value)
        elif isinstance(value, list):
            field.extend(value)
        else:
            setattr(target, last, value)
    return message


# A spec that arrives over gRPC: the same rules (validate_spec), the same field names.
PB_SPEC_CASES = [
    ("negative timeout", {"timeout": Duration(seconds=-5)}, "timeout"),
    ("absurd timeout", {"timeout": Duration(seconds=2**62)}, "timeout"),
    ("NaN multiplier", {"retry.backoff_multiplier": float("nan")}, "retry.backoff.multiplier"),
    ("negative attempts", {"retry.max_attempts": -3}, "retry.max_attempts"),
    ("absurd priority", {"priority": 2**31 - 1}, "priority"),
    ("payload with NaN", {"payload_json": "NaN"}, "payload"),
    ("payload not JSON", {"payload_json": "{"}, "payload"),
    ("payload nested too deeply", {"payload_json": "[" * 100 + "]" * 100}, "payload"),
    ("bad cron", {"schedule": "* * 31 2 *"}, "schedule"),
    ("bad zone", {"timezone": "Nowhere/Land"}, "timezone"),
    ("id with a control character", {"id": "x\x01"}, "id"),
    ("empty handler", {"target": pb.Target(handler="")}, "target"),
    ("absurd catch-up", {"misfire.max_catch_up": 2**31 - 1}, "misfire.max_catch_up"),
]


@pytest.mark.parametrize(("fields", "field"), [case[1:] for case in PB_SPEC_CASES], ids=[c[0] for c in PB_SPEC_CASES])
def test_a_hostile_grpc_spec_names_the_field(fields, field):
    problems = validate_spec(spec_from_pb(good_pb_spec(**fields)))
    assert field in {problem.field for problem in problems}, problems


def test_the_good_specs_are_good():
    assert parse_jobs_document(yaml.safe_dump({"jobs": [GOOD_JOB]}))
    assert validate_spec(spec_from_pb(good_pb_spec())) == []


def ts(seconds: int, nanos: int = 0) -> Timestamp:
    return Timestamp(seconds=seconds, nanos=nanos)


MEMBERSHIP = hasattr(cluster_pb2, "AddMemberRequest")  # calls that arrive with cluster membership changes


def MEMBER(**fields) -> cluster_pb2.Member:  # noqa: N802 - reads as the message it builds
    return cluster_pb2.Member(
        **{"node_id": "n4", "raft_address": "10.0.0.4:7100", "grpc_address": "[::1]:7200", **fields}
    )


REF = worker_pb2.LeaseRef(job_id="a", scheduled_at=ts(1_700_000_000), fencing_token=7)

# (case, request, the field a problem must name)
RPC_CASES = [
    ("too many jobs", jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec()] * 10_001), "jobs"),
    (
        "oversized payload",
        jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(payload_json='"' + "x" * 70_000 + '"')]),
        "jobs[0].payload_json",
    ),
    (
        "deep payload",
        jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(payload_json="[" * 5000 + "]" * 5000)]),
        "jobs[0].payload_json",
    ),
    ("unknown overlap", jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(overlap=99)]), "jobs[0].overlap"),
    (
        "infinite multiplier",
        jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(**{"retry.backoff_multiplier": float("inf")})]),
        "jobs[0].retry.backoff_multiplier",
    ),
    (
        "negative duration",
        jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(timeout=Duration(seconds=-1))]),
        "jobs[0].timeout",
    ),
    ("huge schedule", jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(schedule="*" * 10_000)]), "jobs[0].schedule"),
    ("too many uses", jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(uses=["r"] * 100)]), "jobs[0].uses"),
    ("job listed twice", jobs_pb2.ApplyJobsRequest(jobs=[good_pb_spec(), good_pb_spec()]), "jobs[1].id"),
    ("author with a newline", jobs_pb2.ApplyJobsRequest(author="a\nb"), "author"),
    ("request id too long", jobs_pb2.ApplyJobsRequest(request_id="r" * 1000), "request_id"),
    ("bad resource name", jobs_pb2.ApplyJobsRequest(resources=[pb.Resource(name="a b")]), "resources[0].name"),
    ("too many resources", jobs_pb2.ApplyJobsRequest(resources=[pb.Resource(name="r")] * 1001), "resources"),
    ("job id with NUL", jobs_pb2.GetJobRequest(job_id="a\0"), "job_id"),
    ("empty job id", jobs_pb2.GetJobRequest(), "job_id"),
    ("negative page size", jobs_pb2.ListJobsRequest(page_size=-1), "page_size"),
    ("absurd page size", jobs_pb2.ListJobsRequest(page_size=2**31 - 1), "page_size"),
    ("page token with control characters", jobs_pb2.ListJobsRequest(page_token="\x00\x01"), "page_token"),
    ("class with a space", jobs_pb2.ListJobsRequest(job_class="a b"), "job_class"),
    ("delete: id too long", jobs_pb2.DeleteJobRequest(job_id="j" * 500), "job_id"),
    ("pause: reason with escape", jobs_pb2.PauseJobRequest(job_id="a", reason="\x1b[2J"), "reason"),
    ("resume: author too long", jobs_pb2.ResumeJobRequest(job_id="a", author="a" * 1000), "author"),
    ("trigger: id as a path", jobs_pb2.TriggerJobRequest(job_id="../../x"), "job_id"),
    ("backfill: no end", jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}), "to"),
    ("backfill: end before start", jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(10)}, to=ts(5)), "from"),
    ("backfill: instant beyond 9999", jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(2**62)), "to"),
    ("backfill: negative instant", jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(-1)}, to=ts(5)), "from"),
    ("backfill: bad nanos", jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0, -1)}, to=ts(5)), "from"),
    (
        "backfill: NaN rate",
        jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(5), rate_per_s=float("nan")),
        "rate_per_s",
    ),
    (
        "backfill: tiny rate",
        jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(5), rate_per_s=1e-300),
        "rate_per_s",
    ),
    (
        "backfill: negative count",
        jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(5), max_runs=-1),
        "max_runs",
    ),
    (
        "backfill: absurd count",
        jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(5), max_runs=10**9),
        "max_runs",
    ),
    ("runs: unknown status", runs_pb2.ListRunsRequest(statuses=[42]), "statuses[0]"),
    ("runs: too many statuses", runs_pb2.ListRunsRequest(statuses=[1] * 100), "statuses"),
    ("runs: instant before 1970", runs_pb2.ListRunsRequest(since=ts(-10)), "since"),
    ("runs: negative page size", runs_pb2.ListRunsRequest(page_size=-5), "page_size"),
    ("runs: job id with NUL", runs_pb2.ListRunsRequest(job_id="\0"), "job_id"),
    ("run: key too long", runs_pb2.GetRunRequest(run_key="k" * 10_000), "run_key"),
    ("run: no instant", runs_pb2.GetRunRequest(job_id="a"), "scheduled_at"),
    ("lease: no worker id", worker_pb2.LeaseRequest(), "worker_id"),
    ("lease: worker id with control characters", worker_pb2.LeaseRequest(worker_id="w\r\n"), "worker_id"),
    ("lease: negative count", worker_pb2.LeaseRequest(worker_id="w", max_runs=-1), "max_runs"),
    ("lease: absurd count", worker_pb2.LeaseRequest(worker_id="w", max_runs=2**31 - 1), "max_runs"),
    ("lease: negative wait", worker_pb2.LeaseRequest(worker_id="w", wait=Duration(seconds=-1)), "wait"),
    ("lease: absurd wait", worker_pb2.LeaseRequest(worker_id="w", wait=Duration(seconds=10**9)), "wait"),
    ("lease: too many targets", worker_pb2.LeaseRequest(worker_id="w", targets=["t"] * 1000), "targets"),
    ("lease: bad target", worker_pb2.LeaseRequest(worker_id="w", targets=["t\0"]), "targets[0]"),
    ("heartbeat: too many leases", worker_pb2.HeartbeatRequest(worker_id="w", leases=[REF] * 10_001), "leases"),
    (
        "heartbeat: negative token",
        worker_pb2.HeartbeatRequest(
            worker_id="w", leases=[worker_pb2.LeaseRef(job_id="a", scheduled_at=ts(1), fencing_token=-1)]
        ),
        "leases[0].fencing_token",
    ),
    (
        "heartbeat: no instant",
        worker_pb2.HeartbeatRequest(worker_id="w", leases=[worker_pb2.LeaseRef(job_id="a", fencing_token=1)]),
        "leases[0].scheduled_at",
    ),
    ("complete: no lease", worker_pb2.CompleteRequest(worker_id="w", kind=worker_pb2.SUCCESS), "lease"),
    ("complete: no kind", worker_pb2.CompleteRequest(worker_id="w", lease=REF), "kind"),
    ("complete: unknown kind", worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=17), "kind"),
    (
        "complete: huge error",
        worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=2, error="e" * 100_000),
        "error",
    ),
    (
        "complete: huge output",
        worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=2, output_tail="o" * 100_000),
        "output_tail",
    ),
    (
        "complete: negative retry",
        worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=3, retry_after=Duration(seconds=-9)),
        "retry_after",
    ),
    (
        "complete: absurd retry",
        worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=3, retry_after=Duration(seconds=2**40)),
        "retry_after",
    ),
    ("kill: no class", ops_pb2.KillClassRequest(reason="x"), "job_class"),
    ("kill: until beyond 9999", ops_pb2.KillClassRequest(job_class="c", until=ts(2**40)), "until"),
    ("kill: reason too long", ops_pb2.KillClassRequest(job_class="c", reason="r" * 5000), "reason"),
    ("revive: class with NUL", ops_pb2.ReviveClassRequest(job_class="c\0"), "job_class"),
    ("alerts: negative limit", ops_pb2.ListAlertsRequest(limit=-1), "limit"),
    ("alerts: owner with escape", ops_pb2.ListAlertsRequest(owner="\x1b"), "owner"),
]
if MEMBERSHIP:
    RPC_CASES += [
        ("add member: none", cluster_pb2.AddMemberRequest(), "member"),
        (
            "add member: bad port",
            cluster_pb2.AddMemberRequest(member=MEMBER(grpc_address="h:99999")),
            "member.grpc_address",
        ),
        ("add member: id with NUL", cluster_pb2.AddMemberRequest(member=MEMBER(node_id="n\0")), "member.node_id"),
        ("remove member: no id", cluster_pb2.RemoveMemberRequest(), "node_id"),
    ]


@pytest.mark.parametrize(("request_", "field"), [case[1:] for case in RPC_CASES], ids=[c[0] for c in RPC_CASES])
def test_a_hostile_rpc_argument_names_the_field(request_, field):
    problems = request_problems(request_, DEFAULT_LIMITS)
    assert field in {problem.field for problem in problems}, problems


GOOD_REQUESTS = [
    jobs_pb2.ApplyJobsRequest(
        jobs=[good_pb_spec(payload_json='{"a":[1,{"b":"[[["}]}')], author="alice", request_id="r1"
    ),
    jobs_pb2.GetJobRequest(job_id="a"),
    jobs_pb2.ListJobsRequest(page_size=100, owner="team x"),
    jobs_pb2.DeleteJobRequest(job_id="a"),
    jobs_pb2.PauseJobRequest(job_id="a", reason="maintenance"),
    jobs_pb2.ResumeJobRequest(job_id="a"),
    jobs_pb2.TriggerJobRequest(job_id="a"),
    jobs_pb2.BackfillJobRequest(job_id="a", **{"from": ts(0)}, to=ts(5), rate_per_s=2.0, max_runs=10),
    runs_pb2.ListRunsRequest(statuses=[pb.FAILED], since=ts(1), page_token="5:a"),
    runs_pb2.GetRunRequest(run_key="a@2026-01-01T00:00:00Z"),
    runs_pb2.GetRunRequest(job_id="a", scheduled_at=ts(1)),
    worker_pb2.LeaseRequest(worker_id="host-1/worker 7", targets=["h"], max_runs=8, wait=Duration(seconds=5)),
    worker_pb2.HeartbeatRequest(worker_id="w", leases=[REF]),
    worker_pb2.CompleteRequest(worker_id="w", lease=REF, kind=worker_pb2.FAILURE, error="line 1\nline 2\x1b[0m"),
    ops_pb2.KillClassRequest(job_class="reports", reason="bad data", until=ts(1_800_000_000)),
    ops_pb2.ReviveClassRequest(job_class="reports"),
    ops_pb2.ListKillsRequest(),
    ops_pb2.ListAlertsRequest(limit=10),
    cluster_pb2.StatusRequest(include_digest=True),
    *(
        [cluster_pb2.AddMemberRequest(member=MEMBER()), cluster_pb2.RemoveMemberRequest(node_id="n4")]
        if MEMBERSHIP
        else []
    ),
]


@pytest.mark.parametrize("request_", GOOD_REQUESTS, ids=[type(r).__name__ for r in GOOD_REQUESTS])
def test_good_requests_pass(request_):
    assert request_problems(request_) == []


def test_every_request_type_of_the_api_has_its_own_checks():
    from scheduler.rpc import request_checks

    requests = {
        method.input_type.name
        for module in (jobs_pb2, runs_pb2, worker_pb2, ops_pb2, cluster_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert requests <= set(request_checks._CHECKERS), requests - set(request_checks._CHECKERS)


def test_payload_depth_ignores_brackets_inside_strings():
    assert payload_depth('{"a":"[[[[\\"[[","b":[[{}]]}') == 4
    assert payload_depth("") == 0
    assert payload_depth("[" * 50_000) == 50_000
    assert payload_depth('["\\\\",["\\\\\\"]"]]') == 2  # escaped backslashes before a quote
    assert payload_depth('"' + '\\"' * 30_000) == 0  # an unterminated string of escaped quotes


def json_depth(value: object) -> int:
    if isinstance(value, (list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return 1 + max((json_depth(item) for item in items), default=0)
    return 0


_json_strings = st.text(st.sampled_from('ab"\\[]{}\x00\u00e9/'), max_size=8)
_json_values = st.recursive(
    st.none() | st.integers() | _json_strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_json_strings, inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(value=_json_values, ascii_only=st.booleans())
def test_payload_depth_is_the_depth_of_any_json_text(value, ascii_only):
    assert payload_depth(json.dumps(value, ensure_ascii=ascii_only)) == json_depth(value)


# Any text in any field of a spec: validate_spec answers with problems, never an exception.
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40) | st.sampled_from(
    [
        "*/5 * * * *",
        "0 0 29 2 *",
        "@daily",
        "* * * * * * *",
        "99999999999999999999 * * * *",
        "*/0 * * * *",
        "UTC",
        "Europe/Paris",
        "America",
        "zone.tab",
        "posix/UTC",
        "auto",
        "pinned",
        "30m",
        "0s",
        "1e9d",
    ]
)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedule=_text, timezone=_text, jitter=_text, gap=_text, repeat=_text, payload=_text, job_id=_text)
def test_validate_spec_never_raises(schedule, timezone, jitter, gap, repeat, payload, job_id):
    message = good_pb_spec(id=job_id, schedule=schedule, timezone=timezone, jitter=jitter, payload_json=payload)
    message.dst.gap, message.dst.repeat = gap, repeat
    assert isinstance(validate_spec(spec_from_pb(message)), list)


# -- the core where it is the last line -------------------------------------------------------


def replica() -> Core:
    core = Core(FakeClock())
    core.lead()
    result = core.apply(
        ApplyJobs(
            core.state.now_us,
            "alice",
            "",
            (upsert(spec("a"), next_due_us=T0_US + 60_000_000),),
            (),
            (Resource("db", 1, 1),),
        )
    )
    assert result.accepted
    return core


def hostile_commands(state: State) -> list[tuple[str, object]]:
    """Commands a servicer or leader could propose with values only the core can judge."""
    now, epoch = state.now_us, state.epoch
    ghost = lease_ref("ghost", now, 1)
    return [
        ("apply: repeated id", ApplyJobs(now, "x", "", (upsert(spec("b")), upsert(spec("b"))))),
        ("apply: stale version", ApplyJobs(now, "x", "", (upsert(spec("a"), expected_version=9),))),
        ("apply: negative next due", ApplyJobs(now, "x", "", (upsert(spec("b"), next_due_us=-1),))),
        ("apply: removes a missing job", ApplyJobs(now, "x", "", (), ("nope",))),
        ("apply: undeclared resource", ApplyJobs(now, "x", "", (upsert(spec("b", uses=("nope",))),))),
        ("apply: negative resource", ApplyJobs(now, "x", "", (), (), (Resource("r", -1, 0),))),
        ("apply: empty id", ApplyJobs(now, "x", "", (upsert(spec("")),))),
        ("pause: missing job", SetJobPaused(now, "nope", True, "x", "", "")),
        ("trigger: missing job", TriggerRun(now, "nope", "x", "")),
        ("backfill: missing job", BackfillRuns(now, "nope", "x", "", (now,), 1)),
        ("backfill: negative interval", BackfillRuns(now, "a", "x", "", (now - 10, now - 20), -5)),
        ("backfill: repeated slots", BackfillRuns(now, "a", "x", "", (now - 10, now - 10), 0)),
        ("claim: stale epoch", ClaimRuns(now, epoch + 5, (claim("a", now, now + 1),))),
        ("claim: unknown job", ClaimRuns(now, epoch, (claim("nope", now, now + 1),))),
        ("claim: stale spec version", ClaimRuns(now, epoch, (claim("a", now, now + 1, spec_version=7),))),
        ("claim: unknown status", ClaimRuns(now, epoch, (claim("a", now, now + 1, status="exploded"),))),
        ("grant: run never claimed", GrantLeases(now, epoch, "w", 10_000_000, (run_ref("a", now + 123),))),
        ("grant: negative ttl", GrantLeases(now, epoch, "w", -1, (run_ref("a", now),))),
        ("extend: unknown lease", ExtendLeases(now, (ghost,))),
        ("complete: unknown outcome", CompleteRuns(now, (completion(ghost, outcome="exploded"),))),
        ("complete: negative retry", CompleteRuns(now, (completion(ghost, outcome="retry_later", retry_after_us=-1),))),
        ("expire: unknown reason", ExpireLeases(now, epoch, (expiry(ghost, reason="exploded"),))),
        ("kill: until in the past", KillClass(now, "default", "r", "x", "", until_us=1)),
        ("revive: not killed", ReviveClass(now, "nope", "x", "")),
    ]


def test_the_core_rejects_or_ignores_hostile_commands_and_replicas_agree():
    """Each command goes through the codec as a log entry does; two replicas apply the same log.
    A rejection changes nothing but the applied position; the state stays encodable."""
    first, second = replica(), replica()
    rejected = 0
    for name, command in hostile_commands(first.state):
        data = encode_command(command)
        results = []
        for core in (first, second):
            before = position_free_snapshot(core.state)
            try:
                result = core.apply(decode_command(data))
            except Exception as error:  # noqa: BLE001 - the point: any exception fails the test, by name
                pytest.fail(f"{name}: the core raised {error!r}")
            results.append(result)
            if not result.accepted:
                assert position_free_snapshot(core.state) == before, name
        rejected += not results[0].accepted
        assert results[0] == results[1], name
        assert state_digest(first.state) == state_digest(second.state), name
    assert rejected >= len(hostile_commands(first.state)) // 2


def position_free_snapshot(state: State) -> bytes:
    return encode_snapshot(msgspec.structs.replace(state, applied_index=0))


def test_bytes_that_are_not_a_command_are_refused_by_the_codec():
    for data in (b"", b"\xff" * 10, b"\x92\x01\x02", encode_command(TriggerRun(1, "a", "x", ""))[:-3]):
        with pytest.raises(CodecError):
            decode_command(data)


def test_the_core_refuses_a_command_type_it_does_not_know():
    state = State()
    result = apply(state, object(), 1)  # type: ignore[arg-type]
    assert not result.accepted and result.rejection.code == "unknown_command"


# -- one caller's large items never fail another caller's batch -------------------------------


class EntryCheckingLog:
    """Stands in for the Raft log: refuses an entry over the limit, as the real one does."""

    def __init__(self) -> None:
        self.entry_sizes: list[int] = []

    def submit(self, command, timeout_s: float):
        data = encode_command(command)
        self.entry_sizes.append(len(data))
        if len(data) > MAX_ENTRY_BYTES:
            raise EntryTooLarge(f"{len(data)} bytes")
        return Result(index=len(self.entry_sizes), events=tuple(range(len(command.completions))))


def test_coalesced_completions_with_long_texts_are_split_below_the_entry_limit():
    raftlog = EntryCheckingLog()
    coalescer = Coalescer("complete", raftlog, lambda items: CompleteRuns(T0_US, tuple(items)), timeout_s=5.0)
    try:
        # The servicer keeps 4,096 characters of each text; two-byte characters double the bytes.
        chatty = completion(lease_ref("a", T0_US, 1), outcome="failure", error="é" * 4096, output_tail="ü" * 4096)
        positions = coalescer.submit([chatty] * 300).result(timeout_s=10)  # raises if a batch was refused
    finally:
        coalescer.close()
    assert sum(1 for position in positions if position == 0) == len(raftlog.entry_sizes) > 1
    assert max(raftlog.entry_sizes) <= MAX_ENTRY_BYTES


# -- the interceptor, with a fake call context --------------------------------------------------


class Aborted(Exception):
    def __init__(self, code, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code, self.details = code, details


class FakeContext:
    def __init__(self, remaining_s: float | None = None) -> None:
        self.remaining_s = remaining_s

    def time_remaining(self):
        return self.remaining_s

    def abort(self, code, details):
        raise Aborted(code, details)


class CallDetails:
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def intercepted(interceptor: LimitsInterceptor, method: str, behavior):
    handler = interceptor.intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(behavior), CallDetails(method)
    )
    return handler.unary_unary


def test_the_interceptor_refuses_an_invalid_request_before_the_servicer():
    seen = []
    call = intercepted(
        LimitsInterceptor(), "/raftcron.v1.JobService/GetJob", lambda request, context: seen.append(request)
    )
    with pytest.raises(Aborted) as raised:
        call(jobs_pb2.GetJobRequest(job_id="a\0"), FakeContext())
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "job_id" in raised.value.details
    assert seen == []
    call(jobs_pb2.GetJobRequest(job_id="a"), FakeContext())
    assert len(seen) == 1


def test_the_interceptor_ends_a_long_poll_inside_its_callers_deadline():
    waits = []
    call = intercepted(
        LimitsInterceptor(), "/raftcron.v1.WorkerService/Lease", lambda r, c: waits.append(r.wait.ToNanoseconds())
    )
    call(worker_pb2.LeaseRequest(worker_id="w", wait=Duration(seconds=25)), FakeContext(remaining_s=2.0))
    call(worker_pb2.LeaseRequest(worker_id="w", wait=Duration(seconds=1)), FakeContext(remaining_s=60.0))
    assert waits == [1_750_000_000, 1_000_000_000]


@pytest.mark.parametrize(
    ("method", "request_", "limit"),
    [
        ("/raftcron.v1.WorkerService/Lease", worker_pb2.LeaseRequest(worker_id="w", wait=Duration(seconds=5)), 3),
        ("/raftcron.v1.ClusterService/Status", cluster_pb2.StatusRequest(include_digest=True), 1),
    ],
)
def test_the_interceptor_caps_calls_that_hold_a_thread_or_the_state(method, request_, limit):
    release, entered = threading.Event(), threading.Semaphore(0)

    def hold(request, context):
        entered.release()
        release.wait(10)
        return "done"

    call = intercepted(LimitsInterceptor(max_lease_waits=3), method, hold)
    holders = [threading.Thread(target=call, args=(request_, FakeContext())) for _ in range(limit)]
    for thread in holders:
        thread.start()
    for _ in holders:
        assert entered.acquire(timeout=10)
    with pytest.raises(Aborted) as raised:
        call(request_, FakeContext())
    assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    plain = type(request_)()  # no wait, no digest: never capped
    plain.MergeFrom(request_)
    plain.ClearField("wait" if "wait" in plain.DESCRIPTOR.fields_by_name else "include_digest")
    release.set()
    assert call(plain, FakeContext()) == "done"
    for thread in holders:
        thread.join(10)
    assert call(request_, FakeContext()) == "done"  # the slots are given back


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf")])
def test_every_client_call_has_a_finite_deadline(timeout_s):
    with pytest.raises(ValueError, match="timeout_s"):
        ClusterClient(["127.0.0.1:1"], timeout_s=timeout_s)
    with ClusterClient(["127.0.0.1:1"], timeout_s=1.0) as client, pytest.raises(ValueError, match="timeout_s"):
        client.lease(worker_id="w", timeout_s=timeout_s)


# -- ListRuns: one call looks at a bounded number of runs, and pages still cover everything ----


def history_state(runs_per_job: dict[str, list[tuple[int, str]]]) -> State:
    state = State()
    for job_id, runs in runs_per_job.items():
        for scheduled_us, status in runs:
            state.add_run(Run(job_id=job_id, scheduled_us=scheduled_us, status=status))
    return state


def all_pages(state: State, query: RunQuery, limit: int, max_examined: int) -> list[tuple[int, str]]:
    keys, after = [], None
    for _ in range(10_000):
        page, after = select_runs(state, dataclasses.replace(query, after=after), limit, max_examined)
        keys += [(run.scheduled_us, run.job_id) for run in page]
        if after is None:
            return keys
    raise AssertionError("pagination never ended")


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    runs_per_job=st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(
            st.tuples(st.integers(0, 30), st.sampled_from(["succeeded", "failed", "queued"])),
            max_size=25,
            unique_by=lambda item: item[0],
        ),
        max_size=4,
    ),
    statuses=st.sampled_from([frozenset(), frozenset({"failed"}), frozenset({"queued", "failed"})]),
    newest_first=st.booleans(),
    limit=st.integers(1, 7),
    max_examined=st.integers(1, 12),
    window=st.tuples(st.integers(-1, 31), st.integers(-1, 32)),
)
def test_run_pages_cover_every_matching_run_once_in_order(
    runs_per_job, statuses, newest_first, limit, max_examined, window
):
    state = history_state(runs_per_job)
    query = RunQuery(statuses=statuses, since_us=window[0], until_us=window[1], newest_first=newest_first)
    expected = sorted(
        (
            (at, job)
            for job, runs in runs_per_job.items()
            for at, status in runs
            if window[0] <= at < window[1] and (not statuses or status in statuses)
        ),
        reverse=newest_first,
    )
    assert all_pages(state, query, limit, max_examined) == expected


def test_a_rare_status_answers_a_short_page_with_a_token_instead_of_walking_all_history():
    state = history_state({f"job-{n}": [(t, "succeeded") for t in range(50)] + [(50, "failed")] for n in range(100)})
    page, after = select_runs(state, RunQuery(statuses=frozenset({"failed"})), limit=10, max_examined=1000)
    assert page == [] and after is not None  # 1,000 runs looked at, none failed yet: go on from here
    keys = all_pages(state, RunQuery(statuses=frozenset({"failed"})), limit=10, max_examined=1000)
    assert keys == [(50, f"job-{n}") for n in sorted(range(100), key=lambda n: f"job-{n}")]


class CountingRuns(list):
    """A job's runs that count how many are read."""

    reads = 0

    def __getitem__(self, position):
        CountingRuns.reads += 1
        return super().__getitem__(position)


@pytest.mark.parametrize("newest_first", [False, True])
def test_a_page_deep_into_a_herd_instant_reads_no_run_of_the_earlier_pages(newest_first):
    """A midnight herd: thousands of jobs, one instant. Each page starts just past its token,
    instead of walking past every run the earlier pages returned (quadratic, under the lock)."""
    jobs, limit = 1_000, 10
    state = history_state({f"job-{n:05d}": [(7, "succeeded")] for n in range(jobs)})
    state.runs = {job_id: CountingRuns(runs) for job_id, runs in state.runs.items()}
    query = RunQuery(newest_first=newest_first)
    keys, after, reads = [], None, []
    while True:
        CountingRuns.reads = 0
        page, after = select_runs(state, dataclasses.replace(query, after=after), limit, max_examined=1_000)
        reads.append(CountingRuns.reads)
        keys += [(run.scheduled_us, run.job_id) for run in page]
        assert len(page) == limit or after is None  # never a short page: nothing is skipped
        if after is None:
            break
    assert keys == sorted(((7, f"job-{n:05d}") for n in range(jobs)), reverse=newest_first)
    # A deeper page never costs more than the one before it: it looks at the jobs not listed yet
    # (the first page alone has no token to place). Walking past earlier pages grows instead.
    assert reads[1:] == sorted(reads[1:], reverse=True), reads[:5] + reads[-5:]


class CountingJobs(dict):
    """state.runs, counting the jobs looked up during each hold of the lock."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.per_hold: list[int] = []

    def get(self, key, default=None):
        if self.per_hold:
            self.per_hold[-1] += 1
        return super().get(key, default)


def test_a_listing_across_many_jobs_holds_the_lock_for_a_chunk_of_them_at_a_time():
    """100,000 jobs in one hold of the lock took 0.4-0.8 s: the node's Raft tick waited."""
    from scheduler.rpc.run_pages import JOBS_PER_HOLD, select_page

    jobs = 2 * JOBS_PER_HOLD + 500
    state = history_state({f"job-{n:05d}": [(7, "succeeded"), (8, "failed")] for n in range(jobs)})
    state.runs = CountingJobs(state.runs)

    @contextlib.contextmanager
    def read():
        state.runs.per_hold.append(0)
        yield state

    page, after = select_page(read, RunQuery(since_us=8), limit=10)
    assert [(r.scheduled_us, r.job_id) for r in page] == [(8, f"job-{n:05d}") for n in range(10)]
    assert after == (8, "job-00009")
    assert sum(state.runs.per_hold) >= jobs  # every job was looked at...
    assert max(state.runs.per_hold) <= JOBS_PER_HOLD  # ...a chunk per hold of the lock


def test_runs_that_land_between_the_two_steps_of_a_page_keep_it_ordered():
    from scheduler.rpc.run_pages import select_page

    state = history_state({"a": [(10, "succeeded")], "b": [(20, "succeeded")], "c": [(30, "succeeded")]})
    holds = []

    @contextlib.contextmanager
    def read():
        holds.append(1)
        if len(holds) == 3:  # the merge, after the heads were found: writes landed meanwhile
            state.runs["a"].clear()  # the head of a was pruned
            for at in (15, 25):  # before c's head; 15 sorts before b's run, which is listed first
                state.add_run(Run(job_id="c", scheduled_us=at, status="queued"))
        yield state

    page, after = select_page(read, RunQuery(), limit=10)
    # In order, each run once; the run that landed behind a run already listed waits for the next
    # listing, as a run claimed behind a page token does.
    assert [(r.scheduled_us, r.job_id) for r in page] == [(20, "b"), (25, "c"), (30, "c")]
    assert after is None


def test_the_cli_follows_short_pages_of_runs_until_its_page_is_full(monkeypatch, capsys):
    """`raftcron runs --status failed`: the node answers a rare status in bounded steps."""
    from scheduler.cli import connection
    from scheduler.cli.runs import cmd_runs

    pages = [([], "10:a"), (["x"], "20:b"), ([], "30:c"), (["y", "z"], "40:d")]
    asked = []

    class FakeClient:
        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return None

        def list_runs(self, request):
            asked.append((request.page_token, request.page_size))
            runs, token = pages[len(asked) - 1]
            return runs_pb2.ListRunsResponse(runs=[pb.Run(job_id=job) for job in runs], next_page_token=token)

    monkeypatch.setattr(connection, "cluster_client", lambda args: FakeClient())
    args = argparse.Namespace(
        job="", status=["failed"], since=None, until=None, limit=3, oldest_first=False, linearizable=False, json=True
    )
    assert cmd_runs(args) == 0
    assert [run["job_id"] for run in json.loads(capsys.readouterr().out)] == ["x", "y", "z"]
    assert asked == [("", 3), ("10:a", 3), ("20:b", 2), ("30:c", 2)]


def test_a_write_larger_than_one_log_entry_is_refused_before_planning_and_a_dry_run_is_not():
    payload = '"' + "p" * 60_000 + '"'
    jobs = [good_pb_spec(id=f"big-{n}", payload_json=payload) for n in range(150)]  # 9 MB: too large even compressed
    problems = request_problems(jobs_pb2.ApplyJobsRequest(jobs=jobs))
    assert status_code(problems) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "log entry" in describe(problems)
    assert request_problems(jobs_pb2.ApplyJobsRequest(jobs=jobs, dry_run=True)) == []
    bad = request_problems(jobs_pb2.ApplyJobsRequest(jobs=[*jobs, good_pb_spec(id="a\0")]))
    assert status_code(bad) == grpc.StatusCode.INVALID_ARGUMENT  # what is wrong comes first


# Ten times more values at each level: 10 million strings once expanded.
_BOMB = "\n".join(
    "    {0}: &{0} [{1}]".format(name, ", ".join([f"*{prev}" if prev else "x"] * 10))
    for prev, name in zip(["", "a", "b", "c", "d", "e", "f"], ["a", "b", "c", "d", "e", "f", "g"])
)
_JOB_HEAD = "jobs:\n- id: a\n  schedule: '* * * * *'\n  target: h\n"
DOCUMENT_CASES = [
    ("alias bomb in a payload", _JOB_HEAD + "  payload:\n" + _BOMB, "larger than 64 KiB"),
    ("YAML nested 5,000 deep", _JOB_HEAD + "  payload: " + "[" * 5000 + "]" * 5000, "nests too deeply"),
    ("a key that is not a string", _JOB_HEAD + "  1: x\n", "is not a string"),
    ("a repeated key", "jobs:\n- id: a\n  id: b\n  schedule: '* * * * *'\n  target: h\n", "repeats"),
    ("a Python object tag", "jobs:\n- id: !!python/object/apply:os.system ['true']\n  target: h\n", "constructor"),
    ("an unquoted cron expression", "jobs:\n- id: a\n  schedule: */5 * * * *\n  target: h\n", "must be quoted"),
    ("an impossible date", _JOB_HEAD + "  payload: 2024-02-30\n", "invalid YAML value"),
    ("a file over 8 MiB", "# " + "x" * (8 << 20), "larger than 8 MiB"),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in DOCUMENT_CASES], ids=[c[0] for c in DOCUMENT_CASES])
def test_a_hostile_job_document_is_refused_with_a_clear_message(text, fragment):
    with pytest.raises(SpecError) as raised:
        parse_jobs_document(text)
    assert fragment in str(raised.value)


@pytest.mark.parametrize(
    "data", [b"\xff\xff\xff", b"\x0a\x02\xc3\x28", b"\x08" + b"\xff" * 11], ids=["corrupt", "bad UTF-8", "varint"]
)
def test_the_interceptor_answers_undecodable_bytes_invalid_argument(data):
    seen = []
    handler = LimitsInterceptor().intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(
            lambda request, context: seen.append(request), request_deserializer=jobs_pb2.GetJobRequest.FromString
        ),
        CallDetails("/raftcron.v1.JobService/GetJob"),
    )
    request = handler.request_deserializer(data)
    with pytest.raises(Aborted) as raised:
        handler.unary_unary(request, FakeContext())
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT and "not a valid message" in raised.value.details
    assert seen == []
    assert handler.request_deserializer(jobs_pb2.GetJobRequest(job_id="a").SerializeToString()).job_id == "a"


# -- refusals before the body, and the request read ----------------------------------------------


class Untouchable:
    def __iter__(self):
        return self

    def __next__(self):
        raise AssertionError("a refused call's body was read")


def test_a_call_without_a_token_is_refused_without_reading_its_body():
    from scheduler.security.interceptor import AuthInterceptor

    class Nobody:
        def authenticate(self, token):
            return None

    inner = grpc.unary_unary_rpc_method_handler(
        lambda r, c: "served", request_deserializer=jobs_pb2.GetJobRequest.FromString
    )
    handler = AuthInterceptor(Nobody()).intercept_service(
        lambda details: inner, CallDetails("/raftcron.v1.JobService/GetJob")
    )
    assert handler.request_streaming and handler.request_deserializer is None
    with pytest.raises(Aborted) as raised:
        handler.stream_unary(Untouchable(), FakeContext())
    assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED


class ReadContext(FakeContext):
    def __init__(self, peer: str = "ipv4:10.0.0.1:5000") -> None:
        super().__init__()
        self._peer, self.cancelled = peer, 0

    def peer(self):
        return self._peer

    def cancel(self):
        self.cancelled += 1


def test_slow_request_reads_are_capped_per_caller_and_every_read_on_a_deadline():
    from scheduler.rpc.intake import ReadWatch, RequestIntake

    now = [0.0]
    reads = ReadWatch(timeout_s=15, slow_s=0.5, most_slow=3, most_slow_per_caller=2, clock=lambda: now[0])
    intake = RequestIntake(reads=reads)
    inner = grpc.unary_unary_rpc_method_handler(lambda request, context: request.job_id)
    handler = intake.intercept_service(lambda details: inner, CallDetails("/raftcron.v1.JobService/GetJob"))
    assert handler.stream_unary(iter([jobs_pb2.GetJobRequest(job_id="a")]), ReadContext()) == "a"
    # Pending reads are not slow yet: a burst of any size is let through.
    tokens = [reads.start("host:a", lambda: None) for _ in range(50)]
    assert all(isinstance(token, int) for token in tokens)
    for token in tokens:
        reads.end(token)
    a = [ReadContext() for _ in range(3)]
    b = [ReadContext("ipv4:10.0.0.2:5000") for _ in range(2)]
    for context in a + b:
        assert isinstance(reads.start(caller_key_of(context), context.cancel), int)
    now[0] = 0.6  # all five are slow: a's third is beyond its share, b's second beyond the node's
    for cancel in reads.sweep():
        cancel()
    assert [c.cancelled for c in a + b] == [0, 0, 1, 0, 1]
    assert reads.pending() == 3
    with pytest.raises(Aborted) as raised:  # a has its share of slow reads: refused at once
        handler.stream_unary(Untouchable(), ReadContext())
    assert raised.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    # Another caller with no slow read reads at once, whatever the node's count.
    assert handler.stream_unary(iter([jobs_pb2.GetJobRequest(job_id="c")]), ReadContext("ipv4:10.0.0.3:1")) == "c"
    now[0] = 15.1  # the deadline: every read left is cancelled, and the shares are free again
    for cancel in reads.sweep():
        cancel()
    assert [c.cancelled for c in a + b] == [1, 1, 1, 1, 1] and reads.pending() == 0
    assert handler.stream_unary(iter([jobs_pb2.GetJobRequest(job_id="d")]), ReadContext()) == "d"
    with pytest.raises(Aborted) as raised:  # no message at all
        handler.stream_unary(iter([]), ReadContext())
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT


def caller_key_of(context) -> str:
    from scheduler.rpc.intake import caller_key

    return caller_key(context)


# A day field: a list of values, or a star with a step (starred, so both day fields must match).
_DAYS_OF_MONTH = (
    st.sets(st.integers(1, 31), min_size=1).map(lambda days: ",".join(map(str, sorted(days))))
    | st.sets(st.integers(28, 31), min_size=1).map(lambda days: ",".join(map(str, sorted(days))))
    | st.integers(1, 31).map(lambda step: f"*/{step}")
)
_DAYS_OF_WEEK = st.sets(st.integers(0, 6), min_size=1).map(lambda days: ",".join(map(str, sorted(days)))) | st.integers(
    1, 7
).map(lambda step: f"*/{step}")
_MONTHS = st.sets(st.integers(1, 12), min_size=1).map(
    lambda months: ",".join(map(str, sorted(months)))
) | st.sampled_from(["2", "2,4,6,9,11", "4,6,9,11", "*"])


@settings(max_examples=500, derandomize=True, deadline=None)
@given(dom=_DAYS_OF_MONTH, months=_MONTHS, dow=_DAYS_OF_WEEK)
@example(dom="31", months="2,4,6,9,11", dow="*/1")  # never
@example(dom="30,31", months="2", dow="*/2")  # never
@example(dom="29", months="2", dow="*/3")  # February 29 on a Sunday, Wednesday or Saturday
@example(dom="31", months="2", dow="1")  # either field: every Monday of February
def test_whether_a_schedule_can_fire_is_what_a_search_of_the_calendar_cycle_says(dom, months, dow):
    from scheduler.planning.cron_fields import parse_cron
    from scheduler.planning.wall_clock import days_can_match, next_wall_slot, search_limit_year

    fields = parse_cron(f"0 0 {dom} {months} {dow}")
    searched = next_wall_slot(fields, (2000, 1, 1, 0, 0, 0), search_limit_year(2000)) is not None
    assert days_can_match(fields) == searched, (dom, months, dow)


def test_the_health_service_answers_through_the_request_intake():
    # Watch is a non-blocking server stream: the intake must keep it so (it holds no thread).
    from concurrent import futures

    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    from scheduler.rpc.intake import RequestIntake

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), interceptors=[RequestIntake()])
    servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            assert (
                stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status == health_pb2.HealthCheckResponse.SERVING
            )
            watch = stub.Watch(health_pb2.HealthCheckRequest(), timeout=10)
            assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
            watch.cancel()
    finally:
        server.stop(0)
