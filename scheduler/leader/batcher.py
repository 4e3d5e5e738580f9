"""Coalesce many small requests (heartbeats, completions) into one log entry.

Callers submit items and wait on a future; one flusher thread proposes every
pending item as a single command, then hands each caller the event at its
position (the core returns exactly one event per item, in order). A batch stops
at `max_items` items or `max_bytes` of encoded items, whichever comes first, so
large items (completions with long error texts) never add up to an entry the
log refuses: one caller's large items cannot fail another caller's batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import msgspec

from scheduler.core import Command
from scheduler.replication import RaftLog, ReplicationError
from scheduler.replication.raftlog import MAX_ENTRY_BYTES

log = logging.getLogger("raftcron.batcher")


class Coalescer:
    def __init__(
        self,
        name: str,
        raftlog: RaftLog,
        make_command: Callable[[Sequence[object]], Command],
        timeout_s: float,
        max_items: int = 2000,
        linger_s: float = 0.002,
        max_bytes: int = MAX_ENTRY_BYTES // 2,
    ) -> None:
        self._raftlog = raftlog
        self._make_command = make_command
        self._timeout_s = timeout_s
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._linger_s = linger_s
        self._pending: list[tuple[object, Future, int]] = []  # item, its caller's future, its encoded size
        self._lock = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"coalesce-{name}", daemon=True)
        self._thread.start()

    def submit(self, items: Sequence[object]) -> list[Future]:
        futures = [Future() for _ in items]
        sizes = [len(msgspec.msgpack.encode(item)) for item in items]  # in the caller's thread
        with self._lock:
            if self._closed:
                raise RuntimeError("coalescer closed")
            self._pending.extend(zip(items, futures, sizes))
            self._lock.notify()
        return futures

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join(timeout=5)

    def _take(self) -> list[tuple[object, Future]]:
        with self._lock:
            while not self._pending and not self._closed:
                self._lock.wait()
            if self._closed and not self._pending:
                return []
        # A short linger lets concurrent callers join the same entry.
        threading.Event().wait(self._linger_s)
        with self._lock:
            taken, total = 0, 0
            for _, _, size in self._pending[: self._max_items]:
                if taken and total + size > self._max_bytes:
                    break
                taken, total = taken + 1, total + size
            batch, self._pending = self._pending[:taken], self._pending[taken:]
        return [(item, future) for item, future, _ in batch]

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            items = [item for item, _ in batch]
            try:
                result = self._raftlog.submit(self._make_command(items), self._timeout_s)
            except ReplicationError as exc:
                for _, future in batch:
                    future.set_exception(exc)
                continue
            except Exception as exc:  # a bug: fail the callers loudly rather than hang them
                log.exception("coalesced proposal failed")
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for position, (_, future) in enumerate(batch):
                if not result.accepted:
                    future.set_exception(RejectedBatch(result.rejection.code, result.rejection.message))
                else:
                    future.set_result(result.events[position])


class RejectedBatch(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
