"""The `raftcron` command: run a node or a local dev cluster, and talk to a cluster.

Every read command takes --json. The cluster is named by --cluster host:port,...
or RAFTCRON_CLUSTER, so `eval $(raftcron dev ...)`-style exports just work.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import zoneinfo

from scheduler.cli import calendars, cluster, jobs, logs, ops, plan, routes, runs, serve
from scheduler.cli.connection import DEFAULT_CLUSTER, add_global_flags
from scheduler.cli.failures import EPILOG, run_reporting_errors
from scheduler.core.vocabulary import DstGap, DstRepeat, Overlap

__all__ = ["DEFAULT_CLUSTER", "build_parser", "main"]


def cmd_dev(args) -> int:
    from scheduler.cli.dev import run_dev_cluster
    from scheduler.cli.shadowing import shadowing_in

    if shadow := shadowing_in(os.getcwd()):  # its nodes and worker start here, as `python -m`
        print(f"raftcron dev: {shadow}", file=sys.stderr)
        return 2

    # The dev cluster applies its jobs file through this whole command line, as `raftcron apply`
    # would; handed in rather than imported there, since this module imports that one.
    return run_dev_cluster(args, main)


def build_parser() -> argparse.ArgumentParser:
    from scheduler.config import add_node_flags

    parser = argparse.ArgumentParser(
        prog="raftcron",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"raftcron {installed_version()}")
    add_global_flags(parser)
    # Every command that talks to a cluster takes the global flags after its name too.
    global_flags = argparse.ArgumentParser(add_help=False)
    add_global_flags(global_flags, repeated=True)
    sub = _Subcommands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"), global_flags)

    p = sub.add_parser("serve", help="run one node", local=True)
    add_node_flags(p)
    p.set_defaults(func=serve.cmd_serve)

    p = sub.add_parser("dev", help="run a local cluster of node processes on loopback", local=True)
    p.add_argument("--nodes", type=int, default=3, help="how many nodes (default %(default)s)")
    p.add_argument("--data-dir", default=".raftcron/dev", help="where node data lives (default %(default)s)")
    p.add_argument("--port-base", type=int, default=7100, help="Raft ports are P+i, gRPC P+100+i (default %(default)s)")
    p.add_argument("--jobs", default="examples/jobs.yaml", help="jobs file to apply once a leader exists ('' for none)")
    p.add_argument("--no-worker", action="store_true", help="do not start the demo worker")
    p.add_argument("--fresh", action="store_true", help="delete the data dir first")
    p.set_defaults(func=cmd_dev)

    author = getpass.getuser() if hasattr(os, "getuid") else "operator"
    p = sub.add_parser(
        "credentials", help="create a private CA, node and client certificates and role tokens", local=True
    )
    p.add_argument("directory", help="where to write them (kept if already there)")
    p.add_argument("--host", action="append", default=[], help="a name clients dial the nodes by (repeat)")
    p.set_defaults(func=serve.cmd_credentials)

    p = sub.add_parser("apply", help="apply a jobs file: all or nothing")
    p.add_argument("-f", "--file", required=True, help="YAML jobs file ('-': standard input)")
    p.add_argument("--prune", action="store_true", help="remove jobs missing from the file")
    p.add_argument("--dry-run", action="store_true", help="show the changes, apply nothing")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_apply)

    p = sub.add_parser("jobs", help="list jobs")
    p.add_argument("--owner", default="")
    p.add_argument("--class", dest="job_class", default="")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_jobs)

    p = sub.add_parser("runs", help="list runs of a job (newest first)")
    p.add_argument(
        "job", nargs="?", help="job id (all jobs when omitted), or a run key like nightly@2026-12-01T02:00:00Z"
    )
    p.add_argument("--since", help="e.g. 2026-11-28T18:00:00Z, 'yesterday 18:00', '2h ago'")
    p.add_argument("--until")
    p.add_argument("--status", action="append", help="filter by status (repeatable)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--oldest-first", action="store_true")
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs.cmd_runs)

    p = sub.add_parser("status", help="cluster status as one node sees it")
    p.add_argument("--node", help="ask this host:port only")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cluster.cmd_status)

    p = sub.add_parser("cluster", help="membership: add or remove a node (admin)")
    cluster_sub = _Subcommands(p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION"), global_flags)
    c = cluster_sub.add_parser(
        "add", help="make a node started with `raftcron serve --join` a voting member, and wait until it caught up"
    )
    c.add_argument(
        "member",
        type=cluster.member_argument,
        metavar="ID=RAFT_HOST:PORT/GRPC_HOST:PORT",
        help="the new node and its addresses",
    )
    c.add_argument("--wait", type=float, default=120.0, help="seconds to wait for it to catch up; 0: do not wait")
    c.add_argument("--author", default=author)
    c.set_defaults(func=cluster.cmd_cluster_add)
    c = cluster_sub.add_parser("remove", help="remove a member, dead or alive (a leader hands over first)")
    c.add_argument("node_id", metavar="ID")
    c.add_argument("--author", default=author)
    c.set_defaults(func=cluster.cmd_cluster_remove)

    for name, paused in (("pause", True), ("resume", False)):
        p = sub.add_parser(name, help=f"{name} a job (slots while paused are recorded as skipped)")
        p.add_argument("job")
        p.add_argument("--reason", default="")
        p.add_argument("--author", default=author)
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=lambda args, paused=paused: jobs.cmd_pause(args, paused))

    p = sub.add_parser("delete", help="delete a job (its run history is kept)")
    p.add_argument("job")
    p.add_argument("--author", default=author)
    p.set_defaults(func=jobs.cmd_delete)

    p = sub.add_parser(
        "next",
        help="upcoming fire instants of a job (with the schedule each comes from, what its calendar skips"
        " or moves, and why none is owed) or of an expression (no cluster needed)",
        description="Preview upcoming fire instants of a job or a cron expression, with the DST rule applied.",
        epilog="Cron expressions take 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds"
        " first. Weekdays are 0-7 (0 and 7 Sunday) or names. Day-of-month also takes L (last day), L-3 (three"
        " days before it), 15W (the weekday nearest the 15th, within the month), LW (last weekday);"
        " day-of-week takes fri#3 or 5#3 (third Friday) and friL or 5L (last Friday)."
        " Example: raftcron next --schedule '0 9 * * fri#3' --timezone Europe/Berlin -n 5",
    )
    p.add_argument("job", nargs="?", help="a job id (asks the cluster for its schedule)")
    p.add_argument(
        "--schedule",
        help="cron expression: 5 fields, or 6 with seconds first; L, W and # as in Quartz (see below)",
    )
    p.add_argument("--timezone", default=None, help="IANA time zone of --schedule (default UTC)")
    p.add_argument("--after", default="now", help="ISO-8601 instant (default now)")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("--dst-gap", choices=tuple(DstGap))
    p.add_argument("--dst-repeat", choices=tuple(DstRepeat))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs.cmd_next)

    p = sub.add_parser("trigger", help="run a job now, outside its schedule (honours its overlap policy)")
    p.add_argument("job")
    p.add_argument("--payload", metavar="JSON|@FILE", help="this run's payload instead of the job's (@- reads stdin)")
    p.add_argument("--overlap", choices=tuple(Overlap), help="this run's overlap policy instead of the job's")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_trigger)

    p = sub.add_parser(
        "cancel", help="cancel one queued or running run (a running one is stopped at its next heartbeat)"
    )
    p.add_argument("job")
    p.add_argument("--at", required=True, help="the run's slot instant, as `raftcron runs JOB` shows it")
    p.add_argument("--reason", default="", help="recorded on the run, with the author")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_cancel)

    p = sub.add_parser("backfill", help="fire every past slot in a range that never ran, once")
    p.add_argument("job")
    p.add_argument("--from", dest="from_", required=True, help="first slot instant (inclusive)")
    p.add_argument("--to", required=True, help="last slot instant (inclusive)")
    p.add_argument("--rate", type=float, default=1.0, help="runs becoming due per second (default %(default)s)")
    p.add_argument("--max-runs", type=int, default=1000)
    p.add_argument("--payload", metavar="JSON|@FILE", help="the backfilled runs' payload instead of the job's")
    p.add_argument(
        "--overlap",
        choices=("allow", "forbid", "queue"),
        help="the backfilled runs' overlap policy at grant instead of the job's (forbid and queue wait for a running one)",
    )
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_backfill)

    p = sub.add_parser("kill", help="kill switch: stop every job of a class from firing")
    p.add_argument("job_class", metavar="CLASS")
    p.add_argument("--reason", required=True)
    p.add_argument("--until", help="end of the kill (default: until revived)")
    p.add_argument("--cancel-running", action="store_true", help="also stop running runs (their leases are fenced)")
    p.add_argument("--author", default=author)
    p.set_defaults(func=ops.cmd_kill)

    p = sub.add_parser("revive", help="undo a kill switch")
    p.add_argument("job_class", metavar="CLASS")
    p.add_argument("--author", default=author)
    p.set_defaults(func=ops.cmd_revive)

    p = sub.add_parser("calendars", help="declared calendars: how many dates, their range and where they came from")
    p.add_argument("name", nargs="?", help="one calendar, with every date")
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=calendars.cmd_calendars)

    p = sub.add_parser(
        "routes", help="alert routes in replicated state: which owners go where (urls shown to admins only)"
    )
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=routes.cmd_routes)

    p = sub.add_parser("kills", help="active kill switches and their audit trail")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=ops.cmd_kills)

    p = sub.add_parser("alerts", help="alerts for owners: pending and recent")
    p.add_argument("--pending", action="store_true", help="only alerts not delivered yet")
    p.add_argument("--owner", default="")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=ops.cmd_alerts)

    p = sub.add_parser("plan", help="what `apply -f FILE` would change, effective settings and next fires")
    p.add_argument("-f", "--file", required=True, help="YAML jobs file ('-': standard input)")
    p.add_argument("--prune", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=plan.cmd_plan)

    p = sub.add_parser("forecast", help="fires per minute over the coming hours: see the herd before it happens")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--start", default="now", help="window start (default now)")
    p.add_argument(
        "--herd-window",
        type=float,
        default=None,
        metavar="SECONDS",
        help="spread jobs with jitter auto over this window instead of the spreads the cluster reports (what if)",
    )
    p.add_argument(
        "--png", "--plot", dest="plot", metavar="FILE", help="also draw the forecast as a PNG (needs matplotlib)"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=ops.cmd_forecast)

    p = sub.add_parser("explain", help="what happened to the slot of JOB nearest a time")
    p.add_argument(
        "job", metavar="JOB | RUN_KEY", help="a job id with --at, or a run key like nightly@2026-12-01T02:00:00Z"
    )
    p.add_argument("--at", help="e.g. 'yesterday 02:00' or an ISO-8601 instant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs.cmd_explain)

    p = sub.add_parser(
        "logs",
        help="what each attempt of a run wrote (stdout, stderr) and how it ended",
        description="Each attempt of one run of JOB: worker, times, outcome, exit code, exception type or "
        "HTTP status, error, and the last bytes of its stdout and stderr (node config output_tail_bytes). "
        "By default the newest run that started an attempt.",
    )
    p.add_argument("job", metavar="JOB | RUN_KEY", help="a job id, or a run key like nightly@2026-12-01T02:00:00Z")
    p.add_argument(
        "--at", help="the run scheduled at this time, else the newest before it (as `runs --since` reads times)"
    )
    p.add_argument("--attempt", type=int, metavar="N", help="only attempt N (1 is the first; default: every attempt)")
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=logs.cmd_logs)

    p = sub.add_parser("worker", help="run a worker (see `raftcron worker --help`)", add_help=False, local=True)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=serve.cmd_worker)
    return parser


class _Subcommands:
    """`add_subparsers()` whose commands take the global flags too, unless they are `local`
    (they start processes or write files rather than talk to a cluster)."""

    def __init__(self, action, global_flags: argparse.ArgumentParser) -> None:
        self._action, self._global_flags = action, global_flags

    def add_parser(self, name: str, *, local: bool = False, **kwargs) -> argparse.ArgumentParser:
        parents = [] if local else [self._global_flags]
        return self._action.add_parser(name, parents=parents, **kwargs)


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raftcron")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def main(argv: list[str] | None = None) -> int:
    # Zone rules come from the pinned tzdata package only, never from the host's
    # /usr/share/zoneinfo, so every node computes the same instants.
    zoneinfo.reset_tzpath(to=())
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "worker":
        args.worker_args = unknown + list(args.worker_args)  # every worker flag belongs to the worker
    elif unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if getattr(args, "after", None) in (None, "now") and args.command == "next":
        from scheduler.cli.times import now_iso

        args.after = now_iso()
    if args.command == "explain" and (problem := _explain_slot(args)):
        print(f"raftcron explain: {problem}", file=sys.stderr)
        return 2
    return run_reporting_errors(args.func, args, f"raftcron {args.command}")


def _explain_slot(args) -> str | None:
    """`explain JOB@INSTANT` is `explain JOB --at INSTANT`; what is wrong with the arguments, if anything."""
    from scheduler.planning import format_us
    from scheduler.planning.runkeys import parse_run_key

    if "@" in args.job:
        if args.at:
            return "give a run key or --at, not both"
        try:
            args.job, at_us = parse_run_key(args.job)
        except ValueError as exc:
            return str(exc)
        args.at = format_us(at_us)
    elif not args.at:
        return "explain needs --at TIME, or a run key JOB@INSTANT"
    return None
