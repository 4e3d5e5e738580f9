"""A Python handler's stdout, stderr and log records become its attempt's output tails, per
attempt even when attempts run at once on threads of one process."""

from __future__ import annotations

import logging
import sys
import threading

from worker._execution import TAIL_LIMIT_BYTES, OutcomeKind
from worker.testing import run_handler

log = logging.getLogger("capture.handler")


def test_prints_and_log_records_of_each_attempt_stay_with_that_attempt():
    gate = threading.Barrier(2)

    def talker(ctx) -> None:
        name = ctx.payload["name"]
        gate.wait(5)
        for i in range(50):
            print(f"{name} out {i}")
            print(f"{name} err {i}", file=sys.stderr)
        log.warning("%s logged", name)
        logging.getLogger("raftcron.worker").warning("the worker talking about %s", name)

    outcomes = {}
    threads = [
        threading.Thread(target=lambda n=n: outcomes.setdefault(n, run_handler(talker, {"name": n}))) for n in "ab"
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    for name, other in (("a", "b"), ("b", "a")):
        outcome = outcomes[name]
        assert outcome.kind == OutcomeKind.SUCCESS
        assert f"{name} out 49\n" in outcome.stdout_tail and other not in outcome.stdout_tail
        assert f"WARNING capture.handler: {name} logged\n" in outcome.stderr_tail
        assert "err" not in outcome.stdout_tail and "out" not in outcome.stderr_tail
        assert "the worker talking" not in outcome.output_tail  # the worker's own log stays out
        assert outcome.output_tail.startswith(f"{name} out 0\n{name} err 0\n")


def test_output_outside_an_attempt_is_not_captured_and_still_printed(capsys):
    run_handler(lambda ctx: print("inside"))
    print("outside")
    assert capsys.readouterr().out == "inside\noutside\n"


def test_tails_are_bounded_and_keep_the_end():
    outcome = run_handler(lambda ctx: print("x" * 100_000 + "END"))
    assert len(outcome.stdout_tail.encode()) <= TAIL_LIMIT_BYTES and outcome.stdout_tail.endswith("END\n")


def test_a_failure_has_its_exception_type_and_its_output_before_the_traceback():
    def fails(ctx) -> None:
        print("working")
        raise ValueError("bad input")

    outcome = run_handler(fails)
    assert outcome.kind == OutcomeKind.FAILURE and outcome.exit_code == 0
    assert outcome.output_tail.startswith("working\nTraceback")
    assert outcome.output_tail.rstrip().endswith("ValueError: bad input")


def test_an_async_handler_is_captured_on_the_loop_thread():
    async def talker(ctx) -> None:
        print("from the loop")

    assert run_handler(talker).stdout_tail == "from the loop\n"
