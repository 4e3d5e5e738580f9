"""`StatusPoller`: a thread polling one node's Status at a fixed period, remembering when each
answer was sent and received, so "when was index I applied on the leader" can be read back."""

from __future__ import annotations

import threading
import time

import grpc

from scheduler.local import LocalCluster


class StatusPoller:
    """Polls one node's Status every `period_s` in a thread; keeps (sent, received, status) samples."""

    def __init__(self, cluster: LocalCluster, node_id: str, period_s: float = 0.005, max_s: float = 900.0) -> None:
        self.node_id = node_id
        self._client = cluster.client(node_id, timeout_s=2.0)
        self._address = cluster.member(node_id).grpc_address
        self._period_s = period_s
        self._max_s = max_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.samples: list[tuple[float, float, object]] = []
        self.errors = 0
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"poll-{node_id}")

    def start(self) -> StatusPoller:
        self._thread.start()
        return self

    def _loop(self) -> None:
        stop_at = time.monotonic() + self._max_s
        while not self._stop.is_set() and time.monotonic() < stop_at:
            sent = time.time()
            try:
                status = self._client.status(address=self._address)
            except grpc.RpcError:
                self.errors += 1
                self._stop.wait(0.05)
                continue
            except ValueError:  # closed
                return
            with self._lock:
                self.samples.append((sent, time.time(), status))
            left = self._period_s - (time.time() - sent)
            if left > 0:
                self._stop.wait(left)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._client.close()

    def snapshot(self) -> list[tuple[float, float, object]]:
        with self._lock:
            return list(self.samples)

    def time_when(self, predicate) -> float | None:
        """Estimated wall time at which `predicate(status)` first held: the midpoint between the
        last poll sent that did not see it and the answer of the first that did."""
        previous_sent = None
        for sent, received, status in self.snapshot():
            if predicate(status):
                return received if previous_sent is None else (previous_sent + received) / 2
            previous_sent = sent
        return None

    def applied_times(self) -> list[tuple[float, int]]:
        """(estimated time, applied_index) steps, for `time_of_index`."""
        steps, previous_sent, last = [], None, -1
        for sent, received, status in self.snapshot():
            if status.applied_index > last:
                when = received if previous_sent is None else (previous_sent + received) / 2
                steps.append((when, status.applied_index))
                last = status.applied_index
            previous_sent = sent
        return steps

    def max_gap_s(self, start: float, end: float) -> float:
        """The longest interval between two answers received within [start, end]."""
        times = [r for _, r, _ in self.snapshot() if start <= r <= end]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


def index_times(steps: list[tuple[float, int]]):
    """A function: log index -> estimated time the polled node had applied it (None if never)."""
    import bisect

    indexes = [i for _, i in steps]

    def when(index: int) -> float | None:
        pos = bisect.bisect_left(indexes, index)
        return steps[pos][0] if pos < len(steps) else None

    return when
