"""The trigger loop: sleep until the earliest due slot, claim every due run key in batches.

It keeps a heap of (next_due_us, job_id) built from replicated state when the
epoch starts (each job's next due instant is replicated, so nothing is
recomputed), refreshed from apply notifications when jobs change.
"""

from __future__ import annotations

import heapq
import logging
import threading

import msgspec

from scheduler.core.commands import ApplyJobs, ClaimRuns, SetJobPaused, SlotClaim
from scheduler.core.model import SECOND_US
from scheduler.core.results import ClaimOutOfPlan
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.leader.planner import plan_due_slots
from scheduler.planning import ScheduleError
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.trigger")

# Upper bound of slots one job may account for in one pass (an every-second job after a long outage).
MAX_SLOTS_PER_JOB_PASS = 10_000
# Upper bound of claims in flight per pass: bounds memory and the time to notice deposition.
MAX_CLAIMS_PER_PASS = 50_000


class TriggerLoop:
    def __init__(
        self,
        term: LeaderTerm,
        raftlog: RaftLog,
        batch_size: int,
        max_sleep_s: float,
        propose_timeout_s: float,
        herd_window_us: int = 0,
    ) -> None:
        self._herd_window_us = herd_window_us
        self._term = term
        self._raftlog = raftlog
        self._clock = term.clock
        self._batch_size = batch_size
        self._max_sleep_s = max_sleep_s
        self._propose_timeout_s = propose_timeout_s
        self._heap: list[tuple[int, str]] = []
        self._due: dict[str, int] = {}  # the heap entry that is current for each job
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        self._wake = threading.Event()

    # -- apply notifications (tick thread: cheap, non-blocking) ----------
    def _on_apply(self, command, result) -> None:
        if isinstance(command, ApplyJobs):
            ids = [u.spec.id for u in command.upserts] + list(command.removals)
        elif isinstance(command, SetJobPaused):
            ids = [command.job_id]
        else:
            return
        with self._changed_lock:
            self._changed.update(ids)
        self._wake.set()

    def __call__(self) -> None:
        self._raftlog.add_apply_listener(self._on_apply)
        try:
            self._load_all()
            while not self._term.stopping.is_set():
                self._refresh_changed()
                if not self._claim_due():
                    self._sleep_until_due()
        except Exception:
            log.exception("trigger loop failed; giving up this epoch")
            self._term.depose("trigger loop failed")
        finally:
            self._raftlog.remove_apply_listener(self._on_apply)

    # -- the due queue -----------------------------------------------------
    def _track(self, job_id: str, next_due_us: int) -> None:
        if next_due_us and self._due.get(job_id) != next_due_us:
            self._due[job_id] = next_due_us
            heapq.heappush(self._heap, (next_due_us, job_id))
        elif not next_due_us:
            self._due.pop(job_id, None)

    def _load_all(self) -> None:
        with self._raftlog.read() as state:
            for job_id, job in state.jobs.items():
                self._track(job_id, job.next_due_us)
        log.info("trigger loop ready with %d scheduled jobs", len(self._due))

    def _refresh_changed(self) -> None:
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        if not changed:
            return
        with self._raftlog.read() as state:
            for job_id in changed:
                job = state.jobs.get(job_id)
                self._track(job_id, job.next_due_us if job else 0)

    def _pop_due(self, now_us: int) -> list[str]:
        due_ids = []
        while self._heap and self._heap[0][0] <= now_us:
            due_us, job_id = heapq.heappop(self._heap)
            if self._due.get(job_id) == due_us:  # otherwise a stale entry, superseded
                del self._due[job_id]
                due_ids.append(job_id)
        return due_ids

    def _sleep_until_due(self) -> None:
        wait_s = self._max_sleep_s
        if self._heap:
            wait_s = min(wait_s, max(0.0, (self._heap[0][0] - self._clock.now_us()) / SECOND_US))
        self._wake.wait(wait_s)
        self._wake.clear()

    # -- claiming ------------------------------------------------------------
    def _claim_due(self) -> bool:
        """Claim everything due now; False when nothing was due.

        Job records are copied under the state lock (cheap); planning runs outside it, and
        each batch is proposed as soon as it is planned, so applies and reads never wait
        for the planning of a large herd and the first keys commit early.
        """
        now_us, mono_us = self._clock.read()
        due_ids = self._pop_due(now_us)
        if not due_ids:
            return False
        with self._raftlog.read() as state:
            jobs = [msgspec.structs.replace(job) for job_id in due_ids if (job := state.jobs.get(job_id)) is not None]
        futures, batch, planned = [], [], 0
        for job in jobs:
            if planned >= MAX_CLAIMS_PER_PASS:
                break
            try:
                slots = plan_due_slots(job, now_us, MAX_SLOTS_PER_JOB_PASS, self._herd_window_us)
            except ScheduleError as exc:  # validated at apply time, so a bug if it happens
                log.error("job %s: cannot plan its schedule: %s", job.spec.id, exc)
                continue
            planned += len(slots)
            batch.extend(slots)
            while len(batch) >= self._batch_size:
                futures.append(self._propose(batch[: self._batch_size], now_us, mono_us))
                batch = batch[self._batch_size :]
        if batch:
            futures.append(self._propose(batch, now_us, mono_us))
        self._await(futures)
        # Re-read every touched job: its next due now comes from replicated state, whatever happened.
        with self._changed_lock:
            self._changed.update(due_ids)
        return True

    def _propose(self, claims: list[SlotClaim], now_us: int, mono_us: int):
        return self._raftlog.propose(ClaimRuns(now_us, self._term.epoch, tuple(claims), monotonic_us=mono_us))

    def _await(self, futures) -> None:
        not_due = 0
        for future in futures:
            try:
                result = future.result(timeout=self._propose_timeout_s)
            except (ReplicationError, TimeoutError) as exc:
                # Outcome unknown; claims are idempotent by run key, so the next pass re-plans from state.
                log.warning("claim batch not confirmed: %r", exc)
                self._term.stopping.wait(0.05)
                continue
            if not result.accepted:
                if result.rejection.code == "stale_epoch":
                    self._term.depose(result.rejection.message)
                    return
                log.error("claim batch rejected: %s", result.rejection.message)
            not_due += sum(isinstance(e, ClaimOutOfPlan) and e.reason == "not_due_yet" for e in result.events)
        if not_due:
            # The core judged these slots early (its time is behind this clock): look again shortly, not at once.
            log.warning("%d claims not due yet in replicated time; retrying shortly", not_due)
            self._term.stopping.wait(0.05)
