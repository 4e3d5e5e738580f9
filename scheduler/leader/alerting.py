"""The alert dispatcher: delivers pending alerts to their owner's route, at least once.

Each alert's id is its dedup key (sent as `Idempotency-Key`), so a receiver can drop the
repeat a leader change may cause. Delivered alerts are marked through the log; a new
leader picks up whatever is still pending.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import urllib.request
from collections.abc import Mapping

from scheduler.core.commands import MarkAlertsDelivered
from scheduler.core.model import SECOND_US, Alert
from scheduler.core.vocabulary import RejectionCode
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.planning import format_us
from scheduler.planning.runkeys import readable_run_keys_in
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.alerts")

BATCH = 200
DELIVERY_TIMEOUT_S = 5.0
MAX_BACKOFF_S = 300.0
POLL_S = 0.5


def alert_document(alert: Alert) -> dict:
    return {
        "id": alert.id,  # the dedup key, as replicated state holds it (also the Idempotency-Key)
        "readable_id": readable_run_keys_in(alert.id),  # failed:job@2026-12-01T18:59:00Z
        "kind": alert.kind,
        "job_id": alert.job_id,
        "owner": alert.owner,
        "class": alert.job_class,
        "scheduled_at": format_us(alert.scheduled_us),
        "created_at": format_us(alert.created_us),
        "message": alert.message,
    }


def deliver(alert: Alert, route: Mapping[str, str]) -> None:
    """Raises on failure. Routes: {webhook: URL}, {command: "prog args"}, {file: PATH}, {log: true}."""
    body = json.dumps(alert_document(alert)).encode()
    if "webhook" in route:
        request = urllib.request.Request(
            route["webhook"],
            data=body,
            headers={"Content-Type": "application/json", "Idempotency-Key": alert.id, "X-Raftcron-Alert-Id": alert.id},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=DELIVERY_TIMEOUT_S) as response:
            if response.status >= 300:
                raise OSError(f"webhook answered {response.status}")
    elif "command" in route:
        subprocess.run(
            shlex.split(route["command"]),
            input=body,
            timeout=DELIVERY_TIMEOUT_S,
            check=True,
            capture_output=True,
            env={"RAFTCRON_ALERT_ID": alert.id, "PATH": "/usr/local/bin:/usr/bin:/bin"},
        )
    elif "file" in route:
        with open(route["file"], "ab") as file:
            file.write(body + b"\n")
    else:
        message = readable_run_keys_in(alert.message)
        log.warning("ALERT %s %s: %s", alert.kind, alert.job_id, message, extra={"alert_id": alert.id})


class AlertDispatcher:
    def __init__(self, term: LeaderTerm, raftlog: RaftLog, routes: Mapping[str, Mapping[str, str]], timeout_s: float):
        self._term = term
        self._raftlog = raftlog
        self._routes = routes
        self._timeout_s = timeout_s
        self._retry_at_us: dict[str, int] = {}
        self._attempts: dict[str, int] = {}

    def route_for(self, alert: Alert) -> Mapping[str, str]:
        return self._routes.get(alert.owner) or self._routes.get("default") or {"log": "true"}

    def _pending(self, now_us: int) -> list[Alert]:
        with self._raftlog.read() as state:
            pending = [state.alerts[key] for key in state.alert_order if not state.alerts[key].delivered_us]
        return [a for a in pending if self._retry_at_us.get(a.id, 0) <= now_us][:BATCH]

    def __call__(self) -> None:
        while not self._term.stopping.wait(POLL_S):
            now_us = self._term.clock.now_us()
            delivered = [alert.id for alert in self._pending(now_us) if self._try(alert, now_us)]
            if delivered and not self._mark(delivered):
                return

    def _try(self, alert: Alert, now_us: int) -> bool:
        try:
            deliver(alert, self.route_for(alert))
            return True
        except Exception as exc:  # any route failure: retry later with backoff, never drop
            attempts = self._attempts[alert.id] = self._attempts.get(alert.id, 0) + 1
            delay_s = min(MAX_BACKOFF_S, 2.0**attempts)
            self._retry_at_us[alert.id] = now_us + int(delay_s * SECOND_US)
            log.warning("alert %s not delivered (attempt %d, next in %.0fs): %s", alert.id, attempts, delay_s, exc)
            return False

    def _mark(self, ids: list[str]) -> bool:
        now_us, mono_us = self._term.clock.read()
        try:
            result = self._raftlog.submit(
                MarkAlertsDelivered(now_us, self._term.epoch, tuple(ids), mono_us), self._timeout_s
            )
        except ReplicationError as exc:
            log.warning("could not mark %d alerts delivered (they will be sent again): %r", len(ids), exc)
            return True
        if not result.accepted and result.rejection.code == RejectionCode.STALE_EPOCH:
            self._term.depose(result.rejection.message)
            return False
        return True
