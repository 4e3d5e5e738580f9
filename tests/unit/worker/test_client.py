"""ClusterClient failover against real in-process gRPC servers on loopback."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest

from worker import ClusterClient, parse_cluster
from worker.api.v1 import cluster_pb2, cluster_pb2_grpc, jobs_pb2, jobs_pb2_grpc
from worker.api.v1.metadata import OUTCOME_UNKNOWN

TIMEOUT_S = 3.0


class FakeNode(cluster_pb2_grpc.ClusterServiceServicer, jobs_pb2_grpc.JobServiceServicer):
    """Answers Status and DeleteJob, or aborts them with `fail_with`; records what it saw."""

    def __init__(self, node_id: str, fail_with: grpc.StatusCode | None = None) -> None:
        self.node_id = node_id
        self.fail_with = fail_with
        self.unknown_outcomes = 0  # the next calls abort ABORTED with `raftcron-outcome: unknown`
        self.calls: list[str] = []
        self.request_ids: list[str] = []
        self.metadata: list[dict[str, str]] = []

    def _enter(self, method: str, context: grpc.ServicerContext) -> None:
        self.calls.append(method)
        self.metadata.append(dict(context.invocation_metadata()))
        if self.unknown_outcomes:
            self.unknown_outcomes -= 1
            context.set_trailing_metadata((OUTCOME_UNKNOWN,))
            context.abort(grpc.StatusCode.ABORTED, "leadership changed; retry with the same request id")
        if self.fail_with is not None:
            context.abort(self.fail_with, f"{self.node_id} fails on purpose")

    def Status(self, request, context):  # noqa: N802 (gRPC method name)
        self._enter("Status", context)
        return cluster_pb2.StatusResponse(node_id=self.node_id, role="follower")

    def DeleteJob(self, request, context):  # noqa: N802 (gRPC method name)
        self.request_ids.append(request.request_id)
        self._enter("DeleteJob", context)
        return jobs_pb2.DeleteJobResponse(applied_index=42)


@pytest.fixture
def start_node() -> Iterator[Callable[..., tuple[FakeNode, str]]]:
    servers: list[grpc.Server] = []

    def start(node_id: str, fail_with: grpc.StatusCode | None = None) -> tuple[FakeNode, str]:
        node = FakeNode(node_id, fail_with)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        cluster_pb2_grpc.add_ClusterServiceServicer_to_server(node, server)
        jobs_pb2_grpc.add_JobServiceServicer_to_server(node, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return node, f"127.0.0.1:{port}"

    yield start
    for server in servers:
        server.stop(None)


def _closed_address() -> str:
    """A loopback address on which nothing listens (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_fails_over_from_a_closed_port(start_node) -> None:
    node, address = start_node("n2")
    with ClusterClient([_closed_address(), address], timeout_s=TIMEOUT_S) as client:
        assert client.status().node_id == "n2"
        assert client.status().node_id == "n2"
    assert node.calls == ["Status", "Status"]


def test_tries_the_last_good_node_first(start_node) -> None:
    down, down_address = start_node("n1", fail_with=grpc.StatusCode.UNAVAILABLE)
    up, up_address = start_node("n2")
    with ClusterClient([down_address, up_address], timeout_s=TIMEOUT_S) as client:
        assert client.status().node_id == "n2"
        assert client.status().node_id == "n2"
    assert down.calls == ["Status"]  # not retried once n2 answered
    assert up.calls == ["Status", "Status"]


def test_other_errors_are_raised_without_failover(start_node) -> None:
    _, bad_address = start_node("n1", fail_with=grpc.StatusCode.FAILED_PRECONDITION)
    good, good_address = start_node("n2")
    with ClusterClient([bad_address, good_address], timeout_s=TIMEOUT_S) as client:
        with pytest.raises(grpc.RpcError) as raised:
            client.status()
    assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert good.calls == []


def test_all_nodes_down_raises_the_last_error() -> None:
    addresses = [_closed_address(), _closed_address()]
    with ClusterClient(addresses, timeout_s=TIMEOUT_S) as client:
        with pytest.raises(grpc.RpcError) as raised:
            client.status()
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
    note = "\n".join(getattr(raised.value, "__notes__", []))
    assert all(address in note for address in addresses)


def test_each_address_is_tried_once_per_call(start_node) -> None:
    nodes = [start_node(f"n{i}", fail_with=grpc.StatusCode.UNAVAILABLE) for i in range(3)]
    with ClusterClient([address for _, address in nodes], timeout_s=TIMEOUT_S) as client:
        with pytest.raises(grpc.RpcError):
            client.status()
    assert [node.calls for node, _ in nodes] == [["Status"]] * 3


def test_status_of_a_specific_node_does_not_fail_over(start_node) -> None:
    _, first = start_node("n1")
    _, second = start_node("n2")
    closed = _closed_address()
    with ClusterClient([first, second, closed], timeout_s=TIMEOUT_S) as client:
        assert client.status(address=second).node_id == "n2"
        assert client.status(address=first).node_id == "n1"
        with pytest.raises(grpc.RpcError) as raised:
            client.status(address=closed)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


def test_write_keeps_one_request_id_across_failover(start_node) -> None:
    down, down_address = start_node("n1", fail_with=grpc.StatusCode.UNAVAILABLE)
    up, up_address = start_node("n2")
    with ClusterClient([down_address, up_address], timeout_s=TIMEOUT_S) as client:
        assert client.delete_job(job_id="nightly", author="alice").applied_index == 42
        request = jobs_pb2.DeleteJobRequest(job_id="nightly", request_id="mine")
        client.delete_job(request)
    generated = down.request_ids[0]
    assert generated and up.request_ids == [generated, "mine"]
    assert request.request_id == "mine"


def test_request_message_is_not_modified(start_node) -> None:
    node, address = start_node("n1")
    request = jobs_pb2.DeleteJobRequest(job_id="nightly")
    with ClusterClient([address], timeout_s=TIMEOUT_S) as client:
        client.delete_job(request)
    assert request.request_id == ""
    assert node.request_ids[0] != ""


def test_metadata_is_sent_with_every_call(start_node) -> None:
    node, address = start_node("n1")
    metadata = {"authorization": "Bearer t"}
    with ClusterClient([address], timeout_s=TIMEOUT_S, metadata=metadata) as client:
        client.status()
    assert node.metadata[0]["authorization"] == "Bearer t"


def test_request_and_fields_are_exclusive(start_node) -> None:
    _, address = start_node("n1")
    with ClusterClient([address], timeout_s=TIMEOUT_S) as client:
        with pytest.raises(TypeError):
            client.get_job(jobs_pb2.GetJobRequest(job_id="a"), job_id="b")
        with pytest.raises(TypeError):
            client.get_job(jobs_pb2.DeleteJobRequest(job_id="a"))


def test_closed_client_refuses_calls(start_node) -> None:
    _, address = start_node("n1")
    client = ClusterClient([address], timeout_s=TIMEOUT_S)
    client.close()
    client.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        client.status()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:7100", ["127.0.0.1:7100"]),
        ("a:1,b:2", ["a:1", "b:2"]),
        (" n1.example:7100 , n2.example:7100 ", ["n1.example:7100", "n2.example:7100"]),
        ("[::1]:7100,127.0.0.1:7100", ["[::1]:7100", "127.0.0.1:7100"]),
    ],
)
def test_parse_cluster(text: str, expected: list[str]) -> None:
    assert parse_cluster(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty cluster address list"),
        ("   ", "empty cluster address list"),
        ("a:1,,b:2", "empty address"),
        ("a:1,", "empty address"),
        ("localhost", "expected 'host:port'"),
        (":7100", "expected 'host:port'"),
        ("a:", "port must be"),
        ("a:http", "port must be"),
        ("a:0", "port must be"),
        ("a:65536", "port must be"),
        ("::1:7100", "IPv6"),
        ("[::1]7100", "expected 'host:port'"),
        ("a b:1", "whitespace"),
        ("a:1,a:1", "duplicate"),
    ],
)
def test_parse_cluster_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_cluster(text)


