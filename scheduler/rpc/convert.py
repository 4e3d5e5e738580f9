"""Conversions between protobuf messages and core records. No policy lives here."""

from __future__ import annotations

import msgspec
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from msgspec import UNSET

from scheduler.core import model
from scheduler.core.routes import redacted_url
from scheduler.core.vocabulary import CompletionKind, LeaseOutcome, OnSkip, Overlap, RunStatus, TargetKind
from scheduler.planning.runkeys import parse_run_key as parse_run_key  # servicers read run keys here
from scheduler.planning.runkeys import readable_run_key
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import jobs_pb2
from worker.api.v1 import worker_pb2 as wpb

# Each vocabulary with a proto enum, both ways (tests/unit/core/test_vocabulary.py: every member).
OVERLAP_TO_PB = {
    Overlap.ALLOW: pb.ALLOW,
    Overlap.FORBID: pb.FORBID,
    Overlap.QUEUE: pb.QUEUE,
    Overlap.REPLACE: pb.REPLACE,
}
OVERLAP_FROM_PB = {v: k for k, v in OVERLAP_TO_PB.items()}
STATUS_TO_PB = {
    RunStatus.QUEUED: pb.QUEUED,
    RunStatus.LEASED: pb.LEASED,
    RunStatus.SUCCEEDED: pb.SUCCEEDED,
    RunStatus.FAILED: pb.FAILED,
    RunStatus.TIMED_OUT: pb.TIMED_OUT,
    RunStatus.SKIPPED: pb.SKIPPED,
    RunStatus.MISSED: pb.MISSED,
    RunStatus.CANCELLED: pb.CANCELLED,
}
STATUS_FROM_PB = {v: k for k, v in STATUS_TO_PB.items()}
COMPLETION_TO_PB = {
    CompletionKind.SUCCESS: wpb.SUCCESS,
    CompletionKind.FAILURE: wpb.FAILURE,
    CompletionKind.RETRY_LATER: wpb.RETRY_LATER,
}
COMPLETION_FROM_PB = {v: k for k, v in COMPLETION_TO_PB.items()}
LEASE_OUTCOME_TO_PB = {
    LeaseOutcome.OK: wpb.OK,
    LeaseOutcome.FENCED: wpb.FENCED,
    LeaseOutcome.NOT_FOUND: wpb.NOT_FOUND,
    LeaseOutcome.RUN_CANCELLED: wpb.RUN_CANCELLED,
}
LEASE_OUTCOME_FROM_PB = {v: k for k, v in LEASE_OUTCOME_TO_PB.items()}


def printable_run_key(job_id: str, scheduled_us: int) -> str:
    """`job@2026-01-01T02:00:00Z`: what people and handlers see (parse_run_key reads it back)."""
    return readable_run_key(job_id, scheduled_us)


def timestamp(us: int) -> Timestamp | None:
    return Timestamp(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000) if us else None


def timestamp_us(ts: Timestamp) -> int:
    return ts.seconds * 1_000_000 + ts.nanos // 1000


def duration(us: int) -> Duration:
    return Duration(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000)


def duration_us(message, field: str, default_us: int) -> int:
    if not message.HasField(field):
        return default_us
    d = getattr(message, field)
    return d.seconds * 1_000_000 + d.nanos // 1000


def spec_from_pb(spec: pb.JobSpec) -> model.JobSpec:
    """Unset fields take the documented defaults; validation happens after, on the core record."""
    has_misfire = spec.HasField("misfire")
    retry = _converted(_RETRY_MEMO, spec.retry, True, _retry_from_pb)
    misfire = _converted(_MISFIRE_MEMO, spec.misfire, has_misfire, _misfire_from_pb)
    kind = spec.target.WhichOneof("kind") or TargetKind.HANDLER
    http = http_from_pb(spec.target.http) if kind == TargetKind.HTTP else None
    return model.JobSpec(
        id=spec.id,
        schedule=spec.schedule,
        target_kind=kind,
        target=http.url if http else getattr(spec.target, kind),
        timezone=spec.timezone or "UTC",
        owner=spec.owner,
        job_class=spec.job_class or "default",
        timeout_us=duration_us(spec, "timeout", model.DEFAULT_TIMEOUT_US),
        retry=retry,
        priority=spec.priority,
        payload_json=spec.payload_json,
        misfire=misfire,
        dst_gap=spec.dst.gap,
        dst_repeat=spec.dst.repeat,
        jitter=spec.jitter or "auto",
        overlap=OVERLAP_FROM_PB.get(spec.overlap, Overlap.ALLOW),
        paused=spec.paused,
        uses=tuple(spec.uses),
        history=_converted(_HISTORY_MEMO, spec.history, True, _history_from_pb),
        **_ways_to_fire_from_pb(spec),
        calendar=calendar_rule_from_pb(spec.calendar) if spec.HasField("calendar") else msgspec.UNSET,
        http=http if http else msgspec.UNSET,
    )


