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
from pathlib import Path

import grpc

from scheduler.cli import output as out

DEFAULT_CLUSTER = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203"


# Global credential flags and the variables they override (`raftcron dev` prints the variables).
CREDENTIAL_FLAGS = (
    ("ca", "RAFTCRON_CA"),
    ("token_file", "RAFTCRON_TOKEN_FILE"),
    ("client_cert", "RAFTCRON_CLIENT_CERT"),
    ("client_key", "RAFTCRON_CLIENT_KEY"),
)


def credential_environ(args, environ=os.environ) -> dict[str, str]:
    """The environment with the credential flags given on the command line written over it."""
    merged = dict(environ)
    for flag, name in CREDENTIAL_FLAGS:
        if getattr(args, flag, None):
            merged[name] = getattr(args, flag)
            if name == "RAFTCRON_TOKEN_FILE":
                merged.pop("RAFTCRON_TOKEN", None)
    if getattr(args, "insecure", False):
        merged["RAFTCRON_INSECURE"] = "1"
    return merged


CLI_OUTCOME_RETRIES = 3


def _client(args):
    from worker.client import ClusterClient, Credentials, parse_cluster

    credentials = Credentials.from_env(credential_environ(args))
    # A write cut short by a leader change is sent again with its request id: the cluster applies
    # it once either way, whereas the operator running the command again would trigger twice.
    return ClusterClient(parse_cluster(args.cluster), timeout_s=args.timeout, credentials=credentials,
                         outcome_retries=CLI_OUTCOME_RETRIES)


def cmd_serve(args) -> int:
    import logging

    from scheduler.config import ConfigError, insecure_warning, load_node_config, serving_refusal, with_generated_secret
    from scheduler.logs import configure_logging
    from scheduler.node import serve

    config = load_node_config(args)
    configure_logging(config.log_level, config.log_format, config.node_id)
    log = logging.getLogger("raftcron.node")
    config, generated = with_generated_secret(config)
    if generated is not None:
        log.info("cluster secret: %s (this one-node loopback cluster's own, 0600)", generated)
    if refusal := serving_refusal(config):
        raise ConfigError(refusal)
    if config.insecure:
        log.warning(insecure_warning(config))
    return serve(config)


def cmd_credentials(args) -> int:
    from scheduler.security.devcerts import ensure_dev_credentials

    directory = Path(args.directory).resolve()
    existed = (directory / "principals.yaml").exists()
    credentials = ensure_dev_credentials(directory, tuple(args.host))
    print(f"{'kept the' if existed else 'created'} credentials in {directory} (files 0600, directory 0700):")
    for name in sorted(p.name for p in directory.iterdir() if p.name != ".gitignore"):
        print(f"  {name}")
    print("a client (CLI or worker) needs:")
    for key, value in credentials.client_env("admin").items():
        if "CLIENT" not in key:
            print(f"{key}={value}")
    return 0


def cmd_dev(args) -> int:
    from scheduler.cli.dev import run_dev_cluster

    return run_dev_cluster(args)


def apply_request(document, prune: bool, dry_run: bool, author: str = ""):
    """The ApplyJobs request for a loaded job file (shared by apply and plan)."""
    from scheduler.rpc.convert import resource_to_pb, spec_to_pb
    from worker.api.v1 import jobs_pb2

    return jobs_pb2.ApplyJobsRequest(
        jobs=[spec_to_pb(s) for s in document.jobs],
        resources=[resource_to_pb(r) for r in document.resources],
        prune=prune,
        dry_run=dry_run,
        author=author,
    )


def cmd_apply(args) -> int:
    from scheduler.specs import load_job_document

    request = apply_request(load_job_document(args.file), args.prune, args.dry_run, args.author)
    with _client(args) as client:
        response = client.apply_jobs(request)
    out.print_changes(response, args.json, args.dry_run)
    return 0


def cmd_jobs(args) -> int:
    with _client(args) as client:
        response = client.list_jobs(owner=args.owner, job_class=args.job_class, page_size=args.limit,
                                    linearizable=args.linearizable)
    out.print_jobs(response, args.json)
    return 0


RUN_PAGES_FOLLOWED = 50


