"""Coalesce many small requests (heartbeats, completions) into one log entry.

Callers submit items and wait on their Submission; one flusher thread proposes
every pending item as a single command, then hands each caller the events at its
items' positions (the core returns exactly one event per item, in order). A batch
stops at `max_items` items or `max_bytes` of encoded items, whichever comes first,
so large items (completions with long error texts) never add up to an entry the
log refuses: one caller's large items cannot fail another caller's batch.

A Submission is one wait for all of a call's items: a Future per item cost the
leader more than the core's work on that item (each builds a Condition and a lock).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import msgspec

from scheduler.core import Command
from scheduler.replication import RaftLog, ReplicationError
from scheduler.replication.raftlog import MAX_ENTRY_BYTES

log = logging.getLogger("raftcron.batcher")


class Submission:
    """The events of one `submit` call's items, in order, once every entry holding them is
    decided. Its items may be split over several entries: if one of them fails, `result`
    raises that entry's error (some of the other items may have been committed)."""

    __slots__ = ("_events", "_error", "_left", "_done")

    def __init__(self, size: int) -> None:
        self._events: list[object] = [None] * size
        self._error: BaseException | None = None
        self._left = size
        self._done = threading.Event()
        if not size:
            self._done.set()

    def result(self, timeout_s: float | None = None) -> list[object]:
        """The events; raises the failed entry's error, or TimeoutError after `timeout_s`."""
        if not self._done.wait(timeout_s):
            raise TimeoutError("the entry holding these items was not decided in time")
        if self._error is not None:
            raise self._error
        return self._events

    # Only the flusher thread settles a submission, so `_left` needs no lock.
    def _settle(self, position: int, event: object = None, error: BaseException | None = None) -> None:
        if error is not None and self._error is None:
            self._error = error
        self._events[position] = event
        self._left -= 1
        if not self._left:
            self._done.set()


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
        self._pending: list[
            tuple[object, Submission, int, int]
        ] = []  # item, its submission, position there, encoded size
        self._lock = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"coalesce-{name}", daemon=True)
        self._thread.start()

    def submit(self, items: Sequence[object]) -> Submission:
        submission = Submission(len(items))
        encode = msgspec.msgpack.encode
        pending = [
            (item, submission, position, len(encode(item))) for position, item in enumerate(items)
        ]  # sized in the caller's thread
        with self._lock:
            if self._closed:
                raise RuntimeError("coalescer closed")
            self._pending.extend(pending)
            self._lock.notify()
        return submission

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join(timeout=5)

    def _take(self) -> list[tuple[object, Submission, int, int]]:
        with self._lock:
            while not self._pending and not self._closed:
                self._lock.wait()
            if self._closed and not self._pending:
                return []
        # A short linger lets concurrent callers join the same entry.
        threading.Event().wait(self._linger_s)
        with self._lock:
            taken, total = 0, 0
            for *_, size in self._pending[: self._max_items]:
                if taken and total + size > self._max_bytes:
                    break
                taken, total = taken + 1, total + size
            batch, self._pending = self._pending[:taken], self._pending[taken:]
        return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            try:
                result = self._raftlog.submit(self._make_command([item for item, *_ in batch]), self._timeout_s)
            except ReplicationError as exc:
                _settle_all(batch, exc)
                continue
            except Exception as exc:  # a bug: fail the callers loudly rather than hang them
                log.exception("coalesced proposal failed")
                _settle_all(batch, exc)
                continue
            if not result.accepted:
                _settle_all(batch, RejectedBatch(result.rejection.code, result.rejection.message))
                continue
            if len(result.events) != len(batch):  # a core bug: fail the callers, keep the flusher
                log.error("coalesced entry %d: %d events for %d items", result.index, len(result.events), len(batch))
                _settle_all(
                    batch,
                    RuntimeError(f"entry {result.index} answered {len(result.events)} events for {len(batch)} items"),
                )
                continue
            for event, (_, submission, position, _) in zip(result.events, batch):
                submission._settle(position, event)


def _settle_all(batch: list[tuple[object, Submission, int, int]], error: BaseException) -> None:
    for _, submission, position, _ in batch:
        submission._settle(position, error=error)


class RejectedBatch(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
