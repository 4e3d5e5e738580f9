"""`target: {http: ...}`: reading, the rules at apply, rendering, the wire form and its log format."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scheduler.core.commands import ApplyJobs, JobUpsert
from scheduler.core.log_format import required_log_format
from scheduler.core.model import HttpTarget, JobSpec
from scheduler.rpc.convert import spec_from_pb, spec_to_pb
from scheduler.rpc.request_checks import request_problems
from scheduler.specs import SpecError, load_job_document, parse_jobs_document, spec_to_document, validate_spec
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import jobs_pb2

FULL = """
jobs:
  - id: hooks.ping
    schedule: '*/5 * * * *'
    owner: ops
    timeout: 30s
    target:
      http:
        url: https://hooks.example.com/ping?team=ops
        method: post
        headers: {Authorization: Bearer abc, X-Team: ops}
        body: ping
        timeout: 10s
        success_codes: [200, 202]
        follow_redirects: true
"""


def one_job(target: str, extra: str = "") -> str:
    return f"jobs:\n  - id: j\n    schedule: '@hourly'\n    timeout: 1m\n{extra}    target: {target}\n"


def problems_of(text: str) -> str:
    with pytest.raises(SpecError) as raised:
        parse_jobs_document(text)
    return str(raised.value)


def test_a_full_http_target_reads_renders_and_travels_unchanged() -> None:
    [spec] = parse_jobs_document(FULL)
    assert spec.target_kind == "http" and spec.target == "https://hooks.example.com/ping?team=ops"
    assert spec.http == HttpTarget(
        url="https://hooks.example.com/ping?team=ops",
        method="POST",
        headers=(("Authorization", "Bearer abc"), ("X-Team", "ops")),
        body="ping",
        timeout_us=10_000_000,
        success_codes=(200, 202),
        follow_redirects=True,
    )
    assert parse_jobs_document(yaml.safe_dump({"jobs": [spec_to_document(spec)]})) == [spec]
    assert parse_jobs_document(yaml.safe_dump({"jobs": [spec_to_document(spec, full=True)]})) == [spec]
    assert spec_from_pb(spec_to_pb(spec)) == spec


def test_a_url_alone_is_a_get_with_every_default() -> None:
    [spec] = parse_jobs_document(one_job("{http: 'http://localhost:8080/health'}"))
    assert spec.http == HttpTarget(url="http://localhost:8080/health")
    assert spec_to_document(spec)["target"] == {"http": {"url": "http://localhost:8080/health"}}
    assert spec_from_pb(spec_to_pb(spec)) == spec


@pytest.mark.parametrize(
    ("http", "message"),
    [
        ("{url: 'ftp://x/y'}", "must start with http:// or https://"),
        ("{url: 'file:///etc/passwd'}", "must start with http:// or https://"),
        ("{url: 'http:///path'}", "must name a host"),
        ("{url: 'https://user:pw@x/'}", "must not hold a user or password"),
        ("{url: 'http://x:99999/'}", "is not a valid URL"),
        ("{url: 'http://x/a b'}", "without spaces or control characters"),
        ("{url: 'http://x/#top'}", "must not have a #fragment"),
        ("{method: GET}", "target.http.url': is required"),
        ("{url: 'http://x/', method: FETCH}", "must be one of GET, HEAD, POST"),
        ("{url: 'http://x/', headers: {Idempotency-Key: k}}", "Idempotency-Key is set by the worker"),
        ("{url: 'http://x/', headers: {X-Raftcron-Attempt: '9'}}", "is set by the worker"),
        ("{url: 'http://x/', headers: {Host: evil}}", "Host is set by the worker (or the HTTP client)"),
        ("{url: 'http://x/', headers: {'Bad Name': v}}", "is not a header name"),
        ("{url: 'http://x/', headers: {X-A: \"a\\r\\nX-Injected: 1\"}}", "no CR, LF or NUL"),
        ("{url: 'http://x/', headers: {X-A: 5}}", "the value must be a string"),
        ("{url: 'http://x/', headers: [X-A]}", "must be a mapping of header names to values"),
        ("{url: 'http://x/', body: hi}", "a GET request sends no body"),
        ("{url: 'http://x/', method: POST, body: {a: 1}}", "use the job's `payload:` to send JSON"),
        ("{url: 'http://x/', timeout: 0s}", "must be at least 1ms"),
        ("{url: 'http://x/', timeout: 2m}", "is longer than the job's timeout"),
        ("{url: 'http://x/', success_codes: [200, 99]}", "99 is not an HTTP status code (100-599)"),
        ("{url: 'http://x/', success_codes: [true]}", "is not an HTTP status code"),
        ("{url: 'http://x/', success_codes: [200, 200]}", "lists a code twice"),
        ("{url: 'http://x/', follow_redirects: 'yes'}", "must be true or false"),
        ("{url: 'http://x/', retries: 3}", "target.http.retries': unknown key"),
        ("[http://x/]", "must be a URL or a mapping with `url:`"),
    ],
)
def test_each_rule_on_an_http_request(http: str, message: str) -> None:
    assert message in problems_of(one_job(f"{{http: {http}}}"))


def test_a_body_too_large_is_refused() -> None:
    body = "x" * (64 * 1024 + 1)
    assert "at most 65536 (64 KiB)" in problems_of(
        one_job(f"{{http: {{url: 'http://x/', method: PUT, body: {body}}}}}")
    )


def test_a_payload_is_the_json_body_so_not_with_a_body_nor_on_a_get() -> None:
    with_body = one_job("{http: {url: 'http://x/', method: POST, body: hi}}", extra="    payload: {a: 1}\n")
    assert "either its `payload` (as JSON) or its `body`, not both" in problems_of(with_body)
    on_get = one_job("{http: 'http://x/'}", extra="    payload: {a: 1}\n")
    assert "a GET request sends no body, so the payload would be lost" in problems_of(on_get)
    [ok] = parse_jobs_document(one_job("{http: {url: 'http://x/', method: POST}}", extra="    payload: {a: 1}\n"))
    assert ok.payload_json == '{"a":1}'


def test_the_spec_must_agree_with_itself() -> None:
    request = HttpTarget(url="http://x/")
    moved = JobSpec(id="j", schedule="@hourly", target_kind="http", target="http://y/", http=request)
    assert any("must be its URL" in p.message for p in validate_spec(moved))
    stray = JobSpec(id="j", schedule="@hourly", target_kind="handler", target="h", http=request)
    assert any("has no HTTP request" in p.message for p in validate_spec(stray))
    missing = JobSpec(id="j", schedule="@hourly", target_kind="http", target="http://x/")
    assert any("must be an HTTP request" in p.message for p in validate_spec(missing))


def test_an_http_job_needs_log_format_3_and_others_keep_theirs() -> None:
    [spec] = parse_jobs_document(FULL)
    handler = JobSpec(id="h", schedule="@hourly", target_kind="handler", target="h")
    apply = ApplyJobs(1, "alice", "r", (JobUpsert(spec, 0, 1),))
    assert required_log_format(apply) == 3
    assert required_log_format(ApplyJobs(1, "alice", "r", (JobUpsert(handler, 0, 1),))) == 1


def test_the_wire_bounds_an_http_request_before_it_is_read() -> None:
    http = pb.HttpTarget(
        url="http://x/" + "a" * 3000,
        headers=[pb.HttpHeader(name="X", value="v")] * 40,
        body="b" * 70_000,
        success_codes=[200] * 40,
    )
    spec = pb.JobSpec(id="j", schedule="@hourly", target=pb.Target(http=http))
    fields = {p.field for p in request_problems(jobs_pb2.ApplyJobsRequest(jobs=[spec]))}
    assert {"jobs[0].target.http.url", "jobs[0].target.http.headers", "jobs[0].target.http.body"} <= fields
    assert "jobs[0].target.http.success_codes" in fields


def test_the_http_example_file_parses() -> None:
    path = Path(__file__).resolve().parents[3] / "examples" / "http_jobs.yaml"
    specs = load_job_document(path).jobs
    assert {spec.target_kind for spec in specs} == {"http"} and len(specs) == 2


def test_before_format_3_the_refusal_names_the_http_target() -> None:
    from scheduler.replication.upgrades import proposal_log_format, proposal_refusal

    [spec] = parse_jobs_document(FULL)
    apply = ApplyJobs(1, "alice", "r", (JobUpsert(spec, 0, 1),))
    needed, what = proposal_log_format(apply)
    assert (needed, what) == (3, "an HTTP target (job hooks.ping)")
    refusal = proposal_refusal(apply, needed, 2, ["n1"], {"n1": 2}, what=what)
    assert refusal is not None and "before using an HTTP target (job hooks.ping) (log format 3)" in refusal
