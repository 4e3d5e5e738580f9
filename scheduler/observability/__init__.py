"""A node's observability: Prometheus metrics, the probes (/healthz, /readyz) and the dashboard on
`metrics_address`; the gRPC health service, server reflection and per-method gRPC metrics.

    observability = start_observability(node)   # after node.raftlog.start(); /metrics and the dashboard at /
    ...
    observability.close()

    health = add_health(server, node)           # while building the gRPC server
    ...
    health.close()                              # first thing in a drain

Metrics live in a registry of their own (never prometheus_client's global one), so several
nodes in one process (tests) do not collide. See metrics.py for what is measured and how
cheaply, health.py for what SERVING means, probes.py for what ready means, grpc_metrics.py and
reflection.py for the gRPC server's own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from scheduler.observability.metrics import ApplyObserver, RaftcronCollector, dispatcher_queue_depths, node_ready
from scheduler.observability.probes import readiness_facts, readiness_problem

log = logging.getLogger("raftcron.observability")

__all__ = [
    "ApplyObserver",
    "Observability",
    "RaftcronCollector",
    "add_health",
    "build_registry",
    "dashboard_url",
    "dispatcher_queue_depths",
    "metrics_url",
    "node_ready",
    "parse_host_port",
    "start_observability",
]


def add_health(server, node, interval_s: float = 0.5):
    """Register grpc.health.v1.Health on `server`, kept current for `node`; see health.py."""
    from scheduler.observability.health import add_health as _add_health  # needs grpcio-health-checking

    return _add_health(server, node, interval_s)


def parse_host_port(address: str) -> tuple[str, int]:
    """`HOST:PORT` or `[V6]:PORT` -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"metrics address {address!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def metrics_url(address: str) -> str:
    """The URL Prometheus scrapes for a node whose metrics_address is `address` ('' if off)."""
    if not address:
        return ""
    host, port = parse_host_port(address)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"


def dashboard_url(address: str) -> str:
    """The dashboard of a node whose metrics_address is `address` ('' if off): same port, path /."""
    return metrics_url(address).removesuffix("metrics")


def build_registry(
    raftlog, config, current_dispatcher=lambda: None, leading_epoch=lambda: 0, observer=None, grpc_metrics=None
):
    """A registry with the raftcron collector, the process/platform/GC collectors and, when
    given, the gRPC server's per-method metrics (grpc_metrics.py).

    Returns (registry, observer); the caller installs `observer` as an apply listener.
    """
    observer = observer or ApplyObserver()
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(RaftcronCollector(raftlog, config, observer, current_dispatcher, leading_epoch))
    if grpc_metrics is not None:
        registry.register(grpc_metrics)
    return registry, observer


@dataclass
class Observability:
    url: str = ""
    registry: CollectorRegistry | None = None
    observer: ApplyObserver | None = None
    dashboard_url: str = ""
    _raftlog: object = None
    _dashboard: object = None
    _server: object = None
    _thread: object = None
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
        if self._dashboard is not None:
            self._dashboard.close()
        if self.observer is not None and self._raftlog is not None:
            try:
                self._raftlog.remove_apply_listener(self.observer)
            except ValueError:
                pass


def _leading_epoch(node) -> int:
    term = node.lifecycle.current
    return term.epoch if term is not None and not term.stopping.is_set() else 0


def start_observability(node, authorize=None) -> Observability:
    """Serve Prometheus metrics for `node` on `node.config.metrics_address` ('' = off), at
    /metrics, and the read-only dashboard under / on the same port.

    Call after `node.raftlog.start()`: entries up to the commit index read then are the
    journal this process replays, and are left out of the counters. `authorize(headers) -> bool`
    guards the dashboard pages (not /metrics) when the node has auth on; default: allow all.
    """
    from scheduler.dashboard.server import Dashboard, serve_http

    address = node.config.metrics_address
    if not address:
        return Observability()
    host, port = parse_host_port(address)
    registry, observer = build_registry(
        node.raftlog,
        node.config,
        node.current_dispatcher,
        lambda: _leading_epoch(node),
        grpc_metrics=getattr(node, "grpc_metrics", None),
    )
    observer.replayed_until = node.raftlog.commit_index
    node.raftlog.add_apply_listener(observer)

    def readiness() -> str | None:
        return readiness_problem(readiness_facts(node.raftlog, node.config))

    dashboard = Dashboard(
        node.raftlog,
        node.config,
        authorize=authorize,
        clock_us=getattr(node, "clock_us", None),
        workers=getattr(getattr(node, "workers", None), "registry", None),
    )
    try:
        server, thread = serve_http(host, port, registry, dashboard, readiness)
    except OSError:
        dashboard.close()
        node.raftlog.remove_apply_listener(observer)
        raise
    url = metrics_url(address)
    log.info("metrics on %s, dashboard on %s", url, dashboard_url(address))
    return Observability(url, registry, observer, dashboard_url(address), node.raftlog, dashboard, server, thread)
