"""Security on real nodes: TLS and mutual TLS, bearer tokens with roles and scopes (owners for
submitters, targets for workers, a Lease forwarded by a follower on the caller's behalf), an
unauthenticated message to the Raft port, and private Raft files."""

from __future__ import annotations

import pickle
import socket
import stat
import struct
import time
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2, health_pb2_grpc

from scheduler.core.commands import ReadBarrier
from scheduler.core.model import JobSpec
from scheduler.local import LocalCluster, wait_until
from scheduler.replication import RaftLog, RaftSettings, RaftTuning
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb, timestamp
from scheduler.security.devcerts import ensure_dev_credentials
from scheduler.security.principals import ADMIN, READER, SUBMITTER, WORKER, Principal, principals_document
from tests.integration.conftest import FAST_RAFT, free_port_base, free_ports
from worker import ClusterClient, Credentials
from worker.api.v1 import worker_pb2 as wpb

pytestmark = pytest.mark.integration

PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("fin", SUBMITTER, owners=("finance",)),
    Principal("rep-worker", WORKER, targets=("reports.*",)),
    Principal("bill-worker", WORKER, targets=("billing.*",)),
    Principal("grafana", READER),
]


def every_second(job_id: str, owner: str, target: str) -> JobSpec:
    return JobSpec(
        id=job_id, schedule="* * * * * *", target_kind="handler", target=target, owner=owner, jitter="pinned"
    )


FIN_REPORT = every_second("fin-report", "finance", "reports.build")
ANA_BILLING = every_second("ana-billing", "analytics", "billing.run")


def secured_cluster(directory: Path, nodes: int, metrics: bool = False, **overrides) -> LocalCluster:
    """A cluster with dev TLS material and the test's principals; token files are named after them."""
    credentials = ensure_dev_credentials(directory / "credentials")
    tokens = [(principal, f"token-of-{principal.name}-0123456789") for principal in PRINCIPALS]
    (credentials.directory / "principals.yaml").write_text(yaml.safe_dump(principals_document(tokens)))
    for principal, token in tokens:
        Path(credentials.token_file(principal.name)).write_text(token)
    return LocalCluster(
        directory,
        nodes=nodes,
        port_base=free_port_base(nodes),
        credentials=credentials,
        metrics=metrics,
        overrides={**FAST_RAFT, **overrides},
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("secure"), 3)
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        # Any node: one that has not applied the new epoch yet answers UNAVAILABLE, and the client moves on.
        with cluster.client(timeout_s=10) as root:
            root.apply_jobs(jobs=[spec_to_pb(FIN_REPORT), spec_to_pb(ANA_BILLING)])
        # Reads are served from local state: the tests below may ask any node, so wait until each has both.
        for member in cluster.current_members:
            wait_until(
                lambda: served_job_ids(cluster, member.node_id) >= {"fin-report", "ana-billing"},
                10,
                f"{member.node_id} to apply the jobs",
            )
        yield cluster
    finally:
        cluster.stop()


def served_job_ids(cluster, node_id: str) -> set[str]:
    with cluster.client(node_id) as root:
        return {job.spec.id for job in root.list_jobs().jobs}


def refused(call, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == code, caught.value.details()
    return caught.value.details()


# -- TLS and authentication --------------------------------------------------------------


def test_a_plaintext_client_cannot_talk_to_a_tls_node(cluster):
    with ClusterClient(cluster.addresses, timeout_s=3) as plaintext:
        refused(plaintext.status, grpc.StatusCode.UNAVAILABLE)
    with cluster.client(timeout_s=3) as secured:
        assert secured.status().node_id


def test_a_call_without_a_valid_token_is_unauthenticated(cluster):
    ca_only = Credentials(ca_file=cluster.credentials.ca_file)
    for credentials in (ca_only, Credentials(ca_file=ca_only.ca_file, token="guessed-token")):
        with ClusterClient(cluster.addresses, timeout_s=3, credentials=credentials) as client:
            assert "bearer token" in refused(client.status, grpc.StatusCode.UNAUTHENTICATED)
            refused(lambda: client.list_jobs(), grpc.StatusCode.UNAUTHENTICATED)
    # The health service says whether the node is up, and nothing else: it needs no token.
    channel = ca_only.channel(cluster.addresses[0])
    with channel:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)


def test_a_role_calls_only_what_it_may(cluster):
    with cluster.client(role="rep-worker") as worker:
        details = refused(lambda: worker.list_jobs(), grpc.StatusCode.PERMISSION_DENIED)
        assert details == "rep-worker (role worker) may not call ListJobs: needs admin, reader, submitter"
        refused(lambda: worker.apply_jobs(jobs=[spec_to_pb(FIN_REPORT)]), grpc.StatusCode.PERMISSION_DENIED)
    with cluster.client(role="fin") as submitter:
        refused(lambda: submitter.kill_class(job_class="default", reason="x"), grpc.StatusCode.PERMISSION_DENIED)
        refused(lambda: submitter.lease(worker_id="w", targets=["reports.build"]), grpc.StatusCode.PERMISSION_DENIED)
    with cluster.client(role="grafana") as reader:
        assert {job.spec.id for job in reader.list_jobs().jobs} >= {"fin-report", "ana-billing"}
        refused(lambda: reader.pause_job(job_id="fin-report"), grpc.StatusCode.PERMISSION_DENIED)