def cmd_runs(args) -> int:
    from scheduler.cli.times import parse_when
    from scheduler.rpc.convert import STATUS_FROM_PB, timestamp
    from worker.api.v1 import runs_pb2

    statuses = {name: value for value, name in STATUS_FROM_PB.items()}
    request = runs_pb2.ListRunsRequest(
        job_id=args.job or "",
        statuses=[statuses[s] for s in args.status or []],
        since=timestamp(parse_when(args.since)) if args.since else None,
        until=timestamp(parse_when(args.until)) if args.until else None,
        page_size=args.limit,
        newest_first=not args.oldest_first,
        linearizable=args.linearizable,
    )
    with _client(args) as client:
        response = client.list_runs(request)
        # A node looks at a bounded number of runs per call, so a rare --status may answer a short
        # page with a token: follow it (a bounded number of times) to fill the page.
        for _ in range(RUN_PAGES_FOLLOWED):
            if len(response.runs) >= args.limit or not response.next_page_token:
                break
            request.page_token, request.page_size = response.next_page_token, args.limit - len(response.runs)
            more = client.list_runs(request)
            runs = list(response.runs) + list(more.runs)
            del more.runs[:]
            more.runs.extend(runs)
            response = more
    out.print_runs(response, args.json)
    return 0


def cmd_status(args) -> int:
    with _client(args) as client:
        response = client.status(address=args.node)
    out.print_status(response, args.json)
    return 0


def cmd_cluster_add(args) -> int:
    from worker.api.v1 import cluster_pb2

    peer = args.member
    member = cluster_pb2.Member(node_id=peer.node_id, raft_address=peer.raft_address, grpc_address=peer.grpc_address)
    with _client(args) as client:
        response = client.add_member(member=member, author=args.author, timeout_s=max(args.timeout, 30.0))
        print(f"{peer.node_id} {'is now' if response.changed else 'was already'} a member (entry {response.index})")
        if args.wait > 0:
            _wait_caught_up(client, peer, response.index, args.wait)
    _print_members(response)
    return 0


def _wait_caught_up(client, peer, index: int, wait_s: float) -> None:
    """Until the new member has applied the entry that added it: then it holds the full state."""
    import time

    deadline = time.monotonic() + wait_s
    applied = 0
    while time.monotonic() < deadline:
        try:
            applied = client.status(address=peer.grpc_address).applied_index
        except grpc.RpcError:
            applied = 0
        if applied >= index:
            print(f"{peer.node_id} has caught up (applied {applied})")
            return
        time.sleep(0.2)
    print(f"{peer.node_id} has not caught up within {wait_s:g}s (applied {applied} of {index}); "
          f"watch `raftcron status --node {peer.grpc_address}`", file=sys.stderr)


def member_argument(text: str):
    """`ID=RAFT_HOST:PORT/GRPC_HOST:PORT` as a Peer; argparse reports a malformed one."""
    from scheduler.config import ConfigError, Peer

    try:
        return Peer.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_cluster_remove(args) -> int:
    with _client(args) as client:
        response = client.remove_member(node_id=args.node_id, author=args.author, timeout_s=max(args.timeout, 30.0))
    print(f"{args.node_id} {'removed' if response.changed else 'was already removed'} (entry {response.index})")
    _print_members(response)
    return 0


def _print_members(response) -> None:
    for member in response.members:
        print(f"  {member.node_id}  raft {member.raft_address}  grpc {member.grpc_address}")


def cmd_pause(args, paused: bool = True) -> int:
    with _client(args) as client:
        call = client.pause_job if paused else client.resume_job
        response = call(job_id=args.job, author=args.author, reason=args.reason)
    out.print_job(response.job, args.json)
    return 0


def cmd_delete(args) -> int:
    with _client(args) as client:
        client.delete_job(job_id=args.job, author=args.author)
    print(f"deleted {args.job}")
    return 0


def cmd_next(args) -> int:
    from scheduler.planning import preview

    schedule, timezone, gap, repeat = args.schedule, args.timezone, args.dst_gap, args.dst_repeat
    if args.job:
        with _client(args) as client:
            spec = client.get_job(job_id=args.job).job.spec
        schedule, timezone = spec.schedule, spec.timezone or "UTC"
        gap, repeat = gap or spec.dst.gap or None, repeat or spec.dst.repeat or None
    elif not schedule:
        print("raftcron next: name a JOB or give --schedule", file=sys.stderr)
        return 2
    out.print_fires(preview(schedule, timezone or "UTC", args.after, args.n, gap, repeat), args.json)
    return 0


def cmd_trigger(args) -> int:
    with _client(args) as client:
        response = client.trigger_job(job_id=args.job, author=args.author)
    out.print_runs_list([response.run], args.json)
    return 0


def cmd_backfill(args) -> int:
    from scheduler.cli.times import parse_when
    from scheduler.rpc.convert import timestamp
    from worker.api.v1 import jobs_pb2

    request = jobs_pb2.BackfillJobRequest(
        job_id=args.job, to=timestamp(parse_when(args.to)), max_runs=args.max_runs,
        rate_per_s=args.rate, author=args.author,
    )
    getattr(request, "from").CopyFrom(timestamp(parse_when(args.from_)))
    with _client(args) as client:
        response = client.backfill_job(request)
    out.print_runs_list(list(response.runs), args.json)
    if not args.json:
        print(f"{len(response.runs)} slots backfilled, {response.already_ran} already ran")
    return 0


