"""Per-method gRPC metrics and bounded reflection on an in-process gRPC server: the standard
family names and labels, codes of aborted, failed and refused calls, message counts of streams,
one `unknown` label value for methods that do not exist, and a cap on reflection streams."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.local import wait_until
from scheduler.node import RAFTCRON_SERVICES
from scheduler.observability.grpc_metrics import GrpcServerMetrics, grpc_type
from scheduler.observability.reflection import add_reflection
from worker.api.v1 import cluster_pb2, cluster_pb2_grpc, jobs_pb2, jobs_pb2_grpc

HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
REFLECTION = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"]


class Cluster(cluster_pb2_grpc.ClusterServiceServicer):
    def Status(self, request, context):
        if request.include_digest:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no digest here")
        return cluster_pb2.StatusResponse(node_id="n1")


class Jobs(jobs_pb2_grpc.JobServiceServicer):
    def GetJob(self, request, context):
        raise RuntimeError("a servicer bug")


@pytest.fixture
def served():
    metrics = GrpcServerMetrics([*RAFTCRON_SERVICES, HEALTH, REFLECTION])
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=[metrics.interceptor()])
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(Cluster(), server)
    jobs_pb2_grpc.add_JobServiceServicer_to_server(Jobs(), server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    add_reflection(server, ["raftcron.v1.ClusterService"], max_streams=1)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield metrics, channel
    channel.close()
    server.stop(0)


def samples(metrics: GrpcServerMetrics) -> dict[tuple[str, frozenset], float]:
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


def labels(service: str, method: str, kind: str = "unary") -> dict[str, str]:
    return {"grpc_type": kind, "grpc_service": service, "grpc_method": method}


def test_types_follow_the_descriptor():
    assert [grpc_type(*flags) for flags in ((0, 0), (1, 0), (0, 1), (1, 1))] == [
        "unary",
        "client_stream",
        "server_stream",
        "bidi_stream",
    ]


def test_unary_calls_are_counted_by_code_with_their_messages_and_times(served):
    metrics, channel = served
    stub = cluster_pb2_grpc.ClusterServiceStub(channel)
    for _ in range(3):
        stub.Status(cluster_pb2.StatusRequest(), timeout=5)
    with pytest.raises(grpc.RpcError) as aborted:
        stub.Status(cluster_pb2.StatusRequest(include_digest=True), timeout=5)
    assert aborted.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as failed:
        jobs_pb2_grpc.JobServiceStub(channel).GetJob(jobs_pb2.GetJobRequest(job_id="x"), timeout=5)
    assert failed.value.code() == grpc.StatusCode.UNKNOWN

    got = samples(metrics)
    status = labels("raftcron.v1.ClusterService", "Status")
    get_job = labels("raftcron.v1.JobService", "GetJob")
    assert got[("grpc_server_started_total", frozenset(status.items()))] == 4
    assert got[("grpc_server_handled_total", frozenset({**status, "grpc_code": "OK"}.items()))] == 3
    assert got[("grpc_server_handled_total", frozenset({**status, "grpc_code": "FAILED_PRECONDITION"}.items()))] == 1
    assert got[("grpc_server_handled_total", frozenset({**get_job, "grpc_code": "UNKNOWN"}.items()))] == 1
    assert got[("grpc_server_msg_received_total", frozenset(status.items()))] == 4
    assert got[("grpc_server_msg_sent_total", frozenset(status.items()))] == 3
    assert got[("grpc_server_handling_seconds_count", frozenset(status.items()))] == 4
    assert got[("grpc_server_handling_seconds_bucket", frozenset({**status, "le": "+Inf"}.items()))] == 4
    # A method never called is there at zero, so rate() and absent() work from the start.
    assert got[("grpc_server_started_total", frozenset(labels("raftcron.v1.OpsService", "KillClass").items()))] == 0


def test_unknown_methods_fold_into_one_label_value(served):
    metrics, channel = served
    for name in ("/raftcron.v1.Nope/A", "/x.Y/B", "/raftcron.v1.JobService/NoSuchMethod"):
        with pytest.raises(grpc.RpcError) as missing:
            channel.unary_unary(name)(b"", timeout=5)
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
    got = samples(metrics)
    unknown = labels("unknown", "unknown", "unknown")
    assert got[("grpc_server_handled_total", frozenset({**unknown, "grpc_code": "UNIMPLEMENTED"}.items()))] == 3
    methods = {dict(key)["grpc_method"] for name, key in got if name == "grpc_server_started_total"}
    assert not methods & {"A", "B", "NoSuchMethod"}


def test_streams_count_each_message(served):
    metrics, channel = served
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [reflection_pb2.ServerReflectionRequest(list_services="")] * 3
    answers = list(stub.ServerReflectionInfo(iter(requests), timeout=5))
    assert len(answers) == 3
    got = samples(metrics)
    bidi = labels("grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo", "bidi_stream")
    assert got[("grpc_server_msg_received_total", frozenset(bidi.items()))] == 3
    assert got[("grpc_server_msg_sent_total", frozenset(bidi.items()))] == 3
    assert got[("grpc_server_handled_total", frozenset({**bidi, "grpc_code": "OK"}.items()))] == 1


def test_the_health_watch_stream_is_counted_when_it_ends(served):
    metrics, channel = served
    watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""), timeout=5)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    watch_labels = labels("grpc.health.v1.Health", "Watch", "server_stream")

    def ended():
        got = samples(metrics)
        return sum(
            v for (name, key), v in got.items() if name == "grpc_server_handled_total" and watch_labels.items() <= key
        )

    wait_until(ended, 5, "the cancelled Watch counted")
    got = samples(metrics)
    assert got[("grpc_server_started_total", frozenset(watch_labels.items()))] == 1
    assert got[("grpc_server_msg_sent_total", frozenset(watch_labels.items()))] >= 1


def test_reflection_streams_beyond_the_cap_are_refused(served):
    _, channel = served  # the fixture allows one stream at once
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    release = threading.Event()

    def requests_then_wait():
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        release.wait(10)

    first = stub.ServerReflectionInfo(requests_then_wait(), timeout=10)
    assert next(first).list_services_response.service
    with pytest.raises(grpc.RpcError) as refused:
        list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    release.set()
    assert list(first) == []
    # The slot is free again once the first stream ended.
    again = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5)
    assert len(list(again)) == 1
