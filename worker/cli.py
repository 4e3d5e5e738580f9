"""`raftcron worker`: run a worker from the command line.

    raftcron worker --handlers myjobs:HANDLERS               # a dict {target name: handler}
    raftcron worker --handlers reports.build=myjobs:build     # one handler under a name
    raftcron worker --shell --concurrency 8                   # run {shell: CMD} targets
    raftcron worker --shell --shell-owners ops --shell-user raftcron-jobs   # ops' commands, as that user
    raftcron worker --http --http-allow api.internal hooks.example.com:8443   # {http: ...} targets to these hosts
    raftcron worker --demo                                    # the handlers of examples/jobs.yaml
    raftcron worker --handlers myjobs:HANDLERS --isolation thread   # handlers in this process's threads

Modules are imported from the current directory first. SIGTERM or Ctrl-C drains the worker;
a second one stops it at once.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import logging
import os
import sys
from collections.abc import Mapping

from worker._client import Credentials, parse_cluster
from worker._execution import Handler
from worker._isolation import ISOLATIONS, PROCESS, PoolDidNotStart
from worker._runner import LeaseRefused, Worker

__all__ = ["build_worker", "load_handlers", "main"]

DEFAULT_CLUSTER = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="raftcron worker",
        description="Run raftcron jobs: lease, run, report.",
        epilog="exit status: 0 stopped by SIGTERM or Ctrl-C (after draining); 2 a usage error, a handler "
        "module that does not load, or the cluster refused the token (UNAUTHENTICATED) or its targets "
        "(PERMISSION_DENIED). An unreachable cluster is retried until it answers.",
    )
    parser.add_argument(
        "--cluster",
        default=os.environ.get("RAFTCRON_CLUSTER", DEFAULT_CLUSTER),
        help="gRPC addresses host:port,... of any nodes (env RAFTCRON_CLUSTER; default %(default)s)",
    )
    parser.add_argument(
        "--handlers",
        action="extend",
        nargs="+",
        default=[],
        metavar="[NAME=]MODULE:ATTR",
        help="handlers to run: MODULE:ATTR naming a dict {target: handler}, or NAME=MODULE:ATTR naming one",
    )
    parser.add_argument("--demo", action="store_true", help="register the demo handlers of examples/jobs.yaml")
    parser.add_argument("--shell", action="store_true", help="also run {shell: CMD} targets with /bin/sh")
    parser.add_argument(
        "--shell-owners", nargs="+", metavar="OWNER", help="run only these owners' shell jobs (default: every owner's)"
    )
    parser.add_argument(
        "--shell-env",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="also pass these variables of the worker's environment to shell commands "
        "(beyond PATH, HOME, LANG, LC_*, TZ; never RAFTCRON_*)",
    )
    parser.add_argument(
        "--shell-user",
        metavar="USER",
        help="run shell commands as USER, with its primary group only (the worker must run as root)",
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="also run {http: {url: ...}} targets: one request per attempt, to the hosts of --http-allow",
    )
    parser.add_argument(
        "--http-allow",
        action="extend",
        nargs="+",
        default=[],
        metavar="HOST[:PORT]",
        help="hosts HTTP jobs may call (required with --http): HOST allows port 80 for http:// and 443 "
        "for https://, HOST:PORT that port; a request to any other host fails without connecting",
    )
    parser.add_argument(
        "--concurrency", type=int, default=4, help="most handlers running at once (default %(default)s)"
    )
    parser.add_argument(
        "--isolation",
        choices=ISOLATIONS,
        default=PROCESS,
        help="run Python handlers in a pool of child processes, one per slot, killed at their deadline "
        "or a lost lease (process), or in threads of the worker, cheaper but a handler that ignores "
        "cancellation keeps its slot (thread) (default %(default)s)",
    )
    parser.add_argument(
        "--thread-handlers",
        action="extend",
        nargs="+",
        default=[],
        metavar="NAME",
        help="run these handlers (target names or fnmatch patterns) in threads whatever --isolation says: "
        "for a handler that cannot run in a child process (a closure, or one that starts multiprocessing "
        "children of its own)",
    )
    parser.add_argument(
        "--stream",
        dest="stream",
        action="store_true",
        default=False,
        help="lease, heartbeat and report on one long-lived session with the leader when the cluster "
        "offers it (experimental: it measured no faster than unary calls; see docs/design/worker-stream.md)",
    )
    parser.add_argument(
        "--no-stream",
        dest="stream",
        action="store_false",
        help="unary calls only (the default)",
    )
    parser.add_argument("--worker-id", help="stable id of this worker (default <hostname>-<pid>)")
    parser.add_argument(
        "--lease-wait",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds one Lease call waits for due runs (default %(default)s)",
    )
    parser.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds a stop waits for running attempts (default %(default)s)",
    )
    parser.add_argument(
        "--shell-grace",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL of a cancelled command or handler process (default %(default)s)",
    )
    parser.add_argument("--ca", help="PEM CA of the nodes' certificates; turns TLS on (env RAFTCRON_CA)")
    parser.add_argument("--token-file", help="file holding the worker's bearer token (env RAFTCRON_TOKEN_FILE)")
    parser.add_argument("--client-cert", help="PEM client certificate for mutual TLS (env RAFTCRON_CLIENT_CERT)")
    parser.add_argument("--client-key", help="its PEM private key (env RAFTCRON_CLIENT_KEY)")
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="send the token without TLS to a non-loopback address (env RAFTCRON_INSECURE=1)",
    )
    parser.add_argument(
        "--log-level",
        default=os.environ.get("RAFTCRON_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING... (env RAFTCRON_LOG_LEVEL; default %(default)s)",
    )
    return parser


def load_handlers(spec: str) -> dict[str, Handler]:
    """Handlers named by "MODULE:ATTR" (a mapping of them) or "NAME=MODULE:ATTR" (one of them)."""
    name, equals, location = spec.rpartition("=")
    module_name, colon, attr = location.partition(":")
    if not colon or not module_name or not attr or (equals and not name):
        raise ValueError(f"--handlers {spec!r}: expected MODULE:ATTR or NAME=MODULE:ATTR")
    if module_name.partition(".")[0] == "worker" and (shadow := _shadowing_file(os.getcwd())):
        # `worker` is this SDK, imported already: a user's worker.py can never be loaded by that name.
        raise ValueError(f"--handlers {spec!r}: your file {shadow} shadows raftcron's worker package: rename it")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the user's modules sit here
    value = importlib.import_module(module_name)
    for part in attr.split("."):
        value = getattr(value, part)
    if equals:
        if not callable(value):
            raise ValueError(f"--handlers {spec!r}: {location} is not callable")
        return {name: value}
    if not isinstance(value, Mapping):
        raise ValueError(f"--handlers {spec!r}: {location} is not a dict of handlers (use NAME={location})")
    return dict(value)


def _shadowing_file(directory: str) -> str | None:
    ours = os.path.realpath(os.path.join(os.path.dirname(__file__), "__init__.py"))
    for candidate in (os.path.join(directory, "worker.py"), os.path.join(directory, "worker", "__init__.py")):
        if os.path.isfile(candidate) and os.path.realpath(candidate) != ours:
            return os.path.dirname(candidate) if candidate.endswith("__init__.py") else candidate
    return None


def build_worker(args: argparse.Namespace) -> Worker:
    handlers: dict[str, Handler] = {}
    if args.demo:
        from worker._demo import DEMO_HANDLERS

        handlers.update(DEMO_HANDLERS)
    for spec in args.handlers:
        for name, handler in load_handlers(spec).items():
            if name in handlers and handlers[name] is not handler:
                raise ValueError(f"two handlers for target {name!r}")
            handlers[name] = handler
    thread_only = _thread_handlers(args.thread_handlers, handlers)
    if not handlers and not args.shell and not args.http:
        raise ValueError("nothing to run: give --handlers, --demo, --shell or --http")
    if args.http and not args.http_allow:
        raise ValueError("--http needs --http-allow HOST[:PORT]...: the hosts HTTP jobs may call")
    if args.http_allow and not args.http:
        raise ValueError("--http-allow needs --http")
    if not args.shell and (args.shell_owners or args.shell_env or args.shell_user):
        raise ValueError("--shell-owners, --shell-env and --shell-user need --shell")
    environ = dict(os.environ)
    for flag, name in (
        ("ca", "RAFTCRON_CA"),
        ("token_file", "RAFTCRON_TOKEN_FILE"),
        ("client_cert", "RAFTCRON_CLIENT_CERT"),
        ("client_key", "RAFTCRON_CLIENT_KEY"),
    ):
        if getattr(args, flag, None):
            environ[name] = getattr(args, flag)
            if name == "RAFTCRON_TOKEN_FILE":
                environ.pop("RAFTCRON_TOKEN", None)
    if args.insecure:
        environ["RAFTCRON_INSECURE"] = "1"
    worker = Worker(
        parse_cluster(args.cluster),
        credentials=Credentials.from_env(environ),
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        lease_wait_s=args.lease_wait,
        shell=args.shell,
        drain_timeout_s=args.drain_timeout,
        shell_grace_s=args.shell_grace,
        shell_owners=args.shell_owners,
        shell_env=args.shell_env,
        shell_user=args.shell_user,
        isolation=args.isolation,
        stream=args.stream,
        http=args.http,
        http_allow=args.http_allow,
    )
    for name, handler in handlers.items():
        try:
            worker.add_handler(name, handler, isolation="thread" if name in thread_only else None)
        except ValueError as exc:
            if args.isolation != PROCESS or name in thread_only:
                raise
            raise ValueError(f"{exc} (on the command line: --thread-handlers {name}, or --isolation thread)") from None
    return worker


def _thread_handlers(patterns: list[str], handlers: Mapping[str, Handler]) -> set[str]:
    """The handlers `--thread-handlers` names; a pattern that names none is a mistake worth saying."""
    chosen: set[str] = set()
    for pattern in patterns:
        matched = fnmatch.filter(handlers, pattern)
        if not matched:
            raise ValueError(
                f"--thread-handlers {pattern!r} names no handler (handlers: {', '.join(sorted(handlers))})"
            )
        chosen.update(matched)
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Run a worker until it is signalled; the exit status (2 for a usage error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:  # called with the subcommand still in front
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    try:
        if not logging.getLogger().handlers:
            logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        worker = build_worker(args)
    except (ValueError, TypeError, ImportError, AttributeError, OSError) as exc:
        print(f"raftcron worker: {exc}", file=sys.stderr)
        return 2
    try:
        worker.run()
    except (LeaseRefused, PoolDidNotStart) as refused:
        print(f"raftcron worker: {refused}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