def cmd_forecast(args) -> int:
    import json as json_module

    from scheduler.cli.times import parse_when
    from scheduler.forecast import forecast, plot_png, to_json
    from scheduler.planning import format_us
    from scheduler.rpc.convert import spec_from_pb

    specs, token = [], ""
    with _client(args) as client:
        while True:
            page = client.list_jobs(page_size=1000, page_token=token)
            specs += [spec_from_pb(job.spec) for job in page.jobs if not job.paused]
            token = page.next_page_token
            if not token:
                break
    result = forecast(specs, parse_when(args.start), args.hours, int(args.herd_window * 1_000_000))
    if args.plot:
        plot_png(result, args.plot)
    if args.json:
        print(json_module.dumps(to_json(result), indent=2))
        return 0
    series = result.series()
    print(f"{len(specs)} jobs, {sum(series)} fires in the next {args.hours:g} h "
          f"(mean {sum(series) / len(series):.1f}/min, max {max(series)}/min)")
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


def cmd_kill(args) -> int:
    from scheduler.cli.times import parse_when
    from scheduler.rpc.convert import timestamp

    with _client(args) as client:
        response = client.kill_class(
            job_class=args.job_class, reason=args.reason, author=args.author, cancel_running=args.cancel_running,
            until=timestamp(parse_when(args.until)) if args.until else None,
        )
    until = f" until {args.until}" if args.until else " until revived"
    print(f"class {args.job_class} killed{until}; {response.cancelled_runs} runs cancelled")
    return 0


def cmd_revive(args) -> int:
    with _client(args) as client:
        client.revive_class(job_class=args.job_class, author=args.author)
    print(f"class {args.job_class} revived: it fires again from its next slots")
    return 0


def cmd_kills(args) -> int:
    with _client(args) as client:
        response = client.list_kills()
    out.print_kills(response, args.json)
    return 0


def cmd_alerts(args) -> int:
    with _client(args) as client:
        response = client.list_alerts(pending_only=args.pending, owner=args.owner, limit=args.limit)
    out.print_alerts(response, args.json)
    return 0


def cmd_plan(args) -> int:
    from scheduler.cli.plan import plan

    print(plan(args))
    return 0


def cmd_explain(args) -> int:
    from scheduler.cli.explain import explain

    with _client(args) as client:
        print(explain(client, args.job, args.at, args.json))
    return 0


