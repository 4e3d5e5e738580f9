"""Process isolation: Python handlers run in pre-started child processes the worker can kill.

A thread cannot be killed: a handler that ignores its cancellation keeps its thread and its
slot of the worker's concurrency for as long as it runs. Here each attempt runs in a child
process of a pool (one child per slot, started before the first lease, from the forkserver):

- the parent sends the handler's name (module + qualified name, see `handler_ref`) and the
  run context as plain data; the child imports the handler, rebuilds a RunContext, runs it as
  a thread-isolated worker would (`execute`, output captured) and sends back the Outcome;
- heartbeats stay in the parent. When the attempt is cancelled (deadline, lost lease, run
  cancelled, shutdown), the parent sets the child's `ctx.cancelled` (a message), sends
  SIGTERM to the child, which raises `HandlerTerminated` in the handler, waits `grace_s`, then
  SIGKILLs it. The slot frees once the child is gone. The child stays in the worker's process
  group (a SIGSTOP of the worker pauses its handlers too); processes a handler starts are its
  own to end;
- what the handler writes (stdout, stderr, log records) goes to the parent as it is written, in
  batches (at most one message per `FORWARD_EVERY_S`, each bounded by the capture's tails, and
  all of it when the attempt is cancelled), so
  an attempt killed at its deadline, or a child that crashed, still reports what it wrote;
- a cancelled attempt's child never serves another run: it exits, and a fresh one takes its
  place, as after a crash (a segfault, `os._exit`: a FAILURE naming the signal or exit code);
- `close()` stops every child, killing those that do not stop: no orphan is left. A child also
  exits when the worker dies (its pipe closes).

See docs/design/process-isolation.md for the figures (the cost per run) and the choices.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from worker._capture import Capture
from worker._context import RunContext
from worker._execution import AsyncLoopThread, Outcome, OutcomeKind, cancelled_outcome, execute, with_capture

__all__ = [
    "ISOLATIONS",
    "PROCESS",
    "THREAD",
    "HandlerRef",
    "check_isolation",
    "HandlerTerminated",
    "PoolDidNotStart",
    "ProcessPool",
    "handler_ref",
    "in_handler_process",
]

log = logging.getLogger("raftcron.worker")

HandlerRef = tuple[str, str]  # (module, qualified name)
THREAD, PROCESS = "thread", "process"
ISOLATIONS = (THREAD, PROCESS)
CHILD_NAME = "raftcron-handler"
# A child sends what its handler wrote at most this often: a quiet handler costs nothing, a
# chatty one ten messages a second, and a crash loses at most this long an end of its output.
FORWARD_EVERY_S = 0.1
_CONTEXT_FIELDS = ("job_id", "run_key", "scheduled_at", "fencing_token", "attempt", "deadline", "payload_json")


class PoolDidNotStart(RuntimeError):
    """A handler process died at its start (its error is on the worker's stderr)."""


class HandlerTerminated(BaseException):
    """Raised in a handler running in a child process when the worker terminates the attempt
    (SIGTERM): its `finally` blocks run, and the child then exits. A BaseException, so that
    `except Exception` in the handler does not swallow it."""


def check_isolation(isolation: str) -> str:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, got {isolation!r}")
    return isolation


def in_handler_process() -> bool:
    """True inside a pool's child process (a Worker must not start there)."""
    return multiprocessing.current_process().name.startswith(CHILD_NAME)


def handler_ref(handler: Callable[..., Any]) -> HandlerRef:
    """How a child process finds `handler`: its module and qualified name. Raises ValueError for
    what a child could not import by name (a lambda, a closure, a bound method, an object)."""
    module = getattr(handler, "__module__", None)
    qualname = getattr(handler, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        raise ValueError(f"{handler!r} has no module and name a handler process could import it by")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise ValueError(f"{module}.{qualname} is a lambda or a nested function, which a handler process cannot import")
    try:
        found = _resolve((module, qualname))
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{module}.{qualname} cannot be imported by name: {exc}") from None
    if found is not handler:
        raise ValueError(f"{module}.{qualname} names another object than this handler (a decorator's wrapper?)")
    return module, qualname


def _resolve(ref: HandlerRef) -> Any:
    module, qualname = ref
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def context_data(ctx: RunContext) -> dict[str, Any]:
    data = {name: getattr(ctx, name) for name in _CONTEXT_FIELDS}
    data.update(worker_id=ctx.worker_id, target=ctx.target)
    return data


class _Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, process: Any, conn: multiprocessing.connection.Connection) -> None:
        self.process = process
        self.conn = conn
        self.send_lock = threading.Lock()

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    def send(self, message: tuple) -> bool:
        with self.send_lock:
            try:
                self.conn.send(message)
                return True
            except (OSError, ValueError):  # the child is gone: its sentinel says so
                return False

    def signal_group(self, signum: int) -> None:
        # The child itself only: it stays in the worker's process group, so that what pauses or
        # stops the worker's group (SIGSTOP, a terminal) reaches its handlers too.
        try:
            os.kill(self.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def reap(self, timeout_s: float) -> bool:
        self.process.join(timeout_s)
        if self.process.is_alive():
            return False
        # The attempt's thread and the pool's close() may both reap a busy child: one close only,
        # or the second closes whatever file the descriptor number has become meanwhile.
        with self.send_lock:
            if not self.conn.closed:
                self.conn.close()
        return True


class ProcessPool:
    """`size` child processes running handlers (see the module docstring). `run` blocks the
    calling thread until the attempt ended and its child is done with it."""

    def __init__(
        self, size: int, grace_s: float = 5.0, modules: tuple[str, ...] = (), start_method: str = "forkserver"
    ) -> None:
        self.size = size
        self.grace_s = grace_s
        self._modules = modules  # imported at a child's start, so a first run does not pay for it
        self._mp: Any = multiprocessing.get_context(start_method)
        if start_method == "forkserver":
            self._mp.set_forkserver_preload(["worker._isolation"])
        self._idle: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        self._children: set[_Child] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the children and wait until each is ready. Raises RuntimeError if one dies."""
        children = [self._spawn() for _ in range(self.size)]
        stop_at = time.monotonic() + timeout_s
        for child in children:
            ready = child.conn.poll(max(0.0, stop_at - time.monotonic()))
            try:
                said = child.conn.recv() if ready else None
            except (EOFError, OSError):
                said = None
            if said != ("ready",):
                self.close(timeout_s=1.0)
                child.process.join(1.0)
                raise PoolDidNotStart(
                    f"a handler process did not start (exit code {child.process.exitcode}; its error is on "
                    "the worker's stderr). A script that starts a Worker must do so under "
                    "`if __name__ == '__main__':`, since each handler process imports it again"
                )
            self._idle.put(child)

    def pids(self) -> list[int]:
        """The children alive now."""
        with self._lock:
            return sorted(child.pid for child in self._children if child.process.is_alive())

    def _spawn(self) -> _Child:
        parent_end, child_end = self._mp.Pipe()
        process = self._mp.Process(
            target=_child_main,
            args=(child_end, self._modules, _log_setup()),
            name=CHILD_NAME,
            daemon=True,
        )
        process.start()
        child_end.close()
        child = _Child(process, parent_end)
        with self._lock:
            self._children.add(child)
        return child

    def _take(self) -> _Child:
        while True:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:  # a replacement is still starting: start one here
                return self._spawn()
            if child.process.is_alive():
                return child
            self._retire(child)  # died while idle (the OOM killer?): not this run's failure

    def _retire(self, child: _Child) -> None:
        """`child` is gone or going: reap it, and start its replacement off the caller's thread."""
        if not child.reap(self.grace_s):
            child.signal_group(signal.SIGKILL)
            child.reap(self.grace_s)
        with self._lock:
            self._children.discard(child)
            closed = self._closed
        if not closed:
            threading.Thread(target=self._refill, daemon=True, name="raftcron-pool-refill").start()

    def _refill(self) -> None:
        try:
            child = self._spawn()
        except Exception:  # noqa: BLE001 (the next run starts one itself)
            log.exception("could not start a handler process")
            return
        with self._lock:
            closed = self._closed
        if closed:
            self._stop_child(child)
        else:
            self._idle.put(child)

    def run(self, ref: HandlerRef, ctx: RunContext, capture: Capture | None = None) -> Outcome:
        """Run the handler `ref` for `ctx` in a child and return its Outcome. What the handler
        writes arrives in `capture` as it runs; it is the outcome's output if the child is killed
        or dies before it reports."""
        if self._closed:
            raise RuntimeError("the handler process pool is closed")
        capture = Capture() if capture is None else capture
        child = self._take()
        guard = threading.Lock()
        cancelled_at: list[float] = []
        finished = False

        def on_cancel() -> None:
            with guard:  # a cancel after the attempt ended must not reach the child's next run
                if finished:
                    return
                cancelled_at.append(time.monotonic())
            child.send(("cancel", str(ctx.cancel_reason)))
            child.signal_group(signal.SIGTERM)

        if not child.send(("run", ref, context_data(ctx))):
            self._retire(child)
            return _crashed(child, ctx)
        ctx.add_cancel_callback(on_cancel)
        outcome = self._wait(child, ctx, cancelled_at, capture)
        with guard:
            finished = True
        if outcome is not None and not cancelled_at and not ctx.is_cancelled():
            self._idle.put(child)
            return outcome
        self._retire(child)  # it exits after a cancelled attempt (or was killed, or crashed)
        if ctx.is_cancelled():
            return (
                cancelled_outcome(ctx, outcome)
                if outcome is not None
                else with_capture(cancelled_outcome(ctx), capture)
            )
        return outcome if outcome is not None else with_capture(_crashed(child, ctx), capture)

    def _wait(self, child: _Child, ctx: RunContext, cancelled_at: list[float], capture: Capture) -> Outcome | None:
        """The child's outcome, or None once it is gone without one (crashed, or killed here
        `grace_s` after the attempt was cancelled). Its output meanwhile goes to `capture`."""
        while True:
            wait_s = 0.2 if not cancelled_at else cancelled_at[0] + self.grace_s - time.monotonic()
            try:
                ready = multiprocessing.connection.wait(
                    [child.conn, child.process.sentinel], max(0.0, min(wait_s, 0.2))
                )
                has_message = child.conn in ready or (bool(ready) and child.conn.poll())
                message = child.conn.recv() if has_message else None
            except (EOFError, OSError, ValueError):  # gone, or closed by the pool's close()
                return None
            if message is not None:
                if message[0] == "output":
                    capture.extend(*message[1:])
                elif message[0] == "done":
                    return message[1]
                continue  # "ready": a refilled child that had not said so yet
            if ready:  # the sentinel: the child exited with nothing more to say
                return None
            if cancelled_at and time.monotonic() >= cancelled_at[0] + self.grace_s:
                log.warning(
                    "run %s: handler process %d still running %.1fs after SIGTERM: killing it",
                    ctx.run_key,
                    child.pid,
                    self.grace_s,
                )
                child.signal_group(signal.SIGKILL)
                return None

    def close(self, timeout_s: float | None = None) -> None:
        """Stop every child: idle ones are asked to exit, the rest (and stragglers) killed."""
        with self._lock:
            self._closed = True
            children = list(self._children)
        for child in children:
            child.send(("stop",))
        stop_at = time.monotonic() + (self.grace_s if timeout_s is None else timeout_s)
        for child in children:
            if not child.reap(max(0.0, stop_at - time.monotonic())):
                child.signal_group(signal.SIGKILL)
                child.reap(1.0)
        with self._lock:
            self._children.clear()

    def _stop_child(self, child: _Child) -> None:
        child.send(("stop",))
        if not child.reap(self.grace_s):
            child.signal_group(signal.SIGKILL)
            child.reap(1.0)


def _crashed(child: _Child, ctx: RunContext) -> Outcome:
    """A child that died in the middle of an attempt nobody cancelled: how it died is the error."""
    code = child.process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        log.warning("run %s: handler process %d killed by %s", ctx.run_key, child.pid, name)
        return Outcome(OutcomeKind.FAILURE, f"handler process killed by {name}", exit_code=128 - code)
    log.warning("run %s: handler process %d exited with code %s", ctx.run_key, child.pid, code)
    return Outcome(OutcomeKind.FAILURE, f"handler process exited with code {code}", exit_code=code or 0)


# -- the child ------------------------------------------------------------------------------------
class _Forwarding(Capture):
    """A child's capture of one attempt: all of it for the outcome, and, apart, what was written
    since the last batch sent to the parent (bounded like any capture)."""

    def __init__(self, wake: threading.Event) -> None:
        super().__init__()
        self.unsent = Capture()
        self._wake = wake

    def write(self, stream: str, text: str) -> None:
        super().write(stream, text)
        self.unsent.write(stream, text)
        self._wake.set()


class _ChildState:
    def __init__(self, conn: multiprocessing.connection.Connection) -> None:
        self.conn = conn
        self.ctx: RunContext | None = None
        self.running = False  # the handler is running on the main thread: SIGTERM raises there
        self.terminated = False
        self.wake = threading.Event()  # something was written
        self.capture: _Forwarding | None = None
        # Held by every send but "ready": a batch of an attempt never follows its "done".
        self.send_lock = threading.Lock()

    def forward(self) -> None:
        """Send the current attempt's unsent output. Never called on the main thread: SIGTERM
        raises there, and must not cut a message in half."""
        with self.send_lock:
            taken = self.capture.unsent.take() if self.capture is not None else None
            if taken is not None:
                self.conn.send(("output", *taken))

    def send_done(self, outcome: Outcome) -> None:
        with self.send_lock:
            self.capture = None
            self.conn.send(("done", outcome))


def _forward_output(state: _ChildState) -> None:
    """Send a write at once after a quiet spell, and the writes that follow it in one batch per
    `FORWARD_EVERY_S`: a crash right after a lone line still reports it, a chatty handler costs
    a few messages a second."""
    while True:
        state.wake.wait()
        state.wake.clear()
        try:
            state.forward()
        except (OSError, ValueError):  # the worker is gone: the reader thread ends the process
            return
        time.sleep(FORWARD_EVERY_S)


def _log_setup() -> tuple[int, bool]:
    """The worker's log level, and whether it prints log records (a child then prints its own)."""
    root = logging.getLogger()
    return root.getEffectiveLevel(), bool(root.handlers)


def _child_main(
    conn: multiprocessing.connection.Connection, modules: tuple[str, ...], log_setup: tuple[int, bool]
) -> None:
    level, prints = log_setup
    if prints:
        logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    else:
        logging.getLogger().setLevel(level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the worker's to handle: it drains
    state = _ChildState(conn)
    runs: queue.SimpleQueue[tuple | None] = queue.SimpleQueue()

    def on_sigterm(_signum: int, _frame: object) -> None:
        state.terminated = True
        if state.running:
            raise HandlerTerminated("terminated by the worker")
        os._exit(0)  # idle, or done: nothing to clean up

    signal.signal(signal.SIGTERM, on_sigterm)
    for module in modules:
        try:
            importlib.import_module(module)
        except BaseException:  # noqa: BLE001 (the run that needs it reports the error)
            pass
    conn.send(("ready",))
    threading.Thread(target=_read_messages, args=(conn, state, runs), daemon=True).start()
    threading.Thread(target=_forward_output, args=(state,), daemon=True).start()
    loop = AsyncLoopThread()
    while (message := runs.get()) is not None:
        _, ref, data = message
        outcome = _run_one(ref, data, state, loop)
        state.send_done(outcome)
        if state.ctx is not None and state.ctx.is_cancelled() or state.terminated:
            break  # a cancelled attempt's process serves no other run
        state.ctx = None
    os._exit(0)


def _read_messages(conn: multiprocessing.connection.Connection, state: _ChildState, runs: queue.SimpleQueue) -> None:
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the worker is gone: so is its handler process
            os._exit(1)
        if message[0] == "run":
            runs.put(message)
        elif message[0] == "cancel":
            if state.ctx is not None:
                state.ctx.cancel(message[1])
            try:
                state.forward()  # what it wrote up to now, before a deaf handler is killed
            except (OSError, ValueError):
                os._exit(1)
        else:  # stop
            runs.put(None)
            return


def _run_one(ref: HandlerRef, data: dict[str, Any], state: _ChildState, loop: AsyncLoopThread) -> Outcome:
    scheduled_at: datetime = data["scheduled_at"]
    ctx = RunContext(**{**data, "scheduled_at": scheduled_at})
    state.ctx = ctx
    try:
        handler = _resolve(ref)
    except BaseException as exc:  # noqa: BLE001 (an import that fails here fails the run)
        text = f"handler {ref[0]}.{ref[1]} does not load in the handler process: {type(exc).__name__}: {exc}"
        return Outcome(OutcomeKind.FAILURE, text, exception_type=type(exc).__name__)
    state.capture = _Forwarding(state.wake)
    state.running = True
    try:
        return execute(handler, ctx, loop, state.capture)
    except HandlerTerminated:  # raised past execute, between its own steps
        return cancelled_outcome(ctx) if ctx.is_cancelled() else Outcome(OutcomeKind.FAILURE, "terminated")
    finally:
        state.running = False
