"""Operations: kill switches (`raftcron kill`, `revive`, `kills`), `alerts` and the herd `forecast`."""

from __future__ import annotations

from scheduler.cli import connection
from scheduler.cli import output as out
from scheduler.security.safetext import shown_text


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

    from scheduler.cli import plot
    from scheduler.cli.calendars import fetch_calendars
    from scheduler.cli.times import parse_when
    from scheduler.planning import format_us
    from scheduler.planning.forecast import forecast, name_peaks, peak_text, to_json
    from scheduler.rpc.convert import spec_from_pb

    if args.plot:
        plot.check_available(args.plot)
    start_us = parse_when(args.start)
    specs, spreads, token = [], {}, ""
    with connection.cluster_client(args) as client:
        while True:
            page = client.list_jobs(page_size=1000, page_token=token)
            for job in page.jobs:
                if not job.paused:
                    specs.append(spec_from_pb(job.spec))
                    spreads[job.spec.id] = out.spread_us(job)
            token = page.next_page_token
            if not token:
                break
        calendars = fetch_calendars(client) if any(spec.calendar for spec in specs) else {}
    # The spreads the cluster computed, unless --herd-window asks "what if the window were W".
    herd_window_us = int((args.herd_window or 0) * 1_000_000)
    chosen = None if args.herd_window is not None else spreads
    result = forecast(specs, start_us, args.hours, herd_window_us, calendars, chosen)
    peaks = name_peaks(specs, result, herd_window_us, chosen)
    if args.plot:
        plot.plot_png(result, args.plot, peaks)
    if args.json:
        print(json_module.dumps(to_json(result, peaks), indent=2))
        return 0
    series = result.series()
    print(
        f"{len(specs)} jobs, {sum(series)} fires from {format_us(result.start_us)} for {args.hours:g} h "
        f"(mean {sum(series) / len(series):.1f}/min, max {max(series)}/min; one-minute buckets on the clock)"
    )
    for peak in peaks:
        print(shown_text(f"  peak {format_us(peak.at_us)}  {peak.fires} fires/min: {peak_text(peak)}"))
    for name, counter in sorted(result.by_resource.items()):
        per = result.series(counter)
        print(shown_text(f"  resource {name}: max {max(per)}/min, {sum(per)} fires"))
    if result.truncated_jobs:
        print(f"  (counted at most 100,000 fires for {len(result.truncated_jobs)} very frequent jobs)")
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0