# -- submitters: jobs of their owners ------------------------------------------------------


def job_ids(cluster) -> set[str]:
    with cluster.client() as root:
        return {job.spec.id for job in root.list_jobs(linearizable=True).jobs}


def test_a_submitter_changes_only_jobs_of_its_owners(cluster):
    stolen = every_second("ana-billing", "finance", "billing.run")  # same id, claimed for its own owner
    foreign = every_second("new-ana", "analytics", "billing.run")
    with cluster.client(role="fin", timeout_s=10) as fin:
        for specs in ([foreign], [stolen], [FIN_REPORT, foreign]):
            details = refused(
                lambda: fin.apply_jobs(jobs=[spec_to_pb(s) for s in specs]), grpc.StatusCode.PERMISSION_DENIED
            )
            assert "owner 'analytics'" in details
        before = fin.get_job(job_id="ana-billing").job
        for call in (fin.pause_job, fin.resume_job, fin.delete_job, fin.trigger_job):
            refused(lambda: call(job_id="ana-billing"), grpc.StatusCode.PERMISSION_DENIED)
        backfill = dict(job_id="ana-billing", to=timestamp(int(time.time() * 1e6)), **{"from": timestamp(1)})
        refused(lambda: fin.backfill_job(**backfill), grpc.StatusCode.PERMISSION_DENIED)
        assert fin.get_job(job_id="ana-billing").job == before  # nothing changed

        # Its own jobs: yes; and --prune removes only jobs of its owners.
        mine = every_second("fin-extra", "finance", "reports.extra")
        response = fin.apply_jobs(jobs=[spec_to_pb(FIN_REPORT), spec_to_pb(mine)], prune=True, author="mallory")
        assert {(c.job_id, c.change) for c in response.changes} == {("fin-report", "unchanged"), ("fin-extra", "added")}
        assert fin.pause_job(job_id="fin-extra").job.paused
        assert (
            fin.get_job(job_id="fin-extra", linearizable=True).job.author == "fin"
        )  # the principal, not the claimed author
        fin.delete_job(job_id="fin-extra")
    assert {"fin-report", "ana-billing"} <= job_ids(cluster) and "fin-extra" not in job_ids(cluster)


# -- workers: runs of their targets, Lease forwarded by a follower ------------------------------


def test_a_worker_leases_and_reports_only_runs_of_its_targets(cluster):
    leader = cluster.wait_for_leader()
    follower = next(m.node_id for m in cluster.members if m.node_id != leader)
    with cluster.client(role="bill-worker") as billing:
        details = refused(
            lambda: billing.lease(worker_id="b", targets=["reports.build"]), grpc.StatusCode.PERMISSION_DENIED
        )
        assert "reports.build" in details
        refused(lambda: billing.lease(worker_id="b", targets=[]), grpc.StatusCode.PERMISSION_DENIED)  # empty = any

    # Through a follower, which forwards the Lease to the leader over TLS with the caller's token.
    with cluster.client(follower, timeout_s=15, role="rep-worker") as reports:
        request = wpb.LeaseRequest(worker_id="r", targets=["reports.build"], max_runs=1, wait=Duration(seconds=10))
        (grant,) = reports.lease(request, timeout_s=15).leases
    assert grant.job_id == "fin-report"
    ref = wpb.LeaseRef(job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token)

    with cluster.client(role="bill-worker", timeout_s=15) as billing:
        for call in (
            lambda: billing.heartbeat(worker_id="b", leases=[ref]),
            lambda: billing.complete(lease=ref, worker_id="b", kind=wpb.SUCCESS),
        ):
            assert grant.run_key in refused(call, grpc.StatusCode.PERMISSION_DENIED)
        # Mixed with a run of its own, the foreign lease is answered NOT_FOUND and not extended.
        request = wpb.LeaseRequest(worker_id="b", targets=["billing.run"], max_runs=1, wait=Duration(seconds=10))
        (own,) = billing.lease(request, timeout_s=15).leases
        own_ref = wpb.LeaseRef(job_id=own.job_id, scheduled_at=own.scheduled_at, fencing_token=own.fencing_token)
        results = billing.heartbeat(worker_id="b", leases=[ref, own_ref]).results
        assert [r.outcome for r in results] == [wpb.NOT_FOUND, wpb.OK]
        # CompleteMany likewise: all foreign is refused; mixed, the foreign one is NOT_FOUND.
        foreign = wpb.CompleteRequest(lease=ref, worker_id="b", kind=wpb.SUCCESS)
        refused(lambda: billing.complete_many(worker_id="b", completions=[foreign]), grpc.StatusCode.PERMISSION_DENIED)
        mine = wpb.CompleteRequest(lease=own_ref, worker_id="b", kind=wpb.SUCCESS)
        results = billing.complete_many(worker_id="b", completions=[foreign, mine]).results
        assert [r.outcome for r in results] == [wpb.NOT_FOUND, wpb.OK]
    with cluster.client() as root:
        run = root.get_run(run_key=grant.run_key, linearizable=True).run
    assert (STATUS_FROM_PB[run.status], run.fencing_token) == ("leased", grant.fencing_token)

    with cluster.client(follower, role="rep-worker") as reports:
        assert reports.heartbeat(worker_id="r", leases=[ref]).results[0].outcome == wpb.OK
        assert reports.complete(lease=ref, worker_id="r", kind=wpb.SUCCESS).outcome == wpb.OK
    with cluster.client() as root:
        assert STATUS_FROM_PB[root.get_run(run_key=grant.run_key, linearizable=True).run.status] == "succeeded"


