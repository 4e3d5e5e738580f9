"""Wire-level checks of every argument of every raftcron.v1 call, before a servicer sees it:
sizes, counts, payload depth, signs, enum values and field limits.

`request_problems(request, limits)` is pure: one checker per request type lists what is wrong,
each problem naming the field as the proto does ("jobs[3].payload_json", "leases[0].scheduled_at").
`LimitsInterceptor` (limits_interceptor.py) runs it on every call, and `clean_free_text` on what
it lets through.

A job spec is checked here for sizes, counts, signs and enum values only: what its values mean
(cron, time zone, durations, payload) is `scheduler.specs.validate_spec`'s, which the ApplyJobs
servicer runs next, exactly as on a job file.

Nothing unchecked may reach a core command: a value every replica fails on is a cluster-wide
rejection at best, and a divergence or a state that cannot be snapshotted at worst.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import accumulate

import grpc
from google.protobuf.message import Message

from scheduler.core.calendars import MAX_CALENDAR_DATES, MAX_CALENDARS, MAX_JOB_CALENDARS
from scheduler.core.routes import MAX_ROUTE_URL_CHARS, MAX_ROUTES
from scheduler.core.vocabulary import TargetKind
from scheduler.planning.slots import MAX_SCHEDULES
from scheduler.rpc.convert import parse_run_key
from scheduler.rpc.limits import DEFAULT_LIMITS, MAX_INSTANT_S, RpcLimits
from scheduler.security.safetext import stored_text
from scheduler.specs import http_target, name_problem, text_problem
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import worker_pb2 as wpb

__all__ = ["Problem", "clean_free_text", "describe", "payload_depth", "request_problems", "status_code"]

_PACKAGE = "raftcron.v1."
_MAX_LISTED = 20  # problems named in one error message


@dataclass(frozen=True)
class Problem:
    field: str
    message: str
    # RESOURCE_EXHAUSTED: the request is well formed but larger than the node takes at once.
    code: grpc.StatusCode = grpc.StatusCode.INVALID_ARGUMENT

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def status_code(problems: list[Problem]) -> grpc.StatusCode:
    """RESOURCE_EXHAUSTED when only sizes beyond what the node takes at once are wrong."""
    if all(problem.code == grpc.StatusCode.RESOURCE_EXHAUSTED for problem in problems):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    return grpc.StatusCode.INVALID_ARGUMENT


def describe(problems: list[Problem]) -> str:
    """The error message of a refused request: every problem, one per line (the first 20)."""
    lines = [str(problem) for problem in problems[:_MAX_LISTED]]
    if len(problems) > _MAX_LISTED:
        lines.append(f"... and {len(problems) - _MAX_LISTED} more")
    heading = "request too large" if status_code(problems) == grpc.StatusCode.RESOURCE_EXHAUSTED else "invalid request"
    return f"{heading}:\n" + "\n".join(lines)


def request_problems(request: Message, limits: RpcLimits = DEFAULT_LIMITS) -> list[Problem]:
    """Everything wrong with one request; empty when a servicer may take it."""
    checker = _CHECKERS.get(request.DESCRIPTOR.full_name.removeprefix(_PACKAGE))
    found = _Found(limits)
    if checker is None:
        _generic(found, request, "")
    else:
        checker(found, request)
    writes = "request_id" in request.DESCRIPTOR.fields_by_name and not getattr(request, "dry_run", False)
    if writes and not found.problems and request.ByteSize() > limits.max_write_request_bytes:
        message = (
            f"the request is {request.ByteSize()} bytes, more than one write may be "
            f"({limits.max_write_request_bytes}, to fit one log entry); send it in smaller parts"
        )
        found.problems.append(Problem("", message, grpc.StatusCode.RESOURCE_EXHAUSTED))
    return found.problems


def clean_free_text(request: Message) -> None:
    """A worker's error and output tail, as every replica will store them: free text may hold
    newlines and tabs, never the controls that forge log lines or drive a terminal (the other
    text fields refuse any control character)."""
    name = request.DESCRIPTOR.name
    if name == "SessionRequest":
        request, name = request.complete, "CompleteManyRequest"  # a session's outcomes, as CompleteMany's
    items = [request] if name == "CompleteRequest" else request.completions if name == "CompleteManyRequest" else ()
    for item in items:
        for field in ("error", "output_tail", "stdout_tail", "stderr_tail", "exception_type"):
            text = getattr(item, field)
            if text and (clean := stored_text(text)) != text:
                setattr(item, field, clean)


# ---------------------------------------------------------------------------------------------
# Field checks
# ---------------------------------------------------------------------------------------------


class _Found:
    """Collects problems; each method checks one kind of field."""

    def __init__(self, limits: RpcLimits) -> None:
        self.limits = limits
        self.problems: list[Problem] = []

    def add(self, field: str, message: str | None) -> None:
        if message:
            self.problems.append(Problem(field, message))

    def name(self, field: str, value: str, required: bool = True) -> None:
        """Ids and names: job ids, classes, handler and resource names (the spec's name rule)."""
        if value or required:
            self.add(field, name_problem(value))

    def text(self, field: str, value: str, max_chars: int, required: bool = False) -> None:
        """One line of text: bounded, no control characters."""
        if required and not value:
            self.add(field, "must not be empty")
        elif value:
            self.add(field, text_problem(value, max_chars))

    def blob(self, field: str, value: str, max_bytes: int) -> None:
        """Free text (an error message, an output tail): bounded only."""
        size = len(value.encode("utf-8"))
        if size > max_bytes:
            self.add(field, f"is {size} bytes long; at most {max_bytes} are allowed")

    def count(self, field: str, items: Iterable[object], most: int) -> bool:
        number = len(items)  # type: ignore[arg-type]
        if number > most:
            self.add(field, f"has {number} entries; at most {most} are allowed")
            return False
        return True

    def whole(self, field: str, value: int, low: int, high: int) -> None:
        if not low <= value <= high:
            self.add(field, f"must be between {low} and {high}, got {value}")

    def enum(self, field: str, value: int, enum_type, allow_unspecified: bool = True) -> None:
        if value not in enum_type.DESCRIPTOR.values_by_number:
            self.add(field, f"{value} is not a {enum_type.DESCRIPTOR.name} value")
        elif value == 0 and not allow_unspecified:
            names = ", ".join(v.name for v in enum_type.DESCRIPTOR.values if v.number)
            self.add(field, f"must be one of {names}")

    def instant(self, field: str, message: Message, name: str, required: bool = False) -> None:
        if not message.HasField(name):
            if required:
                self.add(f"{field}{name}", "is required")
            return
        ts = getattr(message, name)
        if not 0 <= ts.nanos <= 999_999_999:
            self.add(f"{field}{name}", f"nanos must be between 0 and 999999999, got {ts.nanos}")
        elif not 0 <= ts.seconds <= MAX_INSTANT_S:
            self.add(f"{field}{name}", f"must be between 1970-01-01 and 9999-12-31, got {ts.seconds} seconds")

    def duration(self, field: str, message: Message, name: str, most_us: int) -> None:
        if not message.HasField(name):
            return
        d = getattr(message, name)
        if d.seconds < 0 or d.nanos < 0:
            self.add(f"{field}{name}", "must not be negative")
        elif d.nanos > 999_999_999:
            self.add(f"{field}{name}", f"nanos must be at most 999999999, got {d.nanos}")
        elif d.seconds * 1_000_000 + d.nanos // 1000 > most_us:
            self.add(f"{field}{name}", f"must be at most {most_us // 1_000_000}s, got {d.seconds}s")


_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def payload_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON text nest, counted without parsing it
    (parsing deeply nested text recurses once per level).

    Every step is one linear pass in C, whatever the text: a regex that matches strings
    retries from every quote it meets, which made 64 KiB of escaped quotes cost seconds of
    GIL. In JSON a backslash escapes exactly one character, so dropping escaped backslashes
    and then escaped quotes leaves quotes that only open and close strings; every other piece
    of a split on them is outside a string. Invalid JSON may be counted wrongly here, and is
    refused by the spec check that parses it.
    """
    if "\\" in text:
        text = text.replace("\\\\", "").replace('\\"', "")
    brackets = _NOT_BRACKET.sub("", "".join(text.split('"')[::2]))
    return max(0, max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0))


# ---------------------------------------------------------------------------------------------
# One checker per request type
# ---------------------------------------------------------------------------------------------


def _writer(found: _Found, request: Message) -> None:
    """`author` and `request_id`, which every write carries."""
    found.text("author", request.author, found.limits.max_author_chars)
    found.text("request_id", request.request_id, found.limits.max_request_id_chars)


def _http_target(found: _Found, http: pb.HttpTarget, at: str) -> None:
    """Sizes only: the rules on the request's values are the spec's (specs/http_target.py)."""
    found.text(f"{at}.url", http.url, http_target.MAX_URL_CHARS, required=True)
    found.text(f"{at}.method", http.method, found.limits.max_policy_chars)
    if found.count(f"{at}.headers", http.headers, http_target.MAX_HEADERS):
        for position, header in enumerate(http.headers):
            found.blob(f"{at}.headers[{position}].name", header.name, http_target.MAX_HEADER_NAME_CHARS)
            found.blob(f"{at}.headers[{position}].value", header.value, http_target.MAX_HEADER_VALUE_CHARS)
    found.blob(f"{at}.body", http.body, http_target.MAX_BODY_BYTES)
    found.count(f"{at}.success_codes", http.success_codes, http_target.MAX_SUCCESS_CODES)
    found.duration(f"{at}.", http, "timeout", found.limits.max_spec_duration_us)


def _spec(found: _Found, spec: pb.JobSpec, at: str) -> None:
    # The one message a request carries by the thousand (ApplyJobs, a million jobs applied):
    # a field's path is formatted only for a problem, and a sub-message left unset is not read
    # (reading one builds a wrapper object); the same checks, 15-17 -> 9 us a spec of the realistic
    # mix (`python -m bench apply_path`).
    limits = found.limits
    _text_at(found, at, "id", spec.id, limits.max_id_chars)
    _text_at(found, at, "owner", spec.owner, limits.max_owner_chars)
    _text_at(found, at, "job_class", spec.job_class, limits.max_id_chars)
    _text_at(found, at, "schedule", spec.schedule, limits.max_schedule_chars)
    _text_at(found, at, "timezone", spec.timezone, limits.max_timezone_chars)
    _text_at(found, at, "jitter", spec.jitter, limits.max_jitter_chars)
    if spec.HasField("misfire"):
        misfire = spec.misfire
        _text_at(found, at, "misfire.policy", misfire.policy, limits.max_policy_chars)
        if misfire.HasField("grace"):
            found.duration(f"{at}.misfire.", misfire, "grace", limits.max_spec_duration_us)
    if spec.HasField("dst"):
        dst = spec.dst
        _text_at(found, at, "dst.gap", dst.gap, limits.max_policy_chars)
        _text_at(found, at, "dst.repeat", dst.repeat, limits.max_policy_chars)
    if spec.overlap not in _OVERLAP_NUMBERS:
        found.enum(f"{at}.overlap", spec.overlap, pb.OverlapPolicy)
    kind = spec.target.WhichOneof("kind")
    if kind == TargetKind.SHELL:
        found.blob(f"{at}.target.shell", spec.target.shell, limits.max_shell_bytes)
    elif kind == TargetKind.HANDLER:
        _text_at(found, at, "target.handler", spec.target.handler, limits.max_id_chars)
    elif kind == TargetKind.HTTP:
        _http_target(found, spec.target.http, f"{at}.target.http")
    if spec.uses and found.count(f"{at}.uses", spec.uses, limits.max_uses_per_job):
        for position, name in enumerate(spec.uses):
            found.text(f"{at}.uses[{position}]", name, limits.max_id_chars)
    if spec.schedules and found.count(f"{at}.schedules", spec.schedules, MAX_SCHEDULES):
        for position, expr in enumerate(spec.schedules):
            found.text(f"{at}.schedules[{position}]", expr, limits.max_schedule_chars)
    if spec.HasField("calendar"):
        calendar = spec.calendar
        for key in ("skip", "only"):
            names = getattr(calendar, key)
            if found.count(f"{at}.calendar.{key}", names, MAX_JOB_CALENDARS):
                for position, name in enumerate(names):
                    found.text(f"{at}.calendar.{key}[{position}]", name, limits.max_id_chars)
        _text_at(found, at, "calendar.on_skip", calendar.on_skip, limits.max_policy_chars)
    for name in _SPEC_DURATIONS:
        if spec.HasField(name):
            found.duration(f"{at}.", spec, name, limits.max_spec_duration_us)
    for name in _SPEC_INSTANTS:
        if spec.HasField(name):
            found.instant(f"{at}.", spec, name)
    if spec.HasField("retry"):
        retry = spec.retry
        for name in _RETRY_DURATIONS:
            if retry.HasField(name):
                found.duration(f"{at}.retry.", retry, name, limits.max_spec_duration_us)
        if not math.isfinite(retry.backoff_multiplier):
            found.add(f"{at}.retry.backoff_multiplier", f"must be a finite number, got {retry.backoff_multiplier}")
    payload = spec.payload_json
    if payload:
        size = len(payload.encode("utf-8"))
        if size > limits.max_payload_bytes:
            found.add(f"{at}.payload_json", f"is {size} bytes long; at most {limits.max_payload_bytes} are allowed")
        elif payload_depth(payload) > limits.max_payload_depth:
            found.add(f"{at}.payload_json", f"nests deeper than {limits.max_payload_depth} levels")


_OVERLAP_NUMBERS = frozenset(pb.OverlapPolicy.DESCRIPTOR.values_by_number)
_SPEC_DURATIONS = ("timeout", "every")
_SPEC_INSTANTS = ("anchor", "at", "active_from", "active_until")
_RETRY_DURATIONS = ("backoff_initial", "backoff_max", "within")


def _text_at(found: _Found, at: str, name: str, value: str, max_chars: int) -> None:
    """`_Found.text` of the field `name` of the spec at `at`, its path formatted only for a problem
    (and the usual short printable ASCII value passed without a call)."""
    if value and (len(value) > max_chars or not (value.isascii() and value.isprintable())):
        if message := text_problem(value, max_chars):
            found.problems.append(Problem(f"{at}.{name}", message))


def _apply_jobs(found: _Found, request) -> None:
    limits = found.limits
    _writer(found, request)
    if found.count("jobs", request.jobs, limits.max_jobs_per_apply):
        first_at: dict[str, int] = {}
        for position, spec in enumerate(request.jobs):
            _spec(found, spec, f"jobs[{position}]")
            if spec.id in first_at:
                found.add(f"jobs[{position}].id", f"{spec.id[:64]!r} is listed twice (also jobs[{first_at[spec.id]}])")
            first_at.setdefault(spec.id, position)
    if found.count("resources", request.resources, limits.max_resources_per_apply):
        for position, resource in enumerate(request.resources):
            found.name(f"resources[{position}].name", resource.name)
    if found.count("calendars", request.calendars, MAX_CALENDARS):
        for position, calendar in enumerate(request.calendars):
            found.name(f"calendars[{position}].name", calendar.name)
            if found.count(f"calendars[{position}].dates", calendar.dates, MAX_CALENDAR_DATES):
                for day_at, day in enumerate(calendar.dates):
                    found.text(f"calendars[{position}].dates[{day_at}]", day, 10)
            for key in ("country", "subdivision"):
                found.text(f"calendars[{position}].holidays.{key}", getattr(calendar.holidays, key), 16)
    if found.count("routes", request.routes, MAX_ROUTES):
        for position, route in enumerate(request.routes):
            found.name(f"routes[{position}].name", route.name)
            found.text(f"routes[{position}].match", route.match, limits.max_id_chars)
            found.text(f"routes[{position}].url", route.url, MAX_ROUTE_URL_CHARS)
            found.text(f"routes[{position}].template", route.template, limits.max_policy_chars)


def _job_write(found: _Found, request) -> None:
    """DeleteJob, TriggerJob, PauseJob, ResumeJob, CancelRun."""
    found.name("job_id", request.job_id)
    _writer(found, request)
    if "reason" in request.DESCRIPTOR.fields_by_name:
        found.text("reason", request.reason, found.limits.max_reason_chars)


def _get_job(found: _Found, request) -> None:
    found.name("job_id", request.job_id)


def _list_jobs(found: _Found, request) -> None:
    found.text("owner", request.owner, found.limits.max_owner_chars)
    found.name("job_class", request.job_class, required=False)
    found.whole("page_size", request.page_size, 0, found.limits.max_page_size)
    found.text("page_token", request.page_token, found.limits.max_page_token_chars)


def _backfill_job(found: _Found, request) -> None:
    limits = found.limits
    found.name("job_id", request.job_id)
    _writer(found, request)
    found.instant("", request, "from", required=True)
    found.instant("", request, "to", required=True)
    start, end = getattr(request, "from"), request.to
    if not found.problems and (start.seconds, start.nanos) > (end.seconds, end.nanos):
        found.add("from", "must not be after `to`")
    found.whole("max_runs", request.max_runs, 0, limits.max_backfill_runs)
    rate = request.rate_per_s
    low, high = limits.min_backfill_rate_per_s, limits.max_backfill_rate_per_s
    if not math.isfinite(rate) or (rate and not low <= rate <= high):
        found.add("rate_per_s", f"must be between {low:g} and {high:g} runs per second (0: the default), got {rate}")


def _list_runs(found: _Found, request) -> None:
    limits = found.limits
    found.name("job_id", request.job_id, required=False)
    found.text("owner", request.owner, limits.max_owner_chars)
    found.name("job_class", request.job_class, required=False)
    if found.count("statuses", request.statuses, limits.max_statuses_per_filter):
        for position, status in enumerate(request.statuses):
            found.enum(f"statuses[{position}]", status, pb.RunStatus, allow_unspecified=False)
    found.instant("", request, "since")
    found.instant("", request, "until")
    found.whole("page_size", request.page_size, 0, limits.max_page_size)
    found.text("page_token", request.page_token, limits.max_page_token_chars)
    scheduled, sep, _ = request.page_token.partition(":")
    if request.page_token and not (sep and re.fullmatch(r"-?[0-9]{1,20}", scheduled)):
        found.add("page_token", "is not a next_page_token this service returned")


def _get_run(found: _Found, request) -> None:
    if request.run_key:
        found.text("run_key", request.run_key, found.limits.max_run_key_chars)
        if not found.problems:
            try:
                job_id, scheduled_us = parse_run_key(request.run_key)
            except ValueError as error:
                found.add("run_key", f"{error} (e.g. nightly@2026-01-01T02:00:00Z)")
            else:
                found.name("run_key", job_id)
                if not 0 <= scheduled_us <= MAX_INSTANT_S * 1_000_000:
                    found.add("run_key", "names an instant outside 1970-01-01 to 9999-12-31")
    else:
        found.name("job_id", request.job_id)
        found.instant("", request, "scheduled_at", required=True)


def _lease_ref(found: _Found, ref: wpb.LeaseRef, at: str) -> None:
    found.name(f"{at}.job_id", ref.job_id)
    found.instant(f"{at}.", ref, "scheduled_at", required=True)
    found.whole(f"{at}.fencing_token", ref.fencing_token, 1, 2**63 - 1)


def _lease(found: _Found, request) -> None:
    limits = found.limits
    found.text("worker_id", request.worker_id, limits.max_worker_id_chars, required=True)
    if found.count("targets", request.targets, limits.max_targets_per_lease):
        for position, target in enumerate(request.targets):
            found.name(f"targets[{position}]", target)
    found.whole("max_runs", request.max_runs, 0, limits.max_runs_asked_per_lease)
    found.duration("", request, "wait", int(limits.max_lease_wait_s * 1_000_000))


def _heartbeat(found: _Found, request) -> None:
    limits = found.limits
    found.text("worker_id", request.worker_id, limits.max_worker_id_chars, required=True)
    if found.count("leases", request.leases, limits.max_leases_per_heartbeat):
        for position, ref in enumerate(request.leases):
            _lease_ref(found, ref, f"leases[{position}]")
            if len(found.problems) > _MAX_LISTED:
                return


def _complete(found: _Found, request) -> None:
    limits = found.limits
    found.text("worker_id", request.worker_id, limits.max_worker_id_chars, required=True)
    if not request.HasField("lease"):
        found.add("lease", "is required")
    else:
        _lease_ref(found, request.lease, "lease")
    found.enum("kind", request.kind, wpb.CompletionKind, allow_unspecified=False)
    found.blob("error", request.error, limits.max_error_bytes)
    found.blob("output_tail", request.output_tail, limits.max_output_tail_bytes)
    found.blob("stdout_tail", request.stdout_tail, limits.max_output_tail_bytes)
    found.blob("stderr_tail", request.stderr_tail, limits.max_output_tail_bytes)
    found.blob("exception_type", request.exception_type, limits.max_error_bytes)
    if not 0 <= request.http_status <= 999:
        found.add("http_status", f"must be an HTTP status code (100-999) or 0 for none, got {request.http_status}")
    found.duration("", request, "retry_after", limits.max_retry_after_us)


def _complete_many(found: _Found, request) -> None:
    limits = found.limits
    found.text("worker_id", request.worker_id, limits.max_worker_id_chars, required=True)
    if not found.count("completions", request.completions, limits.max_leases_per_heartbeat):
        return
    for position, item in enumerate(request.completions):
        inner = _Found(limits)
        _complete(inner, item)
        for problem in inner.problems:
            found.add(f"completions[{position}].{problem.field}", problem.message)
        if item.worker_id != request.worker_id:
            found.add(f"completions[{position}].worker_id", "must be the request's worker_id")
        if len(found.problems) > _MAX_LISTED:
            return


def _session(found: _Found, request) -> None:
    """One message of a worker session: what it carries is checked as the unary call's request."""
    kind = request.WhichOneof("kind")
    if kind is None:
        found.add("kind", "one of open, credits, heartbeat or complete is required")
    elif kind == "open":
        _lease(found, wpb.LeaseRequest(worker_id=request.open.worker_id, targets=request.open.targets))
    elif kind == "credits":
        found.whole("credits", request.credits, 0, found.limits.max_runs_asked_per_lease)
    elif kind == "heartbeat":
        _heartbeat(found, request.heartbeat)
    else:
        _complete_many(found, request.complete)


def _kill_class(found: _Found, request) -> None:
    found.name("job_class", request.job_class)
    found.text("reason", request.reason, found.limits.max_reason_chars)
    found.instant("", request, "until")
    _writer(found, request)


def _revive_class(found: _Found, request) -> None:
    found.name("job_class", request.job_class)
    _writer(found, request)


def _list_alerts(found: _Found, request) -> None:
    found.text("owner", request.owner, found.limits.max_owner_chars)
    found.whole("limit", request.limit, 0, found.limits.max_page_size)


def _address(found: _Found, field: str, value: str) -> None:
    """ "host:port" of a member (IPv6 hosts in brackets)."""
    found.text(field, value, found.limits.max_address_chars, required=True)
    host, sep, port = value.rpartition(":")
    if value and not (sep and host and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        found.add(field, f"{value[:64]!r} is not host:port with a port from 1 to 65535")


def _add_member(found: _Found, request) -> None:
    if not request.HasField("member"):
        found.add("member", "is required")
    else:
        found.name("member.node_id", request.member.node_id)
        _address(found, "member.raft_address", request.member.raft_address)
        _address(found, "member.grpc_address", request.member.grpc_address)
    _writer(found, request)


def _remove_member(found: _Found, request) -> None:
    found.name("node_id", request.node_id)
    _writer(found, request)


def _nothing(found: _Found, request) -> None:
    """Requests with nothing to check (booleans only, or no fields)."""


def _generic(found: _Found, message: Message, at: str) -> None:
    """A request without its own checker (a call added later): bounded text, counts and instants."""
    limits = found.limits
    for field, value in message.ListFields():
        path = f"{at}{field.name}"
        if field.is_repeated and not found.count(path, value, limits.max_leases_per_heartbeat):
            continue
        values = value if field.is_repeated else [value]
        for position, item in enumerate(values):
            where = f"{path}[{position}]" if field.is_repeated else path
            if field.type == field.TYPE_STRING:
                found.text(where, item, limits.max_reason_chars)
            elif field.type == field.TYPE_DOUBLE or field.type == field.TYPE_FLOAT:
                if not math.isfinite(item):
                    found.add(where, f"must be a finite number, got {item}")
            elif field.type == field.TYPE_MESSAGE and item.DESCRIPTOR.full_name == "google.protobuf.Timestamp":
                if not field.is_repeated:
                    found.instant(at, message, field.name)
            elif field.type == field.TYPE_MESSAGE:
                _generic(found, item, f"{where}.")


_CHECKERS: dict[str, Callable[[_Found, Message], None]] = {
    "ApplyJobsRequest": _apply_jobs,
    "GetJobRequest": _get_job,
    "ListJobsRequest": _list_jobs,
    "ListCalendarsRequest": _nothing,
    "ListRoutesRequest": _nothing,
    "DeleteJobRequest": _job_write,
    "PauseJobRequest": _job_write,
    "ResumeJobRequest": _job_write,
    "TriggerJobRequest": _job_write,
    "CancelRunRequest": _job_write,
    "BackfillJobRequest": _backfill_job,
    "ListRunsRequest": _list_runs,
    "GetRunRequest": _get_run,
    "LeaseRequest": _lease,
    "HeartbeatRequest": _heartbeat,
    "CompleteRequest": _complete,
    "CompleteManyRequest": _complete_many,
    "SessionRequest": _session,
    "KillClassRequest": _kill_class,
    "ReviveClassRequest": _revive_class,
    "ListKillsRequest": _nothing,
    "ListAlertsRequest": _list_alerts,
    "StatusRequest": _nothing,
    "AddMemberRequest": _add_member,
    "RemoveMemberRequest": _remove_member,
}
