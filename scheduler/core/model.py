"""Records kept in replicated state: job specs, jobs, runs and their attempts.

Instants are integer microseconds since the Unix epoch (UTC), durations integer
microseconds; names end in `_us`. Integers keep every replica bit-for-bit equal.

Every record is `gc=False`: none can hold a reference cycle, and a replica holds millions of
them. Tracked, each costs 16 bytes more, and every full collection walks them all while
holding the GIL (0.6 s for 100,000 jobs and 300,000 runs): a stall of the Raft tick thread.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from scheduler.core.vocabulary import Misfire, OnSkip, Overlap, RunKind, RunStatus

SECOND_US = 1_000_000
DEFAULT_TIMEOUT_US = 3600 * SECOND_US

# The run statuses as module names: the apply loop reads them for every run, and on Python 3.11
# an enum attribute costs over ten times a module global.
QUEUED = RunStatus.QUEUED
LEASED = RunStatus.LEASED
SUCCEEDED = RunStatus.SUCCEEDED
FAILED = RunStatus.FAILED
TIMED_OUT = RunStatus.TIMED_OUT
SKIPPED = RunStatus.SKIPPED
MISSED = RunStatus.MISSED
CANCELLED = RunStatus.CANCELLED

RUN_STATUSES = tuple(RunStatus)
FINAL_STATUSES = frozenset({SUCCEEDED, FAILED, TIMED_OUT, SKIPPED, MISSED, CANCELLED})
# Statuses a slot may be accounted with when it is claimed.
CLAIM_STATUSES = frozenset({QUEUED, SKIPPED, MISSED})
LIVE_STATUSES = frozenset({QUEUED, LEASED})

RUN_KINDS = tuple(RunKind)


class RetryPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    max_attempts: int = 3
    backoff_initial_us: int = 10 * SECOND_US
    backoff_max_us: int = 300 * SECOND_US
    backoff_multiplier: float = 2.0
    # 0 means unbounded: otherwise no attempt starts later than this after the slot.
    within_us: int = 0
    # Log format 3: exit codes that end the run failed at once, never retried (shell jobs).
    final_exit_codes: tuple[int, ...] | UnsetType = UNSET


class MisfirePolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    policy: str = Misfire.FIRE_LATE
    grace_us: int = 600 * SECOND_US
    max_catch_up: int = 10


# Statuses kept longer by retention: what an owner investigates after the fact.
FAILURE_STATUSES = frozenset({FAILED, TIMED_OUT, MISSED, CANCELLED})
DAY_US = 86_400 * SECOND_US


class HistoryPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """How many final runs of a job are retained, and for how long (by scheduled instant).

    Failures (failed, timed out, missed, cancelled) are counted and aged apart from the
    rest, so a flood of successes never pushes out the failure someone must look at.
    Live runs are never pruned. 0 for an age means no age limit.
    """

    keep_runs: int = 1000
    max_age_us: int = 30 * DAY_US
    keep_failed_runs: int = 1000
    failed_max_age_us: int = 90 * DAY_US


class Resource(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A shared dependency (a database, an API) whose load the cluster budgets. 0 = no limit."""

    name: str
    max_concurrent: int = 0
    max_starts_per_s: int = 0


