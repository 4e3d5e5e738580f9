"""Threads the worker reuses: daemon threads that run attempts, and one watcher for every
attempt's deadline.

A worker at full speed runs thousands of attempts a second. A new thread per attempt, plus a
`threading.Timer` (another thread) per deadline, cost more CPU than the no-op handler, the
lease and the completion together, half of it in the kernel (clone, stack mapping, futexes).

`concurrent.futures.ThreadPoolExecutor` is not used for attempts: its threads are joined at
interpreter exit, so one handler that ignores cancellation would keep a stopped worker's
process alive. These threads are daemons, as the per-attempt threads were.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable

__all__ = ["DeadlineWatcher", "HandlerThreads"]

log = logging.getLogger("raftcron.worker")


class HandlerThreads:
    """Runs each submitted call on an idle thread, or on a new one when none is idle.

    The caller bounds how many calls run at once (the worker's lease table does); a thread idle
    for `idle_exit_s` ends, so a burst does not leave its threads behind. Each call runs in an
    empty `contextvars` context (thread-local data, as in any pool, outlives the call).
    """

    def __init__(self, name: str = "raftcron-run", idle_exit_s: float = 60.0) -> None:
        self._name = name
        self._idle_exit_s = idle_exit_s
        self._calls: queue.SimpleQueue[tuple[Callable[..., object], tuple]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for a call, no call promised to them yet
        self._alive = 0
        self._numbers = itertools.count(1)

    def submit(self, function: Callable[..., object], *args: object) -> None:
        with self._lock:
            idle_thread_will_take_it = self._idle > 0
            if idle_thread_will_take_it:
                self._idle -= 1
            else:
                self._alive += 1
        self._calls.put((function, args))
        if not idle_thread_will_take_it:
            threading.Thread(target=self._serve, daemon=True, name=f"{self._name}-{next(self._numbers)}").start()

    @property
    def idle(self) -> int:
        with self._lock:
            return self._idle

    @property
    def busy(self) -> int:
        """Threads running a call (or about to)."""
        with self._lock:
            return self._alive - self._idle

    def _serve(self) -> None:
        while True:
            try:
                function, args = self._calls.get(timeout=self._idle_exit_s)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody counts on this thread: end it
                        self._idle -= 1
                        self._alive -= 1
                        return
                continue  # a call was promised to an idle thread, maybe this one: take it
            try:
                # An empty context per call, as a new thread had: a context variable one
                # handler sets is not seen by the next attempt this thread runs.
                contextvars.Context().run(function, *args)
            except BaseException:  # noqa: BLE001 (the caller's own handling failed; keep serving)
                log.exception("unexpected error in a worker thread")
            with self._lock:
                self._idle += 1


class _Deadline:
    __slots__ = ("at_s", "action", "cancelled", "_watcher")

    def __init__(self, at_s: float, action: Callable[[], object], watcher: DeadlineWatcher) -> None:
        self.at_s = at_s
        self.action: Callable[[], object] | None = action  # None once called
        self.cancelled = False
        self._watcher = watcher

    def cancel(self) -> None:
        self._watcher._cancel(self)


class DeadlineWatcher:
    """Calls each armed action at its monotonic instant unless cancelled first; one thread,
    started at the first `arm`. Actions must be quick: they run on the watcher's thread."""

    def __init__(self, name: str = "raftcron-deadlines") -> None:
        self._name = name
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._cancelled = 0  # cancelled entries still in the heap
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, delay_s: float, action: Callable[[], object]) -> _Deadline:
        """`action()` in `delay_s` seconds (at once if not positive); `.cancel()` the result to
        call it off."""
        deadline = _Deadline(time.monotonic() + max(0.0, delay_s), action, self)
        with self._cond:
            earliest = not self._heap or deadline.at_s < self._heap[0][0]
            heapq.heappush(self._heap, (deadline.at_s, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True, name=self._name)
                self._thread.start()
            elif earliest:
                self._cond.notify()
        return deadline

    def pending(self) -> int:
        """Armed actions not yet called nor cancelled."""
        with self._cond:
            return len(self._heap) - self._cancelled

    def held(self) -> int:
        """Entries kept, cancelled ones included: stays within about twice `pending()`."""
        with self._cond:
            return len(self._heap)

    def _cancel(self, deadline: _Deadline) -> None:
        with self._cond:
            if deadline.cancelled or deadline.action is None:  # already cancelled, or called
                return
            deadline.cancelled = True
            self._cancelled += 1
            # Most attempts end long before their deadline: without this sweep the heap would
            # keep every finished attempt of the last hour (the default timeout).
            if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _watch(self) -> None:
        while True:
            with self._cond:
                due = self._next_due_locked()
                action, due.action = due.action, None
            if action is None:  # never: only armed deadlines are handed out
                continue
            try:
                action()
            except Exception:  # noqa: BLE001 (one failing action must not end every deadline)
                log.exception("unexpected error in a deadline action")

    def _next_due_locked(self) -> _Deadline:
        while True:
            while self._heap and self._heap[0][2].cancelled:
                heapq.heappop(self._heap)
                self._cancelled -= 1
            if not self._heap:
                self._cond.wait()
                continue
            wait_s = self._heap[0][0] - time.monotonic()
            if wait_s <= 0:
                return heapq.heappop(self._heap)[2]
            self._cond.wait(wait_s)
