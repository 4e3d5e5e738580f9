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

import grpc

from scheduler.cli import cluster, jobs, ops, runs, serve
from scheduler.cli.connection import add_credential_flags
from scheduler.core.vocabulary import DstGap, DstRepeat

DEFAULT_CLUSTER = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203"


def cmd_dev(args) -> int:
    from scheduler.cli.dev import run_dev_cluster

    # The dev cluster applies its jobs file through this whole command line, as `raftcron apply`
    # would; handed in rather than imported there, since this module imports that one.
    return run_dev_cluster(args, main)


def build_parser() -> argparse.ArgumentParser:
    from scheduler.config import add_node_flags

    parser = argparse.ArgumentParser(prog="raftcron", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cluster",
        default=os.environ.get("RAFTCRON_CLUSTER", DEFAULT_CLUSTER),
        help="gRPC addresses host:port,... of any nodes (env RAFTCRON_CLUSTER; default %(default)s)",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per call (default %(default)s)")
    add_credential_flags(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run one node")
    add_node_flags(p)
    p.set_defaults(func=serve.cmd_serve)

    p = sub.add_parser("dev", help="run a local cluster of node processes on loopback")
    p.add_argument("--nodes", type=int, default=3, help="how many nodes (default %(default)s)")
    p.add_argument("--data-dir", default=".raftcron/dev", help="where node data lives (default %(default)s)")
    p.add_argument("--port-base", type=int, default=7100, help="Raft ports are P+i, gRPC P+100+i (default %(default)s)")
    p.add_argument("--jobs", default="examples/jobs.yaml", help="jobs file to apply once a leader exists ('' for none)")
    p.add_argument("--no-worker", action="store_true", help="do not start the demo worker")
    p.add_argument("--fresh", action="store_true", help="delete the data dir first")
    p.set_defaults(func=cmd_dev)

    author = getpass.getuser() if hasattr(os, "getuid") else "operator"
    p = sub.add_parser("credentials", help="create a private CA, node and client certificates and role tokens")
    p.add_argument("directory", help="where to write them (kept if already there)")
    p.add_argument("--host", action="append", default=[], help="a name clients dial the nodes by (repeat)")
    p.set_defaults(func=serve.cmd_credentials)

    p = sub.add_parser("apply", help="apply a jobs file: all or nothing")
    p.add_argument("-f", "--file", required=True, help="YAML jobs file")
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
    p.add_argument("job", nargs="?", help="job id (all jobs when omitted)")
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
    cluster_sub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
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

    p = sub.add_parser("next", help="preview upcoming fire instants of a job or an expression (no cluster needed)")
    p.add_argument("job", nargs="?", help="a job id (asks the cluster for its schedule)")
    p.add_argument("--schedule", help="cron expression (5 fields, or 6 with seconds first)")
    p.add_argument("--timezone", default="")
    p.add_argument("--after", default="now", help="ISO-8601 instant (default now)")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("--dst-gap", choices=tuple(DstGap))
    p.add_argument("--dst-repeat", choices=tuple(DstRepeat))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs.cmd_next)

    p = sub.add_parser("trigger", help="run a job now, outside its schedule (honours its overlap policy)")
    p.add_argument("job")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_trigger)

    p = sub.add_parser("backfill", help="fire every past slot in a range that never ran, once")
    p.add_argument("job")
    p.add_argument("--from", dest="from_", required=True, help="first slot instant (inclusive)")
    p.add_argument("--to", required=True, help="last slot instant (inclusive)")
    p.add_argument("--rate", type=float, default=1.0, help="runs becoming due per second (default %(default)s)")
    p.add_argument("--max-runs", type=int, default=1000)
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
    p.add_argument("-f", "--file", required=True)
    p.add_argument("--prune", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=jobs.cmd_plan)

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
    p.add_argument("job")
    p.add_argument("--at", required=True, help="e.g. 'yesterday 02:00' or an ISO-8601 instant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=runs.cmd_explain)

    p = sub.add_parser("worker", help="run a worker (see `raftcron worker --help`)", add_help=False)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=serve.cmd_worker)
    return parser


def main(argv: list[str] | None = None) -> int:
    from scheduler.config import ConfigError
    from scheduler.planning import ScheduleError
    from scheduler.specs import SpecError

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
    try:
        return args.func(args)
    except (ConfigError, SpecError, ScheduleError, ValueError) as exc:
        print(f"raftcron {args.command}: {exc}", file=sys.stderr)
        return 2
    except grpc.RpcError as exc:
        print(f"raftcron {args.command}: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
