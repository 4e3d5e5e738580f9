"""Random and hostile specs and RPCs against a real 3-node cluster on loopback.

Every call has a deadline and must be answered with success or a clear error (INVALID_ARGUMENT,
FAILED_PRECONDITION, NOT_FOUND, RESOURCE_EXHAUSTED, naming the field); afterwards every node is
alive and ready, logged no servicer exception, and the replicas' digests agree. Also: the cap
on concurrent long polls, a long poll that ends inside its caller's deadline, and requests too
large for the transport or for one log entry.

Hypothesis runs derandomized (the same examples every run) with a bounded number of examples.
"""

from __future__ import annotations

import threading

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scheduler.core.model import JobSpec, Resource
from scheduler.rpc.convert import resource_to_pb, spec_to_pb
from scheduler.rpc.validate import request_problems
from worker.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    ops_pb2,
    ops_pb2_grpc,
    runs_pb2,
    runs_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)

pytestmark = pytest.mark.integration

CALL_TIMEOUT_S = 8.0
EXAMPLES = 150
CLEAR_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}
SERVICES = {
    "JobService": (jobs_pb2, jobs_pb2_grpc.JobServiceStub),
    "RunService": (runs_pb2, runs_pb2_grpc.RunServiceStub),
    "WorkerService": (worker_pb2, worker_pb2_grpc.WorkerServiceStub),
    "OpsService": (ops_pb2, ops_pb2_grpc.OpsServiceStub),
    "ClusterService": (cluster_pb2, cluster_pb2_grpc.ClusterServiceStub),
}
# Calls that change who is in the cluster are sent only when they are invalid.
ONLY_INVALID = {"AddMember", "RemoveMember"}
METHODS = [
    (service, method.name, method.input_type)
    for service, (module, _) in SERVICES.items()
    for method in module.DESCRIPTOR.services_by_name[service].methods
]

TEXTS = st.sampled_from(
    [
        "", "a", "seed-a", "default", "h", "w1", "\x00", "a\nb", "\x1b[2J", "../../etc/passwd", "x" * 300,
        "é" * 70, "ab\u202ecd", "seed-a@2026-01-01T00:00:00Z", "1:seed-a", "*/5 * * * *", "* * * * * *",
        "0 0 30 2 *", "UTC", "Europe/Paris", "Mars/Base", "NaN", "[" * 100, '{"a":1}', "null", "-5m", "400d",
        "pinned", "catch_up", "skip", "run_at_end", "both", "127.0.0.1:1", "host:99999", "%s%n",
    ]
) | st.text(max_size=16)
INT32 = st.sampled_from([0, 1, -1, 2, 7, 1000, 10_001, 2**31 - 1, -(2**31)]) | st.integers(-(2**31), 2**31 - 1)
INT64 = st.sampled_from([0, 1, -1, 5, 2**62, 2**63 - 1, -(2**63)]) | st.integers(-(2**63), 2**63 - 1)
NOW_S = 1_800_000_000
SECONDS = st.sampled_from([0, 1, -1, NOW_S, NOW_S + 60, 253_402_300_800, 2**62, -(2**62)]) | st.integers(0, NOW_S * 2)
NANOS = st.sampled_from([0, 1, 999_999_999, 1_000_000_000, -1])
DOUBLES = st.sampled_from([0.0, 1.0, 2.0, -1.0, 1e-300, 1e300]) | st.floats(allow_nan=True, allow_infinity=True)
# A Lease that is valid waits: keep such waits short so the examples stay quick.
WAITS = st.builds(Duration, seconds=st.sampled_from([-1, 0, 10**9, 700]), nanos=st.sampled_from([0, 100_000_000]))


@st.composite
def message_of(draw, descriptor, depth: int = 0) -> Message:
    """Any message of this type: each field unset or drawn from values good, odd and hostile."""
    from google.protobuf import message_factory

    message = message_factory.GetMessageClass(descriptor)()
    for field in descriptor.fields:
        if not draw(st.booleans()):
            continue
        if field.is_repeated:
            count = draw(st.sampled_from([1, 2, 3, 1, 1, 10_001 if depth == 0 else 2]))
            item = draw(_value_of(field, depth))
            getattr(message, field.name).extend([item] * count)
            continue
        value = draw(_value_of(field, depth))
        if field.type == field.TYPE_MESSAGE:
            getattr(message, field.name).CopyFrom(value)
        else:
            setattr(message, field.name, value)
    return message


