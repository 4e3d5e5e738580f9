"""Finding 8: the client sent its bearer token over plaintext to any address, silently.

The client is pointed at 10.255.255.1:7200 (never contacted: every channel the client asks for
is redirected to a fake server on loopback that records the metadata it receives). Refused, the
client must create no channel at all and the fake server must never see the token; allowed
explicitly, the same setup delivers it (so the probe can see a leak when there is one).
"""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest

from worker import ClusterClient, Credentials, PlaintextTokenRefused
from worker.api.v1 import cluster_pb2, cluster_pb2_grpc

pytestmark = pytest.mark.security

TOKEN = "probe-secret-token"
FAR_ADDRESS = "10.255.255.1:7200"


class _RecordingCluster(cluster_pb2_grpc.ClusterServiceServicer):
    def __init__(self) -> None:
        self.metadata: list[tuple[tuple[str, str], ...]] = []
        self.lock = threading.Lock()

    def Status(self, request, context):  # noqa: N802 (gRPC's name)
        with self.lock:
            self.metadata.append(tuple(context.invocation_metadata()))
        return cluster_pb2.StatusResponse(node_id="fake", role="leader")


@pytest.fixture
def fake_server():
    servicer = _RecordingCluster()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0).wait()


@pytest.fixture
def redirected_channels(monkeypatch, fake_server):
    """Every insecure channel the client opens goes to the fake server; the asked addresses are kept."""
    _, real_address = fake_server
    asked: list[str] = []
    real_insecure_channel = grpc.insecure_channel

    def redirect(address, options=None, *args, **kwargs):
        asked.append(address)
        return real_insecure_channel(real_address, options=options)

    monkeypatch.setattr(grpc, "insecure_channel", redirect)
    return asked


def _tokens_seen(servicer: _RecordingCluster) -> list[str]:
    with servicer.lock:
        return [value for metadata in servicer.metadata for key, value in metadata if key == "authorization"]


def test_a_token_is_not_sent_in_plaintext_to_a_remote_address(fake_server, redirected_channels):
    servicer, _ = fake_server
    with pytest.raises(PlaintextTokenRefused, match=FAR_ADDRESS):
        with ClusterClient([FAR_ADDRESS], timeout_s=5.0, credentials=Credentials(token=TOKEN)) as client:
            client.status()
    assert redirected_channels == []  # refused before any connection attempt
    assert _tokens_seen(servicer) == []


def test_a_one_off_call_to_a_remote_address_is_refused_too(fake_server, redirected_channels):
    servicer, real_address = fake_server
    with ClusterClient([real_address], timeout_s=5.0, credentials=Credentials(token=TOKEN)) as client:
        with pytest.raises(PlaintextTokenRefused):
            client.status(address=FAR_ADDRESS)
    assert FAR_ADDRESS not in redirected_channels
    assert _tokens_seen(servicer) == []


def test_allowed_explicitly_the_same_setup_delivers_the_token(fake_server, redirected_channels):
    servicer, _ = fake_server
    credentials = Credentials(token=TOKEN, allow_plaintext=True)
    with ClusterClient([FAR_ADDRESS], timeout_s=5.0, credentials=credentials) as client:
        assert client.status().node_id == "fake"
    assert redirected_channels == [FAR_ADDRESS]
    assert _tokens_seen(servicer) == [f"Bearer {TOKEN}"]


def test_loopback_still_works_with_a_warning(fake_server, caplog):
    servicer, real_address = fake_server
    with caplog.at_level("WARNING", logger="raftcron.client"):
        with ClusterClient([real_address], timeout_s=5.0, credentials=Credentials(token=TOKEN)) as client:
            assert client.status().node_id == "fake"
    assert _tokens_seen(servicer) == [f"Bearer {TOKEN}"]
    assert any("without TLS" in r.getMessage() and real_address in r.getMessage() for r in caplog.records)
