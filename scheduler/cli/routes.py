"""Alert routes on the command line: `raftcron routes`, and what a file's `routes:` changes."""

from __future__ import annotations

import json

from scheduler.cli import connection
from scheduler.planning.durations import format_duration_us
from scheduler.security.safetext import shown_text


def route_dict(route) -> dict:
    from scheduler.rpc.convert import duration_us

    return {
        "name": route.name,
        "match": route.match,
        "url": route.url,
        "template": route.template,
        "timeout": format_duration_us(duration_us(route, "timeout", 0)),
        "backoff": format_duration_us(duration_us(route, "backoff", 0)),
    }


def cmd_routes(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.list_routes(linearizable=args.linearizable)
    routes = [route_dict(r) for r in response.routes]
    if args.json:
        print(json.dumps({"redacted": response.redacted, "routes": routes}, indent=2))
        return 0
    if not routes:
        print("no replicated routes: each leader routes by its node's alert_routes (add `routes:` to a jobs file)")
        return 0
    header = ["NAME", "MATCH", "URL", "TEMPLATE", "TIMEOUT", "BACKOFF"]
    table = [[r[k] for k in ("name", "match", "url", "template", "timeout", "backoff")] for r in routes]
    widths = [max(len(shown_text(str(row[i]))) for row in table + [header]) for i in range(len(header))]
    for row in [header, *table]:
        print("  ".join(shown_text(str(cell)).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    if response.redacted:
        print("(urls redacted: only an admin reads them)")
    return 0


def route_changes(client, document, prune: bool) -> list[dict]:
    """What applying `document` does to the cluster's routes: one {name, change} per route
    added, changed or removed (removed only with --prune and a `routes:` section)."""
    from scheduler.rpc.convert import route_from_pb

    if not document.declares_routes:
        return []
    response = client.list_routes()
    held = {r.name: route_from_pb(r) for r in response.routes}
    wanted = {r.name: r for r in document.routes}
    changes = []
    for name in sorted(set(held) | set(wanted)):
        if name not in held:
            changes.append({"route": name, "change": "added"})
        elif name not in wanted:
            if prune:
                changes.append({"route": name, "change": "removed"})
        elif response.redacted or held[name] != wanted[name]:
            # Redacted urls cannot be compared: such a caller may not change routes anyway.
            changes.append({"route": name, "change": "changed" if not response.redacted else "unknown"})
    return changes


def route_lines(changes: list[dict]) -> list[str]:
    return [shown_text(f"{c['change']:>9}  route {c['route']}") for c in changes]
