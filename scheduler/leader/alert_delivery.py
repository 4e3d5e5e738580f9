"""What an alert delivery sends, where, and when: pure functions the dispatcher and tests call.

A route is `{webhook: URL}`, `{command: "prog args"}`, `{file: PATH}` or `{log: true}`, plus
optional `template: json | slack` (the body's shape) and `timeout_s` (per delivery, default 5).
A streak alert (consecutive missed or skipped slots, scheduler/core/alerts.py) is sent when it
opens, again when it ends if it grew meanwhile, and at most once an hour while it stays open, so
a day-long outage is a handful of messages, not one per slot.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from scheduler.core.alerts import alert_count, is_open_streak, last_slot_us, undelivered_count
from scheduler.core.model import SECOND_US, Alert, AlertRoute
from scheduler.core.routes import redacted_url
from scheduler.core.vocabulary import AlertKind
from scheduler.planning import format_us
from scheduler.planning.runkeys import readable_run_keys_in

DESTINATIONS = ("webhook", "command", "file", "log")
TEMPLATES = ("json", "slack")
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_BACKOFF_MAX_S = 300.0
MAX_TIMEOUT_S = 60.0
# An open streak that keeps growing is told about again at most this often.
STREAK_REMINDER_US = 3600 * SECOND_US


@dataclass(frozen=True)
class Route:
    destination: str  # one of DESTINATIONS
    target: str  # the URL, command line or path ("" for log)
    template: str = "json"
    timeout_s: float = DEFAULT_TIMEOUT_S
    backoff_max_s: float = DEFAULT_BACKOFF_MAX_S
    # How logs name it: a replicated route's name; never a webhook's url, which may be a secret.
    label: str = ""

    @property
    def name(self) -> str:
        """A route's identity: its own sender and backoff (not for logs: it holds the target)."""
        return f"{self.destination}:{self.target}" if self.target else self.destination

    @property
    def shown(self) -> str:
        if self.label:
            return self.label
        return f"webhook {redacted_url(self.target)}" if self.destination == "webhook" else self.name


LOG_ROUTE = Route("log", "")


def pick_route(owner: str, routes: Mapping[str, AlertRoute]) -> AlertRoute | None:
    """The replicated route an alert of `owner` takes: one whose `match` is the owner itself,
    else the matching pattern with the most literal characters (`team-*` before `*`), ties by
    name; None when none matches."""
    best: tuple[int, str] | None = None
    for name in sorted(routes):
        pattern = routes[name].match
        if pattern == owner:
            rank = 1_000_000
        elif fnmatch.fnmatchcase(owner, pattern):
            rank = sum(1 for char in pattern if char not in "*?[]")
        else:
            continue
        if best is None or rank > best[0]:
            best = (rank, name)
    return routes[best[1]] if best is not None else None


def route_of(route: AlertRoute) -> Route:
    """A replicated route as a sender delivers it."""
    return Route(
        "webhook",
        route.url,
        route.template,
        route.timeout_us / SECOND_US,
        route.backoff_max_us / SECOND_US,
        label=f"route {route.name}",
    )


def parse_route(owner: str, raw: Any) -> Route:
    """A route from its configuration; ValueError naming the owner and what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError(f"alert route for {owner!r} must be a mapping, got {raw!r}")
    destinations = [key for key in raw if key in DESTINATIONS]
    unknown = sorted(set(raw) - set(DESTINATIONS) - {"template", "timeout_s"})
    if len(destinations) != 1 or unknown:
        raise ValueError(
            f"alert route for {owner!r} must have exactly one of {', '.join(DESTINATIONS)} "
            f"(and optionally template, timeout_s), got {raw!r}"
        )
    destination = destinations[0]
    target = "" if destination == "log" else raw[destination]
    if destination != "log" and (not isinstance(target, str) or not target.strip()):
        raise ValueError(f"alert route for {owner!r}: {destination} must be a non-empty string")
    if destination == "webhook" and not target.startswith(("http://", "https://")):
        raise ValueError(f"alert route for {owner!r}: webhook must be an http:// or https:// URL, got {target!r}")
    template = raw.get("template", "json")
    if template not in TEMPLATES:
        raise ValueError(f"alert route for {owner!r}: template must be one of {', '.join(TEMPLATES)}, got {template!r}")
    timeout_s = raw.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise ValueError(f"alert route for {owner!r}: timeout_s must be a number in (0, {MAX_TIMEOUT_S:g}]")
    return Route(destination, target, template, float(timeout_s))


def due_for_delivery(alert: Alert, now_us: int) -> bool:
    """Whether the dispatcher should send `alert` now (retry backoff aside)."""
    if not alert.delivered_us:
        return True
    if undelivered_count(alert) <= 0:
        return False
    if not is_open_streak(alert):
        return True  # the streak ended after growing: one final update
    return now_us - alert.delivered_us >= STREAK_REMINDER_US


def delivery_key(alert: Alert) -> str:
    """The receiver's dedup key: the id for the first delivery, id#count for an update, so a
    receiver that drops repeats still sees each update once."""
    return alert.id if not alert.delivered_us else f"{alert.id}#{alert_count(alert)}"


def alert_document(alert: Alert) -> dict:
    document = {
        "id": alert.id,  # the dedup key, as replicated state holds it
        "readable_id": readable_run_keys_in(alert.id),  # failed:job@2026-12-01T18:59:00Z
        "kind": alert.kind,
        "job_id": alert.job_id,
        "owner": alert.owner,
        "class": alert.job_class,
        "scheduled_at": format_us(alert.scheduled_us),
        "created_at": format_us(alert.created_us),
        "message": readable_run_keys_in(alert.message),
        "count": alert_count(alert),
        "summary": summary(alert),
    }
    if alert.kind in (AlertKind.MISSED, AlertKind.SKIPPED) and alert_count(alert) > 1:
        document["last_scheduled_at"] = format_us(last_slot_us(alert))
    if alert.kind in (AlertKind.MISSED, AlertKind.SKIPPED) and alert.count is not UNSET:
        document["open"] = is_open_streak(alert)
    if alert.delivered_us:
        document["update"] = True
    return document


def summary(alert: Alert) -> str:
    """One line a person reads: what, which job, how many, since when."""
    count = alert_count(alert)
    message = readable_run_keys_in(alert.message)
    if alert.kind in (AlertKind.MISSED, AlertKind.SKIPPED) and count > 1:
        state = "still going" if is_open_streak(alert) else "ended"
        what = (
            f"{count} consecutive slots {alert.kind} from {format_us(alert.scheduled_us)} "
            f"to {format_us(last_slot_us(alert))} ({state}); latest: {message}"
        )
    elif alert.kind == AlertKind.RECOVERED:
        what = f"{message} (failing since {format_us(alert.since_us)})" if alert.since_us is not UNSET else message
    else:
        what = f"slot {format_us(alert.scheduled_us)}: {message}"
    owner = f" (owner {alert.owner})" if alert.owner else ""
    return f"{alert.kind} {alert.job_id}{owner}: {what}"


def render(alert: Alert, template: str) -> bytes:
    """The request body a route's template makes of `alert`."""
    if template == "slack":
        icon = ":white_check_mark:" if alert.kind == AlertKind.RECOVERED else ":rotating_light:"
        text = f"{icon} raftcron {summary(alert)}"
        return json.dumps(
            {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
        ).encode()
    return json.dumps(alert_document(alert)).encode()
