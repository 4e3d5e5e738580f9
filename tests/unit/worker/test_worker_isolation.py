"""Process isolation: a real pool of handler processes, no cluster."""

from __future__ import annotations

import os
import re
import threading
import time

import isolation_handlers as h
import pytest

from worker._context import CancelReason
from worker._execution import TAIL_LIMIT_BYTES, OutcomeKind, arm_deadline
from worker._isolation import ProcessPool, handler_ref
from worker._runner import Worker
from worker.testing import make_context

# A pool thread that dies (e.g. closing a pipe the other side closed) fails the test, not a warning.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")

GRACE_S = 0.5


@pytest.fixture(scope="module")
def pool():
    pool = ProcessPool(2, grace_s=GRACE_S, modules=("isolation_handlers",))
    pool.start()
    yield pool
    pool.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose, and reaped by the pool soon after.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between the kill and the read
        return False


def child_pid(outcome) -> int:
    return int(re.search(r"pid=(\d+)", outcome.output_tail).group(1))


def wait_for(condition, timeout_s: float = 10.0) -> None:
    stop_at = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < stop_at, "condition not met in time"
        time.sleep(0.02)


def run(pool, handler, ctx=None, **context):
    ctx = ctx or make_context(**context)
    timer = arm_deadline(ctx)
    try:
        return pool.run(handler_ref(handler), ctx)
    finally:
        if timer is not None:
            timer.cancel()


def test_a_handler_runs_in_a_child_with_its_context_and_its_output_captured(pool):
    outcome = run(pool, h.reads_context, payload={"n": 7}, attempt=2, fencing_token=41)
    assert outcome.kind == OutcomeKind.SUCCESS
    assert outcome.stdout_tail.endswith(" 2 41 7 True\n")
    quick = run(pool, h.quick, payload={"a": 1})
    assert quick.stdout_tail.startswith("hello from ") and int(quick.stdout_tail.split()[-1]) != os.getpid()
    assert "WARNING isolation.handlers: payload {'a': 1}" in quick.stderr_tail
    assert quick.stdout_tail in quick.output_tail and quick.stderr_tail in quick.output_tail


def test_a_failure_records_its_exception_type_and_traceback(pool):
    outcome = run(pool, h.fails)
    assert outcome.kind == OutcomeKind.FAILURE and outcome.error == "KeyError: 'missing input'"
    assert outcome.exception_type == "KeyError" and outcome.exit_code == 0
    assert outcome.stderr_tail.startswith("about to fail\n") and "Traceback" in outcome.stderr_tail


def test_async_handlers_run_in_the_child(pool):
    outcome = run(pool, h.async_quick)
    assert outcome.kind == OutcomeKind.SUCCESS and outcome.stdout_tail == "async done\n"


def test_a_handler_ignoring_its_deadline_is_killed_and_its_slot_refilled(pool):
    started = time.monotonic()
    outcome = run(pool, h.sleeps_ignoring_cancellation, deadline_s=0.3)
    took_s = time.monotonic() - started
    assert outcome.kind == OutcomeKind.FAILURE and outcome.error == "deadline exceeded"
    assert outcome.cancel_reason == CancelReason.DEADLINE
    assert 0.3 + GRACE_S - 0.1 < took_s < 0.3 + GRACE_S + 2.0
    wait_for(lambda: len(pool.pids()) == 2)  # refilled: the next runs have their two children
    assert run(pool, h.quick).kind == OutcomeKind.SUCCESS


def test_a_handler_that_ignores_sigterm_is_killed_after_the_grace(pool):
    ctx = make_context()
    before = set(pool.pids())
    threading.Timer(0.5, ctx.cancel, args=(CancelReason.FENCED,)).start()
    outcome = run(pool, h.ignores_sigterm, ctx=ctx)
    assert outcome.cancel_reason == CancelReason.FENCED and not outcome.reportable
    gone = before - set(pool.pids())
    assert len(gone) == 1 and not alive(gone.pop())


