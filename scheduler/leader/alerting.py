"""The alert dispatcher: delivers pending alerts to their owner's route, at least once.

Each route has a sender thread of its own, with its own timeout and backoff, so one receiver
that hangs or fails delays only the alerts routed to it. Each delivery carries a dedup key
(`Idempotency-Key`), so a receiver can drop the repeat a leader change may cause. Delivered
alerts are marked through the log, in one entry per pass; a new leader picks up whatever is
still pending. What is sent and when is decided in alert_delivery.py.
"""

from __future__ import annotations

import logging
import queue
import shlex
import subprocess
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any

import msgspec

from scheduler.core.alerts import alert_count
from scheduler.core.commands import MarkAlertsDelivered
from scheduler.core.log_format import STREAK_ALERTS_FORMAT
from scheduler.core.model import SECOND_US, Alert, AlertRoute
from scheduler.core.vocabulary import RejectionCode
from scheduler.leader.alert_delivery import (
    LOG_ROUTE,
    Route,
    delivery_key,
    due_for_delivery,
    parse_route,
    pick_route,
    render,
    route_of,
    summary,
)
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.alerts")

BATCH = 200
POLL_S = 0.5
# Alerts waiting in one route's sender at most: a dead receiver holds no more than this.
ROUTE_QUEUE_LIMIT = 1000


def deliver(alert: Alert, route: Route) -> None:
    """Send one alert; raises on failure."""
    body = render(alert, route.template)
    key = delivery_key(alert)
    if route.destination == "webhook":
        request = urllib.request.Request(
            route.target,
            data=body,
            headers={"Content-Type": "application/json", "Idempotency-Key": key, "X-Raftcron-Alert-Id": alert.id},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=route.timeout_s) as response:
            if response.status >= 300:
                raise OSError(f"webhook answered {response.status}")
    elif route.destination == "command":
        subprocess.run(
            shlex.split(route.target),
            input=body,
            timeout=route.timeout_s,
            check=True,
            capture_output=True,
            env={"RAFTCRON_ALERT_ID": alert.id, "RAFTCRON_ALERT_KEY": key, "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
    elif route.destination == "file":
        with open(route.target, "ab") as file:
            file.write(body + b"\n")
    else:
        log.warning("ALERT %s", summary(alert), extra={"alert_id": alert.id})


class _RouteSender:
    """One route's deliveries, one at a time on its own thread; a failure backs the route off."""

    def __init__(self, route: Route, term: LeaderTerm, done: queue.SimpleQueue) -> None:
        self.route = route
        self._stopping = term.stopping
        self._now_us = term.clock.now_us
        self._done = done
        self._queue: queue.Queue[Alert] = queue.Queue(ROUTE_QUEUE_LIMIT)
        self._failures = 0
        self.retry_at_us = 0
        self._thread = threading.Thread(target=self._run, name=f"alerts {route.shown}", daemon=True)
        self._thread.start()

    def submit(self, alert: Alert) -> bool:
        try:
            self._queue.put_nowait(alert)
            return True
        except queue.Full:
            return False

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                alert = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if self.retry_at_us > self._now_us():
                self._done.put((alert.id, None))  # queued before the route failed: wait with it
                continue
            try:
                deliver(alert, self.route)
            except Exception as exc:  # any route failure: retry later with backoff, never drop
                self._failures += 1
                delay_s = min(self.route.backoff_max_s, 2.0**self._failures)
                self.retry_at_us = self._now_us() + int(delay_s * SECOND_US)
                log.warning(
                    "alert %s not delivered to %s (failure %d, next try in %.0fs): %s",
                    alert.id,
                    self.route.shown,
                    self._failures,
                    delay_s,
                    exc,
                )
                self._done.put((alert.id, None))
                continue
            self._failures, self.retry_at_us = 0, 0
            self._done.put((alert.id, alert_count(alert)))


class AlertDispatcher:
    def __init__(self, term: LeaderTerm, raftlog: RaftLog, routes: Mapping[str, Any], timeout_s: float):
        self._term = term
        self._raftlog = raftlog
        # Validated at config load; parsed again here so a route is one value everywhere.
        self._routes = {owner: parse_route(owner, raw) for owner, raw in routes.items()}
        self._timeout_s = timeout_s
        self._senders: dict[str, _RouteSender] = {}
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._in_flight: set[str] = set()

    def route_for(self, alert: Alert, replicated: Mapping[str, AlertRoute] | None = None) -> Route:
        """Replicated routes decide when the cluster has any (every leader routes alike); the node's
        `alert_routes` are the fallback of a cluster that has none (docs/design/routes-in-replicated-state.md)."""
        if replicated:
            chosen = pick_route(alert.owner, replicated)
            return route_of(chosen) if chosen is not None else LOG_ROUTE
        return self._routes.get(alert.owner) or self._routes.get("default") or LOG_ROUTE

    def _sender(self, route: Route) -> _RouteSender:
        sender = self._senders.get(route.name)
        if sender is None or sender.route != route:
            sender = self._senders[route.name] = _RouteSender(route, self._term, self._done)
        return sender

    def _pending(self, now_us: int) -> tuple[list[Alert], int, dict[str, AlertRoute]]:
        with self._raftlog.read() as state:
            routes = dict(state.routes) if state.routes is not msgspec.UNSET else {}
            pending = [
                # A copy: the tick thread goes on counting a streak while its sender renders it.
                msgspec.structs.replace(alert)
                for key in state.alert_order
                if key not in self._in_flight and due_for_delivery(alert := state.alerts[key], now_us)
            ]
            return pending[:BATCH], state.cluster_version, routes

    def __call__(self) -> None:
        while not self._term.stopping.wait(POLL_S):
            now_us = self._term.clock.now_us()
            pending, cluster_version, routes = self._pending(now_us)
            for alert in pending:
                sender = self._sender(self.route_for(alert, routes))
                if sender.retry_at_us <= now_us and sender.submit(alert):
                    self._in_flight.add(alert.id)
            if not self._mark_finished(cluster_version):
                return

    def _mark_finished(self, cluster_version: int) -> bool:
        delivered: dict[str, int] = {}
        while True:
            try:
                alert_id, count = self._done.get_nowait()
            except queue.Empty:
                break
            self._in_flight.discard(alert_id)
            if count is not None:
                delivered[alert_id] = count
        if not delivered:
            return True
        now_us, mono_us = self._term.clock.read()
        ids = tuple(delivered)
        # Counts are a format-3 field: left UNSET before, so the entry needs no newer format.
        counts = tuple(delivered.values()) if cluster_version >= STREAK_ALERTS_FORMAT else msgspec.UNSET
        command = MarkAlertsDelivered(now_us, self._term.epoch, ids, mono_us, counts=counts)
        try:
            result = self._raftlog.submit(command, self._timeout_s)
        except ReplicationError as exc:
            log.warning("could not mark %d alerts delivered (they will be sent again): %r", len(ids), exc)
            return True
        if not result.accepted and result.rejection.code == RejectionCode.STALE_EPOCH:
            self._term.depose(result.rejection.message)
            return False
        return True
