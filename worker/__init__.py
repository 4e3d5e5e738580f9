"""The raftcron worker SDK: lease runs from a cluster, run handlers with a run context, report outcomes."""

from worker.client import ClusterClient, parse_cluster
from worker.context import CancelReason, RetryLater, RunContext
from worker.execution import Outcome, OutcomeKind
from worker.runner import SHELL_TARGET, Worker
from worker.shell import ShellCommand, ShellResult
from worker.testing import HandlerOutcome, make_context, run_handler

__all__ = [
    "SHELL_TARGET",
    "CancelReason",
    "ClusterClient",
    "HandlerOutcome",
    "Outcome",
    "OutcomeKind",
    "RetryLater",
    "RunContext",
    "ShellCommand",
    "ShellResult",
    "Worker",
    "make_context",
    "parse_cluster",
    "run_handler",
]
