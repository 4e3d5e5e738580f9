"""The standard gRPC health service (grpc.health.v1.Health) on the node's gRPC server.

SERVING means what ClusterService's `ready` means: a leader is known and it has opened
an epoch that this node has applied, so writes reach a leader whose loops run and reads
here are no older than that epoch. NOT_SERVING otherwise (no leader, an election, a node
cut off or still catching up), from the start of a drain on, and from the moment a node halts
because it cannot decode a committed entry (it exits shortly after; Status says why).

"" (the whole server) and every raftcron service follow readiness, except
raftcron.v1.ClusterService: it answers from local state whatever the cluster does, and is
the way to find out why a node is not ready, so it is SERVING while the process serves.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from scheduler.observability.metrics import node_ready
from worker.api.v1 import cluster_pb2, jobs_pb2, ops_pb2, runs_pb2, worker_pb2

log = logging.getLogger("raftcron.health")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
CLUSTER_SERVICE = cluster_pb2.DESCRIPTOR.services_by_name["ClusterService"].full_name
# Services whose answers need a ready cluster; "" is the server as a whole.
READY_SERVICES = (
    "",
    jobs_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    runs_pb2.DESCRIPTOR.services_by_name["RunService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
    ops_pb2.DESCRIPTOR.services_by_name["OpsService"].full_name,
)
CHECK_INTERVAL_S = 0.5


class HealthUpdater:
    """Sets the health status of every service from `is_ready()`, every `interval_s`."""

    def __init__(
        self, servicer: health.HealthServicer, is_ready: Callable[[], bool], interval_s: float = CHECK_INTERVAL_S
    ) -> None:
        self.servicer = servicer
        self._is_ready = is_ready
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._serving: bool | None = None
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)
        servicer.set(CLUSTER_SERVICE, SERVING)
        self._set(False)

    @property
    def serving(self) -> bool:
        return bool(self._serving)

    def start(self) -> HealthUpdater:
        self._thread.start()
        return self

    def close(self) -> None:
        """Report NOT_SERVING for every service from now on (a drain), and stop updating."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.servicer.enter_graceful_shutdown()

    def check_now(self) -> bool:
        try:
            ready = bool(self._is_ready())
        except Exception:  # never let a health probe kill the updater
            log.exception("readiness check failed; reporting NOT_SERVING")
            ready = False
        self._set(ready)
        return ready

    def _set(self, ready: bool) -> None:
        if ready == self._serving:
            return
        if self._serving is not None:
            log.info("health: %s", "SERVING" if ready else "NOT_SERVING")
        self._serving = ready
        for service in READY_SERVICES:
            self.servicer.set(service, SERVING if ready else NOT_SERVING)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.check_now()
            self._stop.wait(self._interval_s)


def add_health(server, node, interval_s: float = CHECK_INTERVAL_S) -> HealthUpdater:
    """Register grpc.health.v1.Health on `server` and start keeping it current for `node`.

    Call while building the server (before `server.start()`); call `.close()` first thing
    in a drain so load balancers stop sending calls before the server stops taking them.
    """
    servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return HealthUpdater(servicer, lambda: node_ready(node.raftlog, node.config), interval_s).start()