# -- mutual TLS, and the Raft port ------------------------------------------------------------


def rce_frame(marker: Path) -> bytes:
    """A pysyncobj frame whose pickle, once loaded, creates `marker` (any callable would run)."""

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    data = zlib.compress(pickle.dumps(Exploit()), 3)
    return struct.pack("i", len(data)) + data


def send_to_raft_port(address: str, frame: bytes) -> bytes:
    """Send `frame`; return what the node answered before it closed the connection."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(frame)
        received = b""
        while chunk := sock.recv(4096):  # the node drops the connection: recv returns b""
            received += chunk
        return received


def http_status(url: str, token: str = "") -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_mutual_tls_an_unauthenticated_raft_message_and_the_dashboard(tmp_path):
    tls = dict(ensure_dev_credentials(tmp_path / "mtls" / "credentials").node_config()["tls"], client_auth=True)
    cluster = secured_cluster(tmp_path / "mtls", 1, metrics=True, tls=tls)
    with cluster:
        cluster.start()
        cluster.wait_for_leader(60)  # the cluster's own client presents the dev client certificate
        env = cluster.credentials.client_env("admin")
        without_cert = Credentials(ca_file=env["RAFTCRON_CA"], token=Path(env["RAFTCRON_TOKEN_FILE"]).read_text())
        with ClusterClient(cluster.addresses, timeout_s=3, credentials=without_cert) as client:
            refused(client.status, grpc.StatusCode.UNAVAILABLE)

        marker = tmp_path / "pwned"
        assert send_to_raft_port(cluster.members[0].raft_address, rce_frame(marker)) == b""
        assert not marker.exists()
        with cluster.client(timeout_s=10) as root:
            assert root.status().ready
            assert root.apply_jobs(jobs=[spec_to_pb(FIN_REPORT)]).changes[0].change == "added"
            assert [job.spec.id for job in root.list_jobs(linearizable=True).jobs] == ["fin-report"]

        # The dashboard's pages take the same tokens (a role that may read); /metrics stays open.
        base = f"http://{cluster.members[0].metrics_address}"
        tokens = {p: Path(cluster.credentials.token_file(p)).read_text() for p in ("grafana", "rep-worker")}
        assert http_status(f"{base}/") == 401
        assert http_status(f"{base}/", "not-a-token") == 401
        assert http_status(f"{base}/", tokens["rep-worker"]) == 401  # a worker reads nothing
        assert http_status(f"{base}/", tokens["grafana"]) == 200
        assert http_status(f"{base}/metrics") == 200


def start_raftlog(data_dir: Path, password: str | None) -> RaftLog:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    raftlog = RaftLog(RaftSettings(address, (), data_dir, password, RaftTuning(connection_retry_s=0.2)))
    raftlog.start()
    wait_until(raftlog.is_leader, 20, "a one-node Raft to lead")
    return raftlog


def test_without_a_secret_the_same_message_runs_code(tmp_path):
    """The control for the test above: the payload is real, only the secret stops it."""
    marker = tmp_path / "pwned"
    raftlog = start_raftlog(tmp_path / "raft", password=None)
    try:
        send_to_raft_port(raftlog.settings.self_address, rce_frame(marker))
        wait_until(marker.exists, 10, "the pickle to run")
    finally:
        raftlog.close()


def test_raft_files_are_private(tmp_path):
    data_dir = tmp_path / "raft"
    raftlog = start_raftlog(data_dir, password="0123456789abcdef-secret")
    try:
        raftlog.submit(ReadBarrier(issued_at_us=1), 10)
        raftlog.force_compaction()
        wait_until(lambda: (data_dir / "raft.dump").exists(), 20, "a dump file after compaction")
        raftlog.submit(ReadBarrier(issued_at_us=2), 10)
    finally:
        raftlog.close()
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    files = {path.name: stat.S_IMODE(path.stat().st_mode) for path in data_dir.iterdir()}
    assert {"raft.wal", "raft.wal.meta", "raft.dump"} <= set(files)
    assert set(files.values()) == {0o600}, files
