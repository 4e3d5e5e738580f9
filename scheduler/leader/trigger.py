"""The trigger loop: sleep until the earliest due slot, claim every due run key in batches.

It keeps a due index (jobs by next due instant) built from replicated state when the
epoch starts (each job's next due instant is replicated, so nothing is recomputed),
refreshed from apply notifications when jobs change.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from dataclasses import dataclass

import msgspec
from msgspec import UNSET

from scheduler.core.commands import NO_SCHEDULE_INDEX, ApplyJobs, ClaimRuns, RunRef, SetJobPaused, SlotClaim
from scheduler.core.model import SECOND_US, Job
from scheduler.core.results import ClaimOutOfPlan
from scheduler.core.vocabulary import OutOfPlan, RejectionCode
from scheduler.leader.due_index import DueIndex
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.leader.planner import claim_instant_us, plan_calendar_due_slots, plan_job_slots
from scheduler.planning import ScheduleError
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.trigger")

# Upper bound of slots one job may account for in one pass (an every-second job after a long outage).
MAX_SLOTS_PER_JOB_PASS = 10_000
# Upper bound of claims in flight per pass: bounds memory (about 10 MB of entries) and the time
# to notice deposition. A herd above it takes more passes, each planned at its own time.
MAX_CLAIMS_PER_PASS = 200_000
# How long before a due instant the loop plans that instant's claims, so that at the instant it
# only checks and proposes them: planning 100,000 pinned jobs takes about 0.5 s on one core,
# which would otherwise come after the instant (docs/design/claims-planned-ahead.md).
PLAN_AHEAD_US = 2 * SECOND_US
# A new leader's first pass indexes only the jobs due within this, and claims them before it
# indexes the rest (`_load_all`).
FIRST_PASS_HORIZON_US = SECOND_US
# The rest is indexed this many jobs at a time, a pass between chunks, so that a job due within
# the horizon is claimed at its instant rather than after the last chunk: a million jobs took
# 0.3-0.4 s to index, and a chunk takes 10-20 ms (docs/design/new-leader-first-pass.md).
DEFERRED_CHUNK_JOBS = 50_000


@dataclass
class _PlannedAhead:
    """The claims of the jobs due at one instant, planned as if at that instant."""

    instant_us: int
    # job_id -> (claims, schedule indexes or None), the answer of plan_job_slots at the instant.
    plans: dict[str, tuple[list[SlotClaim], list[int] | None]]


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
        self._due = DueIndex()
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        # Set when calendars change: every job's claim instant is looked at again.
        self._reload_all = False
        self._wake = threading.Event()
        self._ahead: _PlannedAhead | None = None
        # Jobs copied at the start of an epoch and left out of the index until the first pass:
        # (the copy, the first pass's horizon, how many of the copy are indexed so far).
        self._deferred: tuple[list[Job], int, int] | None = None

    # -- apply notifications (tick thread: cheap, non-blocking) ----------
    def _on_apply(self, command, result, state) -> None:
        if isinstance(command, ApplyJobs):
            ids = [u.spec.id for u in command.upserts] + list(command.removals)
            if command.calendars or command.calendar_removals:
                self._reload_all = True
        elif isinstance(command, SetJobPaused):
            ids = [command.job_id]
        else:
            return
        with self._changed_lock:
            self._changed.update(ids)
        self._wake.set()

    def __call__(self) -> None:
        try:
            with self.attached():
                while not self._term.stopping.is_set():
                    if not self.step():
                        self._sleep_until_due()
        except Exception:
            log.exception("trigger loop failed; giving up this epoch")
            self._term.depose("trigger loop failed")

    @contextlib.contextmanager
    def attached(self):
        """Listen to applied job changes and build the due index from replicated state."""
        self._raftlog.add_apply_listener(self._on_apply)
        try:
            self._load_all(first_pass_until_us=self._clock.now_us() + FIRST_PASS_HORIZON_US)
            yield self
        finally:
            self._raftlog.remove_apply_listener(self._on_apply)

    def step(self) -> bool:
        """One pass: take in changed jobs, claim what is due, index one more chunk of the jobs a
        new leader's first pass left out; False when nothing was due and nothing is left out."""
        self._refresh_changed()
        if self._deferred is not None and self._clock.now_us() > self._deferred[1]:
            self._load_deferred()  # past the first pass's horizon: some of those are due
        claimed = self._claim_due()
        if self._deferred is not None:  # the next pass comes at once: no sleep before it is all in
            self._load_deferred(DEFERRED_CHUNK_JOBS)
        return claimed or self._deferred is not None

    # -- the due queue -----------------------------------------------------
    def _due_at(self, job, calendars) -> int:
        """A job's entry: its next due instant, or where its calendar moved that slot."""
        if not job.body.calendar:
            return job.next_due_us
        try:
            return claim_instant_us(job, calendars, self._herd_window_us)
        except ScheduleError:
            return job.next_due_us  # planning logs it when the slot comes

    def _load_all(self, first_pass_until_us: int | None = None) -> None:
        """Build the index from every job. With `first_pass_until_us` (a new epoch), only the
        jobs due by then go in at once, and the rest after the first pass has claimed: the
        whole index of a million jobs took 0.2-0.5 s, which every failover waited for."""
        self._reload_all = False
        self._deferred = None
        # Only the copy holds the state lock (the tick thread applies under it): 10-20 ms for a
        # million jobs, where building the index under it took 0.3 s, a stalled Raft tick on
        # every new leader. A record read after the copy is at least as new as at the copy, and
        # every change after the copy is in `_changed` (the listener came first).
        with self._raftlog.read() as state:
            jobs = list(state.jobs.values())  # no (id, record) tuples: 10x cheaper
            calendars = dict(state.calendars)
        if first_pass_until_us is not None:
            # A calendar may move a slot earlier than its job's next due instant: always first.
            soon = [job for job in jobs if job.next_due_us <= first_pass_until_us or job.body.calendar]
            self._due.rebuild((job.id, self._due_at(job, calendars)) for job in soon)
            self._deferred = (jobs, first_pass_until_us, 0)
            return
        scheduled = self._due.rebuild((job.id, self._due_at(job, calendars)) for job in jobs)
        log.info("trigger loop ready with %d scheduled jobs", scheduled)

    def _load_deferred(self, max_jobs: int | None = None) -> None:
        """The jobs the first pass left out (at most `max_jobs` more of them); a record changed
        since the copy is in `_changed` as well. Every job left out is due after the first
        pass's horizon, so the index is complete up to it while some are still out."""
        assert self._deferred is not None
        jobs, until_us, start = self._deferred
        end = len(jobs) if max_jobs is None else min(len(jobs), start + max_jobs)
        self._due.extend(
            (job.id, job.next_due_us)
            for job in itertools.islice(jobs, start, end)
            if job.next_due_us > until_us and not job.body.calendar
        )
        if end < len(jobs):
            self._deferred = (jobs, until_us, end)
            return
        self._deferred = None
        log.info("trigger loop ready with %d scheduled jobs", len(self._due))

    def _refresh_changed(self) -> None:
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        if self._reload_all:
            self._load_all()
            return
        if not changed:
            return
        with self._raftlog.read() as state:
            for job_id in changed:
                if (job := state.jobs.get(job_id)) is not None:
                    self._due.add(job_id, self._due_at(job, state.calendars))
        if self._due.needs_rebuild():
            self._load_all()

    def _sleep_until_due(self) -> None:
        if self._deferred is not None:
            self._load_deferred()
        wait_s = self._max_sleep_s
        earliest_us = self._due.earliest_us()
        if earliest_us is not None:
            if earliest_us - self._clock.now_us() <= PLAN_AHEAD_US:
                self.plan_ahead(earliest_us)
            wait_s = min(wait_s, max(0.0, (earliest_us - self._clock.now_us()) / SECOND_US))
        self._wake.wait(wait_s)
        self._wake.clear()

    def plan_ahead(self, instant_us: int) -> int:
        """Plan the claims of the jobs due at `instant_us` now, before it; how many were planned.

        They are a guess about replicated state at the instant: `_claim_due` uses a job's plan
        only if the job's version and next due slot are still the ones planned from, and the core
        checks every claim again anyway (a changed job's claim is out of plan, never wrong)."""
        if self._ahead is not None and self._ahead.instant_us == instant_us:
            return len(self._ahead.plans)
        if self._deferred is not None and instant_us > self._deferred[1]:
            self._load_deferred()  # some of the jobs left out may be due then
        job_ids = self._due.due_at(instant_us)
        with self._raftlog.read() as state:
            jobs = [
                msgspec.structs.replace(job)
                for job_id in job_ids
                if (job := state.jobs.get(job_id)) is not None
                and job.next_due_us == instant_us
                and not job.body.calendar  # a calendar's slot may move: planned at its time
            ]
        plans = {}
        for job in jobs[:MAX_CLAIMS_PER_PASS]:
            try:
                plans[job.id] = plan_job_slots(job, instant_us, MAX_SLOTS_PER_JOB_PASS, self._herd_window_us)
            except ScheduleError:
                continue  # planned again at the instant, which logs it
        self._ahead = _PlannedAhead(instant_us, plans)
        return len(plans)

    def _planned_ahead(self, job, now_us: int) -> tuple[list[SlotClaim], list[int] | None] | None:
        """The claims planned ahead for `job`, if they still hold at `now_us`."""
        ahead = self._ahead
        if ahead is None or ahead.instant_us > now_us or (plan := ahead.plans.get(job.id)) is None:
            return None
        claims = plan[0]
        if not claims or claims[0].spec_version != job.version or claims[0].scheduled_us != job.next_due_us:
            return None
        # Planned as on time: past the grace the misfire policy decides instead, so plan again.
        if now_us - claims[0].scheduled_us > job.body.misfire.grace_us:
            return None
        return plan

    # -- claiming ------------------------------------------------------------
    def _claim_due(self) -> bool:
        """Claim everything due now; False when nothing was due.

        Job records are copied under the state lock (cheap); planning runs outside it, and a
        batch is proposed as soon as a job must be planned after it, so applies and reads never
        wait for the planning of a large herd and its first keys commit early. Batches of claims
        planned ahead are proposed together once all are batched (herd-proposed-together.md).
        """
        now_us, mono_us = self._clock.read()
        due_ids = self._due.pop_due(now_us)
        if not due_ids:
            return False
        # Each due job as the claims planned ahead for it, or as a copy of its record to plan now.
        work: list[tuple[list[SlotClaim], list[int] | None] | Job] = []
        with self._raftlog.read() as state:
            # A stale entry (the job moved to a later instant, or is gone) plans nothing. A job with
            # a calendar may be due before its nominal instant (a slot moved to an earlier day).
            for job_id in due_ids:
                job = state.jobs.get(job_id)
                if job is None or not 0 < job.next_due_us or (job.next_due_us > now_us and not job.body.calendar):
                    continue
                work.append(self._planned_ahead(job, now_us) or msgspec.structs.replace(job))
            calendars = dict(state.calendars)  # records are replaced whole, never changed in place
        if self._ahead is not None and self._ahead.instant_us <= now_us:
            self._ahead = None  # used, or too old to use
        futures, batch, planned = [], [], 0
        # Batches of claims planned ahead wait until the pass has batched them all: proposed one
        # by one, the first committed early and the leader's applying them starved the rest of
        # the pass, which then took twice as long (docs/design/herd-proposed-together.md).
        held: list[ClaimRuns] = []
        # Which `schedules:` entry each claim of the batch comes from; kept only once a job with
        # several schedules is planned in this pass, so plain schedules cost nothing more.
        sources: list[int] | None = None
        decided: set[tuple[str, int]] = set()  # run keys a calendar decided
        for item in work:
            if planned >= MAX_CLAIMS_PER_PASS:
                break
            if isinstance(item, tuple):
                slots, job_sources = item
            else:
                job = item
                # Planning takes time: what is batched already goes out first.
                futures.extend(self._raftlog.propose(command) for command in held)
                held.clear()
                try:
                    if job.body.calendar:  # a calendar goes with one plain `schedule:` (specs/rules.py)
                        slots, by_calendar = plan_calendar_due_slots(
                            job, calendars, now_us, MAX_SLOTS_PER_JOB_PASS, self._herd_window_us
                        )
                        decided.update((c.job_id, c.scheduled_us) for c in by_calendar)
                        job_sources = None
                    else:
                        slots, job_sources = plan_job_slots(job, now_us, MAX_SLOTS_PER_JOB_PASS, self._herd_window_us)
                except ScheduleError as exc:  # validated at apply time, so a bug if it happens
                    log.error("job %s: cannot plan its schedule: %s", job.spec.id, exc)
                    continue
            planned += len(slots)
            if job_sources is not None and sources is None:
                sources = [NO_SCHEDULE_INDEX] * len(batch)
            if sources is not None:
                sources.extend(job_sources if job_sources is not None else [NO_SCHEDULE_INDEX] * len(slots))
            batch.extend(slots)
            while len(batch) >= self._batch_size:
                head = sources[: self._batch_size] if sources is not None else None
                held.append(self._command(batch[: self._batch_size], now_us, mono_us, head, decided))
                batch = batch[self._batch_size :]
                sources = sources[self._batch_size :] if sources is not None else None
        if batch:
            held.append(self._command(batch, now_us, mono_us, sources, decided))
        futures.extend(self._raftlog.propose(command) for command in held)
        self._await(futures)
        # Re-read every touched job: its next due now comes from replicated state, whatever happened.
        with self._changed_lock:
            self._changed.update(due_ids)
        return True

    def _command(
        self,
        claims: list[SlotClaim],
        now_us: int,
        mono_us: int,
        sources: list[int] | None = None,
        decided: set[tuple[str, int]] | None = None,
    ):
        indexes = tuple(sources) if sources is not None and any(s != NO_SCHEDULE_INDEX for s in sources) else UNSET
        command = ClaimRuns(now_us, self._term.epoch, tuple(claims), monotonic_us=mono_us, schedule_indexes=indexes)
        if decided:
            keys = tuple(RunRef(c.job_id, c.scheduled_us) for c in claims if (c.job_id, c.scheduled_us) in decided)
            if keys:
                command = msgspec.structs.replace(command, calendar_keys=keys)
        return command

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
                if result.rejection.code == RejectionCode.STALE_EPOCH:
                    self._term.depose(result.rejection.message)
                    return
                log.error("claim batch rejected: %s", result.rejection.message)
            not_due += sum(isinstance(e, ClaimOutOfPlan) and e.reason == OutOfPlan.NOT_DUE_YET for e in result.events)
        if not_due:
            # The core judged these slots early (its time is behind this clock): look again shortly, not at once.
            log.warning("%d claims not due yet in replicated time; retrying shortly", not_due)
            self._term.stopping.wait(0.05)