def add_credential_flags(parser: argparse.ArgumentParser) -> None:
    """TLS and token flags; each overrides its RAFTCRON_* variable (the token itself only comes
    from RAFTCRON_TOKEN or a file: a flag would show it in the process list)."""
    parser.add_argument("--ca", help="PEM CA that signs the nodes' certificates; turns TLS on (env RAFTCRON_CA)")
    parser.add_argument("--token-file", help="file holding a bearer token (env RAFTCRON_TOKEN_FILE or RAFTCRON_TOKEN)")
    parser.add_argument("--client-cert", help="PEM client certificate for mutual TLS (env RAFTCRON_CLIENT_CERT)")
    parser.add_argument("--client-key", help="its PEM private key (env RAFTCRON_CLIENT_KEY)")
    parser.add_argument("--insecure", action="store_true",
                        help="send the token without TLS to a non-loopback address (env RAFTCRON_INSECURE=1)")


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
    p.set_defaults(func=cmd_serve)

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
    p.set_defaults(func=cmd_credentials)

    p = sub.add_parser("apply", help="apply a jobs file: all or nothing")
    p.add_argument("-f", "--file", required=True, help="YAML jobs file")
    p.add_argument("--prune", action="store_true", help="remove jobs missing from the file")
    p.add_argument("--dry-run", action="store_true", help="show the changes, apply nothing")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("jobs", help="list jobs")
    p.add_argument("--owner", default="")
    p.add_argument("--class", dest="job_class", default="")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_jobs)

    p = sub.add_parser("runs", help="list runs of a job (newest first)")
    p.add_argument("job", nargs="?", help="job id (all jobs when omitted)")
    p.add_argument("--since", help="e.g. 2026-11-28T18:00:00Z, 'yesterday 18:00', '2h ago'")
    p.add_argument("--until")
    p.add_argument("--status", action="append", help="filter by status (repeatable)")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--oldest-first", action="store_true")
    p.add_argument("--linearizable", action="store_true", help="confirm with the leader before reading")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("status", help="cluster status as one node sees it")
    p.add_argument("--node", help="ask this host:port only")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("cluster", help="membership: add or remove a node (admin)")
    cluster_sub = p.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    c = cluster_sub.add_parser(
        "add", help="make a node started with `raftcron serve --join` a voting member, and wait until it caught up"
    )
    c.add_argument(
        "member", type=member_argument, metavar="ID=RAFT_HOST:PORT/GRPC_HOST:PORT", help="the new node and its addresses"
    )
    c.add_argument("--wait", type=float, default=120.0, help="seconds to wait for it to catch up; 0: do not wait")
    c.add_argument("--author", default=author)
    c.set_defaults(func=cmd_cluster_add)
    c = cluster_sub.add_parser("remove", help="remove a member, dead or alive (a leader hands over first)")
    c.add_argument("node_id", metavar="ID")
    c.add_argument("--author", default=author)
    c.set_defaults(func=cmd_cluster_remove)

    for name, paused in (("pause", True), ("resume", False)):
        p = sub.add_parser(name, help=f"{name} a job (slots while paused are recorded as skipped)")
        p.add_argument("job")
        p.add_argument("--reason", default="")
        p.add_argument("--author", default=author)
        p.add_argument("--json", action="store_true")
        p.set_defaults(func=lambda args, paused=paused: cmd_pause(args, paused))

    p = sub.add_parser("delete", help="delete a job (its run history is kept)")
    p.add_argument("job")
    p.add_argument("--author", default=author)
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("next", help="preview upcoming fire instants of a job or an expression (no cluster needed)")
    p.add_argument("job", nargs="?", help="a job id (asks the cluster for its schedule)")
    p.add_argument("--schedule", help="cron expression (5 fields, or 6 with seconds first)")
    p.add_argument("--timezone", default="")
    p.add_argument("--after", default="now", help="ISO-8601 instant (default now)")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("--dst-gap", choices=("run_at_end", "skip"))
    p.add_argument("--dst-repeat", choices=("first", "second", "both"))
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_next)

    p = sub.add_parser("trigger", help="run a job now, outside its schedule (honours its overlap policy)")
    p.add_argument("job")
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_trigger)

    p = sub.add_parser("backfill", help="fire every past slot in a range that never ran, once")
    p.add_argument("job")
    p.add_argument("--from", dest="from_", required=True, help="first slot instant (inclusive)")
    p.add_argument("--to", required=True, help="last slot instant (inclusive)")
    p.add_argument("--rate", type=float, default=1.0, help="runs becoming due per second (default %(default)s)")
    p.add_argument("--max-runs", type=int, default=1000)
    p.add_argument("--author", default=author)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser("kill", help="kill switch: stop every job of a class from firing")
    p.add_argument("job_class", metavar="CLASS")
    p.add_argument("--reason", required=True)
    p.add_argument("--until", help="end of the kill (default: until revived)")
    p.add_argument("--cancel-running", action="store_true", help="also stop running runs (their leases are fenced)")
    p.add_argument("--author", default=author)
    p.set_defaults(func=cmd_kill)

    p = sub.add_parser("revive", help="undo a kill switch")
    p.add_argument("job_class", metavar="CLASS")
    p.add_argument("--author", default=author)
    p.set_defaults(func=cmd_revive)

    p = sub.add_parser("kills", help="active kill switches and their audit trail")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_kills)

    p = sub.add_parser("alerts", help="alerts for owners: pending and recent")
    p.add_argument("--pending", action="store_true", help="only alerts not delivered yet")
    p.add_argument("--owner", default="")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_alerts)

    p = sub.add_parser("plan", help="what `apply -f FILE` would change, effective settings and next fires")
    p.add_argument("-f", "--file", required=True)
    p.add_argument("--prune", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("forecast", help="fires per minute over the coming hours: see the herd before it happens")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--start", default="now", help="window start (default now)")
    p.add_argument("--herd-window", type=float, default=3600.0,
                   help="the cluster's herd_window_s, for jobs with jitter auto (default %(default)s)")
    p.add_argument("--plot", help="also write the histogram as a PNG file (needs matplotlib)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_forecast)

    p = sub.add_parser("explain", help="what happened to the slot of JOB nearest a time")
    p.add_argument("job")
    p.add_argument("--at", required=True, help="e.g. 'yesterday 02:00' or an ISO-8601 instant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("worker", help="run a worker (see `raftcron worker --help`)", add_help=False)
    p.add_argument("worker_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_worker)
    return parser


def cmd_worker(args) -> int:
    from worker.cli import main as worker_main

    worker_args = list(args.worker_args)
    if "--cluster" not in worker_args and os.environ.get("RAFTCRON_CLUSTER") is None:
        worker_args = ["--cluster", args.cluster, *worker_args]
    # Credential flags given before `worker` reach the worker as the variables they stand for.
    for flag, name in CREDENTIAL_FLAGS:
        if getattr(args, flag, None):
            worker_args = [f"--{flag.replace('_', '-')}", getattr(args, flag), *worker_args]
    if getattr(args, "insecure", False):
        worker_args = ["--insecure", *worker_args]
    return worker_main(worker_args)


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
