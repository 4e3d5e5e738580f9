"""The node process: Raft log, gRPC server, leader lifecycle and metrics, started and drained in stages."""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent import futures

import grpc

from scheduler.allocator import tune_allocator
from scheduler.collector import collector_settings, tune_collector
from scheduler.config import NodeConfig, Peer
from scheduler.leader.alerting import AlertDispatcher
from scheduler.leader.cluster_version import ClusterVersionLoop
from scheduler.leader.dispatch import Dispatcher
from scheduler.leader.lifecycle import LeaderLifecycle, LeaderTerm
from scheduler.leader.reaper import Reaper
from scheduler.leader.trigger import TriggerLoop
from scheduler.membership import MembershipChanger, peer_by_raft_address
from scheduler.observability import add_health, start_observability
from scheduler.observability.grpc_metrics import GrpcServerMetrics
from scheduler.replication import RaftLog
from scheduler.rpc.cluster import ClusterServicer
from scheduler.rpc.forwarding import LeaderForwarder, leader_grpc_address
from scheduler.rpc.intake import RequestIntake
from scheduler.rpc.jobs import JobServicer
from scheduler.rpc.limits import DEFAULT_LIMITS, RpcLimits
from scheduler.rpc.limits_interceptor import LimitsInterceptor
from scheduler.rpc.ops import OpsServicer
from scheduler.rpc.quotas import Admission
from scheduler.rpc.reads import Reader
from scheduler.rpc.runs import RunServicer
from scheduler.rpc.workers import WorkerServicer
from scheduler.security.interceptor import AuthInterceptor
from scheduler.security.principals import authenticator_for, http_authorizer
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

log = logging.getLogger("raftcron.node")

LIMITS = DEFAULT_LIMITS
# A node that met an entry it cannot decode exits with this, after answering Status for a moment.
EXIT_HALTED = 3
HALT_EXIT_GRACE_S = 2.0


def wall_clock_us() -> int:
    return time.time_ns() // 1000