class ActiveWindow(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """The instants a job's slots are owed in: `from_us <= slot < until_us`; 0 leaves a side open."""

    from_us: int = 0
    until_us: int = 0


class HolidaySource(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Where a holiday calendar's dates came from: kept for explain, never re-expanded."""

    country: str
    subdivision: str = ""
    first_year: int = 0
    years: int = 0
    library_version: str = ""  # the `holidays` package of the node that expanded it


class Calendar(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A named set of local dates (ISO `YYYY-MM-DD`, sorted, unique) that jobs skip or keep to.

    Always explicit dates: a holiday set is expanded by the node that proposes it, so every
    replica computes the same instants whatever holiday rules it has installed."""

    name: str
    dates: tuple[str, ...] = ()
    source: HolidaySource | None = None


class CalendarRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A job's `calendar:`: dates it skips, dates it keeps to, and what a skipped slot does."""

    skip: tuple[str, ...] = ()
    only: tuple[str, ...] = ()
    on_skip: str = OnSkip.SKIP

    def names(self) -> tuple[str, ...]:
        return self.skip + self.only


class HttpTarget(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """`target: {http: ...}`: one request per attempt, sent by a worker started with `--http`
    (docs/design/http-target.md). The whole struct is of log format 3 (`JobSpec.http`), so its
    own fields take plain defaults; a field added to it later is UNSET like any other."""

    url: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""
    timeout_us: int = 0  # 0: the job's timeout
    success_codes: tuple[int, ...] = ()  # (): any 2xx
    follow_redirects: bool = False


class JobSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """What a user declares about a job. Validated before it is proposed.

    A job fires by one of `schedule` (one cron expression), `schedules` (several, one run per
    instant of their union), `every` (anchor + k * every_us) or `at` (once), or by none of them:
    an empty `schedule` and every other way left UNSET is a manual-only job.
    The fields of log format 3 default to UNSET, which msgspec leaves out of the encoding: a spec
    that does not use them encodes to the bytes it had before they existed, so old log entries,
    snapshots and digests stay byte for byte (docs/design/later-fields-are-unset.md).
    """

    id: str
    schedule: str
    target_kind: str  # a TargetKind
    target: str
    timezone: str = "UTC"
    owner: str = ""
    job_class: str = "default"
    timeout_us: int = DEFAULT_TIMEOUT_US
    retry: RetryPolicy = RetryPolicy()
    priority: int = 0
    payload_json: str = ""
    misfire: MisfirePolicy = MisfirePolicy()
    dst_gap: str = ""  # a DstGap, or "" for the schedule's default
    dst_repeat: str = ""  # a DstRepeat, or ""
    jitter: str = "auto"
    overlap: str = Overlap.ALLOW
    paused: bool = False
    # Named resources this job's runs use; a run is leased only while all have room.
    uses: tuple[str, ...] = ()
    history: HistoryPolicy = HistoryPolicy()
    # Log format 3 (see the docstring): UNSET unless the job uses them.
    schedules: tuple[str, ...] | UnsetType = UNSET
    every_us: int | UnsetType = UNSET
    anchor_us: int | UnsetType = UNSET  # UNSET: the Unix epoch
    at_us: int | UnsetType = UNSET
    active: ActiveWindow | UnsetType = UNSET
    max_runs: int | UnsetType = UNSET
    # Dates it skips or keeps to (log format 3). UNSET (every slot is owed) is left out of the
    # encoding, so a spec without a calendar encodes to the bytes an older node reads and writes.
    calendar: CalendarRule | msgspec.UnsetType = msgspec.UNSET
    # Log format 3: the job pauses itself when this many runs in a row ended failed or timed out.
    pause_after_failures: int | UnsetType = UNSET
    # Log format 3: the request of a `target_kind` http job (whose `target` is then its URL).
    http: HttpTarget | UnsetType = UNSET
    # Log format 3: the jobs whose run of a slot must succeed before this job runs for that slot
    # (scheduler/core/dependencies.py); such a job has no schedule of its own.
    after: tuple[str, ...] | UnsetType = UNSET
    # Log format 3: a scheduled slot whose run has not succeeded this long after the slot raises
    # one `deadline_missed` alert (the run goes on; scheduler/core/deadlines.py).
    deadline_us: int | UnsetType = UNSET


class Attempt(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    number: int
    worker_id: str = ""
    fencing_token: int = 0
    started_us: int = 0
    finished_us: int = 0
    outcome: str = ""  # a CompletionKind or an ExpiryReason; "" while it runs
    error: str = ""
    exit_code: int = 0
    # Log format 3: what the attempt wrote and how it ended in detail, as its completion said
    # (docs/design/output-per-attempt.md); UNSET when it said nothing.
    stdout_tail: str | UnsetType = UNSET
    stderr_tail: str | UnsetType = UNSET
    exception_type: str | UnsetType = UNSET
    http_status: int | UnsetType = UNSET


class Run(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One slot of one job; `(job_id, scheduled_us)` is its run key."""

    job_id: str
    scheduled_us: int
    status: str  # a RunStatus
    kind: str = RunKind.SCHEDULED
    reason: str = ""
    effective_us: int = 0
    claimed_us: int = 0
    claim_index: int = 0
    spec_version: int = 0
    attempt: int = 0
    fencing_token: int = 0
    worker_id: str = ""
    started_us: int = 0
    finished_us: int = 0
    exit_code: int = 0
    error: str = ""
    attempts: tuple[Attempt, ...] = ()  # a tuple: untracked by the GC, and a queued run shares the empty one
    # Execution: a queued run is leasable from not_before_us (retry backoff); a leased run
    # belongs to the holder of fencing_token until lease_expires_us, and at most until deadline_us.
    not_before_us: int = 0
    lease_ttl_us: int = 0
    lease_expires_us: int = 0
    deadline_us: int = 0
    output_tail: str = ""
    # The resources the current lease counts against (the job's `uses` when it was granted).
    resources: tuple[str, ...] = ()
    # Log format 3: a trigger's or backfill's own payload and overlap policy (UNSET: the job's).
    payload_json: str | UnsetType = UNSET
    overlap: str | UnsetType = UNSET
    # Log format 3: which entry of the job's `schedules` produced this slot (UNSET otherwise).
    schedule_index: int | UnsetType = UNSET


class Pause(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Who paused a job and why; a job paused by its spec (`paused: true`) has neither."""

    by: str = ""
    reason: str = ""


PAUSED_BY_SPEC = Pause()


class Change(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Who applied a job's current spec, and when (replicated time); one per ApplyJobs, shared."""

    author: str
    at_us: int


class LastRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A job's latest claimed slot and its status; the jobs of one herd share one."""

    status: str = ""
    scheduled_us: int = 0


NEVER_RUN = LastRun()


class Job(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A job as replicated state knows it: spec, version and schedule cursor.

    Kept small, since a replica holds one per job: the spec as its id and its body (the spec with
    an empty id), which every job whose spec differs only by id shares (see sharing.py), and the
    facts that change together as one shared record each (`change`, `pause`, `last`). `spec` and
    the properties below read them as fields; a hot path that reads spec fields other than the id
    reads `body` and allocates nothing.
    """

    body: JobSpec
    version: int
    change: Change
    # Every slot at or before the cursor has been accounted for (fired, skipped or missed).
    cursor_us: int
    # The next slot after the cursor, computed by the proposer; 0 when the schedule has none.
    next_due_us: int
    pause: Pause | None = None  # None while the job is not paused
    last: LastRun = NEVER_RUN
    id: str = ""
    # Log format 3: scheduled runs counted toward the spec's `max_runs` (UNSET while it has none).
    counted_runs: int | UnsetType = UNSET

    @property
    def spec(self) -> JobSpec:
        return msgspec.structs.replace(self.body, id=self.id)

    @property
    def author(self) -> str:
        return self.change.author

    @property
    def updated_us(self) -> int:
        return self.change.at_us

    @property
    def paused(self) -> bool:
        return self.pause is not None

    @property
    def paused_by(self) -> str:
        return self.pause.by if self.pause is not None else ""

    @property
    def paused_reason(self) -> str:
        return self.pause.reason if self.pause is not None else ""

    @property
    def last_status(self) -> str:
        return self.last.status

    @property
    def last_scheduled_us(self) -> int:
        return self.last.scheduled_us

    @classmethod
    def of(
        cls,
        spec: JobSpec,
        version: int,
        author: str,
        updated_us: int,
        cursor_us: int,
        next_due_us: int,
        paused: bool = False,
        paused_by: str = "",
        paused_reason: str = "",
        last_status: str = "",
        last_scheduled_us: int = 0,
    ) -> Job:
        """A job from its facts one by one (nothing shared: the core shares as it applies)."""
        return cls(
            msgspec.structs.replace(spec, id=""),
            version,
            Change(author, updated_us),
            cursor_us,
            next_due_us,
            pause=Pause(paused_by, paused_reason) if paused else None,
            last=LastRun(last_status, last_scheduled_us),
            id=spec.id,
        )


class KillSwitch(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A job class stopped from firing, by whom, why and until when (0: until revived)."""

    job_class: str
    reason: str
    author: str
    killed_us: int
    until_us: int = 0
    cancel_running: bool = False

    def active(self, now_us: int) -> bool:
        return self.until_us == 0 or now_us < self.until_us


class KillRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """The audit trail of kill switches: who, when, why."""

    action: str  # a KillAction
    job_class: str
    author: str
    at_us: int
    reason: str = ""
    until_us: int = 0


class Alert(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """One alert for a job's owner. Consecutive missed or skipped slots of one job share one alert
    (a streak, from log format 3 on): `count` slots from `scheduled_us` to `last_scheduled_us`,
    open until the job fires again (`closed_us`). The fields added by format 3 are UNSET in alerts
    raised before it (read them through the helpers in alerts.py)."""

    id: str  # kind:job@instant of the first slot, also the delivery dedup key
    kind: str  # an AlertKind
    job_id: str
    owner: str
    job_class: str
    scheduled_us: int
    message: str  # the latest slot's reason for a streak
    created_us: int
    delivered_us: int = 0  # the latest delivery
    count: int | UnsetType = UNSET  # slots (or, for `recovered`, failed runs) it stands for; UNSET: 1
    last_scheduled_us: int | UnsetType = UNSET  # the streak's latest slot
    closed_us: int | UnsetType = UNSET  # when the streak ended (the job fired again)
    delivered_count: int | UnsetType = UNSET  # `count` as last delivered, so an update is sent once
    since_us: int | UnsetType = UNSET  # `recovered`: the first failed slot of the streak it ends


class AlertRoute(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """Where alerts of matching owners go (log format 3, applied like calendars, admin only).

    `match` is an owner name or a shell-style pattern (`team-*`, `*`); an alert goes to the most
    specific route that matches its owner (scheduler/leader/alert_delivery.py `pick_route`). The
    url may hold a secret (a Slack webhook's path): only admins read it back."""

    name: str
    url: str  # http:// or https://
    match: str = "*"
    template: str = "json"  # an AlertTemplate
    timeout_us: int = 5 * SECOND_US
    backoff_max_us: int = 300 * SECOND_US


class FailureStreak(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """A job's runs failing one after another since `since_us` (their slots), `failures` of them."""

    since_us: int
    failures: int


def format_run_key(job_id: str, scheduled_us: int) -> str:
    """The run key as replicated state writes it inside reasons and alert ids (`job@MICROSECONDS`).

    Kept in this form: those bytes are replicated and dedup keys. People see it readable through
    `scheduler.planning.runkeys.readable_run_keys_in`; the core never parses it back."""
    return f"{job_id}@{scheduled_us}"


def run_payload_json(run: Run, spec: JobSpec) -> str:
    """The payload a worker gets for `run`: its own when a trigger gave one, else the job's."""
    return spec.payload_json if run.payload_json is UNSET else run.payload_json


def run_overlap(run: Run, spec: JobSpec) -> str:
    """The overlap policy `run` is granted under: its own when a trigger or backfill gave one."""
    return spec.overlap if run.overlap is UNSET else run.overlap