def test_client_validates_addresses() -> None:
    with pytest.raises(ValueError):
        ClusterClient([])
    with pytest.raises(ValueError):
        ClusterClient(["nope"])
    with pytest.raises(TypeError):
        ClusterClient("a:1,b:2")  # type: ignore[arg-type]


def test_a_write_of_unknown_outcome_is_sent_again_with_its_request_id(start_node, monkeypatch) -> None:
    monkeypatch.setattr("worker._client.OUTCOME_RETRY_BACKOFF_S", 0.0)
    node, address = start_node("n1")
    node.unknown_outcomes = 2
    with ClusterClient([address], timeout_s=TIMEOUT_S, outcome_retries=3) as client:
        assert client.delete_job(job_id="payroll").applied_index == 42
    assert len(node.request_ids) == 3 and len(set(node.request_ids)) == 1 and node.request_ids[0]


def test_retries_of_unknown_outcomes_are_bounded_and_off_by_default(start_node, monkeypatch) -> None:
    monkeypatch.setattr("worker._client.OUTCOME_RETRY_BACKOFF_S", 0.0)
    node, address = start_node("n1")
    node.unknown_outcomes = 10
    with ClusterClient([address], timeout_s=TIMEOUT_S) as client:
        with pytest.raises(grpc.RpcError) as caught:
            client.delete_job(job_id="payroll")
    assert caught.value.code() == grpc.StatusCode.ABORTED and len(node.request_ids) == 1
    with ClusterClient([address], timeout_s=TIMEOUT_S, outcome_retries=2) as client:
        with pytest.raises(grpc.RpcError):
            client.delete_job(job_id="payroll")
    assert len(node.request_ids) == 1 + 3


def test_other_refusals_and_calls_without_a_request_id_are_not_sent_again(start_node, monkeypatch) -> None:
    monkeypatch.setattr("worker._client.OUTCOME_RETRY_BACKOFF_S", 0.0)
    conflicting, address = start_node("n1", fail_with=grpc.StatusCode.ABORTED)  # e.g. version_conflict
    with ClusterClient([address], timeout_s=TIMEOUT_S, outcome_retries=3) as client:
        with pytest.raises(grpc.RpcError):
            client.delete_job(job_id="payroll")
    assert conflicting.calls == ["DeleteJob"]
    reader, address = start_node("n2")
    reader.unknown_outcomes = 1
    with ClusterClient([address], timeout_s=TIMEOUT_S, outcome_retries=3) as client:
        with pytest.raises(grpc.RpcError):
            client.status()
    assert reader.calls == ["Status"]
