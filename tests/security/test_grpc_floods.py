"""Finding 2: calls that never send their body, with or without a token, cannot take a node's
gRPC threads; a refused call's body is neither read nor parsed.

Each probe floods the leader of a cluster secured like `raftcron dev` (TLS, tokens) for a few
seconds while the admin asks it for its Status every tenth of a second: every answer must come
within its 2 s deadline, from the same leader in the same term, and nothing may reach a servicer.
"""

from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2

from scheduler.core.model import JobSpec
from scheduler.rpc.convert import spec_to_pb
from scheduler.rpc.limits import DEFAULT_LIMITS
from tests.integration.test_security import secured_cluster
from worker import Credentials
from worker.api.v1 import jobs_pb2

pytestmark = [pytest.mark.security, pytest.mark.integration]

STATUS = "/raftcron.v1.ClusterService/Status"
APPLY = "/raftcron.v1.JobService/ApplyJobs"
LIST_JOBS = "/raftcron.v1.JobService/ListJobs"
HEALTH = "/grpc.health.v1.Health/Check"
ATTACK_S = 4.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("floods"), 3)
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        yield cluster
    finally:
        cluster.stop()


class Stalled:
    """`count` calls that send their headers and never their body, over a few connections."""

    def __init__(
        self, credentials: Credentials, address: str, methods: list[str], count: int, channels: int = 4
    ) -> None:
        self.release = threading.Event()
        self.channels = [credentials.channel(address) for _ in range(channels)]
        self.calls = [
            self.channels[i % channels]
            .stream_unary(methods[i % len(methods)])
            .future(self._never(), timeout=60, metadata=credentials.metadata())
            for i in range(count)
        ]

    def _never(self):
        self.release.wait(60)
        return
        yield  # a generator that sends nothing

    def outcomes(self) -> dict[grpc.StatusCode, int]:
        """How the calls ended once released (a call still waiting for its body is cancelled)."""
        self.release.set()
        seen: dict[grpc.StatusCode, int] = {}
        for call in self.calls:
            error = call.exception(timeout=30)
            code = error.code() if error is not None else grpc.StatusCode.OK
            seen[code] = seen.get(code, 0) + 1
        return seen

    def close(self) -> None:
        self.release.set()
        for call in self.calls:
            call.cancel()
        for channel in self.channels:
            channel.close()


def leader_and_term(cluster) -> tuple[str, int]:
    leader = cluster.wait_for_leader(30)
    return leader, cluster.status(leader).term


def assert_responsive(cluster, leader: str, term: int, seconds: float) -> int:
    """The admin's Status answers within 2 s throughout, from the same leader in the same term."""
    answered, until = 0, time.monotonic() + seconds
    with cluster.client(leader, timeout_s=2.0) as admin:
        while time.monotonic() < until:
            status = admin.status(address=cluster.member(leader).grpc_address)  # raises past 2 s
            assert (status.role, status.term) == ("leader", term)
            answered += 1
            time.sleep(0.1)
    return answered


def no_jobs(cluster, leader) -> bool:
    with cluster.client(leader) as admin:
        return not admin.list_jobs().jobs


def test_calls_without_a_token_that_never_send_their_body_take_no_thread(cluster):
    leader, term = leader_and_term(cluster)
    anonymous = Credentials(ca_file=cluster.credentials.ca_file)
    stalled = Stalled(anonymous, cluster.member(leader).grpc_address, [STATUS, APPLY, LIST_JOBS], 200)
    try:
        assert assert_responsive(cluster, leader, term, ATTACK_S) >= 10
        # Refused on their metadata, at once: none waited for a body.
        assert stalled.outcomes() == {grpc.StatusCode.UNAUTHENTICATED: 200}
    finally:
        stalled.close()
    assert no_jobs(cluster, leader)


@pytest.mark.parametrize("role", ["grafana", "rep-worker"])
def test_a_callers_stalled_bodies_hold_a_bounded_share_of_the_threads(cluster, role):
    leader, term = leader_and_term(cluster)
    caller = cluster.client_credentials(role)
    methods = [STATUS, LIST_JOBS] if role == "grafana" else ["/raftcron.v1.WorkerService/Heartbeat"]
    stalled = Stalled(caller, cluster.member(leader).grpc_address, methods, 200)
    try:
        assert assert_responsive(cluster, leader, term, ATTACK_S) >= 10
        seen = stalled.outcomes()
    finally:
        stalled.close()
    assert_shared(seen)


