"""Alert routes in replicated state: the checks an apply passes before it declares or drops one.

Routes are applied through ApplyJobs like calendars (log format 3; an admin's change, see
scheduler/specs/apply_plan.py), so every leader routes alike. The core only holds and checks
them; which route an alert takes and how it is sent is the leader's (scheduler/leader/).
"""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core.commands import ApplyJobs
from scheduler.core.declarations import check_declarations
from scheduler.core.model import SECOND_US, AlertRoute
from scheduler.core.results import Result
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertTemplate

MAX_ROUTES = 100
MAX_ROUTE_URL_CHARS = 2000
MAX_ROUTE_TIMEOUT_US = 60 * SECOND_US
MAX_ROUTE_BACKOFF_US = 3600 * SECOND_US


def route_problem(route: AlertRoute) -> str:
    """What makes a route unfit for replicated state, or '' (never names the url: it may be secret)."""
    if not route.name:
        return "a route name is empty"
    if not route.url.startswith(("http://", "https://")) or len(route.url) > MAX_ROUTE_URL_CHARS:
        return (
            f"route {route.name!r}: url must be an http:// or https:// URL of at most {MAX_ROUTE_URL_CHARS} characters"
        )
    if not route.match:
        return f"route {route.name!r}: match must not be empty (use '*' for every owner)"
    if route.template not in tuple(AlertTemplate):
        return f"route {route.name!r}: template must be one of {', '.join(AlertTemplate)}, got {route.template!r}"
    if not 0 < route.timeout_us <= MAX_ROUTE_TIMEOUT_US:
        return f"route {route.name!r}: timeout must be more than 0s and at most 60s"
    if not SECOND_US <= route.backoff_max_us <= MAX_ROUTE_BACKOFF_US:
        return f"route {route.name!r}: backoff must be from 1s to 1h"
    return ""


def check_routes(state: State, cmd: ApplyJobs, index: int) -> Result | None:
    held = state.routes if state.routes is not UNSET else {}
    routes, removals = cmd.routes or (), cmd.route_removals or ()
    return check_declarations(index, routes, removals, held, route_problem, "route", MAX_ROUTES)


def apply_route_changes(state: State, cmd: ApplyJobs) -> None:
    if not cmd.routes and not cmd.route_removals:
        return
    if state.routes is UNSET:
        state.routes = {}
    for route in cmd.routes or ():
        state.routes[route.name] = route
    for name in cmd.route_removals or ():
        state.routes.pop(name, None)


def redacted_url(url: str) -> str:
    """A route url as a non-admin (or a log line) sees it: scheme and host, the rest hidden (a
    webhook's path or query is often its secret)."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    return f"{scheme}://{host}/…"
