"""Leadership as a lifecycle: win the election, commit ClaimLeadership (the barrier and the
epoch), start the loops; lose it, stop them. Never a boolean polled by the loops."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core.commands import ClaimLeadership
from scheduler.core.results import LeadershipClaimed
from scheduler.leader.clock import LeaderClock, monotonic_us
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.leader")


@dataclass
class LeaderTerm:
    """What a loop needs to act as leader: the epoch to stamp on commands and a stop signal."""

    epoch: int
    term: int
    clock: LeaderClock
    stopping: threading.Event = field(default_factory=threading.Event)
    # Loops that serve requests (the dispatcher) register here for the servicers to find.
    services: dict = field(default_factory=dict)
    # Also set when the term ends, for loops that wait on an event of their own.
    wakes_on_depose: list[threading.Event] = field(default_factory=list)

    def depose(self, why: str) -> None:
        if not self.stopping.is_set():
            log.warning("epoch %d ends: %s", self.epoch, why)
        self.stopping.set()
        for event in self.wakes_on_depose:
            event.set()


LoopFactory = Callable[[LeaderTerm], Callable[[], None]]


class LeaderLifecycle:
    def __init__(
        self,
        raftlog: RaftLog,
        node_id: str,
        loops: list[tuple[str, LoopFactory]],
        clock_us: Callable[[], int],
        claim_timeout_s: float = 5.0,
        mono_us: Callable[[], int] = monotonic_us,
    ) -> None:
        self._mono_us = mono_us
        self._raftlog = raftlog
        self._node_id = node_id
        self._loops = loops
        self._clock_us = clock_us
        self._claim_timeout_s = claim_timeout_s
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._current: LeaderTerm | None = None
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._run, name="leader-lifecycle", daemon=True)
        raftlog.add_role_listener(self._wake.set)

    @property
    def current(self) -> LeaderTerm | None:
        return self._current

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=10)
        self._stop_loops("node shutting down")

    def _run(self) -> None:
        while not self._closed.is_set():
            # Role changes wake us at once; the timeout also notices a deposed loop or a new term.
            self._wake.wait(0.1)
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                self._step()
            except Exception:  # a bug here must not silently end leadership handling
                log.exception("leader lifecycle step failed")

    def _step(self) -> None:
        leading, term = self._raftlog.is_leader(), self._raftlog.term
        current = self._current
        if current is not None and (not leading or current.term != term or current.stopping.is_set()):
            self._stop_loops("raft leadership lost" if not leading else "term changed or loop deposed")
            current = None
        if leading and current is None:
            self._become_leader(term)

    def _become_leader(self, term: int) -> None:
        command = ClaimLeadership(self._clock_us(), self._node_id, term, monotonic_us=self._mono_us())
        try:
            result = self._raftlog.submit(command, self._claim_timeout_s)
        except ReplicationError as exc:
            log.warning("could not claim leadership for term %d: %r", term, exc)
            return
        if not result.accepted:
            log.warning("leadership claim rejected: %s", result.rejection.message)
            return
        claimed = next(e for e in result.events if isinstance(e, LeadershipClaimed))
        # The future resolves after the local apply of our entry, so every earlier entry is
        # applied here too: the loops start from complete state (the barrier).
        with self._raftlog.read() as state:
            clock = LeaderClock(
                state.clock_anchor_now_us, state.clock_anchor_mono_us, self._clock_us, self._mono_us, self._anchor
            )
        self._current = LeaderTerm(epoch=claimed.epoch, term=term, clock=clock)
        log.info("leading: term %d, epoch %d", term, claimed.epoch)
        for name, factory in self._loops:
            thread = threading.Thread(target=factory(self._current), name=f"{name}-e{claimed.epoch}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _anchor(self) -> tuple[int, int]:
        with self._raftlog.read() as state:
            return state.clock_anchor_now_us, state.clock_anchor_mono_us

    def _stop_loops(self, why: str) -> None:
        if self._current is not None:
            self._current.depose(why)
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []
        self._current = None