class Node:
    def __init__(self, config: NodeConfig, clock_us=wall_clock_us) -> None:
        self.config = config
        self.clock_us = clock_us
        self.raftlog = RaftLog(config.raft_settings())
        self.raftlog.name_of = self._node_id_at
        self.lifecycle = LeaderLifecycle(
            self.raftlog,
            config.node_id,
            loops=[
                ("trigger", self._trigger_loop),
                ("dispatch", self._dispatcher),
                ("reaper", self._reaper),
                ("alerts", self._alert_dispatcher),
                ("cluster-version", self._cluster_version_loop),
            ],
            clock_us=clock_us,
            claim_timeout_s=config.propose_timeout_s,
        )
        self.server: grpc.Server | None = None
        # Who a bearer token belongs to; None when the node runs without tokens (loopback, insecure_grpc).
        self.authenticator = authenticator_for(config)
        self.health = None
        self.observability = None
        self.grpc_metrics = GrpcServerMetrics(served_services(config))

    def _trigger_loop(self, term: LeaderTerm) -> TriggerLoop:
        c = self.config
        return TriggerLoop(
            term,
            self.raftlog,
            c.claim_batch_size,
            c.trigger_max_sleep_s,
            c.propose_timeout_s,
            int(c.herd_window_s * 1e6),
        )

    def _dispatcher(self, term: LeaderTerm) -> Dispatcher:
        dispatcher = Dispatcher(term, self.raftlog, int(self.config.lease_ttl_s * 1e6), self.config.propose_timeout_s)
        term.services["dispatcher"] = dispatcher
        return dispatcher

    def _cluster_version_loop(self, term: LeaderTerm) -> ClusterVersionLoop:
        return ClusterVersionLoop(term, self.raftlog, self.config.propose_timeout_s)

    def _node_id_at(self, raft_address: str) -> str:
        return self._leader_id_of(raft_address) or raft_address

    def _reaper(self, term: LeaderTerm) -> Reaper:
        return Reaper(term, self.raftlog, self.config.propose_timeout_s)

    def _alert_dispatcher(self, term: LeaderTerm) -> AlertDispatcher:
        return AlertDispatcher(term, self.raftlog, self.config.alert_routes, self.config.propose_timeout_s)

    def current_dispatcher(self) -> Dispatcher | None:
        term = self.lifecycle.current
        return term.services.get("dispatcher") if term is not None and not term.stopping.is_set() else None

    def _peer_at(self, raft_address: str) -> Peer | None:
        """The member on `raft_address`: the replicated member table knows members that joined later."""
        with self.raftlog.read() as state:
            return peer_by_raft_address(self.config, state, raft_address)

    def _leader_id_of(self, raft_address: str) -> str:
        peer = self._peer_at(raft_address)
        return peer.node_id if peer else ""

    def _build_server(self) -> grpc.Server:
        pool = futures.ThreadPoolExecutor(max_workers=self.config.grpc_threads, thread_name_prefix="grpc")
        server = grpc.server(
            pool,
            options=server_options(LIMITS),
            interceptors=self._interceptors(),
            maximum_concurrent_rpcs=LIMITS.max_concurrent_calls,
        )
        tls = self.config.tls_files()
        timeout_s = self.config.propose_timeout_s
        forward_credentials = tls.channel_credentials() if tls is not None else None
        forwarder = self.forwarder = LeaderForwarder(
            lambda: leader_grpc_address(self.raftlog, self.config), forward_credentials
        )
        reader = Reader(
            self.raftlog,
            self.config.node_id,
            self._leader_id_of,
            self.clock_us,
            timeout_s,
            forwarder,
            herd_window_us=int(self.config.herd_window_s * 1e6),
        )
        admission = Admission(self.raftlog.read, self.config.quotas)
        jobs = JobServicer(self.raftlog, reader, self.clock_us, timeout_s, admission)
        jobs_pb2_grpc.add_JobServiceServicer_to_server(jobs, server)
        runs_pb2_grpc.add_RunServiceServicer_to_server(RunServicer(self.raftlog, reader), server)
        changer = MembershipChanger(self.raftlog, self.config, self.clock_us, timeout_s)
        cluster = ClusterServicer(self.raftlog, self.config, changer, forwarder)
        cluster_pb2_grpc.add_ClusterServiceServicer_to_server(cluster, server)
        self.workers = WorkerServicer(
            self.raftlog,
            self.current_dispatcher,
            forwarder,
            self.clock_us,
            timeout_s,
            self.config.max_lease_wait_s,
            output_tail_bytes=self.config.output_tail_bytes,
            limits=LIMITS,
        )
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(self.workers, server)
        ops_pb2_grpc.add_OpsServiceServicer_to_server(
            OpsServicer(self.raftlog, reader, self.clock_us, timeout_s), server
        )
        self.health = add_health(server, self)
        if self.config.grpc_reflection:
            from scheduler.observability.reflection import add_reflection  # needs grpcio-reflection

            add_reflection(server, [service.full_name for service in RAFTCRON_SERVICES] + [HEALTH_SERVICE])
        address = self.config.me.grpc_address
        port = server.add_secure_port(address, tls.server_credentials()) if tls else server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"cannot listen for gRPC on {self.config.me.grpc_address}")
        return server

    def _interceptors(self) -> list[grpc.ServerInterceptor]:
        """The per-method metrics outermost (they count refused calls too), then authentication
        (it refuses on metadata, before any body is read), then the request read (on a deadline, slow reads within a share per caller), then every argument's
        checks. Each thread-holding kind stays within a share of the pool: long polls half of
        it (a worker session counts as one), slow request reads a quarter; the rest answers everything else, Status included."""
        threads = self.config.grpc_threads
        interceptors: list[grpc.ServerInterceptor] = [self.grpc_metrics.interceptor()]
        if self.authenticator:
            interceptors.append(AuthInterceptor(self.authenticator))
        interceptors.append(RequestIntake(LIMITS, max_slow_reads=min(LIMITS.max_slow_request_reads, threads // 4)))
        lease_waits = min(LIMITS.max_concurrent_lease_waits, threads // 2)
        interceptors.append(LimitsInterceptor(LIMITS, max_lease_waits=lease_waits))
        return interceptors

    def start(self) -> None:
        self.server = self._build_server()
        self.raftlog.start()
        # After raftlog.start(): entries replayed from the journal are not counted as new.
        # The dashboard's pages honour the same tokens as gRPC (a role that may read); /metrics stays open.
        authorize = http_authorizer(self.authenticator) if self.authenticator is not None else None
        if authorize is None and self.config.insecure_dashboard and self.config.metrics_address:
            log.warning(
                "INSECURE: the dashboard on %s shows every job, run and alert to anyone who reaches it "
                "(insecure_dashboard: true, no principals file)",
                self.config.metrics_address,
            )
        self.observability = start_observability(self, authorize=authorize)
        self.server.start()
        self.lifecycle.start()
        log.info(
            "node %s serving gRPC on %s, Raft on %s",
            self.config.node_id,
            self.config.me.grpc_address,
            self.config.me.raft_address,
        )

    def stop(self, grace_s: float = 2.0) -> None:
        """Drain in stages: report NOT_SERVING, stop leading, stop taking calls (let in-flight
        ones finish), leave Raft, stop serving metrics."""
        if self.health is not None:
            self.health.close()
        self.lifecycle.close()
        if self.server is not None:
            self.server.stop(grace_s).wait()
            self.workers.close()
            self.forwarder.close()
        self.raftlog.close()
        if self.observability is not None:
            self.observability.close()


RAFTCRON_SERVICES = tuple(
    module.DESCRIPTOR.services_by_name[name]
    for module, name in (
        (jobs_pb2, "JobService"),
        (runs_pb2, "RunService"),
        (cluster_pb2, "ClusterService"),
        (worker_pb2, "WorkerService"),
        (ops_pb2, "OpsService"),
    )
)
HEALTH_SERVICE = "grpc.health.v1.Health"


def served_services(config: NodeConfig) -> list:
    """The descriptors of every service the node's gRPC server registers: the per-method
    metrics' fixed set of methods."""
    from grpc_health.v1 import health_pb2

    services = [*RAFTCRON_SERVICES, health_pb2.DESCRIPTOR.services_by_name["Health"]]
    if config.grpc_reflection:
        from grpc_reflection.v1alpha import reflection_pb2

        services.append(reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"])
    return services


def server_options(limits: RpcLimits) -> list[tuple[str, int]]:
    """gRPC core's own bounds on messages, streams and connections (see RpcLimits)."""

    def ms(seconds: float) -> int:
        return int(seconds * 1000)

    return [
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        ("grpc.max_send_message_length", limits.max_message_bytes),
        ("grpc.max_concurrent_streams", limits.max_streams_per_connection),
        ("grpc.max_connection_idle_ms", ms(limits.max_connection_idle_s)),
        ("grpc.max_connection_age_ms", ms(limits.max_connection_age_s)),
        ("grpc.max_connection_age_grace_ms", ms(limits.max_connection_age_grace_s)),
        ("grpc.keepalive_time_ms", ms(limits.keepalive_time_s)),
        ("grpc.keepalive_timeout_ms", ms(limits.keepalive_timeout_s)),
        # Clients that ping without calls more than once a minute get their connection closed.
        ("grpc.http2.min_ping_interval_without_data_ms", 60_000),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.so_reuseport", 0),
    ]


def serve(config: NodeConfig) -> int:
    # Before Node() starts any thread: an arena limit binds the arenas created afterwards.
    if applied := tune_allocator():
        log.info("malloc settings: %s", " ".join(f"{k}={v}" for k, v in applied.items()))
    collector = collector_settings()  # a bad RAFTCRON_GC_THRESHOLDS fails here, before any port opens
    node = Node(config)
    if applied := tune_collector(collector):
        log.info("garbage collector: %s", " ".join(f"{k}={v}" for k, v in applied.items()))
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    node.raftlog.add_halt_listener(lambda _why: stopping.set())
    node.start()
    stopping.wait()
    if node.raftlog.halted:
        # Raft has stopped already (no vote, no leadership); Status and the health service say
        # why for a moment, for whoever is looking, then the exit code tells the supervisor.
        log.error("exiting with code %d: %s", EXIT_HALTED, node.raftlog.halted)
        time.sleep(HALT_EXIT_GRACE_S)
    log.info("shutting down")
    node.stop()
    return EXIT_HALTED if node.raftlog.halted else 0