def test_a_cooperative_handler_ends_at_its_cancellation_and_its_child_is_replaced(pool):
    before = set(pool.pids())
    outcome = run(pool, h.cooperative, deadline_s=0.2)
    assert outcome.error == "deadline exceeded"
    wait_for(lambda: len(pool.pids()) == 2 and set(pool.pids()) != before)


@pytest.mark.parametrize(
    ("handler", "error", "exit_code"),
    [(h.exits, "handler process exited with code 3", 3), (h.segfaults, "handler process killed by SIGSEGV", 139)],
)
def test_a_child_that_dies_is_a_failure_with_how_it_died(pool, handler, error, exit_code):
    outcome = run(pool, handler)
    assert (outcome.kind, outcome.error, outcome.exit_code) == (OutcomeKind.FAILURE, error, exit_code)
    wait_for(lambda: len(pool.pids()) == 2)


def test_a_killed_handler_reports_what_it_wrote_and_logged_bounded(pool):
    outcome = run(pool, h.prints_then_ignores_sigterm, deadline_s=0.3)
    assert (outcome.kind, outcome.error) == (OutcomeKind.FAILURE, "deadline exceeded")
    assert outcome.stdout_tail.endswith("x\nlast line before the hang\n")
    assert len(outcome.stdout_tail.encode()) == TAIL_LIMIT_BYTES  # the end of 10 KB: bounded
    assert outcome.stderr_tail == "WARNING isolation.handlers: hang starting\n"
    assert outcome.output_tail.endswith("hang starting\nlast line before the hang\n")
    assert len(outcome.output_tail.encode()) == TAIL_LIMIT_BYTES


def test_what_a_handler_writes_after_sigterm_is_kept_when_it_is_killed(pool):
    outcome = run(pool, h.cleans_up_then_hangs, deadline_s=0.3)
    assert outcome.error == "deadline exceeded"
    assert (outcome.stdout_tail, outcome.stderr_tail) == ("working\n", "terminated: cleaning up\n")
    assert outcome.output_tail == "working\nterminated: cleaning up\n"


def test_a_crashed_handler_reports_what_it_wrote(pool):
    outcome = run(pool, h.prints_then_segfaults)
    assert outcome.error == "handler process killed by SIGSEGV" and outcome.stdout_tail == "about to crash\n"


def test_output_of_an_attempt_never_reaches_the_next_one(pool):
    for _ in range(20):
        assert run(pool, h.quick, payload={}).stdout_tail.count("hello from") == 1


def test_close_leaves_no_child_behind_even_a_busy_one():
    pool = ProcessPool(2, grace_s=GRACE_S)
    pool.start()
    ctx = make_context()
    busy = threading.Thread(target=run, args=(pool, h.sleeps_ignoring_cancellation, ctx))
    busy.start()
    wait_for(lambda: len(pool.pids()) == 2)
    pids = pool.pids()
    pool.close(timeout_s=0.5)
    assert not any(alive(pid) for pid in pids)
    ctx.cancel(CancelReason.SHUTDOWN)
    busy.join(5)
    assert not busy.is_alive()


def test_process_isolation_refuses_what_a_child_cannot_import():
    worker = Worker(["127.0.0.1:1"], isolation="process", credentials=None)
    with pytest.raises(ValueError, match="lambda or a nested function.*isolation='thread'"):
        worker.add_handler("job", lambda ctx: None)

    def closure(ctx) -> None:
        pass

    with pytest.raises(ValueError, match="cannot run in a handler process"):
        worker.add_handler("job", closure)
    worker.add_handler("job", closure, isolation="thread")  # the per-handler override
    worker.add_handler("other", h.quick)
    with pytest.raises(ValueError, match="isolation must be one of thread, process"):
        Worker(["127.0.0.1:1"], isolation="fork", credentials=None)