def assert_shared(seen: dict) -> None:
    """A few waited for their body (released, they end without one: INVALID_ARGUMENT); the rest
    were cancelled once slow, or refused at once."""
    assert set(seen) <= {
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.CANCELLED,
    }
    assert seen.get(grpc.StatusCode.INVALID_ARGUMENT, 0) <= DEFAULT_LIMITS.max_slow_request_reads_per_caller, seen
    assert seen.get(grpc.StatusCode.RESOURCE_EXHAUSTED, 0) >= 100, seen


def test_stalled_health_checks_hold_a_bounded_share_of_the_threads(cluster):
    # The health service answers without a token: its callers are told apart by host.
    leader, term = leader_and_term(cluster)
    anonymous = Credentials(ca_file=cluster.credentials.ca_file)
    stalled = Stalled(anonymous, cluster.member(leader).grpc_address, [HEALTH], 200)
    try:
        assert assert_responsive(cluster, leader, term, ATTACK_S) >= 10
        seen = stalled.outcomes()
    finally:
        stalled.close()
    assert_shared(seen)
    with anonymous.channel(cluster.member(leader).grpc_address) as channel:  # and it still answers
        check = channel.unary_unary(HEALTH, response_deserializer=health_pb2.HealthCheckResponse.FromString)
        assert check(health_pb2.HealthCheckRequest().SerializeToString(), timeout=5).status


def test_a_call_past_its_read_deadline_is_cancelled(cluster):
    leader, _ = leader_and_term(cluster)
    stalled = Stalled(
        cluster.client_credentials("grafana"), cluster.member(leader).grpc_address, [STATUS], 1, channels=1
    )
    try:
        error = stalled.calls[0].exception(timeout=DEFAULT_LIMITS.request_read_timeout_s + 30)
        assert error is not None and error.code() == grpc.StatusCode.CANCELLED
    finally:
        stalled.close()


def test_a_burst_of_calls_from_one_caller_is_not_refused(cluster):
    # Only reads that are slow count against a caller: 128 calls in flight at once all answer.
    leader, _ = leader_and_term(cluster)
    reader = cluster.client_credentials("grafana")
    with reader.channel(cluster.member(leader).grpc_address) as channel:
        status = channel.unary_unary(STATUS)
        for _ in range(5):
            calls = [status.future(b"", timeout=30, metadata=reader.metadata()) for _ in range(128)]
            assert [call.exception(timeout=60) for call in calls] == [None] * 128


# -- a large body without a token is not read --------------------------------------------------


class CountingProxy:
    """A TCP relay to `target` that counts the bytes the server took from its clients."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.to_server = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)  # blocks while the server reads nothing: only what it took counts
                if counted:
                    with self._lock:
                        self.to_server += len(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._listener.close()


def test_a_large_body_without_a_token_is_refused_before_it_is_read(cluster):
    leader, term = leader_and_term(cluster)
    host, port = cluster.member(leader).grpc_address.rsplit(":", 1)
    proxy = CountingProxy((host, int(port)))
    payload = '{"k":"' + "x" * (DEFAULT_LIMITS.max_payload_bytes - 16) + '"}'
    jobs = [
        spec_to_pb(JobSpec(id=f"b{i}", schedule="* * * * *", target_kind="handler", target="h", payload_json=payload))
        for i in range(DEFAULT_LIMITS.max_message_bytes // len(payload) - 2)
    ]
    body = jobs_pb2.ApplyJobsRequest(jobs=jobs, dry_run=True).SerializeToString()
    calls = 4
    try:
        with Credentials(ca_file=cluster.credentials.ca_file).channel(proxy.address) as channel:
            apply = channel.unary_unary(APPLY)
            futures = [apply.future(body, timeout=60) for _ in range(calls)]
            codes = [future.exception(timeout=90).code() for future in futures]
        assert codes == [grpc.StatusCode.UNAUTHENTICATED] * calls
        # Each refused call's body stopped at the transport's flow-control window: far from 16 MiB.
        assert proxy.to_server < calls * len(body) / 4, (proxy.to_server, calls * len(body))
    finally:
        proxy.close()
    assert assert_responsive(cluster, leader, term, 1.0) >= 1
