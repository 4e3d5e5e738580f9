"""FinalFailure: a handler fails a run for good, and the worker reports it final."""

from __future__ import annotations

from worker import FinalFailure, OutcomeKind, run_handler
from worker._completion import complete_request
from worker._execution import Outcome
from worker.api.v1 import worker_pb2


def test_a_handler_raising_final_failure_reports_a_final_failure() -> None:
    def charge(ctx):
        raise FinalFailure("card declined: do not retry")

    outcome = run_handler(charge)
    assert (outcome.kind, outcome.error, outcome.final) == (OutcomeKind.FAILURE, "card declined: do not retry", True)


def test_any_other_exception_stays_retryable() -> None:
    def flaky(ctx):
        raise ConnectionError("upstream down")

    assert run_handler(flaky).final is False


def test_the_complete_request_says_final() -> None:
    ref = worker_pb2.LeaseRef(job_id="a", fencing_token=3)
    assert complete_request("w", ref, Outcome(OutcomeKind.FAILURE, "x", final=True)).final is True
    assert complete_request("w", ref, Outcome(OutcomeKind.FAILURE, "x")).final is False
