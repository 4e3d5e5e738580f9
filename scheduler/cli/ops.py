"""Operations: kill switches (`raftcron kill`, `revive`, `kills`), `alerts` and the herd `forecast`."""

from __future__ import annotations

from scheduler.cli import connection
from scheduler.cli import output as out


def cmd_kill(args) -> int:
    from scheduler.cli.times import parse_when
    from scheduler.rpc.convert import timestamp

    with connection.cluster_client(args) as client:
        response = client.kill_class(
            job_class=args.job_class,
            reason=args.reason,
            author=args.author,
            cancel_running=args.cancel_running,
            until=timestamp(parse_when(args.until)) if args.until else None,
        )
    until = f" until {args.until}" if args.until else " until revived"
    print(f"class {args.job_class} killed{until}; {response.cancelled_runs} runs cancelled")
    return 0


def cmd_revive(args) -> int:
    with connection.cluster_client(args) as client:
        client.revive_class(job_class=args.job_class, author=args.author)
    print(f"class {args.job_class} revived: it fires again from its next slots")
    return 0


def cmd_kills(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.list_kills()
    out.print_kills(response, args.json)
    return 0


def cmd_alerts(args) -> int:
    with connection.cluster_client(args) as client:
        response = client.list_alerts(pending_only=args.pending, owner=args.owner, limit=args.limit)
    out.print_alerts(response, args.json)
    return 0


def cmd_forecast(args) -> int:
    import json as json_module

    from scheduler.cli.calendars import fetch_calendars
    from scheduler.cli.plot import plot_png
    from scheduler.cli.times import parse_when
    from scheduler.planning import format_us
    from scheduler.planning.forecast import forecast, to_json
    from scheduler.rpc.convert import spec_from_pb

    specs, token = [], ""
    with connection.cluster_client(args) as client:
        while True:
            page = client.list_jobs(page_size=1000, page_token=token)
            specs += [spec_from_pb(job.spec) for job in page.jobs if not job.paused]
            token = page.next_page_token
            if not token:
                break
        calendars = fetch_calendars(client) if any(spec.calendar for spec in specs) else {}
    result = forecast(specs, parse_when(args.start), args.hours, int(args.herd_window * 1_000_000), calendars)
    if args.plot:
        plot_png(result, args.plot)
    if args.json:
        print(json_module.dumps(to_json(result), indent=2))
        return 0
    series = result.series()
    print(
        f"{len(specs)} jobs, {sum(series)} fires in the next {args.hours:g} h "
        f"(mean {sum(series) / len(series):.1f}/min, max {max(series)}/min)"
    )
    for at, fires in result.peaks():
        print(f"  peak {format_us(at)}  {fires} fires/min")
    for name, counter in sorted(result.by_resource.items()):
        per = result.series(counter)
        print(f"  resource {name}: max {max(per)}/min, {sum(per)} fires")
    if result.truncated_jobs:
        print(f"  (counted at most 100,000 fires for {len(result.truncated_jobs)} very frequent jobs)")
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0
