"""Finding 1: every validator of caller text runs in linear time.

Each validator is run on adversarial text of size n and 4n, in the same test, and the ratio of
the two times is bounded: about 4 for linear work, 16 for quadratic (what the payload-depth
regex did on escaped quotes: one 64 KiB payload held the GIL for about 26 s). No wall-clock
threshold: only the ratio of CPU times, with room for a loaded machine. A real node then takes a request of
such payloads while Status keeps answering and the leader stays.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from scheduler.cli.times import parse_when
from scheduler.core.model import JobSpec
from scheduler.planning import ScheduleError, compile_schedule, parse_iso_to_us
from scheduler.planning.durations import DurationError, parse_duration_us
from scheduler.rpc.convert import spec_to_pb
from scheduler.rpc.limits import DEFAULT_LIMITS
from scheduler.rpc.request_checks import payload_depth, request_problems
from scheduler.security.safetext import json_line, shown_text, stored_text
from scheduler.specs import SpecError, parse_jobs_document, validate_spec
from worker.api.v1 import jobs_pb2, worker_pb2

pytestmark = pytest.mark.security

# Linear work grows about 4x from n to 4n; quadratic 16x. Bounded well between the two.
MAX_GROWTH = 8.0


def seconds_for(work, text, repeat: int, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.thread_time()  # CPU time of this thread: other processes' load does not count
        for _ in range(repeat):
            work(text)
        best = min(best, time.thread_time() - started)
    return best


def growth(work, make, n: int) -> float:
    """How much longer `work` takes on make(4n) than on make(n): the best of 3 rounds each, a
    round repeating the call until the small input takes at least 20 ms of CPU."""
    small, large = make(n), make(4 * n)
    repeat = 1
    while seconds_for(work, small, repeat, rounds=1) < 0.02 and repeat < 1 << 16:
        repeat *= 2
    return seconds_for(work, large, repeat) / seconds_for(work, small, repeat)


def quietly(work):
    def call(text):
        try:
            work(text)
        except (ValueError, SpecError, ScheduleError, DurationError):
            pass

    return call


# Pathological shapes for text scanners: escapes that never close, alternations that overlap,
# brackets, nesting, long digit runs, repeated separators.
SHAPES = {
    "escaped quotes": lambda n: '"' + '\\"' * (n // 2),
    "quote per char": lambda n: '"a' * (n // 2),
    "backslashes": lambda n: "\\" * n,
    "open brackets": lambda n: "[" * n,
    "strings of brackets": lambda n: '["' + "[" * n + '"]',
    "digits": lambda n: "1" * n,
    "spaces then junk": lambda n: " " * n + "\x00",
    "commas": lambda n: "1," * (n // 2),
    "controls": lambda n: "\x1b]0;" * (n // 4),
}


def spec_pb(**fields) -> jobs_pb2.ApplyJobsRequest:
    job = spec_to_pb(JobSpec(id="j", schedule="* * * * *", target_kind="handler", target="h"))
    for name, value in fields.items():
        setattr(job, name, value)
    return jobs_pb2.ApplyJobsRequest(jobs=[job], dry_run=True)


@pytest.mark.parametrize("shape", SHAPES)
def test_payload_depth_is_linear(shape):
    assert growth(payload_depth, SHAPES[shape], 8_000) < MAX_GROWTH


@pytest.mark.parametrize("shape", SHAPES)
def test_the_wire_check_of_a_spec_is_linear(shape):
    def check(text):
        request_problems(spec_pb(payload_json=text, schedule=text[:256], timezone=text[:64], jitter=text[:64]))

    assert growth(check, SHAPES[shape], 8_000) < MAX_GROWTH


@pytest.mark.parametrize("shape", SHAPES)
def test_validate_spec_is_linear(shape):
    def check(text):
        validate_spec(
            JobSpec(id="j", schedule="* * * * *", target_kind="shell", target=text[:8000] or "x", payload_json=text)
        )

    assert growth(quietly(check), SHAPES[shape], 8_000) < MAX_GROWTH


@pytest.mark.parametrize("shape", SHAPES)
def test_a_workers_free_text_is_checked_and_cleaned_in_linear_time(shape):
    def check(text):
        request = worker_pb2.CompleteRequest(worker_id="w", error=text, output_tail=text)
        request_problems(request)
        stored_text(text), shown_text(text), json_line(text)

    assert growth(check, SHAPES[shape], 8_000) < MAX_GROWTH


@pytest.mark.parametrize("shape", SHAPES)
def test_short_fields_refuse_long_text_without_reading_it_all(shape):
    # Ids, names, reasons: bounded before any per-character work.
    def check(text):
        request_problems(jobs_pb2.PauseJobRequest(job_id=text, reason=text, author=text, request_id=text))

    assert growth(check, SHAPES[shape], 8_000) < MAX_GROWTH


@pytest.mark.parametrize(
    "parse",
    [
        quietly(lambda text: parse_duration_us(text, "timeout")),
        quietly(lambda text: parse_duration_us("1d" + "1" * len(text), "timeout")),
        quietly(lambda text: compile_schedule(text)),
        quietly(lambda text: parse_iso_to_us(text)),
        quietly(lambda text: parse_when(text)),
        quietly(lambda text: parse_jobs_document(f"jobs:\n  - id: j\n    schedule: '{text}'\n    target: h\n")),
    ],
    ids=["duration", "duration digits", "cron", "iso instant", "cli time", "jobs document"],
)
@pytest.mark.parametrize("shape", ["digits", "spaces then junk", "commas"])
def test_other_parsers_of_caller_text_are_linear(parse, shape):
    assert growth(parse, SHAPES[shape], 8_000) < MAX_GROWTH


# -- against a real node ------------------------------------------------------------------------


@pytest.mark.integration
def test_a_request_of_pathological_payloads_leaves_the_node_responsive(make_cluster):
    cluster = make_cluster(3)
    cluster.start()
    leader = cluster.wait_for_leader(60)
    term = cluster.status(leader).term
    # The largest request a node takes: 16 MiB of 64 KiB payloads of escaped quotes, a dry run.
    payload = '"' + '\\"' * (DEFAULT_LIMITS.max_payload_bytes // 2 - 1)
    jobs = [
        spec_to_pb(JobSpec(id=f"p{i}", schedule="* * * * *", target_kind="handler", target="h", payload_json=payload))
        for i in range(DEFAULT_LIMITS.max_message_bytes // len(payload) - 2)
    ]
    request = jobs_pb2.ApplyJobsRequest(jobs=jobs, dry_run=True)
    outcome: list = []

    def attack():
        with cluster.client(leader, timeout_s=120) as client:
            try:
                client.apply_jobs(request)
            except grpc.RpcError as error:
                outcome.append((error.code(), error.details()[:200]))
            else:
                outcome.append("applied")

    attacker = threading.Thread(target=attack)
    attacker.start()
    answered = 0
    with cluster.client(leader, timeout_s=2.0) as admin:
        while attacker.is_alive():
            status = admin.status(address=cluster.member(leader).grpc_address)  # raises past its 2 s deadline
            assert status.role == "leader" and status.term == term
            answered += 1
            time.sleep(0.05)
    attacker.join()
    # Refused (payload_json is not JSON): INVALID_ARGUMENT, or RESOURCE_EXHAUSTED when the list of
    # every job's problem is longer than the client takes as an error message.
    assert len(outcome) == 1 and outcome[0][0] in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED)
    assert answered >= 1
    with cluster.client(leader) as admin:
        assert not admin.list_jobs().jobs
    assert cluster.wait_for_leader(10) == leader and cluster.status(leader).term == term
