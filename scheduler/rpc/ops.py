"""OpsService: kill switches and alerts. Translation only."""

from __future__ import annotations

import uuid

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import alert_count, is_open_streak, last_slot_us
from scheduler.core.commands import KillClass, ReviveClass
from scheduler.core.model import Alert, KillRecord, KillSwitch
from scheduler.replication import RaftLog
from scheduler.rpc.convert import timestamp, timestamp_us
from scheduler.rpc.errors import submit_or_abort
from scheduler.rpc.reads import Reader
from scheduler.security.interceptor import audited_author
from worker.api.v1 import ops_pb2, ops_pb2_grpc

MAX_ALERTS_LISTED = 1000


def kill_to_pb(kill: KillSwitch) -> ops_pb2.KillSwitch:
    return ops_pb2.KillSwitch(
        job_class=kill.job_class,
        reason=kill.reason,
        author=kill.author,
        killed_at=timestamp(kill.killed_us),
        until=timestamp(kill.until_us),
        cancel_running=kill.cancel_running,
    )


def record_to_pb(record: KillRecord) -> ops_pb2.KillRecord:
    return ops_pb2.KillRecord(
        action=record.action,
        job_class=record.job_class,
        author=record.author,
        at=timestamp(record.at_us),
        reason=record.reason,
        until=timestamp(record.until_us),
    )


def alert_to_pb(alert: Alert) -> ops_pb2.Alert:
    return ops_pb2.Alert(
        id=alert.id,
        kind=alert.kind,
        job_id=alert.job_id,
        owner=alert.owner,
        job_class=alert.job_class,
        scheduled_at=timestamp(alert.scheduled_us),
        message=alert.message,
        created_at=timestamp(alert.created_us),
        delivered_at=timestamp(alert.delivered_us),
        count=alert_count(alert),
        last_scheduled_at=timestamp(last_slot_us(alert)),
        open=is_open_streak(alert),
        since=timestamp(0 if alert.since_us is UNSET else alert.since_us),
    )


class OpsServicer(ops_pb2_grpc.OpsServiceServicer):
    def __init__(self, raftlog: RaftLog, reader: Reader, clock_us, timeout_s: float) -> None:
        self._raftlog = raftlog
        self._reader = reader
        self._clock_us = clock_us
        self._timeout_s = timeout_s

    def _submit(self, command, context):
        return submit_or_abort(self._raftlog, command, self._timeout_s, context)

    def KillClass(self, request, context):
        until_us = timestamp_us(request.until) if request.HasField("until") else 0
        command = KillClass(
            self._clock_us(),
            request.job_class,
            request.reason,
            audited_author(request.author),
            request.request_id or uuid.uuid4().hex,
            until_us,
            request.cancel_running,
        )
        result = self._submit(command, context)
        with self._raftlog.read() as state:
            kill = state.kills.get(request.job_class)
            reply = kill_to_pb(kill) if kill else None
        cancelled = sum(1 for e in result.events if isinstance(e, ev.RunEnded))
        return ops_pb2.KillClassResponse(kill=reply, cancelled_runs=cancelled)

    def ReviveClass(self, request, context):
        command = ReviveClass(
            self._clock_us(), request.job_class, audited_author(request.author), request.request_id or uuid.uuid4().hex
        )
        self._submit(command, context)
        return ops_pb2.ReviveClassResponse()

    def ListKills(self, request, context):
        with self._raftlog.read() as state:
            active = [kill_to_pb(k) for name, k in sorted(state.kills.items()) if k.active(state.now_us)]
            audit = [record_to_pb(r) for r in reversed(state.kill_log[-100:])]
        return ops_pb2.ListKillsResponse(active=active, audit=audit, read=self._reader.read_info(False))

    def ListAlerts(self, request, context):
        limit = min(request.limit or 100, MAX_ALERTS_LISTED)
        selected = []
        with self._raftlog.read() as state:
            pending = sum(1 for a in state.alerts.values() if not a.delivered_us)
            for key in reversed(state.alert_order):
                alert = state.alerts[key]
                if request.pending_only and alert.delivered_us:
                    continue
                if request.owner and alert.owner != request.owner:
                    continue
                selected.append(alert_to_pb(alert))
                if len(selected) >= limit:
                    break
        return ops_pb2.ListAlertsResponse(alerts=selected, pending=pending, read=self._reader.read_info(False))