def _retry_from_pb(retry: pb.RetryPolicy, _is_set: bool) -> model.RetryPolicy:
    defaults = model.RetryPolicy()
    return model.RetryPolicy(
        max_attempts=retry.max_attempts or defaults.max_attempts,
        backoff_initial_us=duration_us(retry, "backoff_initial", defaults.backoff_initial_us),
        backoff_max_us=duration_us(retry, "backoff_max", defaults.backoff_max_us),
        backoff_multiplier=retry.backoff_multiplier or defaults.backoff_multiplier,
        within_us=duration_us(retry, "within", 0),
        **({"final_exit_codes": tuple(retry.final_exit_codes)} if retry.final_exit_codes else {}),
    )


def _misfire_from_pb(misfire: pb.MisfirePolicy, is_set: bool) -> model.MisfirePolicy:
    defaults = model.MisfirePolicy()
    return model.MisfirePolicy(
        policy=misfire.policy or defaults.policy,
        grace_us=duration_us(misfire, "grace", defaults.grace_us),
        max_catch_up=misfire.max_catch_up if is_set else defaults.max_catch_up,
    )


# A million jobs applied carry a handful of distinct policies (a platform's templates, the
# defaults): each distinct one is converted once, keyed by its wire bytes, and the frozen record
# shared. Cleared when full, so a caller sending ever-new policies costs memory no longer.
_MEMO_MAX = 1024
_RETRY_MEMO: dict[tuple[bool, bytes], model.RetryPolicy] = {}
_MISFIRE_MEMO: dict[tuple[bool, bytes], model.MisfirePolicy] = {}
_HISTORY_MEMO: dict[tuple[bool, bytes], model.HistoryPolicy] = {}


def _converted(memo: dict, message, is_set: bool, convert):
    key = (is_set, message.SerializeToString(deterministic=True))
    found = memo.get(key)
    if found is None:
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        found = memo[key] = convert(message, is_set)
    return found


def _history_from_pb(history: pb.HistoryPolicy, _is_set: bool) -> model.HistoryPolicy:
    return history_from_pb(history)


def http_from_pb(http: pb.HttpTarget) -> model.HttpTarget:
    return model.HttpTarget(
        url=http.url,
        method=http.method or "GET",
        headers=tuple((h.name, h.value) for h in http.headers),
        body=http.body,
        timeout_us=duration_us(http, "timeout", 0),
        success_codes=tuple(http.success_codes),
        follow_redirects=http.follow_redirects,
    )


def http_to_pb(http: model.HttpTarget) -> pb.HttpTarget:
    return pb.HttpTarget(
        url=http.url,
        method=http.method,
        headers=[pb.HttpHeader(name=name, value=value) for name, value in http.headers],
        body=http.body,
        timeout=duration(http.timeout_us) if http.timeout_us else None,
        success_codes=list(http.success_codes),
        follow_redirects=http.follow_redirects,
    )


def _ways_to_fire_from_pb(spec: pb.JobSpec) -> dict:
    """The fields of log format 3 that the message sets (left out, a spec keeps them UNSET)."""
    fields: dict = {}
    if spec.schedules:
        fields["schedules"] = tuple(spec.schedules)
    if spec.HasField("every"):
        fields["every_us"] = duration_us(spec, "every", 0)
    if spec.HasField("anchor"):
        fields["anchor_us"] = timestamp_us(spec.anchor)
    if spec.HasField("at"):
        fields["at_us"] = timestamp_us(spec.at)
    if spec.HasField("active_from") or spec.HasField("active_until"):
        fields["active"] = model.ActiveWindow(
            timestamp_us(spec.active_from) if spec.HasField("active_from") else 0,
            timestamp_us(spec.active_until) if spec.HasField("active_until") else 0,
        )
    if spec.HasField("max_runs"):
        fields["max_runs"] = spec.max_runs
    if spec.HasField("pause_after_failures"):
        fields["pause_after_failures"] = spec.pause_after_failures
    if spec.after:
        fields["after"] = tuple(spec.after)
    if spec.HasField("deadline"):
        fields["deadline_us"] = duration_us(spec, "deadline", 0)
    return fields


