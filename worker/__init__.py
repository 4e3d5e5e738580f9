"""The raftcron worker SDK: lease runs from a cluster, run handlers with a run context, report outcomes.

Import from here (and `worker.testing` for tests of handlers); the `_`-prefixed modules are the
SDK's internals and may change without notice. `worker.cli` is `raftcron worker`.
"""

from worker._client import ClusterClient, Credentials, PlaintextTokenRefused, parse_cluster
from worker._context import CancelReason, FinalFailure, RetryLater, RunContext
from worker._execution import Outcome, OutcomeKind
from worker._runner import SHELL_TARGET, LeaseRefused, Worker
from worker._shell import ShellCommand, ShellResult
from worker.testing import HandlerOutcome, make_context, run_handler

__all__ = [
    "SHELL_TARGET",
    "CancelReason",
    "ClusterClient",
    "Credentials",
    "FinalFailure",
    "HandlerOutcome",
    "LeaseRefused",
    "Outcome",
    "OutcomeKind",
    "PlaintextTokenRefused",
    "RetryLater",
    "RunContext",
    "ShellCommand",
    "ShellResult",
    "Worker",
    "make_context",
    "parse_cluster",
    "run_handler",
]