def _value_of(field, depth: int):
    t = field.type
    if t == field.TYPE_STRING:
        return TEXTS
    if t == field.TYPE_BOOL:
        return st.booleans()
    if t in (field.TYPE_INT32, field.TYPE_ENUM):
        return INT32 if t == field.TYPE_INT32 else st.sampled_from([0, 1, 2, 3, 4, 8, 99, -1])
    if t == field.TYPE_INT64:
        return INT64
    if t == field.TYPE_DOUBLE:
        return DOUBLES
    name = field.message_type.full_name
    if name == "google.protobuf.Timestamp":
        return st.builds(Timestamp, seconds=SECONDS, nanos=NANOS)
    if name == "google.protobuf.Duration":
        if field.name == "wait":
            return WAITS
        return st.builds(Duration, seconds=st.sampled_from([0, 1, -1, 60, 2**40, -(2**40)]), nanos=NANOS)
    if depth >= 3:
        return st.just(None).map(lambda _: _empty(field.message_type))
    return message_of(field.message_type, depth + 1)


def _empty(descriptor) -> Message:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)()


def field_names(descriptor, seen: set | None = None) -> set[str]:
    """Every field name a message can contain, and the document names of a job spec's fields."""
    seen = set() if seen is None else seen
    if descriptor.full_name in seen:
        return set()
    seen.add(descriptor.full_name)
    names = set()
    for field in descriptor.fields:
        names.add(field.name)
        if field.message_type is not None:
            names |= field_names(field.message_type, seen)
    return names | {"class", "payload", "retry", "misfire", "dst", "jitter", "timeout", "uses", "target", "resources"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from scheduler.localcluster import LocalCluster
    from tests.integration.conftest import FAST_RAFT, free_port_base

    local = LocalCluster(
        tmp_path_factory.mktemp("fuzz"), nodes=3, port_base=free_port_base(3), overrides={**FAST_RAFT, "grpc_threads": 8}
    )
    try:
        local.start()
        local.wait_for_leader()
        seed = [
            JobSpec(id="seed-a", schedule="*/5 * * * *", target_kind="handler", target="h", uses=("db",)),
            JobSpec(id="seed-b", schedule="0 3 * * *", target_kind="shell", target="echo hi", timezone="Europe/Paris"),
        ]
        with local.client(timeout_s=CALL_TIMEOUT_S) as client:
            client.apply_jobs(jobs=[spec_to_pb(s) for s in seed], resources=[resource_to_pb(Resource("db", 2, 5))])
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def channels(cluster):
    opened = {address: grpc.insecure_channel(address) for address in cluster.addresses}
    yield opened
    for channel in opened.values():
        channel.close()


def call(channels, address: str, service: str, method: str, request: Message):
    stub = SERVICES[service][1](channels[address])
    return getattr(stub, method)(request, timeout=CALL_TIMEOUT_S)


@st.composite
def rpcs(draw, addresses):
    service, method, descriptor = draw(st.sampled_from(METHODS))
    request = draw(message_of(descriptor))
    if method in ONLY_INVALID:
        assume(request_problems(request))
    return draw(st.sampled_from(addresses)), service, method, request


def test_random_and_hostile_calls_get_success_or_a_clear_error(cluster, channels):
    answered: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(rpcs(cluster.addresses))
    def one_call(rpc):
        address, service, method, request = rpc
        try:
            call(channels, address, service, method, request)
            answered["OK"] = answered.get("OK", 0) + 1
        except grpc.RpcError as error:
            code, details = error.code(), error.details() or ""
            answered[code.name] = answered.get(code.name, 0) + 1
            assert code in CLEAR_ERRORS, f"{service}.{method} on {address}: {code.name}: {details}\n{request}"
            assert details, f"{service}.{method}: {code.name} without a message"
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                names = field_names(request.DESCRIPTOR)
                assert any(name in details for name in names), f"{method}: no field named in {details!r}"

    one_call()
    print("answers:", answered)
    assert answered.get("INVALID_ARGUMENT", 0) > 0 and answered.get("OK", 0) > 0
    assert_node_healthy(cluster)


def assert_node_healthy(cluster) -> None:
    assert all(member.alive() for member in cluster.members)
    cluster.wait_for_leader()
    cluster.wait_converged(timeout_s=30)
    for member in cluster.members:
        text = member.log_path.read_text(errors="replace")
        for marker in ("Exception calling application", "Traceback", "CRITICAL"):
            assert marker not in text, f"{member.node_id} logged {marker!r}: see {member.log_path}"


def test_long_polls_beyond_the_cap_are_refused_and_other_calls_still_answered(cluster, channels):
    leader = cluster.member(cluster.wait_for_leader()).grpc_address
    cap = 8 // 2  # grpc_threads // 2 (below the limits' default of 32)
    callers = cap + 4
    start, outcomes, lock = threading.Barrier(callers), [], threading.Lock()
    polls_started = threading.Event()

    def poll(number: int):
        request = worker_pb2.LeaseRequest(worker_id=f"poller-{number}", targets=["nothing-runs-this"])
        request.wait.FromSeconds(4)
        start.wait()
        polls_started.set()
        try:
            call(channels, leader, "WorkerService", "Lease", request)
            outcome = "OK"
        except grpc.RpcError as error:
            outcome = error.code().name
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=poll, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    polls_started.wait(CALL_TIMEOUT_S)
    # While the polls hold their threads, the node still answers.
    status = call(channels, leader, "ClusterService", "Status", cluster_pb2.StatusRequest())
    assert status.role == "leader"
    for thread in threads:
        thread.join(CALL_TIMEOUT_S * 2)
    assert sorted(outcomes) == ["OK"] * cap + ["RESOURCE_EXHAUSTED"] * (callers - cap), outcomes


def test_a_long_poll_ends_before_its_callers_deadline(cluster, channels):
    leader = cluster.member(cluster.wait_for_leader()).grpc_address
    stub = worker_pb2_grpc.WorkerServiceStub(channels[leader])
    request = worker_pb2.LeaseRequest(worker_id="impatient", targets=["nothing-runs-this"], wait=Duration(seconds=25))
    # The node waits up to 25 s (capped by its config) unless the caller's deadline is nearer.
    response = stub.Lease(request, timeout=1.5)
    assert list(response.leases) == []


def test_a_message_beyond_the_transport_limit_is_refused(cluster, channels):
    request = jobs_pb2.ApplyJobsRequest(author="x" * (17 << 20))
    with pytest.raises(grpc.RpcError) as raised:
        call(channels, cluster.addresses[0], "JobService", "ApplyJobs", request)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_an_apply_too_large_for_one_log_entry_is_refused_clearly(cluster, channels):
    payload = '"' + "p" * 60_000 + '"'
    jobs = [
        spec_to_pb(JobSpec(id=f"big-{n}", schedule="0 4 * * *", target_kind="handler", target="h", payload_json=payload))
        for n in range(40)
    ]
    with pytest.raises(grpc.RpcError) as raised:
        call(channels, cluster.addresses[1], "JobService", "ApplyJobs", jobs_pb2.ApplyJobsRequest(jobs=jobs))
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "log entry" in raised.value.details()
    # Nothing was applied, and the same jobs fit in smaller applies.
    response = call(channels, cluster.addresses[1], "JobService", "ApplyJobs", jobs_pb2.ApplyJobsRequest(jobs=jobs[:4]))
    assert [change.change for change in response.changes] == ["added"] * 4


def test_too_many_jobs_in_one_apply_are_refused(cluster, channels):
    job = spec_to_pb(JobSpec(id="same", schedule="0 4 * * *", target_kind="handler", target="h"))
    with pytest.raises(grpc.RpcError) as raised:
        call(channels, cluster.addresses[2], "JobService", "ApplyJobs", jobs_pb2.ApplyJobsRequest(jobs=[job] * 10_001))
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "jobs: has 10001 entries; at most 10000" in raised.value.details()