def _ways_to_fire_to_pb(spec: model.JobSpec) -> dict:
    fields: dict = {}
    if spec.schedules is not UNSET:
        fields["schedules"] = list(spec.schedules)
    if spec.every_us is not UNSET:
        fields["every"] = duration(spec.every_us)
    if spec.anchor_us is not UNSET:
        fields["anchor"] = _instant(spec.anchor_us)
    if spec.at_us is not UNSET:
        fields["at"] = _instant(spec.at_us)
    if spec.active is not UNSET:
        fields["active_from"] = timestamp(spec.active.from_us)
        fields["active_until"] = timestamp(spec.active.until_us)
    if spec.max_runs is not UNSET:
        fields["max_runs"] = spec.max_runs
    if spec.pause_after_failures is not UNSET:
        fields["pause_after_failures"] = spec.pause_after_failures
    if spec.after is not UNSET:
        fields["after"] = list(spec.after)
    if spec.deadline_us is not UNSET:
        fields["deadline"] = duration(spec.deadline_us)
    return fields


def _instant(us: int) -> Timestamp:
    """A timestamp even at 0 (`timestamp` leaves 0 unset: there it means "none")."""
    return Timestamp(seconds=us // 1_000_000, nanos=(us % 1_000_000) * 1000)


def history_from_pb(history: pb.HistoryPolicy) -> model.HistoryPolicy:
    defaults = model.HistoryPolicy()
    return model.HistoryPolicy(
        keep_runs=history.keep_runs if history.HasField("keep_runs") else defaults.keep_runs,
        max_age_us=duration_us(history, "max_age", defaults.max_age_us),
        keep_failed_runs=history.keep_failed_runs
        if history.HasField("keep_failed_runs")
        else defaults.keep_failed_runs,
        failed_max_age_us=duration_us(history, "failed_max_age", defaults.failed_max_age_us),
    )


def history_to_pb(history: model.HistoryPolicy) -> pb.HistoryPolicy:
    return pb.HistoryPolicy(
        keep_runs=history.keep_runs,
        max_age=duration(history.max_age_us),
        keep_failed_runs=history.keep_failed_runs,
        failed_max_age=duration(history.failed_max_age_us),
    )


def target_to_pb(spec: model.JobSpec) -> pb.Target:
    if spec.target_kind == TargetKind.HTTP and isinstance(spec.http, model.HttpTarget):
        return pb.Target(http=http_to_pb(spec.http))
    return pb.Target(**{spec.target_kind: spec.target})


def spec_to_pb(spec: model.JobSpec) -> pb.JobSpec:
    return pb.JobSpec(
        id=spec.id,
        owner=spec.owner,
        job_class=spec.job_class,
        schedule=spec.schedule,
        timezone=spec.timezone,
        misfire=pb.MisfirePolicy(
            policy=spec.misfire.policy,
            grace=duration(spec.misfire.grace_us),
            max_catch_up=spec.misfire.max_catch_up,
        ),
        dst=pb.DstPolicy(gap=spec.dst_gap, repeat=spec.dst_repeat),
        jitter=spec.jitter,
        paused=spec.paused,
        target=target_to_pb(spec),
        payload_json=spec.payload_json,
        timeout=duration(spec.timeout_us),
        retry=pb.RetryPolicy(
            max_attempts=spec.retry.max_attempts,
            backoff_initial=duration(spec.retry.backoff_initial_us),
            backoff_max=duration(spec.retry.backoff_max_us),
            backoff_multiplier=spec.retry.backoff_multiplier,
            within=duration(spec.retry.within_us) if spec.retry.within_us else None,
            final_exit_codes=list(spec.retry.final_exit_codes) if spec.retry.final_exit_codes is not UNSET else [],
        ),
        priority=spec.priority,
        overlap=OVERLAP_TO_PB.get(spec.overlap, pb.OVERLAP_UNSPECIFIED),
        uses=list(spec.uses),
        history=history_to_pb(spec.history),
        **_ways_to_fire_to_pb(spec),
        calendar=calendar_rule_to_pb(spec.calendar) if spec.calendar else None,
    )


def calendar_rule_from_pb(rule: pb.CalendarRule) -> model.CalendarRule:
    return model.CalendarRule(tuple(rule.skip), tuple(rule.only), rule.on_skip or OnSkip.SKIP)


def calendar_rule_to_pb(rule: model.CalendarRule) -> pb.CalendarRule:
    return pb.CalendarRule(skip=list(rule.skip), only=list(rule.only), on_skip=rule.on_skip)


def calendar_from_pb(calendar: pb.Calendar, record: bool = False) -> model.Calendar:
    """A calendar as a client declares it: dates as sent (the servicer's rules check them), and a
    holiday request without provenance, so the receiving node expands it. With `record`, a
    calendar as the cluster answers it, with the year and library version that produced it."""
    source = None
    if calendar.HasField("holidays"):
        h = calendar.holidays
        source = model.HolidaySource(h.country, h.subdivision, years=h.years or 1)
        if record:
            source = model.HolidaySource(h.country, h.subdivision, h.first_year, h.years, h.library_version)
    return model.Calendar(calendar.name, tuple(calendar.dates), source)


def calendar_to_pb(calendar: model.Calendar) -> pb.Calendar:
    source = calendar.source
    holidays = (
        pb.HolidaySource(
            country=source.country,
            subdivision=source.subdivision,
            years=source.years,
            first_year=source.first_year,
            library_version=source.library_version,
        )
        if source is not None
        else None
    )
    return pb.Calendar(name=calendar.name, dates=list(calendar.dates), holidays=holidays)


def resource_from_pb(resource: pb.Resource) -> model.Resource:
    return model.Resource(resource.name, resource.max_concurrent, resource.max_starts_per_s)


def resource_to_pb(resource: model.Resource) -> pb.Resource:
    return pb.Resource(
        name=resource.name, max_concurrent=resource.max_concurrent, max_starts_per_s=resource.max_starts_per_s
    )


def job_to_pb(job: model.Job, spread_us: int = 0, children: tuple[str, ...] = ()) -> pb.Job:
    """`spread_us`: the job's herd spread (planning.jobs.spread_offset_us), unset when 0;
    `children`: the jobs `after:` it (State.dependents)."""
    return pb.Job(
        spec=spec_to_pb(job.spec),
        version=job.version,
        author=job.author,
        updated_at=timestamp(job.updated_us),
        cursor=timestamp(job.cursor_us),
        next_due=timestamp(job.next_due_us),
        paused=job.paused,
        last_status=STATUS_TO_PB.get(job.last_status, pb.RUN_STATUS_UNSPECIFIED),
        last_scheduled_at=timestamp(job.last_scheduled_us),
        counted_runs=None if job.counted_runs is UNSET else job.counted_runs,
        spread=duration(spread_us) if spread_us else None,
        children=list(children),
    )


def attempt_output_pb(attempt: model.Attempt) -> dict:
    """The per-attempt output fields an attempt holds (log format 3), as pb.Attempt arguments."""
    return {
        name: value
        for name in ("stdout_tail", "stderr_tail", "exception_type", "http_status")
        if (value := getattr(attempt, name)) is not msgspec.UNSET
    }


def run_to_pb(run: model.Run) -> pb.Run:
    return pb.Run(
        job_id=run.job_id,
        scheduled_at=timestamp(run.scheduled_us),
        run_key=printable_run_key(run.job_id, run.scheduled_us),
        kind=run.kind,
        schedule_index=None if run.schedule_index is UNSET else run.schedule_index,
        status=STATUS_TO_PB.get(run.status, pb.RUN_STATUS_UNSPECIFIED),
        reason=run.reason,
        effective_at=timestamp(run.effective_us),
        claimed_at=timestamp(run.claimed_us),
        claim_index=run.claim_index,
        attempt=run.attempt,
        fencing_token=run.fencing_token,
        worker_id=run.worker_id,
        started_at=timestamp(run.started_us),
        finished_at=timestamp(run.finished_us),
        exit_code=run.exit_code,
        error=run.error,
        attempts=[
            pb.Attempt(
                number=a.number,
                worker_id=a.worker_id,
                fencing_token=a.fencing_token,
                started_at=timestamp(a.started_us),
                finished_at=timestamp(a.finished_us),
                outcome=a.outcome,
                error=a.error,
                exit_code=a.exit_code,
                **attempt_output_pb(a),
            )
            for a in run.attempts
        ],
    )


def route_from_pb(route: jobs_pb2.AlertRoute) -> model.AlertRoute:
    default = model.AlertRoute("", "")
    return model.AlertRoute(
        name=route.name,
        url=route.url,
        match=route.match or default.match,
        template=route.template or default.template,
        timeout_us=duration_us(route, "timeout", default.timeout_us),
        backoff_max_us=duration_us(route, "backoff", default.backoff_max_us),
    )


def route_to_pb(route: model.AlertRoute, redact: bool) -> jobs_pb2.AlertRoute:
    return jobs_pb2.AlertRoute(
        name=route.name,
        match=route.match,
        url=redacted_url(route.url) if redact else route.url,
        template=route.template,
        timeout=duration(route.timeout_us),
        backoff=duration(route.backoff_max_us),
    )
