"""What the leader learns about workers from their calls: in memory, bounded, expiring.

    registry = WorkerRegistry()                       # one per node; only the leader's fills
    registry.leased("ops/w1", ["payroll.run"], "ipv4:10.0.0.7:51234")
    registry.heartbeat("ops/w1", leases=3, peer="ipv4:10.0.0.7:51234")
    registry.workers()                                # -> [WorkerSeen], most recently seen first

A worker is known by the holder name its leases are recorded under (`PRINCIPAL/WORKER_ID`,
policy.lease_holder). Nothing here is replicated: it is what this process heard, lost on a
restart or a leader change and rebuilt within one lease poll (docs/design/worker-registry.md).
A worker silent for `expire_after_us` is dropped; past `max_workers` the least recently seen
one is, so a caller inventing worker ids costs bounded memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from scheduler.leader.dispatch import leased_queues

MAX_WORKERS = 2048
# Workers long-poll Lease every few seconds while idle and heartbeat while busy: two minutes of
# silence means the worker is gone (or talks to another node, which is no longer the leader).
EXPIRE_AFTER_US = 120 * 1_000_000
MAX_TARGETS_KEPT = 32


@dataclass(frozen=True)
class WorkerSeen:
    holder: str  # PRINCIPAL/WORKER_ID, as its leases are recorded
    targets: tuple[str, ...]  # what its latest Lease asked for; () = every target
    peer: str  # the client address of its latest call
    first_seen_us: int
    last_seen_us: int
    last_lease_us: int  # 0: only heartbeats heard (e.g. it leased from the previous leader)
    last_heartbeat_us: int
    leases_in_heartbeat: int  # how many leases its latest heartbeat carried

    def serves(self, target: str) -> bool:
        """Whether its Lease calls draw from `target`'s queue (dispatch.leased_queues)."""
        if self.last_lease_us == 0:
            return False
        return target in leased_queues(list(self.targets), [target])


class WorkerRegistry:
    def __init__(
        self,
        clock_us: Callable[[], int] | None = None,
        max_workers: int = MAX_WORKERS,
        expire_after_us: int = EXPIRE_AFTER_US,
    ) -> None:
        self._clock_us = clock_us or (lambda: time.time_ns() // 1000)
        self._max_workers = max_workers
        self._expire_after_us = expire_after_us
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, WorkerSeen] = OrderedDict()  # least recently seen first
        self.evicted = 0  # dropped to stay within max_workers (not counting expiry)

    def leased(self, holder: str, targets: Iterable[str], peer: str = "") -> None:
        now_us = self._clock_us()
        kept = tuple(sorted(set(targets)))[:MAX_TARGETS_KEPT]
        self._touch(holder, now_us, peer, targets=kept, last_lease_us=now_us)

    def heartbeat(self, holder: str, leases: int, peer: str = "") -> None:
        now_us = self._clock_us()
        self._touch(holder, now_us, peer, last_heartbeat_us=now_us, leases_in_heartbeat=leases)

    def _touch(self, holder: str, now_us: int, peer: str, **changes) -> None:
        with self._lock:
            known = self._seen.pop(holder, None)
            if known is None:
                known = WorkerSeen(holder, (), peer, now_us, now_us, 0, 0, 0)
            self._seen[holder] = replace(known, peer=peer or known.peer, last_seen_us=now_us, **changes)
            self._expire(now_us)
            while len(self._seen) > self._max_workers:
                self._seen.popitem(last=False)
                self.evicted += 1

    def _expire(self, now_us: int) -> None:
        while self._seen:
            oldest = next(iter(self._seen.values()))
            if now_us - oldest.last_seen_us <= self._expire_after_us:
                return
            self._seen.popitem(last=False)

    def workers(self) -> list[WorkerSeen]:
        """The workers heard from within the expiry, most recently seen first."""
        with self._lock:
            self._expire(self._clock_us())
            return list(reversed(self._seen.values()))

    def serving(self, target: str) -> list[WorkerSeen]:
        """The live workers whose Lease calls draw from `target`'s queue."""
        return [worker for worker in self.workers() if worker.serves(target)]
