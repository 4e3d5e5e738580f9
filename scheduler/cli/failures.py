"""How a command fails: a user's mistake or a refusal is one line on stderr and exit status 2.

A traceback is for raftcron's own bugs; a missing file, bad YAML, a bad instant, an unreachable
cluster or a refused token is something the operator fixes, and needs to read as such.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

EXIT_OK = 0
EXIT_FAILED = 1  # the cluster answered with a fault of its own (INTERNAL, UNKNOWN, DATA_LOSS)
EXIT_USAGE = 2  # the command could not do what was asked: fix the input, the credentials or the address
EXIT_INTERRUPTED = 130

EPILOG = """\
exit status:
  0    done
  1    the cluster answered with an internal fault (see its node logs)
  2    nothing done: a bad argument, file or jobs spec, an instant not understood, a cluster
       that cannot be reached, a token refused, or a request the cluster refused (the message
       says which)
  130  interrupted (Ctrl-C)

Global options (--cluster, --timeout, --ca, --token-file, --client-cert, --client-key,
--insecure) go before or after the command: `raftcron runs JOB --cluster H:P` works.
`-f -` reads a jobs file from standard input."""


class CommandError(Exception):
    """A failure the operator fixes, with the sentence that says how (e.g. an extra to install)."""


_INTERNAL_CODES = ("INTERNAL", "UNKNOWN", "DATA_LOSS")


def rpc_error_line(exc, cluster: str) -> tuple[str, int]:
    """The one line and exit status for a gRPC error a call ended with."""
    code = exc.code().name if callable(getattr(exc, "code", None)) else "UNKNOWN"
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    if code == "UNAVAILABLE":
        return f"cannot reach the cluster at {cluster} (UNAVAILABLE: {details}); is it running? check --cluster", 2
    if code == "DEADLINE_EXCEEDED":
        return f"no answer from the cluster at {cluster} in time (DEADLINE_EXCEEDED); raise --timeout?", 2
    if code == "UNAUTHENTICATED":
        return f"the cluster refused the token (UNAUTHENTICATED: {details}); check --token-file or RAFTCRON_TOKEN", 2
    if code == "PERMISSION_DENIED":
        return f"the token's role may not do this (PERMISSION_DENIED: {details})", 2
    return f"{code}: {details}", EXIT_FAILED if code in _INTERNAL_CODES else EXIT_USAGE


def os_error_line(exc: OSError) -> str:
    if exc.filename is not None:
        return f"{exc.filename}: {exc.strerror or exc}"
    return str(exc.strerror or exc)


def failure_line(exc: BaseException, cluster: str) -> tuple[str, int] | None:
    """The line and exit status for a failure that is not a bug; None for a bug (its traceback helps)."""
    import grpc

    from scheduler.config import ConfigError
    from scheduler.planning import ScheduleError
    from scheduler.specs import SpecError

    if isinstance(exc, grpc.RpcError):
        return rpc_error_line(exc, cluster)
    if isinstance(exc, (CommandError, ConfigError, SpecError, ScheduleError, ValueError)):
        return str(exc), EXIT_USAGE
    if isinstance(exc, OSError):
        return os_error_line(exc), EXIT_USAGE
    return None


def run_reporting_errors(func: Callable, args, prefix: str) -> int:
    """`func(args)`'s exit status; a failure that is not a bug as one line on stderr instead."""
    try:
        return func(args)
    except BrokenPipeError:  # `raftcron runs | head`: the reader has what it wanted
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"{prefix}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        reported = failure_line(exc, getattr(args, "cluster", ""))
        if reported is None:
            raise
        line, status = reported
        print(f"{prefix}: {line}", file=sys.stderr)
        return status
