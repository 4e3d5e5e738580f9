"""`routes:` in a job file: where alerts go, declared like `calendars:` (admin only).

    routes:
      payments-slack: {match: payments, url: https://hooks.slack.com/..., template: slack}
      everyone-else: {url: https://alerts.example.com/raftcron, timeout: 5s, backoff: 5m}

`match` is an owner or a shell-style pattern (default `*`), `template` json (default) or slack,
`timeout` one delivery's limit (default 5s, at most 60s), `backoff` the longest wait between
retries of a failing route (default 5m, 1s to 1h).
"""

from __future__ import annotations

from scheduler.core.model import AlertRoute
from scheduler.core.routes import MAX_ROUTES, route_problem
from scheduler.planning.durations import DurationError, parse_duration_us, type_name
from scheduler.specs.problems import SpecProblem

_ROUTE_KEYS = ("url", "match", "template", "timeout", "backoff")
_DEFAULT = AlertRoute("", "")


def read_routes(value: object, name_problem) -> tuple[list[AlertRoute], list[SpecProblem]]:
    """`routes: {NAME: {url, match, template, timeout, backoff}}`; problems never quote a url."""
    if value is None:
        return [], []
    if not isinstance(value, dict):
        return [], [SpecProblem("", "routes", f"must be a mapping of names to routes, not {type_name(value)}")]
    if len(value) > MAX_ROUTES:
        return [], [SpecProblem("", "routes", f"declares {len(value)} routes; at most {MAX_ROUTES}")]
    routes, problems = [], []
    for name, body in value.items():
        field = f"routes.{name}"
        naming = name_problem(name) if isinstance(name, str) else "must be a string"
        if naming:
            problems.append(SpecProblem("", field, f"name {naming}"))
            continue
        route, found = _read_route(name, body, field)
        problems += [SpecProblem("", where, message) for where, message in found]
        if route is not None and not found:
            routes.append(route)
    return routes, problems


def _read_route(name: str, body: object, field: str) -> tuple[AlertRoute | None, list[tuple[str, str]]]:
    if not isinstance(body, dict):
        return None, [(field, f"must be a mapping with a url, not {type_name(body)}")]
    unknown = [key for key in body if key not in _ROUTE_KEYS]
    if unknown:
        return None, [(field, f"unknown key {unknown[0]!r} (known: {', '.join(_ROUTE_KEYS)})")]
    found: list[tuple[str, str]] = []
    texts = {}
    for key in ("url", "match", "template"):
        if key in body and not isinstance(body[key], str):
            found.append((f"{field}.{key}", f"must be a string, not {type_name(body[key])}"))
        texts[key] = body.get(key, "")
    if "url" not in body:
        found.append((f"{field}.url", "is required"))
    durations = {}
    for key, default in (("timeout", _DEFAULT.timeout_us), ("backoff", _DEFAULT.backoff_max_us)):
        try:
            durations[key] = parse_duration_us(body[key], f"{field}.{key}") if key in body else default
        except DurationError as error:
            found.append((f"{field}.{key}", error.message))
    if found:
        return None, found
    route = AlertRoute(
        name=name,
        url=texts["url"].strip(),
        match=texts["match"] or _DEFAULT.match,
        template=texts["template"] or _DEFAULT.template,
        timeout_us=durations["timeout"],
        backoff_max_us=durations["backoff"],
    )
    problem = route_problem(route)
    return (None, [(field, problem.removeprefix(f"route {name!r}: "))]) if problem else (route, [])
